//! `holarchy workspace ...`: operators attach, detach and list an agent's
//! workspaces.

use anyhow::Context;
use clap::Subcommand;

use super::output::Output;
use super::resolve;
use crate::api::pb;
use crate::client::Clients;

#[derive(Debug, Subcommand)]
pub enum WorkspaceCommand {
    /// Attach a host directory to a public agent (never made active).
    Attach {
        /// The agent: its name or id.
        agent: String,
        /// The directory, on the daemon's host (relative: from here).
        path: std::path::PathBuf,
        /// The workspace's id; by default made from the directory's name.
        #[arg(long)]
        id: Option<String>,
    },
    /// Remove a binding; the directory is left as it is.
    Detach {
        /// The agent: its name or id.
        agent: String,
        /// The workspace's id (`workspace list AGENT` shows them).
        workspace_id: String,
    },
    /// An agent's workspaces; `*` marks the active one.
    List {
        /// The agent: its name or id.
        agent: String,
    },
}

pub(super) async fn workspace_command(
    mut clients: Clients,
    command: &WorkspaceCommand,
    out: &Output,
) -> anyhow::Result<()> {
    let workspaces = match command {
        WorkspaceCommand::Attach { agent, path, id } => {
            let agent_id = resolve(&mut clients, agent).await?;
            // The daemon resolves the path on its host; a relative one is
            // taken from where the operator stands.
            let path = std::path::absolute(path)
                .with_context(|| format!("cannot make {} absolute", path.display()))?;
            let request = pb::AttachWorkspaceRequest {
                agent_id,
                path: path.to_string_lossy().into_owned(),
                workspace_id: id.clone().unwrap_or_default(),
            };
            clients.workspaces.attach_workspace(request).await?
        }
        WorkspaceCommand::Detach {
            agent,
            workspace_id,
        } => {
            let agent_id = resolve(&mut clients, agent).await?;
            let request = pb::DetachWorkspaceRequest {
                agent_id,
                workspace_id: workspace_id.clone(),
            };
            clients.workspaces.detach_workspace(request).await?
        }
        WorkspaceCommand::List { agent } => {
            let agent_id = resolve(&mut clients, agent).await?;
            // Pages are joined into one listing.
            let mut all = clients
                .workspaces
                .list_workspaces(pb::ListWorkspacesRequest {
                    agent_id: agent_id.clone(),
                    page_token: String::new(),
                })
                .await?
                .into_inner();
            while !all.next_page_token.is_empty() {
                let request = pb::ListWorkspacesRequest {
                    agent_id: agent_id.clone(),
                    page_token: std::mem::take(&mut all.next_page_token),
                };
                let page = clients.workspaces.list_workspaces(request).await?;
                let page = page.into_inner();
                all.workspaces.extend(page.workspaces);
                all.next_page_token = page.next_page_token;
            }
            tonic::Response::new(all)
        }
    };
    out.workspaces(&workspaces.into_inner());
    Ok(())
}
