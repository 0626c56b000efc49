//! The directory of running actors: agents and task handles by id, and
//! which id each actor runs. Shared by every supervisor (the runtime and the
//! agents) and by the gateway, so routing costs a read lock, not a message.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use foldhash::fast::RandomState;

use holarchy_supervision::{AgentId, LifecycleState, MessageId, TaskId, Visibility, WaitId};
use ractor::{ActorId, ActorRef};

use crate::limits::AgentSlots;
use crate::live::{AgentSnapshot, LiveView};
use crate::namespaces::NamespaceUse;
use crate::protocol::{
    Ack, AgentMsg, CommandMsg, DeliverError, Delivered, NewMessage, TaskMsg, WaitMsg,
};

#[derive(Debug, Clone)]
pub struct DirectoryEntry {
    pub actor: ActorRef<AgentMsg>,
    pub visibility: Visibility,
    /// Paused by an operator: it takes messages but starts no turn. Kept
    /// here so that metrics count agents by state without asking them.
    pub paused: bool,
    /// Its queue and turns as it publishes them, read without asking it.
    pub live: Arc<LiveView>,
    /// Its namespace, which counts it while it is here.
    pub namespace: Arc<NamespaceUse>,
}

impl DirectoryEntry {
    /// The agent's queue and turns as it last published them, without
    /// asking it.
    pub fn snapshot(&self) -> AgentSnapshot {
        let state = if self.paused {
            LifecycleState::Paused
        } else {
            LifecycleState::Active
        };
        self.live.snapshot(state)
    }
}

/// What a supervised actor runs, read from a supervision event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Member {
    Agent(AgentId),
    Task(TaskId),
    Wait(WaitId),
    Command(TaskId),
}

/// Counts of running actors: agents by visibility (and how many of them
/// are paused), tasks, and waits (and how many of them are timers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectoryCounts {
    pub public: usize,
    pub private: usize,
    pub paused_public: usize,
    pub paused_private: usize,
    /// Tasks running: command tasks and child-agent handles.
    pub tasks: usize,
    /// How many of `tasks` are commands.
    pub commands: usize,
    pub waits: usize,
    pub timers: usize,
    /// Every supervised actor: agents, tasks, commands and waits.
    pub actors: usize,
}

/// A wait's actor, and whether it is a timer (else an external trigger).
#[derive(Debug, Clone)]
struct WaitEntry {
    actor: ActorRef<WaitMsg>,
    timer: bool,
}

/// The directory's maps. Their keys are ids the daemon makes (random ULIDs,
/// ractor's counters), never a client's choice, so they need no defence
/// against chosen collisions, and SipHash was a measurable share of a
/// restart's CPU (docs/benchmarks.md); foldhash is still seeded per process.
type Map<K, V> = HashMap<K, V, RandomState>;

#[derive(Debug, Default)]
struct Inner {
    agents: Map<AgentId, DirectoryEntry>,
    /// How many of `agents` are public, and paused by visibility, kept so
    /// status and metrics never walk them.
    public: usize,
    paused: [usize; 2],
    tasks: Map<TaskId, ActorRef<TaskMsg>>,
    waits: Map<WaitId, WaitEntry>,
    /// How many of `waits` are timers.
    timers: usize,
    commands: Map<TaskId, ActorRef<CommandMsg>>,
    members: Map<ActorId, Member>,
}

/// Maps smaller than this keep their capacity.
const SHRINK_FLOOR: usize = 4096;

/// Gives back a map's table once it is three-quarters empty, so a daemon
/// that ended most of its agents does not keep their slots. Halving at most
/// once per doubling of emptiness keeps the rehashing amortised.
fn shrink<K: std::hash::Hash + Eq, V>(map: &mut Map<K, V>) {
    if map.capacity() > SHRINK_FLOOR && map.len() * 4 < map.capacity() {
        map.shrink_to(map.len() * 2);
    }
}

/// Which of `Inner::paused` counts an agent of `visibility`.
fn slot(visibility: Visibility) -> usize {
    usize::from(visibility == Visibility::Public)
}

