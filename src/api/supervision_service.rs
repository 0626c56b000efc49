//! `holarchy.v1.SupervisionService`: the supervision tree for operators,
//! the stored ownership checked against the live actors.

use std::sync::Arc;

use holarchy_actors::tree::{self, Node};
use holarchy_actors::{Runtime, Store as _};
use holarchy_supervision::AgentRecord;
use tonic::{Request, Response, Status};

use super::agent_service::parse_agent_id;
use super::convert::{self, ApiError};
use super::pb;
use super::pb::supervision_service_server::SupervisionService;
use crate::store::SledStore;

/// Agents read per page while collecting the roots.
const PAGE: usize = 1000;

#[derive(Debug, Clone)]
pub struct SupervisionApi {
    runtime: Arc<Runtime>,
    store: Arc<SledStore>,
}

impl SupervisionApi {
    pub fn new(runtime: Arc<Runtime>, store: Arc<SledStore>) -> Self {
        Self { runtime, store }
    }

    /// Every live agent without a supervisor: the top of the tree.
    fn roots(&self) -> Result<Vec<AgentRecord>, ApiError> {
        let mut roots = Vec::new();
        let mut after = None;
        loop {
            let page = self.store.list_agents(after, PAGE, true)?;
            after = page.last().map(|r| r.id);
            let done = page.len() < PAGE;
            roots.extend(
                page.into_iter()
                    .filter(|r| r.state.is_live() && r.supervisor_agent_id.is_none()),
            );
            if done {
                return Ok(roots);
            }
        }
    }
}

fn node(node: &Node) -> pb::TreeNode {
    match node {
        Node::Agent {
            record,
            actor_alive,
            place,
            children,
        } => pb::TreeNode {
            node_type: "agent".into(),
            id: record.id.to_string(),
            name: record.name.clone().unwrap_or_default(),
            kind: record
                .profile
                .preset()
                .map(|p| p.name().to_owned())
                .unwrap_or_default(),
            state: record.state.name().into(),
            visibility: format!("{:?}", record.profile.visibility).to_lowercase(),
            ownership: match record.profile.ownership {
                holarchy_supervision::Ownership::SelfOwned => "self_owned".into(),
                holarchy_supervision::Ownership::ParentSupervised => "parent_supervised".into(),
            },
            actor_alive: *actor_alive,
            children: children.iter().map(self::node).collect(),
            worktree: None,
            active_workspace_id: place.workspace_id.clone(),
            active_dir: place.dir.display().to_string(),
        },
        Node::Wait {
            record,
            actor_alive,
        } => pb::TreeNode {
            node_type: "wait".into(),
            id: record.id.to_string(),
            name: record.reason.clone(),
            kind: record.kind.name().into(),
            state: record.status.name().into(),
            visibility: String::new(),
            ownership: String::new(),
            actor_alive: *actor_alive,
            children: Vec::new(),
            ..Default::default()
        },
        Node::Task {
            record,
            actor_alive,
        } => pb::TreeNode {
            node_type: "task".into(),
            id: record.id.to_string(),
            name: record.label.clone(),
            kind: record.kind.name().into(),
            state: record.status.name().into(),
            visibility: String::new(),
            ownership: String::new(),
            actor_alive: *actor_alive,
            children: Vec::new(),
            worktree: convert::worktree(record),
            ..Default::default()
        },
    }
}

#[tonic::async_trait]
impl SupervisionService for SupervisionApi {
    async fn get_tree(
        &self,
        request: Request<pb::GetTreeRequest>,
    ) -> Result<Response<pb::GetTreeResponse>, Status> {
        let req = request.into_inner();
        let (roots, whole) = if req.agent_id.is_empty() {
            (self.roots()?, true)
        } else {
            let agent_id = parse_agent_id(&req.agent_id)?;
            let record = self
                .store
                .agent(agent_id)
                .map_err(ApiError::from)?
                .ok_or_else(|| ApiError::NotFound(format!("agent {agent_id} not found")))?;
            if !record.state.is_live() {
                return Err(ApiError::FailedPrecondition(format!(
                    "agent {agent_id} is {}",
                    record.state.name()
                ))
                .into());
            }
            (vec![record], false)
        };
        let report = tree::inspect(self.runtime.ctx(), roots, whole).map_err(ApiError::from)?;
        self.store.durable().await.map_err(ApiError::from)?;
        Ok(Response::new(pb::GetTreeResponse {
            roots: report.roots.iter().map(node).collect(),
            mismatches: report.mismatches,
            agents: report.agents as u32,
            tasks: report.tasks as u32,
            waits: report.waits as u32,
        }))
    }
}
