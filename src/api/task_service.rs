//! `holarchy.v1.TaskService`: operators act on task handles as the owning
//! agent would, through the same task plane its tools use.

use std::pin::Pin;
use std::sync::Arc;

use holarchy_actors::Runtime;
use holarchy_supervision::{bounds, TaskId, TaskKind};
use prost::Message as _;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

use super::agent_service::{page, page_token, parse_agent_id};
use super::budget;
use super::convert::{self, ApiError};
use super::pb;
use super::pb::task_service_server::TaskService;

#[derive(Debug, Clone)]
pub struct TaskApi {
    runtime: Arc<Runtime>,
    /// Flips to `true` at shutdown; open follows end then.
    shutdown: watch::Receiver<bool>,
}

impl TaskApi {
    pub fn new(runtime: Arc<Runtime>, shutdown: watch::Receiver<bool>) -> Self {
        Self { runtime, shutdown }
    }
}

/// How often a follower re-reads without a notice.
const FOLLOW_RECHECK: std::time::Duration = std::time::Duration::from_secs(2);

type ChunkStream = Pin<Box<dyn Stream<Item = Result<pb::OutputChunk, Status>> + Send>>;

fn parse_task_id(text: &str) -> Result<TaskId, ApiError> {
    if text.is_empty() {
        return Err(ApiError::InvalidArgument("task_id is required".into()));
    }
    Ok(text.parse()?)
}

/// A command's output is paged by offset: chunks past the budget are left
/// for the next read (the text follows the chunks kept). Anything else
/// over the budget (a child's long result) is cut and marked.
fn fit_output(response: &mut pb::ReadTaskOutputResponse) {
    if response.encoded_len() <= budget::RECORD_BUDGET_BYTES || response.chunks.is_empty() {
        budget::bound(response);
        return;
    }
    // Text and chunks carry the same bytes; each gets half the budget.
    let half = budget::RECORD_BUDGET_BYTES / 2 - 1024;
    let mut used = 0;
    let mut keep = 0;
    for chunk in &mut response.chunks {
        let room = half.saturating_sub(used);
        if chunk.data.len() > room {
            if keep == 0 {
                chunk.data.truncate(room);
                keep = 1;
            }
            break;
        }
        used += chunk.data.len();
        keep += 1;
    }
    response.chunks.truncate(keep);
    let bytes: Vec<u8> = response
        .chunks
        .iter()
        .flat_map(|c| c.data.iter().copied())
        .collect();
    response.output = String::from_utf8_lossy(&bytes).into_owned();
    response.next_offset = response
        .chunks
        .last()
        .map_or(response.next_offset, |c| c.offset + c.data.len() as u64);
}

#[tonic::async_trait]
impl TaskService for TaskApi {
    async fn list_tasks(
        &self,
        request: Request<pb::ListTasksRequest>,
    ) -> Result<Response<pb::ListTasksResponse>, Status> {
        let req = request.into_inner();
        let agent_id = parse_agent_id(&req.agent_id)?;
        let after: Option<TaskId> = page_token(&req.page_token)?;
        if self
            .runtime
            .agent_record(agent_id)
            .map_err(ApiError::from)?
            .is_none()
        {
            return Err(ApiError::NotFound(format!("agent {agent_id} not found")).into());
        }
        let mut records = self.runtime.tasks(agent_id).map_err(ApiError::from)?;
        records.retain(|t| after.is_none_or(|after| t.id > after));
        let (tasks, next_page_token) =
            page(records, req.page_size, convert::task, |t| t.task_id.clone());
        self.runtime.durable().await.map_err(ApiError::from)?;
        Ok(Response::new(pb::ListTasksResponse {
            tasks,
            next_page_token,
        }))
    }

    async fn get_task(
        &self,
        request: Request<pb::GetTaskRequest>,
    ) -> Result<Response<pb::TaskHandle>, Status> {
        let task_id = parse_task_id(&request.into_inner().task_id)?;
        let task = self.runtime.task(task_id).map_err(ApiError::from)?;
        self.runtime.durable().await.map_err(ApiError::from)?;
        let mut handle = convert::task(&task);
        budget::bound(&mut handle);
        Ok(Response::new(handle))
    }