impl Inner {
    /// Counts `entry` in (`add`) or out of the totals.
    fn count(&mut self, entry: &DirectoryEntry, add: bool) {
        let step = |n: &mut usize| {
            *n = if add {
                n.saturating_add(1)
            } else {
                n.saturating_sub(1)
            }
        };
        if entry.visibility == Visibility::Public {
            step(&mut self.public);
        }
        if entry.paused {
            step(&mut self.paused[slot(entry.visibility)]);
        }
        entry.namespace.count_agent(add);
    }

    fn insert_agent(&mut self, id: AgentId, entry: DirectoryEntry) -> Option<DirectoryEntry> {
        self.count(&entry, true);
        let old = self.agents.insert(id, entry);
        if let Some(old) = &old {
            self.count(old, false);
        }
        old
    }

    fn remove_agent(&mut self, id: AgentId) -> Option<DirectoryEntry> {
        let old = self.agents.remove(&id)?;
        self.count(&old, false);
        shrink(&mut self.agents);
        Some(old)
    }

    fn remove_wait(&mut self, id: WaitId) -> Option<WaitEntry> {
        let old = self.waits.remove(&id)?;
        if old.timer {
            self.timers = self.timers.saturating_sub(1);
        }
        Some(old)
    }

    fn remove_member(&mut self, actor: &ActorId) -> Option<Member> {
        let member = self.members.remove(actor)?;
        shrink(&mut self.members);
        Some(member)
    }
}

#[derive(Debug, Default)]
pub struct Directory {
    inner: RwLock<Inner>,
}

impl Directory {
    // Entries are plain data, so a panic while the lock was held cannot have
    // left a half-made entry: a poisoned lock is still safe to use.

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn get(&self, id: AgentId) -> Option<DirectoryEntry> {
        self.read().agents.get(&id).cloned()
    }

    /// The agents of `namespace` whose next turn waits for a turn limit.
    /// Walks every entry under the read lock: for an operator's rare
    /// change of a quota, not for a hot path.
    pub fn deferred_in(&self, namespace: &Arc<NamespaceUse>) -> Vec<ActorRef<AgentMsg>> {
        self.read()
            .agents
            .values()
            .filter(|e| Arc::ptr_eq(&e.namespace, namespace) && e.live.is_turn_deferred())
            .map(|e| e.actor.clone())
            .collect()
    }

    /// The namespace of running agent `id`, without cloning its entry.
    pub fn namespace_of(&self, id: AgentId) -> Option<Arc<NamespaceUse>> {
        self.read().agents.get(&id).map(|e| e.namespace.clone())
    }

    pub fn task(&self, id: TaskId) -> Option<ActorRef<TaskMsg>> {
        self.read().tasks.get(&id).cloned()
    }

    pub fn member(&self, actor: ActorId) -> Option<Member> {
        self.read().members.get(&actor).copied()
    }

    /// Makes room for `agents` more agents at once, so recovery does not
    /// rehash the maps (under the write lock) as they grow.
    pub fn reserve(&self, agents: usize) {
        let mut inner = self.write();
        inner.agents.reserve(agents);
        inner.members.reserve(agents);
    }

    pub fn insert(&self, id: AgentId, entry: DirectoryEntry) {
        let mut inner = self.write();
        Self::put_agent(&mut inner, id, entry);
    }

    /// [`Self::insert`] for an agent a creation reserved room for: one of
    /// its `slots` is given back under the same lock (see
    /// [`Self::counts_with`]).
    pub fn insert_reserved(&self, id: AgentId, entry: DirectoryEntry, slots: &mut AgentSlots) {
        let mut inner = self.write();
        Self::put_agent(&mut inner, id, entry);
        slots.release_one();
    }

    fn put_agent(inner: &mut Inner, id: AgentId, entry: DirectoryEntry) {
        inner
            .members
            .insert(entry.actor.get_id(), Member::Agent(id));
        if let Some(old) = inner.insert_agent(id, entry) {
            inner.remove_member(&old.actor.get_id());
        }
    }

