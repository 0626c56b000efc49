//! Inspection of the supervision tree: the ownership recorded in the store,
//! walked from its roots, with each node's actor checked against it. The
//! actor tree must mirror the stored tree exactly; every difference is
//! reported, never silently repaired here.
//!
//! Agents grow the tree (depth and width), so nothing here recurses: the
//! walk keeps its own stack on the heap and yields the tree flat, in
//! pre-order, each node with its parent and depth. A nested result would
//! recurse again when dropped, converted or encoded.

use holarchy_composition::approval::ApprovalRecord;
use std::collections::{HashMap, HashSet};

use holarchy_supervision::workspace::Place;
use holarchy_supervision::{
    AgentId, AgentRecord, TaskKind, TaskRecord, TaskStatus, WaitRecord, WaitStatus,
};
use ractor::{ActorCell, ActorId, ActorStatus};

use crate::store::StoreError;
use crate::workspace;
use crate::Ctx;

/// What a node of the tree is, and whether its actor runs.
#[derive(Debug, Clone)]
pub enum NodeKind {
    Agent {
        record: AgentRecord,
        actor_alive: bool,
        /// Where its commands run now.
        place: Place,
    },
    Task {
        record: TaskRecord,
        actor_alive: bool,
    },
    Wait {
        record: WaitRecord,
        actor_alive: bool,
    },
    /// A tool call waiting for an operator's decision (or running once
    /// approved); it has no actor: the agent is what waits.
    Approval { record: ApprovalRecord },
}

/// One node of the flat, pre-order tree.
#[derive(Debug, Clone)]
pub struct Node {
    /// The agent it hangs under; `None` for a root of the walk.
    pub parent: Option<AgentId>,
    /// Agents above it in the walk: 0 for a root.
    pub depth: usize,
    pub kind: NodeKind,
}

/// The whole tree at once, for callers that know it is small (tests, the
/// model checks). The gRPC service pages through [`Walk`] instead.
#[derive(Debug, Clone, Default)]
pub struct TreeReport {
    /// Every node, in pre-order.
    pub nodes: Vec<Node>,
    /// Where the actor tree and the stored tree disagree.
    pub mismatches: Vec<String>,
    pub agents: usize,
    pub tasks: usize,
    pub waits: usize,
}

/// Walks the stored tree from `roots` (live agents) and checks each actor.
/// With `whole_runtime`, also reports running actors the walk never met.
pub fn inspect(
    ctx: &Ctx,
    roots: Vec<AgentRecord>,
    whole_runtime: bool,
) -> Result<TreeReport, StoreError> {
    let mut walk = Walk::new(ctx, roots);
    let mut report = TreeReport::default();
    while let Some(node) = walk.next_node()? {
        report.nodes.push(node);
    }
    if whole_runtime {
        walk.report_unvisited_actors();
    }
    report.agents = walk.counts.agents;
    report.tasks = walk.counts.tasks;
    report.waits = walk.counts.waits;
    report.mismatches = walk.take_mismatches();
    Ok(report)
}

/// Nodes of each kind the walk has passed so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub agents: usize,
    /// Running tasks (ended ones still holding a worktree are shown but not
    /// counted).
    pub tasks: usize,
    /// Armed waits.
    pub waits: usize,
}

/// A pre-order walk over any forest, with its stack on the heap: the depth
/// of the forest costs memory, never call stack. `below` is asked for the
/// children of each node as it is passed, so a caller can stop anywhere.
#[derive(Debug)]
pub struct Preorder<T> {
    /// Met but not yet passed, the next one on top, with its depth.
    stack: Vec<(usize, T)>,
    /// Nodes passed so far.
    passed: usize,
}

impl<T> Preorder<T> {
    pub fn new(roots: Vec<T>) -> Self {
        Self {
            stack: roots.into_iter().rev().map(|root| (0, root)).collect(),
            passed: 0,
        }
    }

    /// Passes the next node, with its depth, after pushing what `below`
    /// lists under it (in order, first shown first); `None` at the end.
    pub fn next_with<E>(
        &mut self,
        below: impl FnOnce(&T, usize) -> Result<Vec<T>, E>,
    ) -> Result<Option<(usize, T)>, E> {
        let Some((depth, node)) = self.stack.pop() else {
            return Ok(None);
        };
        let children = below(&node, depth)?;
        self.stack
            .extend(children.into_iter().rev().map(|child| (depth + 1, child)));
        self.passed += 1;
        Ok(Some((depth, node)))
    }

    /// Nodes passed so far.
    pub fn passed(&self) -> usize {
        self.passed
    }

    pub fn is_done(&self) -> bool {
        self.stack.is_empty()
    }
}

