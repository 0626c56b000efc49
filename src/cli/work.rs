//! `holarchy work ...`: operators read agents' work items.

use clap::Subcommand;

use super::output::Output;
use super::resolve;
use crate::api::pb;
use crate::client::Clients;

#[derive(Debug, Subcommand)]
pub enum WorkCommand {
    /// An agent's work items.
    List {
        /// The agent: its name or id.
        agent: String,
    },
    /// One work item.
    Get {
        /// The work item's id (`work list AGENT` shows them).
        work_item_id: String,
    },
}

pub(super) async fn work_command(
    mut clients: Clients,
    command: &WorkCommand,
    out: &Output,
) -> anyhow::Result<()> {
    match command {
        WorkCommand::List { agent } => {
            let agent_id = resolve(&mut clients, agent).await?;
            let mut page_token = String::new();
            loop {
                let page = clients
                    .work
                    .list_work_items(pb::ListWorkItemsRequest {
                        agent_id: agent_id.clone(),
                        page_size: 1000,
                        page_token,
                    })
                    .await?
                    .into_inner();
                for item in &page.work_items {
                    out.work_item(item);
                }
                if page.next_page_token.is_empty() {
                    break;
                }
                page_token = page.next_page_token;
            }
        }
        WorkCommand::Get { work_item_id } => {
            let request = pb::GetWorkItemRequest {
                work_item_id: work_item_id.clone(),
            };
            out.work_item(&clients.work.get_work_item(request).await?.into_inner());
        }
    }
    Ok(())
}
