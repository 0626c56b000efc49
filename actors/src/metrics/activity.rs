//! The hot set: the few agents that have something queued or took a turn
//! lately, for `GetActivity` (`holarchy top`) and the longest-queue gauge.
//! Queues and turns report themselves here as they change, so a reader
//! never walks the agents: an idle agent has no entry and costs nothing.
//!
//! The set is sharded by agent id and bounded ([`HOT_CAPACITY`]); each
//! update holds one shard's lock for one map lookup or insert. When a
//! shard is full, a newcomer takes the place of the weakest of a few
//! entries sampled round-robin, if it is weaker than the newcomer: a long
//! queue always finds room, and what is left out is counted.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use holarchy_supervision::AgentId;

/// Shards, each with its own lock: turns of different agents rarely meet.
const SHARDS: usize = 64;
/// Entries one shard keeps.
const SLOTS_PER_SHARD: usize = 256;
/// Agents the set tracks at most.
pub const HOT_CAPACITY: usize = SHARDS * SLOTS_PER_SHARD;
/// Entries a full shard looks at to make room (the lock is held for them).
const SAMPLE: usize = 8;
/// "Recent turns" are the turns of the last minute, estimated from two
/// one-minute buckets (the current one, and the previous one weighted by
/// how much of it the last minute still covers).
pub const WINDOW_MS: u64 = 60_000;

/// What the set knows of one agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HotAgent {
    pub agent_id: AgentId,
    /// Messages on its queue, as its queue last said.
    pub queue_len: usize,
    /// Turns it started in about the last minute.
    pub recent_turns: u32,
}

#[derive(Debug, Clone, Copy)]
struct Hot {
    agent: AgentId,
    queue: u32,
    /// The bucket (`now / WINDOW_MS`) `current` counts turns of.
    bucket: u64,
    current: u32,
    previous: u32,
}

impl Hot {
    fn new(agent: AgentId, now: u64) -> Self {
        Self {
            agent,
            queue: 0,
            bucket: now / WINDOW_MS,
            current: 0,
            previous: 0,
        }
    }

    /// Moves the buckets up to `now`'s.
    fn roll(&mut self, now: u64) {
        let bucket = now / WINDOW_MS;
        if bucket == self.bucket {
            return;
        }
        self.previous = if bucket == self.bucket + 1 {
            self.current
        } else {
            0
        };
        self.current = 0;
        self.bucket = bucket;
    }

    /// Turns in the minute before `now`: the current bucket's, and the
    /// share of the previous bucket's that the minute still covers.
    fn recent(&self, now: u64) -> u32 {
        let bucket = now / WINDOW_MS;
        let into = now % WINDOW_MS;
        let (current, previous) = match bucket.checked_sub(self.bucket) {
            Some(0) | None => (self.current, self.previous),
            Some(1) => (0, self.current),
            Some(_) => (0, 0),
        };
        let carried = u64::from(previous) * (WINDOW_MS - into) / WINDOW_MS;
        current.saturating_add(u32::try_from(carried).unwrap_or(u32::MAX))
    }

    /// Nothing queued and no turn left in its window: it may go.
    fn cold(&self, now: u64) -> bool {
        self.queue == 0 && self.recent(now) == 0
    }

    /// How much the entry is worth keeping.
    fn weight(&self, now: u64) -> u64 {
        u64::from(self.queue) + u64::from(self.recent(now))
    }

    fn view(&self, now: u64) -> HotAgent {
        HotAgent {
            agent_id: self.agent,
            queue_len: self.queue as usize,
            recent_turns: self.recent(now),
        }
    }
}

#[derive(Debug, Default)]
struct Shard {
    slots: Vec<Hot>,
    index: HashMap<AgentId, usize>,
    /// Where the next sample for room starts.
    hand: usize,
}

impl Shard {
    fn remove(&mut self, agent: AgentId) {
        let Some(at) = self.index.remove(&agent) else {
            return;
        };
        self.slots.swap_remove(at);
        if let Some(moved) = self.slots.get(at) {
            self.index.insert(moved.agent, at);
        }
        if self.slots.is_empty() && self.slots.capacity() > 16 {
            // A burst's tables go with it; a few slots stay for the next
            // turn of a lone busy agent.
            self.slots = Vec::new();
            self.index = HashMap::new();
        }
    }

