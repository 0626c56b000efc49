//! What a running agent publishes about itself for readers that must not
//! wait on its mailbox (`GetAgent`, listings, instances): the length of
//! its queue, the turn it runs, whether a queued turn is held back by a
//! turn limit, and how many turns it has completed since its actor
//! started. The agent writes it as these change; a reader takes
//! one short lock and never wakes the agent.

use std::sync::{Mutex, PoisonError};

use holarchy_supervision::{AgentId, LifecycleState, RunId};

/// What operators and tests can see of a running agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSnapshot {
    pub agent_id: AgentId,
    pub state: LifecycleState,
    pub queue_len: usize,
    pub current_run: Option<RunId>,
    /// A queued message waits for the turn pace or the hourly limit: the
    /// one sign, short of the debug log, that a turn was considered and
    /// put off rather than not yet looked at.
    pub turn_deferred: bool,
    pub turns_completed: u64,
}

/// Shared by an agent's actor (the only writer) and its directory entry.
#[derive(Debug)]
pub struct LiveView {
    agent: AgentId,
    live: Mutex<Live>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Live {
    queue_len: u32,
    /// In the padding after `queue_len`: no cost per agent.
    turn_deferred: bool,
    /// A cleanup is ending the agent: its records (messages included)
    /// are written by the cleanup now, not only by the agent.
    ending: bool,
    turns_completed: u64,
    run: Option<RunId>,
}

impl LiveView {
    pub fn new(agent: AgentId) -> Self {
        Self {
            agent,
            live: Mutex::default(),
        }
    }

    pub fn agent(&self) -> AgentId {
        self.agent
    }

    fn update(&self, change: impl FnOnce(&mut Live)) {
        change(&mut self.live.lock().unwrap_or_else(PoisonError::into_inner));
    }

    fn read(&self) -> Live {
        *self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn queue_changed(&self, len: usize) {
        self.update(|live| live.queue_len = u32::try_from(len).unwrap_or(u32::MAX));
    }

    pub fn turn_started(&self, run_id: RunId) {
        self.update(|live| live.run = Some(run_id));
    }

    /// A queued turn was put off by a turn limit (`true`), or may start
    /// again (`false`).
    pub fn turn_deferred(&self, deferred: bool) {
        self.update(|live| live.turn_deferred = deferred);
    }

    /// Set by a cleanup before it writes the agent's records ended.
    pub fn mark_ending(&self) {
        self.update(|live| live.ending = true);
    }

    /// Whether a cleanup may have written the agent's records: what the
    /// agent kept in memory of them may no longer be what is stored.
    pub fn is_ending(&self) -> bool {
        self.read().ending
    }

    /// Whether a queued turn waits for a turn limit now.
    pub fn is_turn_deferred(&self) -> bool {
        self.read().turn_deferred
    }

    /// The turn left the agent (finished, failed or aborted).
    pub fn turn_ended(&self) {
        self.update(|live| live.run = None);
    }

    /// A turn's result was recorded.
    pub fn turn_completed(&self) {
        self.update(|live| live.turns_completed += 1);
    }

    /// The agent as it stands; `state` comes from the caller, which knows
    /// it without asking the agent.
    pub fn snapshot(&self, state: LifecycleState) -> AgentSnapshot {
        let live = self.read();
        AgentSnapshot {
            agent_id: self.agent,
            state,
            queue_len: live.queue_len as usize,
            current_run: live.run,
            turn_deferred: live.turn_deferred,
            turns_completed: live.turns_completed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_shows_the_queue_the_running_turn_and_the_completed_turns() {
        let agent = AgentId::generate();
        let live = LiveView::new(agent);
        let idle = live.snapshot(LifecycleState::Active);
        assert_eq!(idle.agent_id, agent);
        assert_eq!(
            (idle.queue_len, idle.current_run, idle.turns_completed),
            (0, None, 0)
        );

        let run = RunId::generate();
        live.queue_changed(3);
        live.turn_started(run);
        let busy = live.snapshot(LifecycleState::Active);
        assert_eq!((busy.queue_len, busy.current_run), (3, Some(run)));

        live.turn_deferred(true);
        assert!(live.snapshot(LifecycleState::Active).turn_deferred);
        live.turn_deferred(false);
        live.turn_completed();
        live.turn_ended();
        live.queue_changed(2);
        let after = live.snapshot(LifecycleState::Paused);
        assert_eq!((after.queue_len, after.current_run), (2, None));
        assert_eq!(after.turns_completed, 1);
        assert!(!after.turn_deferred);
        assert_eq!(after.state, LifecycleState::Paused);
    }
}
