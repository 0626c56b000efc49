//! The directory of running agents: agent id to actor reference. Shared by
//! the runtime (which spawns and reaps agents) and the gateway (which routes
//! to them), so routing costs a read lock, not a message to the runtime.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

use holarchy_supervision::{AgentId, Visibility};
use ractor::ActorRef;

use crate::agent::AgentMsg;

#[derive(Debug, Clone)]
pub struct DirectoryEntry {
    pub actor: ActorRef<AgentMsg>,
    pub visibility: Visibility,
}

/// Counts of running agents, by visibility.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectoryCounts {
    pub public: usize,
    pub private: usize,
}

#[derive(Debug, Default)]
pub struct Directory {
    entries: RwLock<HashMap<AgentId, DirectoryEntry>>,
}

impl Directory {
    // Entries are plain data, so a panic while the lock was held cannot have
    // left a half-made entry: a poisoned lock is still safe to use.

    pub fn get(&self, id: AgentId) -> Option<DirectoryEntry> {
        let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
        entries.get(&id).cloned()
    }

    pub fn insert(&self, id: AgentId, entry: DirectoryEntry) {
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        entries.insert(id, entry);
    }

    pub fn remove(&self, id: AgentId) -> Option<DirectoryEntry> {
        let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        entries.remove(&id)
    }

    pub fn counts(&self) -> DirectoryCounts {
        let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
        let public = entries
            .values()
            .filter(|e| e.visibility == Visibility::Public)
            .count();
        DirectoryCounts {
            public,
            private: entries.len() - public,
        }
    }

    /// Every running agent; used to ask them all for snapshots.
    pub fn actors(&self) -> Vec<ActorRef<AgentMsg>> {
        let entries = self.entries.read().unwrap_or_else(PoisonError::into_inner);
        entries.values().map(|e| e.actor.clone()).collect()
    }
}