/// A node of the stored tree met by the walk, with the agent it hangs under.
#[derive(Debug)]
struct Pending {
    parent: Option<AgentId>,
    item: Item,
}

#[derive(Debug)]
enum Item {
    Agent(AgentRecord),
    Task(TaskRecord),
    Wait(WaitRecord),
    /// A call parked for an operator: a wait with no actor of its own.
    Approval(ApprovalRecord),
}

/// The walk of the stored tree: a [`Preorder`] over its agents, tasks and
/// waits. Nodes come out one at a time: a caller stops when its page is
/// full and continues on the next call by skipping the nodes it already
/// sent ([`Walk::skip`]).
#[derive(Debug)]
pub struct Walk<'a> {
    ctx: &'a Ctx,
    order: Preorder<Pending>,
    /// Agents met so far: a cycle (only a corrupt store makes one) is
    /// walked once, and the runtime-wide check knows what the walk covered.
    seen: HashSet<AgentId>,
    pub counts: Counts,
    /// Found since the last [`Walk::take_mismatches`].
    mismatches: Vec<String>,
    /// The actor ids linked under recently checked parents: a wide node's
    /// children are listed once, not once per child.
    linked: HashMap<ActorId, HashSet<ActorId>>,
    /// Agents at this depth are passed without meeting what hangs under
    /// them, so a caller can list one level of a wide tree (a console
    /// expanding a node) without reading the levels below.
    max_depth: Option<usize>,
}

/// Parents whose linked children are kept at once; the walk needs only the
/// current node's ancestors, and a deeper chain just lists again.
const LINKED_CACHE: usize = 64;

impl<'a> Walk<'a> {
    pub fn new(ctx: &'a Ctx, roots: Vec<AgentRecord>) -> Self {
        let seen = roots.iter().map(|r| r.id).collect();
        let roots = roots
            .into_iter()
            .map(|record| Pending {
                parent: None,
                item: Item::Agent(record),
            })
            .collect();
        Self {
            ctx,
            order: Preorder::new(roots),
            seen,
            counts: Counts::default(),
            mismatches: Vec::new(),
            linked: HashMap::new(),
            max_depth: None,
        }
    }

    /// Stops the walk at `depth`: agents there are shown, nothing below
    /// them is read. 0 lists the roots alone.
    #[must_use]
    pub fn max_depth(mut self, depth: Option<usize>) -> Self {
        self.max_depth = depth;
        self
    }

    /// Whether the walk stops above the leaves (see [`Walk::max_depth`]):
    /// then it does not cover the whole tree.
    pub fn is_bounded(&self) -> bool {
        self.max_depth.is_some()
    }

    /// Nodes passed so far: where a next page starts.
    pub fn passed(&self) -> usize {
        self.order.passed()
    }

    /// Whether every node has been passed.
    pub fn is_done(&self) -> bool {
        self.order.is_done()
    }

    /// The mismatches found since the last call.
    pub fn take_mismatches(&mut self) -> Vec<String> {
        std::mem::take(&mut self.mismatches)
    }

    /// Passes `count` nodes without checking their actors (an earlier page
    /// showed them); their mismatches were reported then, and are dropped.
    pub fn skip(&mut self, count: usize) -> Result<(), StoreError> {
        for _ in 0..count {
            if self.advance()?.is_none() {
                break;
            }
        }
        self.mismatches.clear();
        Ok(())
    }

    /// The next node in pre-order, its actor checked; `None` at the end.
    pub fn next_node(&mut self) -> Result<Option<Node>, StoreError> {
        let Some((depth, pending)) = self.advance()? else {
            return Ok(None);
        };
        let kind = match pending.item {
            Item::Agent(record) => self.check_agent(record)?,
            Item::Task(record) => self.check_task(record),
            Item::Wait(record) => self.check_wait(record),
            Item::Approval(record) => NodeKind::Approval { record },
        };
        Ok(Some(Node {
            parent: pending.parent,
            depth,
            kind,
        }))
    }

    /// After the last node: reports running agents the walk never met.
    pub fn report_unvisited_actors(&mut self) {
        // A bounded walk never meets the agents below its last level: they
        // are not strays.
        if self.is_bounded() {
            return;
        }
        for (agent_id, _) in self.ctx.directory.agents() {
            if !self.seen.contains(&agent_id) {
                self.mismatches.push(format!(
                    "agent {agent_id} has a running actor but is not live in the store"
                ));
            }
        }
    }