    /// The entry of `agent`, made if there is room or the weakest sampled
    /// entry weighs less than `weight`; `None` if it was left out.
    fn entry(&mut self, agent: AgentId, now: u64, weight: u64) -> Option<&mut Hot> {
        if let Some(&at) = self.index.get(&agent) {
            return self.slots.get_mut(at);
        }
        if self.slots.len() < SLOTS_PER_SHARD {
            self.index.insert(agent, self.slots.len());
            self.slots.push(Hot::new(agent, now));
            return self.slots.last_mut();
        }
        let mut weakest: Option<(usize, u64)> = None;
        for step in 0..SAMPLE {
            let at = (self.hand + step) % self.slots.len();
            let w = self.slots[at].weight(now);
            if weakest.is_none_or(|(_, least)| w < least) {
                weakest = Some((at, w));
            }
        }
        self.hand = (self.hand + SAMPLE) % self.slots.len();
        let (at, least) = weakest?;
        if least >= weight && !self.slots[at].cold(now) {
            return None;
        }
        let old = self.slots[at].agent;
        self.index.remove(&old);
        self.index.insert(agent, at);
        self.slots[at] = Hot::new(agent, now);
        self.slots.get_mut(at)
    }
}

/// The hot set. Shared by every agent's queue and turn.
#[derive(Debug)]
pub struct Activity {
    shards: Box<[Mutex<Shard>]>,
    started: Instant,
    /// Updates that found no room: the lists may miss an agent.
    left_out: AtomicU64,
}

impl Default for Activity {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            started: Instant::now(),
            left_out: AtomicU64::new(0),
        }
    }
}

/// A point in time, bounded to the set's clock.
fn ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

impl Activity {
    fn shard(&self, agent: AgentId) -> MutexGuard<'_, Shard> {
        // Ids end in 80 random bits: their low bits spread agents evenly.
        let at = (agent.as_u128() % SHARDS as u128) as usize;
        // An entry is plain numbers, whole after any panic.
        self.shards[at]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn now(&self) -> u64 {
        ms(self.started)
    }

    /// `agent`'s queue now holds `len` messages.
    pub fn queue_changed(&self, agent: AgentId, len: usize) {
        self.queue_changed_at(agent, len, self.now());
    }

