//! Cleanup of a supervision subtree: which agents and tasks stop when an
//! agent is archived, its task is stopped, or it finishes its work. Only
//! parent-supervised descendants go; a public agent an agent spawned keeps
//! only lineage and stays.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::ids::{AgentId, CleanupId, TaskId};

/// Why a subtree is being cleaned up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CleanupReason {
    /// An operator archived the root agent.
    Archived,
    /// The root's supervisor stopped its task handle.
    TaskStopped { task_id: TaskId },
    /// The root finished its delegated work.
    Completed { task_id: TaskId },
    /// The root's supervisor gave up restarting it.
    Failed { task_id: Option<TaskId> },
    /// The root's supervisor is gone (found at recovery).
    Orphaned,
}

impl CleanupReason {
    pub const fn name(&self) -> &'static str {
        match self {
            CleanupReason::Archived => "archived",
            CleanupReason::TaskStopped { .. } => "task_stopped",
            CleanupReason::Completed { .. } => "completed",
            CleanupReason::Failed { .. } => "failed",
            CleanupReason::Orphaned => "orphaned",
        }
    }
}

/// Written in the same batch as the subtree's terminal records, before any
/// actor stops; removed once the actors are gone. One left behind by a
/// crash is finished on the next start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CleanupIntent {
    pub id: CleanupId,
    pub root_agent_id: AgentId,
    pub reason: CleanupReason,
    pub agents: Vec<AgentId>,
    pub created_at_ms: u64,
}

/// What a cleanup stops.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanupPlan {
    /// The root and its supervised descendants, every agent before its
    /// supervisor (the root last).
    pub agents: Vec<AgentId>,
    /// The tasks those agents own.
    pub tasks: Vec<TaskId>,
}

/// Walks the subtree of `root`, breadth first over a queue it keeps on the
/// heap: agents grow the subtree, so its depth must cost memory, never call
/// stack. `children(a)` lists the live agents that `a` supervises;
/// `tasks(a)` the live tasks `a` owns.
pub fn cleanup_plan<E>(
    root: AgentId,
    mut children: impl FnMut(AgentId) -> Result<Vec<AgentId>, E>,
    mut tasks: impl FnMut(AgentId) -> Result<Vec<TaskId>, E>,
) -> Result<CleanupPlan, E> {
    let mut order = vec![root];
    let mut seen: HashSet<AgentId> = HashSet::from([root]);
    let mut next = 0;
    while next < order.len() {
        let id = order[next];
        next += 1;
        for child in children(id)? {
            // A cycle can only come from a corrupt store; visit once.
            if seen.insert(child) {
                order.push(child);
            }
        }
    }
    let mut plan = CleanupPlan::default();
    for id in &order {
        plan.tasks.extend(tasks(*id)?);
    }
    order.reverse();
    plan.agents = order;
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::convert::Infallible;

    use proptest::prelude::*;

    use super::*;

    /// A forest over 1..=n: each agent is either self-owned (no supervisor)
    /// or supervised by a smaller id.
    fn arb_forest() -> impl Strategy<Value = Vec<Option<u128>>> {
        (1usize..40).prop_flat_map(|n| {
            proptest::collection::vec((any::<prop::sample::Index>(), any::<bool>()), n).prop_map(
                |picks| {
                    picks
                        .iter()
                        .enumerate()
                        .map(|(i, (pick, own))| {
                            if i == 0 || *own {
                                None
                            } else {
                                Some(pick.index(i) as u128 + 1)
                            }
                        })
                        .collect()
                },
            )
        })
    }

    #[test]
    fn a_100000_deep_chain_plans_on_a_small_stack_deepest_first() {
        const DEPTH: u128 = 100_000;
        let plan = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                cleanup_plan::<Infallible>(
                    AgentId::from_u128(1),
                    |a| {
                        let next = a.as_u128() + 1;
                        Ok(if next <= DEPTH {
                            vec![AgentId::from_u128(next)]
                        } else {
                            vec![]
                        })
                    },
                    |_| Ok(Vec::new()),
                )
                .expect("infallible")
            })
            .expect("spawn")
            .join()
            .expect("no overflow");
        assert_eq!(plan.agents.len(), DEPTH as usize);
        assert_eq!(plan.agents.first(), Some(&AgentId::from_u128(DEPTH)));
        assert_eq!(plan.agents.last(), Some(&AgentId::from_u128(1)));
    }

    proptest! {
        #[test]
        fn a_plan_holds_exactly_the_supervised_subtree_children_first(
            forest in arb_forest(),
            root_pick in any::<prop::sample::Index>(),
        ) {
            let ids: Vec<AgentId> = (1..=forest.len() as u128).map(AgentId::from_u128).collect();
            let mut kids: HashMap<AgentId, Vec<AgentId>> = HashMap::new();
            for (i, sup) in forest.iter().enumerate() {
                if let Some(sup) = sup {
                    kids.entry(AgentId::from_u128(*sup)).or_default().push(ids[i]);
                }
            }
            let root = ids[root_pick.index(ids.len())];
            let plan = cleanup_plan::<Infallible>(
                root,
                |a| Ok(kids.get(&a).cloned().unwrap_or_default()),
                |a| Ok(vec![TaskId::from_u128(a.as_u128())]),
            ).expect("infallible");

            // Exactly the descendants through supervisor links, plus the root.
            let supervisor = |a: AgentId| forest[(a.as_u128() - 1) as usize].map(AgentId::from_u128);
            let in_subtree = |mut a: AgentId| loop {
                if a == root { return true; }
                match supervisor(a) { Some(s) => a = s, None => return false }
            };
            let expected: HashSet<AgentId> = ids.iter().copied().filter(|a| in_subtree(*a)).collect();
            let got: HashSet<AgentId> = plan.agents.iter().copied().collect();
            prop_assert_eq!(&got, &expected);
            prop_assert_eq!(got.len(), plan.agents.len(), "no agent twice");
            prop_assert_eq!(plan.agents.last(), Some(&root));
            // Every agent comes before its supervisor.
            let pos: HashMap<AgentId, usize> = plan.agents.iter().enumerate().map(|(i, a)| (*a, i)).collect();
            for a in &plan.agents {
                if let Some(s) = supervisor(*a).filter(|s| pos.contains_key(s)) {
                    prop_assert!(pos[a] < pos[&s]);
                }
            }
            prop_assert_eq!(plan.tasks.len(), plan.agents.len());
        }
    }
}