    /// Passes the next node, counting it, and meets what hangs under it.
    fn advance(&mut self) -> Result<Option<(usize, Pending)>, StoreError> {
        let Self {
            ctx,
            order,
            seen,
            counts,
            mismatches,
            max_depth,
            ..
        } = self;
        order.next_with(|pending, depth| match &pending.item {
            Item::Agent(record) => {
                counts.agents += 1;
                if max_depth.is_some_and(|max| depth >= max) {
                    return Ok(Vec::new());
                }
                below(ctx, record.id, seen, mismatches)
            }
            Item::Task(task) => {
                if task.status == TaskStatus::Running {
                    counts.tasks += 1;
                }
                Ok(Vec::new())
            }
            Item::Wait(_) | Item::Approval(_) => {
                counts.waits += 1;
                Ok(Vec::new())
            }
        })
    }

    fn check_agent(&mut self, record: AgentRecord) -> Result<NodeKind, StoreError> {
        let agent_id = record.id;
        let cell = self.ctx.directory.get(agent_id).map(|e| e.actor.get_cell());
        let actor_alive = cell.as_ref().is_some_and(alive);
        if !actor_alive {
            self.mismatches.push(format!(
                "agent {agent_id} is live in the store but its actor is not running"
            ));
        }
        // Its actor must be linked under its supervisor's, or its root
        // partition's.
        let expected_parent = match record.supervisor_agent_id {
            None => self.ctx.topology.partition_for(agent_id),
            Some(sup) => self.ctx.directory.get(sup).map(|e| e.actor.get_cell()),
        };
        if let (Some(cell), Some(parent)) = (&cell, &expected_parent) {
            if !self.is_linked(parent, cell) {
                let owner = record
                    .supervisor_agent_id
                    .map_or("its root partition".to_owned(), |s| s.to_string());
                self.mismatches.push(format!(
                    "agent {agent_id}'s actor is not linked under {owner}"
                ));
            }
        }
        Ok(NodeKind::Agent {
            place: workspace::place(self.ctx, agent_id)?,
            record,
            actor_alive,
        })
    }

    fn check_task(&mut self, record: TaskRecord) -> NodeKind {
        if record.status != TaskStatus::Running {
            return NodeKind::Task {
                record,
                actor_alive: false,
            };
        }
        let cell = match record.kind {
            TaskKind::ChildAgent { .. } => self.ctx.directory.task(record.id).map(|a| a.get_cell()),
            TaskKind::Command => self.ctx.directory.command(record.id).map(|a| a.get_cell()),
        };
        let actor_alive = cell.as_ref().is_some_and(alive);
        if !actor_alive {
            self.mismatches.push(format!(
                "task {} is running in the store but its actor is not",
                record.id
            ));
        } else if let Some(cell) = &cell {
            self.check_linked(record.owner_agent_id, cell, "task", &record.id.to_string());
        }
        NodeKind::Task {
            record,
            actor_alive,
        }
    }

    fn check_wait(&mut self, record: WaitRecord) -> NodeKind {
        let cell = self.ctx.directory.wait(record.id).map(|a| a.get_cell());
        let actor_alive = cell.as_ref().is_some_and(alive);
        if !actor_alive {
            self.mismatches.push(format!(
                "wait {} is armed in the store but its actor is not running",
                record.id
            ));
        } else if let Some(cell) = &cell {
            self.check_linked(record.owner_agent_id, cell, "wait", &record.id.to_string());
        }
        NodeKind::Wait {
            record,
            actor_alive,
        }
    }

    /// A task's or wait's actor must be linked under its owner's.
    fn check_linked(&mut self, owner: AgentId, cell: &ActorCell, what: &str, id: &str) {
        let Some(owner_cell) = self.ctx.directory.get(owner).map(|e| e.actor.get_cell()) else {
            return;
        };
        if !self.is_linked(&owner_cell, cell) {
            self.mismatches.push(format!(
                "{what} {id}'s actor is not linked under agent {owner}"
            ));
        }
    }
}

/// What hangs under agent `agent_id`, in the order it is shown: its running
/// tasks (and ended ones still holding a worktree), its armed waits, then
/// its live supervised children, each in the store's order.
fn below(
    ctx: &Ctx,
    agent_id: AgentId,
    seen: &mut HashSet<AgentId>,
    mismatches: &mut Vec<String>,
) -> Result<Vec<Pending>, StoreError> {
    let reads = ctx.reads();
    let pending = |item| Pending {
        parent: Some(agent_id),
        item,
    };
    let mut below = Vec::new();
    for task in reads.tasks_of(agent_id)? {
        // An ended task still holding its child's worktree is shown: the
        // worktree is on disk until the task lets it go.
        if task.status == TaskStatus::Running || task.pending_worktree().is_some() {
            below.push(pending(Item::Task(task)));
        }
    }
    for wait in reads.waits_of(agent_id)? {
        if wait.status == WaitStatus::Armed {
            below.push(pending(Item::Wait(wait)));
        }
    }
    for approval in ctx
        .approvals()
        .open_approvals(Some(agent_id), crate::approval::MAX_LISTED)?
    {
        if !approval.status.is_decided() {
            below.push(pending(Item::Approval(approval)));
        }
    }
    for child in reads.children_of(agent_id)? {
        let Some(child) = reads.agent(child)? else {
            mismatches.push(format!(
                "agent {agent_id} supervises {child}, which has no record"
            ));
            continue;
        };
        if child.state.is_live() && seen.insert(child.id) {
            below.push(pending(Item::Agent(child)));
        }
    }
    Ok(below)
}

