//! A wait's life, decided: armed, fired (a timer's deadline), cancelled (by
//! its owner or an operator), or given up on (its actor failed past its
//! restart budget). Each end is a guarded write, so a wait ends once, and
//! an end that wakes the owner queues the message in the same batch.

use crate::effect::{Batch, Directive, Plan, Write};
use crate::{EventKind, MessageRecord, Provenance, WaitRecord, WaitStatus};

/// The event that says `wait` is now in its status.
fn updated(wait: &WaitRecord) -> EventKind {
    EventKind::WaitUpdated {
        wait_id: wait.id,
        kind: wait.kind.name().into(),
        status: wait.status,
    }
}

/// Arms `wait`, a new one.
pub fn arm(wait: &WaitRecord) -> Plan {
    let batch = Batch::new()
        .event(wait.owner_agent_id, updated(wait))
        .write(Write::PutWait(wait.clone()));
    Plan::writes(batch)
}

/// Cancels `wait` at `now_ms` if it is armed as read (the write refuses one
/// that ended since); `None` otherwise. Its actor is forgotten once that
/// lands.
pub fn cancel(wait: &WaitRecord, now_ms: u64) -> Option<(Plan, WaitRecord)> {
    if wait.status != WaitStatus::Armed {
        return None;
    }
    let mut wait = wait.clone();
    wait.status = WaitStatus::Cancelled;
    wait.updated_at_ms = now_ms;
    let batch = Batch::new()
        .event(wait.owner_agent_id, updated(&wait))
        .write(Write::EndWait(wait.clone()));
    Some((Plan::writes(batch), wait))
}

/// Fires `wait`, a timer as read now, at `now_ms`: its owner is woken by a
/// timer message, in the same batch; `None` unless it is an armed timer.
pub fn fire(wait: &WaitRecord, now_ms: u64) -> Option<Plan> {
    let fired = wait.fire(now_ms)?;
    let owner = wait.owner_agent_id;
    let body = match wait.reason.is_empty() {
        true => "wake: timer fired".to_owned(),
        false => format!("wake: {}", wait.reason),
    };
    let provenance = Provenance::Timer { wait_id: wait.id };
    let message = MessageRecord::queued(owner, provenance, body, None, now_ms);
    let message_id = message.id;
    let batch = Batch::new()
        .event(owner, updated(&fired))
        .write(Write::EndWait(fired))
        .put_queued(message);
    Some(
        Plan::writes(batch)
            .then(Directive::ForgetWait(wait.id))
            .wake(owner, Some(message_id)),
    )
}

/// Gives up on `wait`, whose actor kept failing, because of `why`: it is
/// cancelled (unless it ended meanwhile) and its owner told.
pub fn give_up(wait: &WaitRecord, why: &str, now_ms: u64) -> Plan {
    let owner = wait.owner_agent_id;
    let mut wait = wait.clone();
    wait.status = WaitStatus::Cancelled;
    wait.updated_at_ms = now_ms;
    let body = format!("wait {} was cancelled: {why}", wait.id);
    let message = MessageRecord::queued(owner, Provenance::Runtime, body, None, now_ms);
    let message_id = message.id;
    let batch = Batch::new()
        .event(owner, updated(&wait))
        .write(Write::EndWait(wait))
        .put_queued(message);
    Plan::writes(batch).wake(owner, Some(message_id))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::{AgentId, WaitId, WaitKind};

    fn wait(timer: bool, status: WaitStatus) -> WaitRecord {
        WaitRecord {
            id: WaitId::generate(),
            owner_agent_id: AgentId::generate(),
            kind: match timer {
                true => WaitKind::Timer { deadline_ms: 5 },
                false => WaitKind::Trigger {
                    token_hash: [3; 32],
                },
            },
            reason: String::new(),
            work_item_id: None,
            status,
            created_at_ms: 1,
            updated_at_ms: 1,
        }
    }

    fn status() -> impl Strategy<Value = WaitStatus> {
        prop_oneof![
            Just(WaitStatus::Armed),
            Just(WaitStatus::Fired),
            Just(WaitStatus::Cancelled),
        ]
    }

    /// The ending writes of a plan, each with the status it ends in.
    fn ends(plan: &Plan) -> Vec<WaitStatus> {
        plan.batch
            .writes
            .iter()
            .filter_map(|w| match w {
                Write::EndWait(w) => Some(w.status),
                _ => None,
            })
            .collect()
    }

    proptest! {
        /// Only an armed timer fires, by one guarded end with the owner's
        /// message in the same batch, woken once it lands; only an armed
        /// wait is cancelled; a give-up always writes a guarded cancel.
        #[test]
        fn a_wait_ends_once_by_a_guarded_write_and_only_from_armed(
            timer in any::<bool>(),
            status in status(),
            now in any::<u64>(),
        ) {
            let wait = wait(timer, status);
            let armed = status == WaitStatus::Armed;
            match fire(&wait, now) {
                Some(plan) => {
                    prop_assert!(timer && armed);
                    prop_assert_eq!(ends(&plan), vec![WaitStatus::Fired]);
                    let queued = plan.batch.writes.iter().find_map(|w| match w {
                        Write::PutMessage(m) => Some(m.id),
                        _ => None,
                    });
                    prop_assert_eq!(queued, plan.woken());
                    prop_assert!(plan.directives.contains(&Directive::ForgetWait(wait.id)));
                }
                None => prop_assert!(!(timer && armed)),
            }
            match cancel(&wait, now) {
                Some((plan, cancelled)) => {
                    prop_assert!(armed);
                    prop_assert_eq!(ends(&plan), vec![WaitStatus::Cancelled]);
                    prop_assert_eq!(cancelled.updated_at_ms, now);
                }
                None => prop_assert!(!armed),
            }
            let given_up = give_up(&wait, "kept failing", now);
            prop_assert_eq!(ends(&given_up), vec![WaitStatus::Cancelled]);
            prop_assert!(given_up.woken().is_some());
            prop_assert_eq!(ends(&arm(&wait)), Vec::<WaitStatus>::new());
        }
    }
}
