//! One lock per agent on its structure: its children, task handles,
//! commands, waits and workspaces. A change to one agent's structure is
//! serialised by that agent's lock alone, so a slow change under one agent
//! never waits for another's.
//!
//! Rules, in one place (see docs/architecture.md):
//! - A change takes the lock of the agent it changes, checks that agent is
//!   live, commits (in memory; never a flush) and registers the actors it
//!   starts, then lets go. Slow parts (flushes, git, process stops) run
//!   outside the lock; a change that must finish after one takes the lock
//!   again and checks again.
//! - Only a cleanup holds more than one lock: it locks its subtree from the
//!   root down, a parent before its children. Every other change holds one
//!   lock at a time, so no two holders can wait on each other.
//! - Locks exist only while held or waited for: a million idle agents cost
//!   nothing here.
//!
//! [`KeyedLocks`], the table behind them, also serialises worktree removals
//! per repository.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::{Arc, Mutex, PoisonError};

use holarchy_supervision::AgentId;
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// The locks that order structural changes, none daemon-wide. None is held
/// across a flush or a process stop; only a repository's worktree lock is
/// held across git, and only across that repository's own removal.
#[derive(Debug, Default)]
pub struct Locks {
    /// One lock per agent on its structure (children, tasks, waits,
    /// workspaces), so a child is never created under a supervisor being
    /// cleaned up. Never taken inside an actor's `handle`.
    pub structure: StructureLocks,
    /// Serialises worktree removals per repository (its git directory): a
    /// stop and a sweep may race for one worktree, and git locks a
    /// repository's worktree list and refs.
    pub worktrees: KeyedLocks<std::path::PathBuf>,
    /// Serialises the writes of applies of one instance (by name): the
    /// agent's record and the instance's are two writes, and a second
    /// apply must see both of the first. Let go before their flush; other
    /// instances never wait.
    pub instances: KeyedLocks<String>,
}

/// Shards of the lock table; a shard's mutex is held only to find or drop
/// an entry, never while a structure lock is waited for.
const SHARDS: usize = 64;

type Table<K> = HashMap<K, Arc<AsyncMutex<()>>>;

/// One async lock per key, made when first awaited and forgotten when no
/// one holds or awaits it.
pub struct KeyedLocks<K> {
    shards: Box<[Mutex<Table<K>>]>,
    hasher: std::collections::hash_map::RandomState,
}

/// The structure locks of every agent of one runtime.
pub type StructureLocks = KeyedLocks<AgentId>;

impl<K> Default for KeyedLocks<K> {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: std::collections::hash_map::RandomState::new(),
        }
    }
}

impl<K: Hash + Eq + Clone> std::fmt::Debug for KeyedLocks<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedLocks")
            .field("held", &self.held())
            .finish()
    }
}

impl<K: Hash + Eq + Clone> KeyedLocks<K> {
    /// Waits for `key`'s lock.
    pub async fn lock(&self, key: K) -> KeyedGuard<'_, K> {
        let entry = self
            .shard(&key)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key.clone())
            .or_default()
            .clone();
        let guard = entry.lock_owned().await;
        KeyedGuard {
            locks: self,
            key,
            guard: Some(guard),
        }
    }

    /// How many keys' locks are held or awaited now.
    pub fn held(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }

    fn shard(&self, key: &K) -> &Mutex<Table<K>> {
        &self.shards[(self.hasher.hash_one(key) as usize) % SHARDS]
    }
}

impl StructureLocks {
    /// Locks every agent `children_of` reaches from `root`, parents before
    /// their children, and returns the guards in that order (the root
    /// first). `children_of` is read under each parent's lock, so no child
    /// can be added to a locked agent unseen.
    pub async fn lock_subtree<E>(
        &self,
        root: AgentId,
        mut children_of: impl FnMut(AgentId) -> Result<Vec<AgentId>, E>,
    ) -> Result<Vec<StructureGuard<'_>>, E> {
        let mut guards = vec![self.lock(root).await];
        let mut next = 0;
        while next < guards.len() {
            let parent = guards[next].key;
            next += 1;
            for child in children_of(parent)? {
                guards.push(self.lock(child).await);
            }
        }
        Ok(guards)
    }
}

/// Held: no other holder of the same key runs.
pub struct KeyedGuard<'a, K: Hash + Eq + Clone> {
    locks: &'a KeyedLocks<K>,
    key: K,
    guard: Option<OwnedMutexGuard<()>>,
}

/// Held: no other change of the agent's structure runs.
pub type StructureGuard<'a> = KeyedGuard<'a, AgentId>;

impl<K: Hash + Eq + Clone> KeyedGuard<'_, K> {
    /// The key this guard holds.
    pub fn key(&self) -> &K {
        &self.key
    }
}

impl<K: Hash + Eq + Clone> std::fmt::Debug for KeyedGuard<'_, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedGuard").finish_non_exhaustive()
    }
}

impl<K: Hash + Eq + Clone> Drop for KeyedGuard<'_, K> {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut table = self
            .locks
            .shard(&self.key)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Waiters take their clone under this shard's mutex, so a count of
        // one (the table's own) means nobody holds or awaits the lock.
        if table
            .get(&self.key)
            .is_some_and(|entry| Arc::strong_count(entry) == 1)
        {
            table.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn one_agents_lock_does_not_wait_for_anothers() {
        let locks = StructureLocks::default();
        let (a, b) = (AgentId::generate(), AgentId::generate());
        let _held = locks.lock(a).await;
        let other = tokio::time::timeout(Duration::from_secs(5), locks.lock(b)).await;
        assert!(other.is_ok(), "b's lock waited for a's");
    }

    #[tokio::test]
    async fn a_second_holder_of_one_agent_waits_until_the_first_lets_go() {
        let locks = Arc::new(StructureLocks::default());
        let a = AgentId::generate();
        let first = locks.lock(a).await;
        let waiter = {
            let locks = locks.clone();
            tokio::spawn(async move {
                let _second = locks.lock(a).await;
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "the second holder did not wait");
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("the waiter got the lock")
            .expect("no panic");
    }

    #[tokio::test]
    async fn locks_are_forgotten_once_nobody_holds_or_awaits_them() {
        let locks = Arc::new(StructureLocks::default());
        let a = AgentId::generate();
        let first = locks.lock(a).await;
        let waiter = {
            let locks = locks.clone();
            tokio::spawn(async move { drop(locks.lock(a).await) })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(first);
        waiter.await.expect("no panic");
        assert_eq!(locks.held(), 0);
        for _ in 0..100 {
            drop(locks.lock(AgentId::generate()).await);
        }
        assert_eq!(locks.held(), 0);
    }

    #[tokio::test]
    async fn a_subtree_is_locked_parents_first_and_whole() {
        let locks = StructureLocks::default();
        let root = AgentId::generate();
        let kids = [AgentId::generate(), AgentId::generate()];
        let grandchild = AgentId::generate();
        let guards = locks
            .lock_subtree(root, |a| {
                Ok::<_, ()>(if a == root {
                    kids.to_vec()
                } else if a == kids[1] {
                    vec![grandchild]
                } else {
                    Vec::new()
                })
            })
            .await
            .expect("locked");
        let order: Vec<_> = guards.iter().map(|g| *g.key()).collect();
        assert_eq!(order, vec![root, kids[0], kids[1], grandchild]);
        assert_eq!(locks.held(), 4);
        drop(guards);
        assert_eq!(locks.held(), 0);
    }
}
