//! What the daemon's edges read of the runtime besides agents: the levels
//! its metrics report, and the daemon's variables a webhook's signature is
//! checked against.

use std::sync::atomic::Ordering;

use prometheus_client::registry::Registry;

use super::handle::Runtime;
use crate::directory::DirectoryCounts;

/// Live actors and the supervisors' counters, read at once.
#[derive(Debug, Clone)]
pub struct Levels {
    pub counts: DirectoryCounts,
    /// Turns running now, across agents.
    pub turns_in_flight: usize,
    /// Agents restarted by their supervisor after a failure.
    pub restarts: u64,
    /// Agents whose supervisor gave up restarting them.
    pub given_up: u64,
}

impl Runtime {
    /// Adds the runtime's own metrics (turns, tools, brains) to `registry`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        self.ctx().stats.metrics.register(registry);
    }

    pub fn levels(&self) -> Levels {
        let stats = &self.ctx().stats;
        Levels {
            counts: self.ctx().directory.counts(),
            turns_in_flight: stats.busy.load(Ordering::Relaxed),
            restarts: stats.restarts.load(Ordering::Relaxed),
            given_up: stats.given_up.load(Ordering::Relaxed),
        }
    }

    /// The daemon's variable `name` (given to it or in its environment),
    /// read now, so a rotated value takes effect at once. Its value is
    /// redacted from then on wherever agents could see it.
    pub fn secret_var(&self, name: &str) -> Option<String> {
        self.ctx().config.secrets.var(name)
    }
}
