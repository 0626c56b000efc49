//! `holarchy task ...`: operators act on task handles, named by their
//! whole id or any part only one task's id has (the tail `task list`
//! shows).

use tokio_stream::StreamExt;

use super::output::{Output, OutputStream};
use super::resolve::resolve_task;
use super::{message_text, resolve, TaskCommand};
use crate::api::pb;
use crate::client::Clients;

pub(super) async fn task_command(
    mut clients: Clients,
    command: &TaskCommand,
    out: &Output,
) -> anyhow::Result<()> {
    match command {
        TaskCommand::List { agent } => {
            let agent_id = resolve(&mut clients, agent).await?;
            // Printed once every page is in: one table sized to its
            // content, its ids cut to the tail that tells them apart.
            let mut tasks = Vec::new();
            let mut page_token = String::new();
            loop {
                let page = clients
                    .tasks
                    .list_tasks(pb::ListTasksRequest {
                        agent_id: agent_id.clone(),
                        page_size: 1000,
                        page_token,
                    })
                    .await?
                    .into_inner();
                tasks.extend(page.tasks);
                if page.next_page_token.is_empty() {
                    break;
                }
                page_token = page.next_page_token;
            }
            out.tasks(&tasks);
        }
        TaskCommand::Get { task_id } => {
            let task_id = resolve_task(&mut clients, task_id).await?;
            let task = clients
                .tasks
                .get_task(pb::GetTaskRequest { task_id })
                .await?
                .into_inner();
            out.task(&task);
        }
        TaskCommand::Output {
            task_id,
            offset,
            follow: false,
            raw,
        } => {
            let request = pb::ReadTaskOutputRequest {
                task_id: resolve_task(&mut clients, task_id).await?,
                offset: *offset,
            };
            let output = clients.tasks.read_task_output(request).await?.into_inner();
            out.task_output(&output, *raw);
        }
        TaskCommand::Output {
            task_id,
            offset,
            follow: true,
            raw,
        } => {
            let request = pb::ReadTaskOutputRequest {
                task_id: resolve_task(&mut clients, task_id).await?,
                offset: *offset,
            };
            let mut chunks = clients
                .tasks
                .follow_task_output(request)
                .await?
                .into_inner();
            let mut stream = OutputStream::new(*raw);
            while let Some(chunk) = chunks.next().await {
                out.chunk(&chunk?, &mut stream);
            }
            out.chunk_end(&mut stream);
        }
        TaskCommand::Input { task_id, text } => {
            let text = message_text::read(text)?;
            message_text::warn_if_broken_json(&text, out);
            let task_id = resolve_task(&mut clients, task_id).await?;
            let sent = clients
                .tasks
                .send_task_input(pb::SendTaskInputRequest { task_id, text })
                .await?
                .into_inner();
            out.sent(&pb::SendMessageResponse {
                message_id: sent.message_id,
                duplicate: false,
            });
        }
        TaskCommand::Stop { task_id } => {
            let task_id = resolve_task(&mut clients, task_id).await?;
            let task = clients
                .tasks
                .stop_task(pb::StopTaskRequest { task_id })
                .await?
                .into_inner();
            out.task(&task);
        }
    }
    Ok(())
}