    async fn read_task_output(
        &self,
        request: Request<pb::ReadTaskOutputRequest>,
    ) -> Result<Response<pb::ReadTaskOutputResponse>, Status> {
        let req = request.into_inner();
        let task_id = parse_task_id(&req.task_id)?;
        let (task, output) = self
            .runtime
            .task_output(task_id, req.offset)
            .map_err(ApiError::from)?;
        self.runtime.durable().await.map_err(ApiError::from)?;
        let mut response = pb::ReadTaskOutputResponse {
            task_id: task.id.to_string(),
            status: task.status.name().to_owned(),
            output: output.text,
            chunks: output.chunks.iter().map(convert::chunk).collect(),
            next_offset: output.next_offset,
            dropped_bytes: output.dropped,
            truncated_from_bytes: 0,
        };
        fit_output(&mut response);
        Ok(Response::new(response))
    }

    type FollowTaskOutputStream = ChunkStream;

    async fn follow_task_output(
        &self,
        request: Request<pb::ReadTaskOutputRequest>,
    ) -> Result<Response<Self::FollowTaskOutputStream>, Status> {
        let req = request.into_inner();
        let task_id = parse_task_id(&req.task_id)?;
        let runtime = self.runtime.clone();
        // Refuse unknown tasks up front, not as a stream error.
        let task = runtime.task(task_id).map_err(ApiError::from)?;
        if task.kind != TaskKind::Command {
            return Err(ApiError::FailedPrecondition(
                "only command output can be followed; read a child task's result with ReadTaskOutput".into(),
            )
            .into());
        }
        let (tx, rx) = mpsc::channel(64);
        let mut shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            // Subscribe before reading, so nothing produced in between is missed.
            let mut grown = runtime.follow_output();
            let mut offset = req.offset;
            loop {
                let (task, output) = match runtime.task_output(task_id, offset) {
                    Ok(read) => read,
                    Err(err) => {
                        let _ = tx.send(Err(Status::from(ApiError::from(err)))).await;
                        return;
                    }
                };
                for chunk in &output.chunks {
                    if tx.send(Ok(convert::chunk(chunk))).await.is_err() {
                        return;
                    }
                }
                let caught_up = output.next_offset == offset;
                offset = output.next_offset;
                if caught_up && task.status.is_terminal() {
                    return;
                }
                if !caught_up {
                    continue;
                }
                loop {
                    tokio::select! {
                        // A safety net: re-read now and then even without a
                        // notice, so a missed one cannot hang the stream.
                        () = tokio::time::sleep(FOLLOW_RECHECK) => break,
                        changed = grown.recv() => match changed {
                            Ok(id) if id == task_id => break,
                            Ok(_) => continue,
                            // Lagged: some notice was lost; read again.
                            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => break,
                            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                        },
                        _ = shutdown.wait_for(|stop| *stop) => return,
                        _ = tx.closed() => return,
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn send_task_input(
        &self,
        request: Request<pb::SendTaskInputRequest>,
    ) -> Result<Response<pb::SendTaskInputResponse>, Status> {
        let req = request.into_inner();
        let task_id = parse_task_id(&req.task_id)?;
        bounds::check_message(&req.text).map_err(ApiError::from)?;
        let delivered = self
            .runtime
            .send_task_input(task_id, req.text)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::SendTaskInputResponse {
            message_id: delivered
                .map(|d| d.message_id.to_string())
                .unwrap_or_default(),
        }))
    }

    async fn stop_task(
        &self,
        request: Request<pb::StopTaskRequest>,
    ) -> Result<Response<pb::TaskHandle>, Status> {
        let task_id = parse_task_id(&request.into_inner().task_id)?;
        let task = self
            .runtime
            .stop_task(task_id, "by an operator")
            .await
            .map_err(ApiError::from)?;
        let mut handle = convert::task(&task);
        budget::bound(&mut handle);
        Ok(Response::new(handle))
    }
}