impl Walk<'_> {
    /// Whether `child`'s actor is linked under `parent`'s.
    fn is_linked(&mut self, parent: &ActorCell, child: &ActorCell) -> bool {
        if self.linked.len() >= LINKED_CACHE && !self.linked.contains_key(&parent.get_id()) {
            self.linked.clear();
        }
        self.linked
            .entry(parent.get_id())
            .or_insert_with(|| child_ids(parent))
            .contains(&child.get_id())
    }
}

fn alive(cell: &ActorCell) -> bool {
    matches!(
        cell.get_status(),
        ActorStatus::Running | ActorStatus::Upgrading | ActorStatus::Starting
    )
}

fn child_ids(cell: &ActorCell) -> HashSet<ActorId> {
    cell.get_children().iter().map(ActorCell::get_id).collect()
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use proptest::prelude::*;

    use super::*;

    /// A stack this small overflows in a recursive walk a few thousand
    /// levels deep; the walks must not care.
    const SMALL_STACK: usize = 256 * 1024;

    fn on_small_stack<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
        std::thread::Builder::new()
            .stack_size(SMALL_STACK)
            .spawn(f)
            .expect("spawn")
            .join()
            .expect("no overflow")
    }

    #[test]
    fn a_100000_deep_chain_walks_on_a_small_stack() {
        const DEPTH: usize = 100_000;
        let (count, deepest) = on_small_stack(|| {
            let mut walk = Preorder::new(vec![0usize]);
            let mut count = 0;
            let mut deepest = 0;
            while let Some((depth, node)) = walk
                .next_with(|n: &usize, _| {
                    Ok::<_, Infallible>(if *n + 1 < DEPTH { vec![*n + 1] } else { vec![] })
                })
                .expect("infallible")
            {
                assert_eq!(depth, node, "a chain's node sits at its own depth");
                count += 1;
                deepest = deepest.max(depth);
            }
            (count, deepest)
        });
        assert_eq!((count, deepest), (DEPTH, DEPTH - 1));
    }

    /// A forest over 0..n: node i's parent, if any, is a smaller node.
    fn arb_forest() -> impl Strategy<Value = Vec<Option<usize>>> {
        (1usize..60).prop_flat_map(|n| {
            proptest::collection::vec((any::<prop::sample::Index>(), any::<bool>()), n).prop_map(
                |picks| {
                    picks
                        .iter()
                        .enumerate()
                        .map(|(i, (pick, root))| (i > 0 && !*root).then(|| pick.index(i)))
                        .collect()
                },
            )
        })
    }

    /// The reference: the recursive pre-order, fine on forests this small.
    fn recursive(kids: &[Vec<usize>], node: usize, depth: usize, out: &mut Vec<(usize, usize)>) {
        out.push((depth, node));
        for &kid in &kids[node] {
            recursive(kids, kid, depth + 1, out);
        }
    }

    proptest! {
        #[test]
        fn the_walk_is_the_recursive_preorder(forest in arb_forest(), stop in 0usize..80) {
            let mut kids = vec![Vec::new(); forest.len()];
            for (i, parent) in forest.iter().enumerate() {
                if let Some(p) = parent {
                    kids[*p].push(i);
                }
            }
            let roots: Vec<usize> = (0..forest.len()).filter(|i| forest[*i].is_none()).collect();
            let mut expected = Vec::new();
            for &root in &roots {
                recursive(&kids, root, 0, &mut expected);
            }
            // Walked in two goes, as pages are: `stop` nodes, then the rest
            // after skipping the first go in a new walk.
            let children = |n: &usize, _: usize| Ok::<_, Infallible>(kids[*n].clone());
            let mut first = Preorder::new(roots.clone());
            let mut got = Vec::new();
            while got.len() < stop {
                match first.next_with(children).expect("infallible") {
                    Some(node) => got.push(node),
                    None => break,
                }
            }
            prop_assert_eq!(first.passed(), got.len());
            let mut rest = Preorder::new(roots);
            for _ in 0..got.len() {
                rest.next_with(children).expect("infallible");
            }
            while let Some(node) = rest.next_with(children).expect("infallible") {
                got.push(node);
            }
            prop_assert!(rest.is_done());
            prop_assert_eq!(got, expected);
        }
    }
}