    fn queue_changed_at(&self, agent: AgentId, len: usize, now: u64) {
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        let mut shard = self.shard(agent);
        if len == 0 {
            // An empty queue makes no entry; a known agent keeps its turns.
            if let Some(&at) = shard.index.get(&agent) {
                shard.slots[at].queue = 0;
                if shard.slots[at].cold(now) {
                    shard.remove(agent);
                }
            }
            return;
        }
        match shard.entry(agent, now, u64::from(len)) {
            Some(hot) => hot.queue = len,
            None => {
                self.left_out.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// `agent` started a turn.
    pub fn turn_started(&self, agent: AgentId) {
        self.turn_started_at(agent, self.now());
    }

    fn turn_started_at(&self, agent: AgentId, now: u64) {
        let mut shard = self.shard(agent);
        match shard.entry(agent, now, 1) {
            Some(hot) => {
                hot.roll(now);
                hot.current = hot.current.saturating_add(1);
            }
            None => {
                self.left_out.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// `agent`'s queue is gone (its actor stopped, crashed or was archived).
    pub fn forget(&self, agent: AgentId) {
        self.shard(agent).remove(agent);
    }

    /// Every agent in the set, after dropping the cold ones; one shard
    /// locked at a time, for at most [`SLOTS_PER_SHARD`] entries.
    pub fn agents(&self) -> Vec<HotAgent> {
        self.agents_at(self.now())
    }

    fn agents_at(&self, now: u64) -> Vec<HotAgent> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            let mut shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
            let cold: Vec<AgentId> = shard
                .slots
                .iter()
                .filter(|hot| hot.cold(now))
                .map(|hot| hot.agent)
                .collect();
            for agent in cold {
                shard.remove(agent);
            }
            out.extend(shard.slots.iter().map(|hot| hot.view(now)));
        }
        out
    }

    /// The longest queue in the set (0 when none).
    pub fn queue_max(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                let shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
                shard.slots.iter().map(|hot| hot.queue).max().unwrap_or(0)
            })
            .max()
            .unwrap_or(0) as usize
    }

    /// Updates that found the set full and were left out, since start.
    pub fn left_out(&self) -> u64 {
        self.left_out.load(Ordering::Relaxed)
    }
}

/// The `limit` busiest agents (most recent turns, then longest queue) and
/// the `limit` with the longest queues (then most recent turns), from
/// `agents`. Agents with no recent turn are not busy; with an empty queue,
/// not queued.
pub fn top(agents: &[HotAgent], limit: usize) -> (Vec<HotAgent>, Vec<HotAgent>) {
    let pick = |keep: fn(&HotAgent) -> bool, key: fn(&HotAgent) -> (u64, u64)| {
        let mut chosen: Vec<HotAgent> = agents.iter().copied().filter(keep).collect();
        // Biggest first; ties by id, so a refresh does not reshuffle them.
        chosen.sort_unstable_by(|a, b| key(b).cmp(&key(a)).then(a.agent_id.cmp(&b.agent_id)));
        chosen.truncate(limit);
        chosen
    };
    let busiest = pick(
        |a| a.recent_turns > 0,
        |a| (u64::from(a.recent_turns), a.queue_len as u64),
    );
    let queued = pick(
        |a| a.queue_len > 0,
        |a| (a.queue_len as u64, u64::from(a.recent_turns)),
    );
    (busiest, queued)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An id that lands in shard 0.
    fn in_shard_zero(n: u128) -> AgentId {
        AgentId::from_u128(n * SHARDS as u128)
    }

    #[test]
    fn an_idle_agent_has_no_entry_and_an_emptied_queue_keeps_its_turns() {
        let set = Activity::default();
        let a = AgentId::generate();
        set.queue_changed_at(a, 0, 0);
        assert!(set.agents_at(0).is_empty());
        set.queue_changed_at(a, 3, 0);
        set.turn_started_at(a, 10);
        set.queue_changed_at(a, 2, 10);
        assert_eq!(
            set.agents_at(20),
            [HotAgent {
                agent_id: a,
                queue_len: 2,
                recent_turns: 1
            }]
        );
        set.queue_changed_at(a, 0, 30);
        assert_eq!(set.agents_at(30)[0].queue_len, 0);
        // Two windows later nothing is left of it.
        assert!(set.agents_at(2 * WINDOW_MS + 30).is_empty());
        set.queue_changed_at(a, 1, 0);
        set.forget(a);
        assert!(set.agents_at(0).is_empty());
    }

    #[test]
    fn recent_turns_fade_over_the_next_minute() {
        let set = Activity::default();
        let a = AgentId::generate();
        for _ in 0..10 {
            set.turn_started_at(a, 1_000);
        }
        let recent = |now| set.agents_at(now).first().map_or(0, |h| h.recent_turns);
        assert_eq!(recent(WINDOW_MS - 1), 10);
        assert_eq!(recent(WINDOW_MS + WINDOW_MS / 2), 5);
        assert_eq!(recent(3 * WINDOW_MS), 0);
        set.turn_started_at(a, 3 * WINDOW_MS + 5);
        assert_eq!(recent(3 * WINDOW_MS + 6), 1);
    }

    #[test]
    fn a_full_shard_makes_room_for_a_longer_queue_and_counts_what_it_left_out() {
        let set = Activity::default();
        for n in 0..SLOTS_PER_SHARD as u128 {
            set.queue_changed_at(in_shard_zero(n + 1), 2, 0);
        }
        // As long as what is there: left out.
        let late = in_shard_zero(10_000);
        set.queue_changed_at(late, 2, 0);
        assert_eq!(set.left_out(), 1);
        // Longer: it takes a place, and the shard stays at its bound.
        set.queue_changed_at(late, 50, 0);
        let agents = set.agents_at(0);
        assert_eq!(agents.len(), SLOTS_PER_SHARD);
        assert!(agents
            .iter()
            .any(|h| h.agent_id == late && h.queue_len == 50));
        assert_eq!(set.queue_max(), 50);
        // The index still finds every entry after the swap.
        for hot in &agents {
            set.queue_changed_at(hot.agent_id, 0, 0);
        }
        assert!(set.agents_at(0).is_empty());
        assert_eq!(set.queue_max(), 0);
    }

    #[test]
    fn top_orders_by_turns_or_by_queue_and_bounds_both() {
        let hot = |n, queue_len, recent_turns| HotAgent {
            agent_id: AgentId::from_u128(n),
            queue_len,
            recent_turns,
        };
        let agents = [hot(1, 0, 9), hot(2, 40, 1), hot(3, 7, 0), hot(4, 1, 3)];
        let (busiest, queued) = top(&agents, 2);
        let ids = |list: &[HotAgent]| {
            list.iter()
                .map(|h| h.agent_id.as_u128())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&busiest), [1, 4]);
        assert_eq!(ids(&queued), [2, 3]);
    }
}
