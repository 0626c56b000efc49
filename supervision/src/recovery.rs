//! Recovery: from what the store holds after a crash, decide which agents
//! come back, in which order, and what goes back on their queues. Pure, so
//! the at-least-once and parents-first rules are tested without a daemon.

use std::collections::{HashMap, HashSet};

use crate::ids::{AgentId, MessageId};
use crate::record::{AgentRecord, MessageRecord, MessageStatus};

/// What a daemon start does before it reports SERVING.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecoveryPlan {
    /// Live agents, every supervisor before the agents it supervises.
    pub spawn: Vec<AgentRecord>,
    /// The rebuilt queue, in message-id order, of each agent of `spawn`
    /// with pending messages; the others come back with empty queues. Kept
    /// apart from `spawn` so that, in the usual shape (roots only, read in
    /// id order), `spawn` is the vector of records it was given, with no
    /// copy of each record (320 MB at a million agents).
    pub queues: HashMap<AgentId, Vec<MessageId>>,
    /// How many agents of `spawn` sit at each depth of the tree, roots
    /// first. Agents of one generation have their supervisors in earlier
    /// ones, so a generation can be spawned all at once.
    pub generations: Vec<usize>,
    /// Messages whose turn was cut short: they are queued again and their
    /// run is recorded as interrupted.
    pub interrupted: Vec<MessageRecord>,
    /// Live agents whose supervisor is no longer live. They are not spawned:
    /// their cleanup belongs to the supervision plane.
    pub orphans: Vec<AgentRecord>,
    /// Pending messages of agents that are not live (archived, failed or
    /// unknown). Left as they are, and counted for the operator.
    pub stranded_messages: usize,
}

/// Builds the plan. `agents` may hold any agent; `pending` holds the
/// messages whose status is pending, in any order.
///
/// Records stay in the vector they were read into and the walk moves
/// their indices: at a million agents the plan is on the path from a
/// crash to serving, and moving each record through maps cost seconds.
pub fn recover(agents: Vec<AgentRecord>, pending: Vec<MessageRecord>) -> RecoveryPlan {
    let mut records: Vec<Option<AgentRecord>> = agents
        .into_iter()
        .filter(|a| a.state.is_live())
        .map(Some)
        .collect();
    let mut index: HashMap<AgentId, usize> = HashMap::with_capacity(records.len());
    for i in 0..records.len() {
        let Some(id) = records[i].as_ref().map(|a| a.id) else {
            continue;
        };
        // An id read twice: the later record stands, as a map would keep it.
        if let Some(earlier) = index.insert(id, i) {
            records[earlier] = None;
        }
    }

    let mut plan = RecoveryPlan::default();

    // Breadth-first from the roots, so a child is spawned under a
    // supervisor that already runs; over a queue on the heap, since agents
    // grow the tree and its depth must never cost call stack.
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut roots = Vec::new();
    let mut orphans = Vec::new();
    for (i, agent) in records.iter().enumerate() {
        let Some(agent) = agent else { continue };
        match agent.supervisor_agent_id {
            None => roots.push(i),
            Some(sup) => match index.get(&sup) {
                Some(&s) => children.entry(s).or_default().push(i),
                None => orphans.push(i),
            },
        }
    }
    let id_of = |i: &usize| records[*i].as_ref().map(|a| a.id);
    roots.sort_by_key(id_of);
    let mut seen = vec![false; records.len()];
    for &root in &roots {
        seen[root] = true;
    }
    let mut order = roots;
    let mut next = 0;
    // `order[generation_start..]` is the generation being walked.
    let mut generation_end = order.len();
    let mut generation_start = 0;
    while next < order.len() {
        if next == generation_end {
            plan.generations.push(generation_end - generation_start);
            generation_start = generation_end;
            generation_end = order.len();
        }
        let parent = order[next];
        next += 1;
        if let Some(mut kids) = children.remove(&parent) {
            kids.sort_by_key(id_of);
            for kid in kids {
                if !seen[kid] {
                    seen[kid] = true;
                    order.push(kid);
                }
            }
        }
    }
    if generation_end > generation_start {
        plan.generations.push(generation_end - generation_start);
    }
    // Agents on a supervision cycle are unreachable from a root; a cycle
    // can only come from a corrupted store, so they stay down as orphans.
    // (Those whose supervisor is not live were found above.)
    for (i, agent) in records.iter().enumerate() {
        if !seen[i]
            && agent
                .as_ref()
                .and_then(|a| a.supervisor_agent_id)
                .is_some_and(|s| index.contains_key(&s))
        {
            orphans.push(i);
        }
    }
    plan.orphans = orphans
        .into_iter()
        .filter_map(|i| records[i].take())
        .collect();
    plan.orphans.sort_by_key(|a| a.id);

    // Queues are rebuilt only for agents that come back; whatever else is
    // pending stays in the store untouched.
    let mut pending = pending;
    pending.retain(|m| m.status.is_pending());
    pending.sort_by_key(|m| m.id);
    for message in pending {
        if !index.get(&message.agent_id).is_some_and(|&i| seen[i]) {
            plan.stranded_messages += 1;
            continue;
        }
        plan.queues
            .entry(message.agent_id)
            .or_default()
            .push(message.id);
        if let MessageStatus::Handling { .. } = message.status {
            plan.interrupted.push(message);
        }
    }

    // When the walk took the records in the order they lie (roots only,
    // given in id order) they stay where they are; otherwise they are
    // gathered in the walk's order.
    let reached = order.len();
    plan.spawn = if order.windows(2).all(|w| w[0] < w[1]) {
        // Orphans were taken above, so none should be left that the walk
        // did not reach; whatever might be is not spawned.
        for (record, seen) in records.iter_mut().zip(&seen) {
            if !seen {
                *record = None;
            }
        }
        // Not `flatten`: std collects `filter_map` into the same vector,
        // `flatten` into a new one.
        #[allow(clippy::filter_map_identity)]
        let kept: Vec<AgentRecord> = records.into_iter().filter_map(|r| r).collect();
        kept
    } else {
        order
            .into_iter()
            .filter_map(|i| records[i].take())
            .collect()
    };
    debug_assert_eq!(plan.spawn.len(), reached);
    plan
}

