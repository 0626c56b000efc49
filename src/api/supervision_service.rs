//! `holarchy.v1.SupervisionService`: the supervision tree for operators,
//! the stored ownership checked against the live actors, flat and a page
//! at a time so no depth or width of the tree breaks a response.

use std::sync::Arc;

use holarchy_actors::tree::{Node, NodeKind};
use holarchy_actors::Runtime;
use holarchy_supervision::{AgentId, AgentRecord, TaskKind, Visibility};
use prost::Message as _;
use tonic::{Request, Response, Status};

use super::agent_service::parse_agent_id;
use super::budget;
use super::convert::{self, ApiError};
use super::pb;
use super::pb::supervision_service_server::SupervisionService;
use super::read_model::ReadModel;

/// Agents read per page while collecting the roots.
const PAGE: usize = 1000;

/// Records a page of roots alone (`max_depth` 0) reads at most, however
/// many ended agents sit between live ones: a page may come back short,
/// with a token to go on from.
const ROOTS_SCAN: usize = 10 * PAGE;

#[derive(Debug, Clone)]
pub struct SupervisionApi {
    runtime: Arc<Runtime>,
    store: Arc<dyn ReadModel>,
}

impl SupervisionApi {
    pub fn new(runtime: Arc<Runtime>, store: Arc<dyn ReadModel>) -> Self {
        Self { runtime, store }
    }

    /// Every live agent of `namespace` without a supervisor: the top of
    /// its tree; and whether that is every root of the runtime (no other
    /// namespace's was passed over).
    fn roots(&self, namespace: &str) -> Result<(Vec<AgentRecord>, bool), ApiError> {
        let mut roots = Vec::new();
        let mut after = None;
        let mut all = true;
        loop {
            let page = self.store.list_agents(after, PAGE, true)?;
            after = page.last().map(|r| r.id);
            let done = page.len() < PAGE;
            for record in page {
                if !record.state.is_live() || record.supervisor_agent_id.is_some() {
                    continue;
                }
                if record.namespace == namespace {
                    roots.push(record);
                } else {
                    all = false;
                }
            }
            if done {
                return Ok((roots, all));
            }
        }
    }

    /// Up to `limit` roots after the one `after` names, in id order, and
    /// the id to go on from when the scan stopped before the end. Reads
    /// what it returns plus the ended agents between them (at most
    /// [`ROOTS_SCAN`]), never the whole runtime.
    fn roots_after(
        &self,
        mut after: Option<AgentId>,
        limit: usize,
        namespace: &str,
    ) -> Result<(Vec<AgentRecord>, Option<AgentId>), ApiError> {
        let mut roots = Vec::new();
        let mut scanned = 0;
        while roots.len() < limit && scanned < ROOTS_SCAN {
            let want = (limit - roots.len()).min(PAGE);
            let page = self.store.list_agents(after, want, true)?;
            scanned += page.len();
            let done = page.len() < want;
            after = page.last().map(|r| r.id).or(after);
            roots.extend(page.into_iter().filter(|r| {
                r.state.is_live() && r.supervisor_agent_id.is_none() && r.namespace == namespace
            }));
            if done {
                return Ok((roots, None));
            }
        }
        Ok((roots, after))
    }
}

/// Nodes per page of the tree, at most and by default.
pub const MAX_TREE_NODES: usize = 5000;

/// A node of the flat tree, bounded in bytes; `partition_of` says which
/// root partition supervises a public agent.
fn node(node: &Node, partition_of: impl Fn(AgentId) -> usize) -> pb::TreeNode {
    let mut out = match &node.kind {
        NodeKind::Agent {
            record,
            actor_alive,
            place,
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
            active_workspace_id: place.workspace_id.clone(),
            active_dir: place.dir.display().to_string(),
            partition: (record.profile.visibility == Visibility::Public)
                .then(|| u32::try_from(partition_of(record.id)).unwrap_or(u32::MAX)),
            ..Default::default()
        },
        NodeKind::Wait {
            record,
            actor_alive,
        } => pb::TreeNode {
            node_type: "wait".into(),
            id: record.id.to_string(),
            name: record.reason.clone(),
            kind: record.kind.name().into(),
            state: record.status.name().into(),
            actor_alive: *actor_alive,
            ..Default::default()
        },
        NodeKind::Approval { record } => pb::TreeNode {
            node_type: "wait".into(),
            id: record.id.to_string(),
            name: record.tool.clone(),
            kind: "approval".into(),
            state: record.status.name().into(),
            // No actor of its own: nothing is down.
            actor_alive: true,
            ..Default::default()
        },
        NodeKind::Task {
            record,
            actor_alive,
        } => pb::TreeNode {
            node_type: "task".into(),
            id: record.id.to_string(),
            name: record.label.clone(),
            kind: record.kind.name().into(),
            state: record.status.name().into(),
            actor_alive: *actor_alive,
            worktree: convert::worktree(record),
            child_agent_id: match record.kind {
                TaskKind::ChildAgent { child_agent_id } => child_agent_id.to_string(),
                TaskKind::Command => String::new(),
            },
            ..Default::default()
        },
    };
    out.parent_id = node.parent.map(|p| p.to_string()).unwrap_or_default();
    out.depth = u32::try_from(node.depth).unwrap_or(u32::MAX);
    budget::bound(&mut out);
    out
}

