//! `holarchy workspace ...`: operators attach, detach and list an agent's
//! workspaces.

use anyhow::Context;

use super::output::Output;
use super::{resolve, WorkspaceCommand};
use crate::api::pb;
use crate::client::Clients;

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
            let request = pb::ListWorkspacesRequest { agent_id };
            clients.workspaces.list_workspaces(request).await?
        }
    };
    out.workspaces(&workspaces.into_inner());
    Ok(())
}
