//! An agent's own record, changed from outside its turns: paused or
//! resumed, given another brain, purged once archived; and the turns a
//! graceful shutdown cut, given back to their queues. Every change of a
//! live agent is a guarded write, so nothing ended is ever brought back.

use crate::effect::{Batch, Plan, Write};
use crate::{
    AgentRecord, BrainConfig, EventKind, LifecycleState, MessageRecord, RunId, RunOutcome,
};

/// Why a change of an agent's record was refused as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the agent is {}", .0.name())]
pub struct NotLive(pub LifecycleState);

/// Moves `record` to `to` for `reason` at `now_ms`, after `extra` (what the
/// control carries). An ended agent is refused; one already in `to` is
/// left as it is (only `extra` lands).
pub fn set_state(
    record: &AgentRecord,
    to: LifecycleState,
    reason: &str,
    extra: Batch,
    now_ms: u64,
) -> Result<Plan, NotLive> {
    if !record.state.is_live() {
        return Err(NotLive(record.state));
    }
    if record.state == to {
        return Ok(Plan::writes(extra));
    }
    let mut record = record.clone();
    record.state = to;
    record.updated_at_ms = now_ms;
    let id = record.id;
    let batch = extra.write(Write::PutLiveAgent(record)).event(
        id,
        EventKind::AgentStateChanged {
            state: to,
            reason: reason.into(),
        },
    );
    Ok(Plan::writes(batch))
}

/// Gives `record` another brain from its next turn, at `now_ms`.
pub fn rebrain(
    record: &AgentRecord,
    brain: BrainConfig,
    now_ms: u64,
) -> Result<(Plan, AgentRecord), NotLive> {
    if !record.state.is_live() {
        return Err(NotLive(record.state));
    }
    let record = AgentRecord {
        brain,
        updated_at_ms: now_ms,
        ..record.clone()
    };
    let plan = Plan::writes(Batch::new().write(Write::PutLiveAgent(record.clone())));
    Ok((plan, record))
}

/// Purges archived agents, each with an event saying so; the store refuses
/// the whole batch if any is not archived when it lands.
pub fn purge(records: Vec<AgentRecord>) -> Plan {
    let mut batch = Batch::new();
    for record in records {
        batch = batch
            .event(
                record.id,
                EventKind::AgentStateChanged {
                    state: LifecycleState::Archived,
                    reason: "deleted: its record purged and its name freed".into(),
                },
            )
            .write(Write::DeleteAgent(record));
    }
    Plan::writes(batch)
}

/// Puts back on their queues the messages of turns a graceful shutdown
/// stopped (each with the run that held it), their attempts given back;
/// one another run holds, or that ended meanwhile, stays as it is.
/// `detail` says why, in each run's end. Returns the plan and how many it
/// gives back.
pub fn give_back(cut: Vec<(MessageRecord, RunId)>, detail: &str) -> (Plan, usize) {
    let mut batch = Batch::new();
    let mut given_back = 0;
    for (message, run_id) in cut {
        let Some(requeued) = message.stopped_mid_turn(run_id) else {
            continue;
        };
        batch = batch
            .event(
                message.agent_id,
                EventKind::RunFinished {
                    run_id,
                    message_id: message.id,
                    outcome: RunOutcome::Interrupted,
                    detail: detail.to_owned(),
                },
            )
            .write(Write::PutMessage(requeued));
        given_back += 1;
    }
    (Plan::writes(batch), given_back)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::{MessageStatus, Provenance};

    fn state() -> impl Strategy<Value = LifecycleState> {
        prop_oneof![
            Just(LifecycleState::Active),
            Just(LifecycleState::Paused),
            Just(LifecycleState::Failed),
            Just(LifecycleState::Archived),
        ]
    }

    proptest! {
        /// An ended agent is never changed; a live one moves by one guarded
        /// write with its event, or not at all when already there.
        #[test]
        fn only_a_live_agent_changes_state_and_only_when_it_moves(
            from in state(),
            to in prop_oneof![Just(LifecycleState::Active), Just(LifecycleState::Paused)],
            now in any::<u64>(),
        ) {
            let record = AgentRecord { state: from, ..AgentRecord::public("a", 1) };
            match set_state(&record, to, "operator", Batch::new(), now) {
                Err(NotLive(state)) => prop_assert!(!from.is_live() && state == from),
                Ok(plan) if from == to => prop_assert!(plan.batch.is_empty()),
                Ok(plan) => {
                    prop_assert!(from.is_live());
                    prop_assert!(matches!(plan.batch.writes.as_slice(),
                        [Write::PutLiveAgent(a)] if a.state == to && a.updated_at_ms == now));
                    prop_assert_eq!(plan.batch.events.len(), 1);
                }
            }
            prop_assert_eq!(rebrain(&record, BrainConfig::default(), now).is_ok(), from.is_live());
        }

        /// Only a message still held by the run that was cut goes back.
        #[test]
        fn a_cut_turn_gives_back_only_a_message_its_run_still_holds(
            holds in proptest::collection::vec(any::<bool>(), 0..6),
        ) {
            let mut cut = Vec::new();
            for held in &holds {
                let run = RunId::generate();
                let mut message = MessageRecord::queued(
                    crate::AgentId::generate(), Provenance::Operator, "m".into(), None, 1);
                message.status = MessageStatus::Handling {
                    run_id: if *held { run } else { RunId::generate() },
                };
                message.attempts = 1;
                cut.push((message, run));
            }
            let (plan, given) = give_back(cut, "stopped");
            prop_assert_eq!(given, holds.iter().filter(|h| **h).count());
            let queued = plan.batch.writes.iter().filter(|w| matches!(w,
                Write::PutMessage(m) if m.status == MessageStatus::Queued)).count();
            prop_assert_eq!(queued, given);
        }
    }
}