/// Where a page starts: the nodes of the walk earlier pages passed.
fn tree_offset(token: &str) -> Result<usize, ApiError> {
    if token.is_empty() {
        return Ok(0);
    }
    token
        .parse()
        .map_err(|_| ApiError::InvalidArgument("malformed page token".into()))
}

/// Adds `lines` to `mismatches` while they fit in `room` bytes, then one
/// line saying how many more there were.
fn add_mismatches(mismatches: &mut Vec<String>, lines: Vec<String>, room: &mut usize) {
    let total = lines.len();
    for (i, line) in lines.into_iter().enumerate() {
        let size = line.len() + 8;
        if size > *room {
            mismatches.push(format!("... and {} more mismatches", total - i));
            *room = room.saturating_sub(64);
            return;
        }
        *room -= size;
        mismatches.push(line);
    }
}

/// One page of the walk: up to `max_nodes` nodes after `offset`, stopping
/// before the page passes the byte budget.
fn tree_page(
    runtime: &Runtime,
    roots: Vec<AgentRecord>,
    whole_runtime: bool,
    offset: usize,
    max_nodes: usize,
    max_depth: Option<usize>,
) -> Result<pb::GetTreeResponse, ApiError> {
    let mut walk = runtime.walk(roots).max_depth(max_depth);
    walk.skip(offset)?;
    let mut page = pb::GetTreeResponse::default();
    // Room left for nodes and mismatches; the counts, token and cut are
    // small and covered by the slack between page and message budgets.
    let mut room = budget::PAGE_BUDGET_BYTES;
    let mut reason = None;
    // Nodes passed by the walk and sent: a node walked but left for the
    // next page is not.
    let mut sent = offset;
    while !walk.is_done() {
        if page.nodes.len() >= max_nodes {
            reason = Some("max_nodes");
            break;
        }
        let Some(next) = walk.next_node()? else {
            break;
        };
        let next = node(&next, |agent| runtime.partition_of(agent));
        let found = walk.take_mismatches();
        let size = next.encoded_len() + 8 + found.iter().map(|m| m.len() + 8).sum::<usize>();
        if size > room && !page.nodes.is_empty() {
            // The next page walks it again, mismatches and all.
            reason = Some("max_bytes");
            break;
        }
        room = room.saturating_sub(next.encoded_len() + 8);
        page.nodes.push(next);
        sent += 1;
        add_mismatches(&mut page.mismatches, found, &mut room);
    }
    if walk.is_done() && whole_runtime {
        walk.report_unvisited_actors();
        let found = walk.take_mismatches();
        add_mismatches(&mut page.mismatches, found, &mut room);
    }
    page.partitions = count(runtime.partition_count());
    page.agents = count(walk.counts.agents);
    page.tasks = count(walk.counts.tasks);
    page.waits = count(walk.counts.waits);
    if let (Some(reason), Some(last)) = (reason, page.nodes.last()) {
        page.next_page_token = sent.to_string();
        page.cut = Some(pb::TreeCut {
            after_node_id: last.id.clone(),
            after_depth: last.depth,
            reason: reason.into(),
            nodes_so_far: sent as u64,
        });
    }
    Ok(page)
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl SupervisionApi {
    /// The roots alone, a page at a time after the id in the page token:
    /// what a console lists first, at a cost of its page, not of the
    /// runtime. No whole-runtime check: that is a full walk's job.
    fn roots_page(
        &self,
        req: &pb::GetTreeRequest,
        namespace: &str,
    ) -> Result<pb::GetTreeResponse, ApiError> {
        let after = match req.page_token.as_str() {
            "" => None,
            token => Some(parse_agent_id(token).map_err(|_| {
                ApiError::InvalidArgument("malformed page token for a page of roots".into())
            })?),
        };
        let limit = match req.max_nodes as usize {
            0 => MAX_TREE_NODES,
            n => n.min(MAX_TREE_NODES),
        };
        let (roots, more) = self.roots_after(after, limit, namespace)?;
        let mut page = tree_page(&self.runtime, roots, false, 0, limit, Some(0))?;
        // Every root read was sent unless the byte budget cut the page;
        // then the cut's own node is where the next page goes on from.
        page.next_page_token = match &page.cut {
            Some(cut) => cut.after_node_id.clone(),
            None => more.map(|id| id.to_string()).unwrap_or_default(),
        };
        Ok(page)
    }
}

#[tonic::async_trait]
impl SupervisionService for SupervisionApi {
    async fn get_tree(
        &self,
        request: Request<pb::GetTreeRequest>,
    ) -> Result<Response<pb::GetTreeResponse>, Status> {
        let namespace = super::scope::namespace_of(&request);
        let req = request.into_inner();
        if req.agent_id.is_empty() && req.max_depth == Some(0) {
            let page = self.roots_page(&req, &namespace)?;
            self.store.durable().await.map_err(ApiError::from)?;
            return Ok(Response::new(page));
        }
        // The whole runtime's check (actors no walk met) only where the
        // walk is of the whole runtime: it would name other namespaces'.
        let (roots, whole) = if req.agent_id.is_empty() {
            self.roots(&namespace)?
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
        let offset = tree_offset(&req.page_token)?;
        let max_nodes = match req.max_nodes as usize {
            0 => MAX_TREE_NODES,
            n => n.min(MAX_TREE_NODES),
        };
        let max_depth = req.max_depth.map(|d| d as usize);
        let page = tree_page(&self.runtime, roots, whole, offset, max_nodes, max_depth)?;
        self.store.durable().await.map_err(ApiError::from)?;
        Ok(Response::new(page))
    }
}
