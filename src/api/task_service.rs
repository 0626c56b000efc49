//! `holarchy.v1.TaskService`: operators act on task handles as the owning
//! agent would, through the same task plane its tools use.

use std::sync::Arc;

use holarchy_actors::{task_plane, Runtime};
use holarchy_supervision::{limits, TaskId};
use tonic::{Request, Response, Status};

use super::agent_service::parse_agent_id;
use super::convert::{self, ApiError};
use super::pb;
use super::pb::task_service_server::TaskService;

#[derive(Debug, Clone)]
pub struct TaskApi {
    runtime: Arc<Runtime>,
}

impl TaskApi {
    pub fn new(runtime: Arc<Runtime>) -> Self {
        Self { runtime }
    }
}

fn parse_task_id(text: &str) -> Result<TaskId, ApiError> {
    if text.is_empty() {
        return Err(ApiError::InvalidArgument("task_id is required".into()));
    }
    Ok(text.parse()?)
}

#[tonic::async_trait]
impl TaskService for TaskApi {
    async fn list_tasks(
        &self,
        request: Request<pb::ListTasksRequest>,
    ) -> Result<Response<pb::ListTasksResponse>, Status> {
        let agent_id = parse_agent_id(&request.into_inner().agent_id)?;
        let ctx = self.runtime.ctx();
        if ctx.store.agent(agent_id).map_err(ApiError::from)?.is_none() {
            return Err(ApiError::NotFound(format!("agent {agent_id} not found")).into());
        }
        let tasks = task_plane::list(ctx, agent_id).map_err(ApiError::from)?;
        ctx.store.durable().await.map_err(ApiError::from)?;
        Ok(Response::new(pb::ListTasksResponse {
            tasks: tasks.iter().map(convert::task).collect(),
        }))
    }

    async fn get_task(
        &self,
        request: Request<pb::GetTaskRequest>,
    ) -> Result<Response<pb::TaskHandle>, Status> {
        let task_id = parse_task_id(&request.into_inner().task_id)?;
        let ctx = self.runtime.ctx();
        let task = task_plane::get(ctx, task_id, None).map_err(ApiError::from)?;
        ctx.store.durable().await.map_err(ApiError::from)?;
        Ok(Response::new(convert::task(&task)))
    }

    async fn read_task_output(
        &self,
        request: Request<pb::ReadTaskOutputRequest>,
    ) -> Result<Response<pb::ReadTaskOutputResponse>, Status> {
        let task_id = parse_task_id(&request.into_inner().task_id)?;
        let ctx = self.runtime.ctx();
        let (task, output) = task_plane::output(ctx, task_id, None).map_err(ApiError::from)?;
        ctx.store.durable().await.map_err(ApiError::from)?;
        Ok(Response::new(pb::ReadTaskOutputResponse {
            task_id: task.id.to_string(),
            status: task.status.name().to_owned(),
            output,
        }))
    }

    async fn send_task_input(
        &self,
        request: Request<pb::SendTaskInputRequest>,
    ) -> Result<Response<pb::SendTaskInputResponse>, Status> {
        let req = request.into_inner();
        let task_id = parse_task_id(&req.task_id)?;
        limits::check_message(&req.text).map_err(ApiError::from)?;
        let delivered = task_plane::input(self.runtime.ctx(), task_id, None, req.text)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::SendTaskInputResponse {
            message_id: delivered.message_id.to_string(),
        }))
    }

    async fn stop_task(
        &self,
        request: Request<pb::StopTaskRequest>,
    ) -> Result<Response<pb::TaskHandle>, Status> {
        let task_id = parse_task_id(&request.into_inner().task_id)?;
        let task = task_plane::stop(self.runtime.ctx(), task_id, None, "by an operator")
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(convert::task(&task)))
    }
}