impl RecoveryPlan {
    /// Sets aside poison messages: an interrupted message that already had
    /// `max_attempts` turns (each cut short by a crash, since a finished
    /// turn ends the message and a graceful stop gives its turn's attempt
    /// back, durably, before the store closes) is not queued again; it is returned for the
    /// caller to mark failed. Without this a message whose turn crashes the
    /// daemon would crash every start.
    pub fn set_aside_poison(&mut self, max_attempts: u32) -> Vec<MessageRecord> {
        let (poison, retried): (Vec<MessageRecord>, Vec<MessageRecord>) =
            std::mem::take(&mut self.interrupted)
                .into_iter()
                .partition(|m| m.attempts >= max_attempts);
        self.interrupted = retried;
        if poison.is_empty() {
            return poison;
        }
        let ids: HashSet<MessageId> = poison.iter().map(|m| m.id).collect();
        for message in &poison {
            if let Some(queue) = self.queues.get_mut(&message.agent_id) {
                queue.retain(|id| !ids.contains(id));
            }
        }
        poison
    }
}

/// Takes out of `agents` every descendant of the agents in `held`, and
/// returns their ids, in no particular order.
///
/// An agent whose record (or one of its records) cannot be read is not
/// started; its descendants are held with it, neither started without
/// their supervisor nor archived as orphans: archiving is for good, and
/// the damage may yet be repaired from a backup.
pub fn hold_subtrees(agents: &mut Vec<AgentRecord>, held: &HashSet<AgentId>) -> Vec<AgentId> {
    let mut children: HashMap<AgentId, Vec<AgentId>> = HashMap::new();
    for agent in agents.iter() {
        if let Some(sup) = agent.supervisor_agent_id {
            children.entry(sup).or_default().push(agent.id);
        }
    }
    let mut out: HashSet<AgentId> = HashSet::new();
    let mut queue: Vec<AgentId> = held.iter().copied().collect();
    while let Some(parent) = queue.pop() {
        for kid in children.remove(&parent).unwrap_or_default() {
            if !held.contains(&kid) && out.insert(kid) {
                queue.push(kid);
            }
        }
    }
    if !out.is_empty() {
        agents.retain(|a| !out.contains(&a.id));
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::ids::RunId;
    use crate::profile::Preset;
    use crate::record::{LifecycleState, Provenance};

    fn agent(id: u128, supervisor: Option<u128>, state: LifecycleState) -> AgentRecord {
        let preset = if supervisor.is_some() {
            Preset::PrivateChild
        } else {
            Preset::PublicNamed
        };
        AgentRecord {
            id: AgentId::from_u128(id),
            name: None,
            profile: preset.profile(),
            lineage_parent_agent_id: supervisor.map(AgentId::from_u128),
            supervisor_agent_id: supervisor.map(AgentId::from_u128),
            state,
            brain: Default::default(),
            forked_context: None,
            composition: None,
            context_tokens: None,
            mcp_servers: Vec::new(),
            network: Default::default(),
            namespace: crate::namespace::DEFAULT.to_owned(),
            labels: Default::default(),
            created_at_ms: 0,
            updated_at_ms: 0,
        }
    }

    fn message(id: u128, agent: u128, status: MessageStatus) -> MessageRecord {
        MessageRecord {
            id: MessageId::from_u128(id),
            agent_id: AgentId::from_u128(agent),
            provenance: Provenance::Operator,
            body: String::new(),
            dedupe_key: None,
            status,
            reply: None,
            attempts: 0,
            created_at_ms: 0,
        }
    }

    fn arb_state() -> impl Strategy<Value = LifecycleState> {
        prop_oneof![
            3 => Just(LifecycleState::Active),
            1 => Just(LifecycleState::Paused),
            1 => Just(LifecycleState::Failed),
            1 => Just(LifecycleState::Archived),
        ]
    }

    fn arb_status() -> impl Strategy<Value = MessageStatus> {
        let run = RunId::from_u128(7);
        prop_oneof![
            Just(MessageStatus::Queued),
            Just(MessageStatus::Handling { run_id: run }),
            Just(MessageStatus::Handled { run_id: run }),
        ]
    }

    /// A forest over ids 1..=n: agent i's supervisor, if any, has a smaller id.
    fn arb_world() -> impl Strategy<Value = (Vec<AgentRecord>, Vec<MessageRecord>)> {
        (1usize..30)
            .prop_flat_map(|n| {
                (
                    proptest::collection::vec(
                        (any::<prop::sample::Index>(), any::<bool>(), arb_state()),
                        n,
                    ),
                    proptest::collection::vec((0u128..(n as u128 + 3), arb_status()), 0..80),
                )
            })
            .prop_map(|(shape, msgs)| {
                let agents = shape
                    .iter()
                    .enumerate()
                    .map(|(i, (pick, rooted, state))| {
                        let id = i as u128 + 1;
                        let sup = if *rooted || i == 0 {
                            None
                        } else {
                            Some(pick.index(i) as u128 + 1)
                        };
                        agent(id, sup, *state)
                    })
                    .collect();
                let messages = msgs
                    .into_iter()
                    .enumerate()
                    .map(|(i, (agent, status))| message(1000 - i as u128, agent, status))
                    .collect();
                (agents, messages)
            })
    }

    proptest! {
        #[test]
        fn every_pending_message_of_a_live_agent_is_queued_once_in_order((agents, messages) in arb_world()) {
            let plan = recover(agents.clone(), messages.clone());
            let spawned: HashSet<AgentId> = plan.spawn.iter().map(|a| a.id).collect();
            prop_assert!(plan.queues.keys().all(|id| spawned.contains(id)));
            for m in &messages {
                let queued = plan
                    .queues
                    .get(&m.agent_id)
                    .map(|queue| queue.iter().filter(|id| **id == m.id).count())
                    .unwrap_or(0);
                if m.status.is_pending() && spawned.contains(&m.agent_id) {
                    prop_assert_eq!(queued, 1);
                } else {
                    prop_assert_eq!(queued, 0);
                }
            }
            for queue in plan.queues.values() {
                prop_assert!(queue.windows(2).all(|w| w[0] < w[1]));
            }
        }

        #[test]
        fn supervisors_are_spawned_a_generation_before_their_children((agents, messages) in arb_world()) {
            let plan = recover(agents, messages);
            // Only earlier generations count as up: a generation is spawned
            // all at once.
            let mut up: HashSet<AgentId> = HashSet::new();
            let mut rest = plan.spawn.as_slice();
            for &size in &plan.generations {
                prop_assert!(size > 0);
                let (generation, later) = rest.split_at(size);
                for a in generation {
                    prop_assert!(a.state.is_live());
                    if let Some(sup) = a.supervisor_agent_id {
                        prop_assert!(up.contains(&sup));
                    }
                }
                up.extend(generation.iter().map(|a| a.id));
                rest = later;
            }
            prop_assert!(rest.is_empty());
        }

        #[test]
        fn no_live_agent_is_lost((agents, messages) in arb_world()) {
            let plan = recover(agents.clone(), messages);
            let live = agents.iter().filter(|a| a.state.is_live()).count();
            prop_assert_eq!(plan.spawn.len() + plan.orphans.len(), live);
            prop_assert_eq!(plan.generations.iter().sum::<usize>(), plan.spawn.len());
        }

        #[test]
        fn poison_leaves_the_queues_and_the_rest_stays(
            (agents, messages) in arb_world(),
            attempts in proptest::collection::vec(0u32..6, 80),
            max in 1u32..5,
        ) {
            let messages: Vec<MessageRecord> = messages
                .into_iter()
                .zip(attempts)
                .map(|(m, attempts)| MessageRecord { attempts, ..m })
                .collect();
            let before = recover(agents, messages);
            let mut plan = before.clone();
            let poison = plan.set_aside_poison(max);
            for m in &poison {
                prop_assert!(m.attempts >= max);
                let handling = matches!(m.status, MessageStatus::Handling { .. });
                prop_assert!(handling);
                prop_assert!(plan.queues.values().all(|queue| !queue.contains(&m.id)));
            }
            prop_assert!(plan.interrupted.iter().all(|m| m.attempts < max));
            prop_assert_eq!(poison.len() + plan.interrupted.len(), before.interrupted.len());
            // Every other queued message keeps its place.
            prop_assert_eq!(&before.spawn, &plan.spawn);
            for (agent, queue) in &before.queues {
                let kept: Vec<MessageId> = queue
                    .iter()
                    .copied()
                    .filter(|id| poison.iter().all(|m| m.id != *id))
                    .collect();
                let after = plan.queues.get(agent).cloned().unwrap_or_default();
                prop_assert_eq!(kept, after);
            }
        }

        #[test]
        fn only_cut_short_turns_are_interrupted((agents, messages) in arb_world()) {
            let plan = recover(agents, messages);
            for m in &plan.interrupted {
                let is_handling = matches!(m.status, MessageStatus::Handling { .. });
                prop_assert!(is_handling);
            }
        }
    }

    #[test]
    fn a_100000_deep_chain_recovers_on_a_small_stack_one_generation_per_level() {
        const DEPTH: u128 = 100_000;
        let plan = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                // Given deepest first, so the order comes from the walk.
                let agents = (1..=DEPTH)
                    .rev()
                    .map(|id| agent(id, (id > 1).then(|| id - 1), LifecycleState::Active))
                    .collect();
                recover(agents, vec![message(1, DEPTH, MessageStatus::Queued)])
            })
            .expect("spawn")
            .join()
            .expect("no overflow");
        assert_eq!(plan.spawn.len(), DEPTH as usize);
        assert_eq!(plan.generations, vec![1; DEPTH as usize]);
        let order: Vec<u128> = plan.spawn.iter().map(|a| a.id.as_u128()).collect();
        assert!(order.iter().copied().eq(1..=DEPTH), "supervisors first");
        let deepest = AgentId::from_u128(DEPTH);
        assert_eq!(plan.queues.get(&deepest).map(Vec::len), Some(1));
        assert!(plan.orphans.is_empty());
    }

    /// At a million agents a copy of every record is hundreds of MB of
    /// fresh memory on the way from a crash to serving.
    #[test]
    fn roots_given_in_id_order_are_spawned_from_the_vector_they_came_in() {
        let agents: Vec<AgentRecord> = (1..=1000)
            .map(|id| agent(id, None, LifecycleState::Active))
            .collect();
        let given = agents.as_ptr();
        let plan = recover(agents, vec![message(5, 7, MessageStatus::Queued)]);
        assert_eq!(plan.spawn.len(), 1000);
        assert_eq!(plan.generations, vec![1000]);
        assert!(plan.spawn.iter().map(|a| a.id.as_u128()).eq(1..=1000));
        assert_eq!(plan.queues.len(), 1);
        assert!(
            std::ptr::eq(plan.spawn.as_ptr(), given),
            "the records were copied"
        );
    }

    #[test]
    fn children_of_a_dead_supervisor_are_orphans() {
        let agents = vec![
            agent(1, None, LifecycleState::Archived),
            agent(2, Some(1), LifecycleState::Active),
        ];
        let plan = recover(agents, vec![message(5, 2, MessageStatus::Queued)]);
        assert!(plan.spawn.is_empty());
        assert_eq!(plan.orphans.len(), 1);
        assert_eq!(plan.stranded_messages, 1);
    }

    #[test]
    fn held_subtrees_leave_the_tree_whole_and_the_rest_alone() {
        use LifecycleState::Active;
        // 1 -> 2 -> 3 -> 4, 1 -> 5; 6 -> 7. Hold 2 (its record damaged).
        let mut agents = vec![
            agent(1, None, Active),
            agent(2, Some(1), Active),
            agent(3, Some(2), Active),
            agent(4, Some(3), Active),
            agent(5, Some(1), Active),
            agent(6, None, Active),
            agent(7, Some(6), Active),
        ];
        let held = HashSet::from([AgentId::from_u128(2)]);
        let mut out = hold_subtrees(&mut agents, &held);
        out.sort();
        assert_eq!(out, vec![AgentId::from_u128(3), AgentId::from_u128(4)]);
        let left: Vec<u128> = agents.iter().map(|a| a.id.as_u128()).collect();
        assert_eq!(left, vec![1, 2, 5, 6, 7]);
        // What is left plans as before: nothing orphaned by the hold.
        let plan = recover(agents, Vec::new());
        assert!(plan.orphans.is_empty());
        // A held agent whose record could not be read at all.
        let mut agents = vec![agent(8, Some(9), Active), agent(10, Some(8), Active)];
        let held = HashSet::from([AgentId::from_u128(9)]);
        assert_eq!(hold_subtrees(&mut agents, &held).len(), 2);
        assert!(agents.is_empty());
    }
}
