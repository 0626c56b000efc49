//! Where the runtime's fixed actors are: the root, the gateway and the
//! root partitions. Filled in by the runtime as it starts them (they need
//! the shared context to start, so they cannot be given to it up front),
//! and read by whoever must address them.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{PoisonError, RwLock};

use holarchy_supervision::AgentId;
use ractor::{ActorCell, ActorRef};

use crate::protocol::{GatewayMsg, SchedulerMsg};

/// Which of `count` partitions supervises the public agent `agent`. The
/// same for the life of the data directory's agents as long as `count`
/// stays the same; a different count only moves agents at the next start.
pub fn partition_of(agent: AgentId, count: usize) -> usize {
    let mut hasher = DefaultHasher::new();
    agent.hash(&mut hasher);
    (hasher.finish() % count.max(1) as u64) as usize
}

/// The runtime's fixed actors. Each slot is written a handful of times in a
/// daemon's life (start, a partition's restart) and read often, so a read
/// lock each; a poisoned lock still holds a whole value, so it is used.
#[derive(Debug, Default)]
pub struct Topology {
    gateway: RwLock<Option<ActorRef<GatewayMsg>>>,
    scheduler: RwLock<Option<ActorRef<SchedulerMsg>>>,
    root: RwLock<Option<ActorCell>>,
    partitions: RwLock<Vec<ActorCell>>,
}

impl Topology {
    pub fn gateway(&self) -> Option<ActorRef<GatewayMsg>> {
        self.gateway
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_gateway(&self, gateway: ActorRef<GatewayMsg>) {
        *self.gateway.write().unwrap_or_else(PoisonError::into_inner) = Some(gateway);
    }

    pub fn scheduler(&self) -> Option<ActorRef<SchedulerMsg>> {
        self.scheduler
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_scheduler(&self, scheduler: ActorRef<SchedulerMsg>) {
        *self
            .scheduler
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(scheduler);
    }

    /// Tells the scheduler that instances changed, so it picks up new,
    /// changed and deleted schedules now rather than at its next wake-up.
    pub fn schedules_changed(&self) {
        if let Some(scheduler) = self.scheduler() {
            let _ = scheduler.cast(SchedulerMsg::Scan);
        }
    }

    /// The runtime's root actor, supervisor of the gateway and the root
    /// partitions.
    pub fn root(&self) -> Option<ActorCell> {
        self.root
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_root(&self, root: ActorCell) {
        *self.root.write().unwrap_or_else(PoisonError::into_inner) = Some(root);
    }

    /// The root partition that supervises the public agent `agent`.
    pub fn partition_for(&self, agent: AgentId) -> Option<ActorCell> {
        let partitions = self
            .partitions
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        partitions
            .get(partition_of(agent, partitions.len()))
            .cloned()
    }

    /// How many root partitions there are (0 before the runtime started).
    pub fn partition_count(&self) -> usize {
        self.partitions
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The index of the partition actor `actor`, if it is one.
    pub fn partition_index(&self, actor: ractor::ActorId) -> Option<usize> {
        self.partitions
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .position(|p| p.get_id() == actor)
    }

    pub(crate) fn set_partitions(&self, partitions: Vec<ActorCell>) {
        *self
            .partitions
            .write()
            .unwrap_or_else(PoisonError::into_inner) = partitions;
    }

    pub(crate) fn set_partition(&self, index: usize, partition: ActorCell) {
        if let Some(slot) = self
            .partitions
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(index)
        {
            *slot = partition;
        }
    }
}