    pub fn insert_task(&self, id: TaskId, actor: ActorRef<TaskMsg>) {
        let mut inner = self.write();
        inner.members.insert(actor.get_id(), Member::Task(id));
        if let Some(old) = inner.tasks.insert(id, actor) {
            inner.remove_member(&old.get_id());
        }
    }

    /// Forgets an agent, if `actor` is still the one registered for it (a
    /// late exit of a replaced actor must not remove its successor).
    pub fn remove_actor(&self, actor: ActorId) -> Option<Member> {
        let mut inner = self.write();
        let member = inner.remove_member(&actor)?;
        match member {
            Member::Agent(id) => {
                if inner
                    .agents
                    .get(&id)
                    .is_some_and(|e| e.actor.get_id() == actor)
                {
                    inner.remove_agent(id);
                }
            }
            Member::Task(id) => {
                if inner.tasks.get(&id).is_some_and(|a| a.get_id() == actor) {
                    inner.tasks.remove(&id);
                }
            }
            Member::Wait(id) => {
                if inner
                    .waits
                    .get(&id)
                    .is_some_and(|w| w.actor.get_id() == actor)
                {
                    inner.remove_wait(id);
                }
            }
            Member::Command(id) => {
                if inner.commands.get(&id).is_some_and(|a| a.get_id() == actor) {
                    inner.commands.remove(&id);
                }
            }
        }
        Some(member)
    }

    pub fn remove(&self, id: AgentId) -> Option<DirectoryEntry> {
        let mut inner = self.write();
        let entry = inner.remove_agent(id)?;
        inner.remove_member(&entry.actor.get_id());
        Some(entry)
    }

    pub fn command(&self, id: TaskId) -> Option<ActorRef<CommandMsg>> {
        self.read().commands.get(&id).cloned()
    }

    pub fn insert_command(&self, id: TaskId, actor: ActorRef<CommandMsg>) {
        let mut inner = self.write();
        inner.members.insert(actor.get_id(), Member::Command(id));
        if let Some(old) = inner.commands.insert(id, actor) {
            inner.remove_member(&old.get_id());
        }
    }

    pub fn remove_command(&self, id: TaskId) -> Option<ActorRef<CommandMsg>> {
        let mut inner = self.write();
        let actor = inner.commands.remove(&id)?;
        inner.remove_member(&actor.get_id());
        Some(actor)
    }

    pub fn wait(&self, id: WaitId) -> Option<ActorRef<WaitMsg>> {
        self.read().waits.get(&id).map(|w| w.actor.clone())
    }

    /// Registers a wait's actor; `timer` tells a timer from an external
    /// trigger, for the counts.
    pub fn insert_wait(&self, id: WaitId, actor: ActorRef<WaitMsg>, timer: bool) {
        let mut inner = self.write();
        inner.members.insert(actor.get_id(), Member::Wait(id));
        let old = inner.remove_wait(id);
        if timer {
            inner.timers += 1;
        }
        inner.waits.insert(id, WaitEntry { actor, timer });
        if let Some(old) = old {
            inner.remove_member(&old.actor.get_id());
        }
    }

    pub fn remove_wait(&self, id: WaitId) -> Option<ActorRef<WaitMsg>> {
        let mut inner = self.write();
        let old = inner.remove_wait(id)?;
        inner.remove_member(&old.actor.get_id());
        Some(old.actor)
    }

    /// Records that a running agent was paused or resumed; an agent not
    /// running is left alone (it is counted from its record when it starts).
    pub fn set_paused(&self, id: AgentId, paused: bool) {
        let mut inner = self.write();
        let Some(entry) = inner.agents.get_mut(&id) else {
            return;
        };
        if entry.paused == paused {
            return;
        }
        entry.paused = paused;
        let visibility = entry.visibility;
        let count = &mut inner.paused[slot(visibility)];
        *count = if paused {
            count.saturating_add(1)
        } else {
            count.saturating_sub(1)
        };
    }

