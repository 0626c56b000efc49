//! The daemon-wide gate that holds turns back while recovery rebuilds the
//! tree (a turn may reshape the tree: spawn, archive, so none starts until
//! every live agent runs again), and while the disk is nearly full.
//!
//! Only agents with work to do ever wait at the gate. An agent that finds it
//! closed parks itself and is woken when it opens; the other agents never
//! hear of it, so opening the gate after a million agents came back costs
//! one message per agent that has a queue, not one per agent.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use ractor::ActorRef;

use crate::protocol::AgentMsg;

/// Closed from the runtime's start until its recovery has spawned every
/// agent; closed again only while the disk is nearly full.
#[derive(Debug)]
pub struct TurnGate {
    /// Read on every turn start; the mutex is never taken once this is set.
    open: AtomicBool,
    /// Agents that found the gate closed with work queued; `None` once
    /// open. A mutex, since an agent must not park after the gate opened
    /// (it would never be woken): parking and opening decide under it.
    /// Held for a push or a take only, and only while recovering.
    parked: Mutex<Option<Vec<ActorRef<AgentMsg>>>>,
}

impl Default for TurnGate {
    fn default() -> Self {
        Self {
            open: AtomicBool::new(false),
            parked: Mutex::new(Some(Vec::new())),
        }
    }
}

impl TurnGate {
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// Parks `agent` until the gate opens. False if it is open already: the
    /// caller goes on and starts its turn.
    pub fn park(&self, agent: &ActorRef<AgentMsg>) -> bool {
        if self.is_open() {
            return false;
        }
        // A poisoned lock only means a panic elsewhere mid-push; the list
        // is still a list.
        let mut parked = self.parked.lock().unwrap_or_else(|p| p.into_inner());
        match parked.as_mut() {
            Some(agents) => {
                agents.push(agent.clone());
                true
            }
            None => false,
        }
    }

    /// Closes the gate again, while the disk is nearly full (see the
    /// daemon's disk guard): agents with work park at their next turn
    /// start until it opens. Turns already running finish.
    pub fn close(&self) {
        let mut parked = self.parked.lock().unwrap_or_else(|p| p.into_inner());
        parked.get_or_insert_with(Vec::new);
        self.open.store(false, Ordering::Release);
    }

    /// Opens the gate; returns the agents parked at it, for the caller to
    /// wake. Opening twice returns nobody the second time.
    pub fn open(&self) -> Vec<ActorRef<AgentMsg>> {
        let mut parked = self.parked.lock().unwrap_or_else(|p| p.into_inner());
        let agents = parked.take().unwrap_or_default();
        self.open.store(true, Ordering::Release);
        agents
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ractor::{Actor, ActorProcessingErr, ActorRef};

    use super::*;

    /// Stands in for an agent: the gate only keeps and hands back refs.
    struct Parked;

    impl Actor for Parked {
        type Msg = AgentMsg;
        type State = ();
        type Arguments = ();

        async fn pre_start(
            &self,
            _myself: ActorRef<AgentMsg>,
            _args: (),
        ) -> Result<(), ActorProcessingErr> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn an_agent_parked_before_the_gate_opens_is_handed_back_and_none_parks_after() {
        let gate = TurnGate::default();
        let (agent, handle) = Actor::spawn(None, Parked, ()).await.expect("spawn");
        assert!(!gate.is_open());
        assert!(gate.park(&agent));
        let woken: Vec<_> = gate.open().iter().map(|a| a.get_id()).collect();
        assert_eq!(woken, vec![agent.get_id()]);
        assert!(gate.is_open());
        assert!(!gate.park(&agent), "parked at an open gate: never woken");
        assert!(gate.open().is_empty());
        agent.stop(None);
        handle.await.expect("stopped");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_park_that_succeeds_while_the_gate_opens_is_woken() {
        let gate = Arc::new(TurnGate::default());
        let (agent, handle) = Actor::spawn(None, Parked, ()).await.expect("spawn");
        let parkers: Vec<_> = (0..4)
            .map(|_| {
                let gate = gate.clone();
                let agent = agent.clone();
                std::thread::spawn(move || (0..5_000).filter(|_| gate.park(&agent)).count())
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(1));
        let woken = gate.open().len();
        let parked: usize = parkers.into_iter().map(|p| p.join().expect("parker")).sum();
        assert_eq!(parked, woken);
        agent.stop(None);
        handle.await.expect("stopped");
    }
}
