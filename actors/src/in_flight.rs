//! The turns running across the daemon, so a graceful shutdown knows which
//! messages it cut short and can give their attempts back: only a crash
//! counts towards `--max-message-attempts`.
//!
//! One short lock per turn start and end (never held across an await),
//! like the directory's; an idle agent costs nothing here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use holarchy_supervision::{AgentId, MessageId, RunId};

/// One turn in flight: the message it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFlightTurn {
    pub agent_id: AgentId,
    pub message_id: MessageId,
    pub run_id: RunId,
}

#[derive(Debug, Default)]
struct Inner {
    /// Set by [`InFlight::close`]: no turn starts after the shutdown has
    /// taken its list.
    closed: bool,
    turns: HashMap<RunId, InFlightTurn>,
}

/// The registry, shared by every agent through the runtime's context.
#[derive(Debug, Default)]
pub struct InFlight {
    inner: Mutex<Inner>,
}

impl InFlight {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The map stays consistent even if a holder panicked: every change
        // is one insert or remove.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a turn about to start; `None` once the daemon is shutting
    /// down, when no turn may start. The turn leaves the registry when the
    /// returned guard drops.
    pub fn begin(self: &Arc<Self>, turn: InFlightTurn) -> Option<InFlightGuard> {
        let mut inner = self.lock();
        if inner.closed {
            return None;
        }
        inner.turns.insert(turn.run_id, turn);
        Some(InFlightGuard {
            registry: self.clone(),
            run_id: turn.run_id,
        })
    }

    /// Refuses every later turn and returns those running now, atomically
    /// with the refusal, so no turn can start unseen in between.
    pub fn close(&self) -> Vec<InFlightTurn> {
        let mut inner = self.lock();
        inner.closed = true;
        inner.turns.values().copied().collect()
    }

    /// Turns still registered (their agents' actors have not let go yet).
    pub fn len(&self) -> usize {
        self.lock().turns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A turn's place in the registry, held by the agent's current run.
#[derive(Debug)]
pub struct InFlightGuard {
    registry: Arc<InFlight>,
    run_id: RunId,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.registry.lock().turns.remove(&self.run_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(n: u128) -> InFlightTurn {
        InFlightTurn {
            agent_id: AgentId::from_u128(n),
            message_id: MessageId::from_u128(n),
            run_id: RunId::from_u128(n),
        }
    }

    #[test]
    fn close_lists_the_running_turns_and_refuses_new_ones() {
        let registry = Arc::new(InFlight::default());
        let first = registry.begin(turn(1)).expect("open");
        let second = registry.begin(turn(2)).expect("open");
        drop(second);
        assert_eq!(registry.close(), vec![turn(1)]);
        assert!(registry.begin(turn(3)).is_none(), "closed");
        assert_eq!(registry.len(), 1);
        drop(first);
        assert!(registry.is_empty());
    }
}
