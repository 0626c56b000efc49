//! Where one runtime is in its life: recovering (turns held at the
//! [`TurnGate`] until every agent runs again), running, and shutting down
//! (no restart starts, turns in flight are drained). Every actor reads it;
//! recovery opens the turn gate, and the runtime's handle begins the
//! shutdown. It also tracks every task the runtime starts, for the
//! shutdown to wait for.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio_util::task::TaskTracker;

use crate::in_flight::{InFlight, InFlightTurn};
use crate::turn_gate::TurnGate;

#[derive(Debug, Default)]
pub struct Lifecycle {
    /// Set before the runtime stops its children, so their exits are not
    /// taken for failures.
    shutting_down: AtomicBool,
    /// Holds turns back until recovery has every agent running again.
    pub turns: TurnGate,
    /// Which messages turns in flight hold, for a graceful shutdown.
    pub in_flight: Arc<InFlight>,
    /// Every task the runtime starts beside its actors (turns, cleanups,
    /// restarts, creations, acknowledgements after a flush): a shutdown
    /// closes it and waits for them, so none is left detached.
    pub tasks: TaskTracker,
}

impl Lifecycle {
    /// True once the runtime began to stop: exits are expected, and no
    /// restart or respawn should start anything.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// Marks the runtime as stopping and closes the turn registry: no turn
    /// starts from now on. Returns the turns still in flight.
    pub(crate) fn begin_shutdown(&self) -> Vec<InFlightTurn> {
        self.shutting_down.store(true, Ordering::Release);
        self.in_flight.close()
    }
}
