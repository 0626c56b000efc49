//! `holarchy.v1.WorkspaceService`: operators attach and detach host
//! directories on public agents and list any agent's workspaces.

use std::path::Path;
use std::sync::Arc;

use holarchy_actors::workspace::{View, WorkspaceError};
use holarchy_actors::Runtime;
use holarchy_supervision::workspace::WorkspaceRefusal;
use holarchy_supervision::{AgentId, Visibility};
use prost::Message as _;
use tonic::{Request, Response, Status};

use super::agent_service::parse_agent_id;
use super::budget;
use super::convert::ApiError;
use super::pb;
use super::pb::workspace_service_server::WorkspaceService;

#[derive(Debug, Clone)]
pub struct WorkspaceApi {
    runtime: Arc<Runtime>,
}

impl WorkspaceApi {
    pub fn new(runtime: Arc<Runtime>) -> Self {
        Self { runtime }
    }

    /// The agent, which must exist; for changes, it must also be public:
    /// a private agent's authority is its supervisor's to shape.
    fn agent(&self, text: &str, changing: bool) -> Result<AgentId, ApiError> {
        let agent_id = parse_agent_id(text)?;
        let record = self
            .runtime
            .agent_record(agent_id)?
            .ok_or_else(|| ApiError::NotFound(format!("agent {agent_id} not found")))?;
        if changing && record.profile.visibility == Visibility::Private {
            return Err(ApiError::PermissionDenied(format!(
                "agent {agent_id} is private: its workspaces come from its supervisor"
            )));
        }
        Ok(agent_id)
    }
}

#[tonic::async_trait]
impl WorkspaceService for WorkspaceApi {
    async fn attach_workspace(
        &self,
        request: Request<pb::AttachWorkspaceRequest>,
    ) -> Result<Response<pb::Workspaces>, Status> {
        let req = request.into_inner();
        let agent_id = self.agent(&req.agent_id, true)?;
        if req.path.is_empty() {
            return Err(ApiError::InvalidArgument("path is required".into()).into());
        }
        let id = (!req.workspace_id.is_empty()).then_some(req.workspace_id);
        let (view, _) = self
            .runtime
            .attach_workspace(agent_id, Path::new(&req.path), id)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(workspaces(agent_id, &view, 0)))
    }

    async fn detach_workspace(
        &self,
        request: Request<pb::DetachWorkspaceRequest>,
    ) -> Result<Response<pb::Workspaces>, Status> {
        let req = request.into_inner();
        let agent_id = self.agent(&req.agent_id, true)?;
        if req.workspace_id.is_empty() {
            return Err(ApiError::InvalidArgument("workspace_id is required".into()).into());
        }
        let (view, _) = self
            .runtime
            .detach_workspace(agent_id, req.workspace_id)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(workspaces(agent_id, &view, 0)))
    }

    async fn list_workspaces(
        &self,
        request: Request<pb::ListWorkspacesRequest>,
    ) -> Result<Response<pb::Workspaces>, Status> {
        let req = request.into_inner();
        let agent_id = self.agent(&req.agent_id, false)?;
        let from = if req.page_token.is_empty() {
            0
        } else {
            req.page_token
                .parse()
                .map_err(|_| ApiError::InvalidArgument("malformed page token".into()))?
        };
        let view = self.runtime.workspaces(agent_id).map_err(ApiError::from)?;
        self.runtime.durable().await.map_err(ApiError::from)?;
        Ok(Response::new(workspaces(agent_id, &view, from)))
    }
}

/// An agent's workspaces, `agent_home` first, from the `from`th on and as
/// many as fit in the page budget; the token of the next page is the index
/// of the first left out. Attach and detach answer with the first page.
pub fn workspaces(agent_id: AgentId, view: &View, from: usize) -> pb::Workspaces {
    let place = view.place();
    let mut room = budget::PAGE_BUDGET_BYTES;
    let mut page = Vec::new();
    let mut next_page_token = String::new();
    for (i, binding) in view.bindings().into_iter().enumerate().skip(from) {
        let workspace = pb::Workspace {
            active: binding.workspace_id == place.workspace_id,
            workspace_id: binding.workspace_id,
            root: binding.root.display().to_string(),
        };
        // Ids are short and roots are paths, so one always fits.
        let size = workspace.encoded_len() + 8;
        if size > room && !page.is_empty() {
            next_page_token = i.to_string();
            break;
        }
        room = room.saturating_sub(size);
        page.push(workspace);
    }
    pb::Workspaces {
        agent_id: agent_id.to_string(),
        workspaces: page,
        active_workspace_id: place.workspace_id,
        active_dir: place.dir.display().to_string(),
        next_page_token,
    }
}

impl From<WorkspaceError> for ApiError {
    fn from(err: WorkspaceError) -> Self {
        match err {
            WorkspaceError::AgentNotFound(_) => ApiError::NotFound(err.to_string()),
            WorkspaceError::AgentNotLive(_) => ApiError::FailedPrecondition(err.to_string()),
            WorkspaceError::Refused(refusal) => match refusal {
                WorkspaceRefusal::BadId
                | WorkspaceRefusal::Builtin
                | WorkspaceRefusal::OutsideWorkspace(..) => {
                    ApiError::InvalidArgument(refusal.to_string())
                }
                WorkspaceRefusal::IdTaken(_) | WorkspaceRefusal::RootTaken(..) => {
                    ApiError::FailedPrecondition(refusal.to_string())
                }
                WorkspaceRefusal::Unknown(_) => ApiError::NotFound(refusal.to_string()),
            },
            WorkspaceError::Path(_)
            | WorkspaceError::NotAbsolute(_)
            | WorkspaceError::NotADirectory(_)
            | WorkspaceError::OneTarget => ApiError::InvalidArgument(err.to_string()),
            WorkspaceError::NeedsAuthority(_)
            | WorkspaceError::Protected(_)
            | WorkspaceError::NotAllowed(_) => ApiError::PermissionDenied(err.to_string()),
            WorkspaceError::Home(_) => ApiError::Internal(err.to_string()),
            WorkspaceError::Store(e) => e.into(),
        }
    }
}