    pub fn remove_task(&self, id: TaskId) -> Option<ActorRef<TaskMsg>> {
        let mut inner = self.write();
        let actor = inner.tasks.remove(&id)?;
        inner.remove_member(&actor.get_id());
        Some(actor)
    }

    /// Every running agent, for whole-tree checks.
    pub fn agents(&self) -> Vec<(AgentId, DirectoryEntry)> {
        self.read()
            .agents
            .iter()
            .map(|(id, e)| (*id, e.clone()))
            .collect()
    }

    /// Up to `limit` running tasks (child-agent handles, then commands), in
    /// no particular order: one read lock for `limit` entries, whatever the
    /// number running.
    pub fn some_tasks(&self, limit: usize) -> Vec<TaskId> {
        let inner = self.read();
        inner
            .tasks
            .keys()
            .chain(inner.commands.keys())
            .take(limit)
            .copied()
            .collect()
    }

    /// Up to `limit` armed waits, as [`Directory::some_tasks`].
    pub fn some_waits(&self, limit: usize) -> Vec<WaitId> {
        self.read().waits.keys().take(limit).copied().collect()
    }

    pub fn counts(&self) -> DirectoryCounts {
        self.counts_with(|| ()).0
    }

    /// The counts, and `also` read under the same lock: a creation's slots
    /// are given back under the write lock as its agents are registered
    /// ([`Self::insert_reserved`]), so a count of reservations read here
    /// never holds an agent the directory holds too.
    pub fn counts_with<T>(&self, also: impl FnOnce() -> T) -> (DirectoryCounts, T) {
        let inner = self.read();
        let counts = DirectoryCounts {
            public: inner.public,
            private: inner.agents.len().saturating_sub(inner.public),
            paused_public: inner.paused[slot(Visibility::Public)],
            paused_private: inner.paused[slot(Visibility::Private)],
            tasks: inner.tasks.len() + inner.commands.len(),
            commands: inner.commands.len(),
            waits: inner.waits.len(),
            timers: inner.timers,
            actors: inner.members.len(),
        };
        (counts, also())
    }
}

/// Puts a message on a running agent's queue from outside any actor (a
/// turn, an API call); resolves once the message is durable.
pub async fn deliver(
    actor: &ActorRef<AgentMsg>,
    message: NewMessage,
    timeout: std::time::Duration,
) -> Result<Delivered, DeliverError> {
    match actor
        .call(
            |reply| AgentMsg::Deliver {
                message,
                ack: Ack::Durable,
                reply,
            },
            Some(timeout),
        )
        .await
    {
        Ok(ractor::rpc::CallResult::Success(answer)) => answer,
        Ok(_) => Err(DeliverError::Unavailable("the agent did not answer".into())),
        Err(err) => Err(DeliverError::Unavailable(err.to_string())),
    }
}

impl Directory {
    /// Puts a message already in the store on its agent's queue. A parent
    /// that is not running picks the message up from the store when it
    /// next starts.
    pub fn wake(&self, agent_id: AgentId, message_id: MessageId) {
        if let Some(entry) = self.get(agent_id) {
            let _ = entry.actor.cast(AgentMsg::Wake(message_id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mostly_emptied_map_gives_back_its_table() {
        let mut map: Map<u64, u64> = (0..100_000).map(|i| (i, i)).collect();
        let full = map.capacity();
        for i in 0..99_000 {
            map.remove(&i);
            shrink(&mut map);
        }
        assert_eq!(map.len(), 1_000);
        assert!(map.capacity() * 16 < full, "{} of {full}", map.capacity());
        assert!((99_000..100_000).all(|i| map.get(&i) == Some(&i)));
    }

    #[test]
    fn small_maps_keep_their_table() {
        let mut map: Map<u64, u64> = (0..1_000).map(|i| (i, i)).collect();
        for i in 0..999 {
            map.remove(&i);
        }
        // Removal leaves tombstones that `capacity` already discounts, so
        // compare around the shrink itself.
        let before = map.capacity();
        shrink(&mut map);
        assert_eq!(map.capacity(), before);
    }
}
