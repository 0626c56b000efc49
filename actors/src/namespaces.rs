//! Per-namespace quotas and the counts held against them: live agents,
//! turns started per minute, commands running, and the bytes the store
//! holds for the namespace's agents (measured by the daemon, see
//! [`NamespaceUse::set_store_bytes`]).
//!
//! One [`NamespaceUse`] per namespace that has agents or a quota, shared
//! by the directory entries and the agents of that namespace, so that a
//! check is a few atomics and never a lock: the registry's own lock is
//! taken only to find a namespace the first time. A namespace without a
//! quota pays one relaxed load per check. Quotas are the operator's
//! (`holarchy namespace quota`), kept by the daemon's store and handed
//! here whole with [`Namespaces::set_quotas`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

/// An operator's bounds on one namespace; `None` is unbounded (the
/// daemon-wide limits still hold).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Quota {
    /// Most live agents, public and private.
    pub agents: Option<u64>,
    /// Most turns started per minute across the namespace, in bursts of
    /// up to this many; past it the next turn waits (it is not failed).
    pub turns_per_minute: Option<u32>,
    /// Most commands running at once across the namespace.
    pub commands: Option<u64>,
    /// Most bytes the store may hold for the namespace's agents (their
    /// records, messages, notes, context, commands' output), as last
    /// measured. Past it the namespace takes no new agent, message,
    /// command or note, and its turns wait, until it is under again.
    pub store_bytes: Option<u64>,
}

impl Quota {
    pub fn is_unbounded(&self) -> bool {
        *self == Quota::default()
    }
}

/// A quota that refused an action. The text names the namespace and how
/// an operator lifts it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuotaError {
    #[error("namespace `{namespace}` holds {limit} live agents, its quota (an admin raises it with `holarchy namespace quota {namespace} --agents N`)")]
    Agents { namespace: String, limit: u64 },
    #[error("namespace `{namespace}` already runs {limit} commands, its quota (an admin raises it with `holarchy namespace quota {namespace} --commands N`)")]
    Commands { namespace: String, limit: u64 },
    #[error("namespace `{namespace}` holds {used} bytes in the store, over its quota of {limit}: archive and delete agents it no longer needs (`holarchy agent archive`, `agent delete`), or an admin raises it with `holarchy namespace quota {namespace} --store-bytes N`")]
    StoreBytes {
        namespace: String,
        used: u64,
        limit: u64,
    },
    /// The store quota, told to a trigger's caller, who holds only a token
    /// and learns no name.
    #[error("the trigger's agent is over its store quota: its operator frees space or raises the quota; try again then")]
    TriggerTargetFull,
}

/// How long a turn held for the store quota waits before it looks again.
const STORE_RECHECK: Duration = Duration::from_secs(5);

/// One step of a turn pace of `per_minute` (the generic cell rate
/// algorithm, shared by an agent's pace and its namespace's): the pace
/// runs `ahead` of now. A turn is taken, and the pace then runs the
/// returned time ahead; or it is refused, with how long until one may.
pub(crate) fn pace_step(ahead: Duration, per_minute: u32) -> Result<Duration, Duration> {
    let window = Duration::from_secs(60);
    let per_turn = window / per_minute.max(1);
    let tolerance = window.saturating_sub(per_turn);
    if ahead > tolerance {
        Err(ahead - tolerance)
    } else {
        Ok(ahead + per_turn)
    }
}

/// What marks "no bound" in an atomic limit.
const UNBOUNDED: u64 = u64::MAX;

fn bound(limit: Option<u64>) -> u64 {
    limit.unwrap_or(UNBOUNDED)
}

fn unbound(limit: u64) -> Option<u64> {
    (limit != UNBOUNDED).then_some(limit)
}

/// One namespace's quota and what it uses now.
#[derive(Debug)]
pub struct NamespaceUse {
    name: Arc<str>,
    max_agents: AtomicU64,
    /// 0: no bound.
    turns_per_minute: AtomicU64,
    max_commands: AtomicU64,
    max_store_bytes: AtomicU64,
    /// Bytes the store held for the namespace at the last measure, and
    /// when (milliseconds since the epoch; 0: never measured).
    store_bytes: AtomicU64,
    measured_at_ms: AtomicU64,
    /// Agents in the directory (counted by the directory, under its lock).
    agents: AtomicUsize,
    /// Agents reserved by creations under way, not yet in the directory.
    creating: AtomicUsize,
    commands: AtomicUsize,
    /// The turn pace's theoretical arrival time, in nanoseconds since
    /// [`Namespaces`]' epoch (the generic cell rate algorithm, as an
    /// agent's own pace, shared by compare-and-swap).
    pace: AtomicU64,
    epoch: Instant,
    /// Turns put off by the namespace's pace, since the daemon started.
    deferred: AtomicU64,
}

/// What a namespace uses now, against its quota.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceReport {
    pub name: String,
    pub quota: Quota,
    pub agents: u64,
    pub commands: u64,
    pub turns_deferred: u64,
    /// As last measured; 0 with `measured_at_ms` 0 if never.
    pub store_bytes: u64,
    pub measured_at_ms: u64,
}

impl NamespaceUse {
    fn new(name: Arc<str>, epoch: Instant) -> Self {
        Self {
            name,
            max_agents: AtomicU64::new(UNBOUNDED),
            turns_per_minute: AtomicU64::new(0),
            max_commands: AtomicU64::new(UNBOUNDED),
            max_store_bytes: AtomicU64::new(UNBOUNDED),
            store_bytes: AtomicU64::new(0),
            measured_at_ms: AtomicU64::new(0),
            agents: AtomicUsize::new(0),
            creating: AtomicUsize::new(0),
            commands: AtomicUsize::new(0),
            pace: AtomicU64::new(0),
            epoch,
            deferred: AtomicU64::new(0),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name, shared.
    pub fn name_shared(&self) -> Arc<str> {
        self.name.clone()
    }

    pub fn quota(&self) -> Quota {
        Quota {
            agents: unbound(self.max_agents.load(Ordering::Relaxed)),
            turns_per_minute: match self.turns_per_minute.load(Ordering::Relaxed) {
                0 => None,
                n => Some(u32::try_from(n).unwrap_or(u32::MAX)),
            },
            commands: unbound(self.max_commands.load(Ordering::Relaxed)),
            store_bytes: unbound(self.max_store_bytes.load(Ordering::Relaxed)),
        }
    }

    /// Sets the quota; whether it eased what holds turns back (a turn or
    /// store bound lifted or raised), so that waiting turns may start.
    fn set_quota(&self, quota: Quota) -> bool {
        let before = self.quota();
        let eased = |was: Option<u64>, now: Option<u64>| match (was, now) {
            (Some(_), None) => true,
            (Some(was), Some(now)) => now > was,
            (None, _) => false,
        };
        let turns_eased = eased(
            before.turns_per_minute.map(u64::from),
            quota.turns_per_minute.map(u64::from),
        );
        if turns_eased {
            // The pace kept under the old bound would still hold the
            // next turn for as long as that bound spaced them.
            self.pace.store(0, Ordering::SeqCst);
        }
        self.max_agents
            .store(bound(quota.agents), Ordering::Relaxed);
        self.turns_per_minute.store(
            quota.turns_per_minute.map_or(0, u64::from),
            Ordering::Relaxed,
        );
        self.max_commands
            .store(bound(quota.commands), Ordering::Relaxed);
        self.max_store_bytes
            .store(bound(quota.store_bytes), Ordering::Relaxed);
        turns_eased || eased(before.store_bytes, quota.store_bytes)
    }

    /// Records what the store held for the namespace at `at_ms`.
    pub fn set_store_bytes(&self, bytes: u64, at_ms: u64) {
        self.store_bytes.store(bytes, Ordering::Relaxed);
        self.measured_at_ms.store(at_ms, Ordering::Relaxed);
    }

    /// The refusal of a write that would grow the store, if the
    /// namespace holds more than its quota as last measured.
    pub fn store_refusal(&self) -> Option<QuotaError> {
        let limit = self.max_store_bytes.load(Ordering::Relaxed);
        let used = self.store_bytes.load(Ordering::Relaxed);
        (limit != UNBOUNDED && used > limit).then(|| QuotaError::StoreBytes {
            namespace: self.name.to_string(),
            used,
            limit,
        })
    }

    /// Counts an agent into (`add`) or out of the directory; called by
    /// the directory only.
    pub(crate) fn count_agent(&self, add: bool) {
        if add {
            self.agents.fetch_add(1, Ordering::SeqCst);
        } else {
            // Never below zero, whatever order the directory saw.
            let _ = self
                .agents
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        }
    }

    /// Live agents now.
    pub fn agents(&self) -> usize {
        self.agents.load(Ordering::SeqCst)
    }

    /// Reserves `count` agents about to be created, under the quota. The
    /// reservation is held until the creation is over, so an agent is
    /// counted twice for that moment: at the quota's edge a concurrent
    /// creation may be refused early, never let past it.
    pub fn reserve_agents(self: &Arc<Self>, count: usize) -> Result<NamespaceSlots, QuotaError> {
        if let Some(refused) = self.store_refusal() {
            return Err(refused);
        }
        self.creating.fetch_add(count, Ordering::SeqCst);
        let slots = NamespaceSlots {
            namespace: self.clone(),
            count,
        };
        let limit = self.max_agents.load(Ordering::Relaxed);
        if limit != UNBOUNDED {
            let creating = self.creating.load(Ordering::SeqCst);
            let live = self.agents.load(Ordering::SeqCst);
            if (creating + live) as u64 > limit {
                return Err(QuotaError::Agents {
                    namespace: self.name.to_string(),
                    limit,
                });
            }
        }
        Ok(slots)
    }

    /// Takes one of the namespace's command slots.
    pub fn take_command(self: &Arc<Self>) -> Result<NamespaceCommand, QuotaError> {
        if let Some(refused) = self.store_refusal() {
            return Err(refused);
        }
        let limit = self.max_commands.load(Ordering::Relaxed);
        self.commands
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                ((n as u64) < limit).then_some(n + 1)
            })
            .map_err(|_| QuotaError::Commands {
                namespace: self.name.to_string(),
                limit,
            })?;
        Ok(NamespaceCommand(self.clone()))
    }

    /// Takes a turn at `now` under the namespace's pace, or says how long
    /// until one may start. Unbounded namespaces always may.
    pub fn take_turn(&self, now: Instant) -> Result<(), Duration> {
        if self.store_refusal().is_some() {
            self.deferred.fetch_add(1, Ordering::Relaxed);
            return Err(STORE_RECHECK);
        }
        let per_minute = self.turns_per_minute.load(Ordering::Relaxed);
        if per_minute == 0 {
            return Ok(());
        }
        let per_minute = u32::try_from(per_minute).unwrap_or(u32::MAX);
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let now = nanos(now.saturating_duration_since(self.epoch));
        let step = |theoretical: u64| {
            pace_step(Duration::from_nanos(theoretical.max(now) - now), per_minute)
        };
        let taken = self
            .pace
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |theoretical| {
                step(theoretical).ok().map(|ahead| now + nanos(ahead))
            });
        match taken {
            Ok(_) => Ok(()),
            Err(theoretical) => {
                self.deferred.fetch_add(1, Ordering::Relaxed);
                Err(step(theoretical).err().unwrap_or_default())
            }
        }
    }

    pub fn report(&self) -> NamespaceReport {
        NamespaceReport {
            name: self.name.to_string(),
            quota: self.quota(),
            agents: self.agents() as u64,
            commands: self.commands.load(Ordering::SeqCst) as u64,
            turns_deferred: self.deferred.load(Ordering::Relaxed),
            store_bytes: self.store_bytes.load(Ordering::Relaxed),
            measured_at_ms: self.measured_at_ms.load(Ordering::Relaxed),
        }
    }
}

/// Agents reserved in one namespace by a creation; given back on drop.
#[must_use]
#[derive(Debug)]
pub struct NamespaceSlots {
    namespace: Arc<NamespaceUse>,
    count: usize,
}

impl Drop for NamespaceSlots {
    fn drop(&mut self) {
        self.namespace
            .creating
            .fetch_sub(self.count, Ordering::SeqCst);
    }
}

/// One running command's place under its namespace's quota; given back
/// on drop.
#[must_use]
#[derive(Debug)]
pub struct NamespaceCommand(Arc<NamespaceUse>);

impl Drop for NamespaceCommand {
    fn drop(&mut self) {
        self.0.commands.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Every namespace the daemon has met, by name.
#[derive(Debug)]
pub struct Namespaces {
    by_name: RwLock<HashMap<Arc<str>, Arc<NamespaceUse>>>,
    epoch: Instant,
}

impl Default for Namespaces {
    fn default() -> Self {
        Self {
            by_name: RwLock::default(),
            epoch: Instant::now(),
        }
    }
}

impl Namespaces {
    /// The namespace `name`, met now if never before. Its names are
    /// checked where agents are made; this takes what a record holds.
    pub fn get(&self, name: &str) -> Arc<NamespaceUse> {
        if let Some(found) = self
            .by_name
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
        {
            return found.clone();
        }
        let mut by_name = self.by_name.write().unwrap_or_else(PoisonError::into_inner);
        by_name
            .entry(Arc::from(name))
            .or_insert_with_key(|name| Arc::new(NamespaceUse::new(name.clone(), self.epoch)))
            .clone()
    }

    /// Makes `quotas` the quotas of their namespaces, and every other
    /// namespace unbounded. Returns the namespaces whose turns may start
    /// sooner now (see `Runtime::wake_deferred`).
    pub fn set_quotas(&self, quotas: &[(String, Quota)]) -> Vec<Arc<NamespaceUse>> {
        let given: HashMap<&str, Quota> = quotas.iter().map(|(n, q)| (n.as_str(), *q)).collect();
        let mut eased = Vec::new();
        for (name, quota) in &given {
            let namespace = self.get(name);
            if namespace.set_quota(*quota) {
                eased.push(namespace);
            }
        }
        let by_name = self.by_name.read().unwrap_or_else(PoisonError::into_inner);
        for (name, namespace) in by_name.iter() {
            if !given.contains_key(&**name) && namespace.set_quota(Quota::default()) {
                eased.push(namespace.clone());
            }
        }
        eased
    }

    /// Every namespace met, by name.
    pub fn reports(&self) -> Vec<NamespaceReport> {
        let by_name = self.by_name.read().unwrap_or_else(PoisonError::into_inner);
        let mut reports: Vec<NamespaceReport> = by_name.values().map(|n| n.report()).collect();
        reports.sort_by(|a, b| a.name.cmp(&b.name));
        reports
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(agents: Option<u64>, turns: Option<u32>, commands: Option<u64>) -> Quota {
        Quota {
            agents,
            turns_per_minute: turns,
            commands,
            store_bytes: None,
        }
    }

    #[test]
    fn a_namespace_over_its_store_bytes_takes_nothing_new_until_under() {
        let namespaces = Namespaces::default();
        namespaces.set_quotas(&[(
            "a".into(),
            Quota {
                store_bytes: Some(1000),
                ..Quota::default()
            },
        )]);
        let a = namespaces.get("a");
        a.set_store_bytes(1001, 1);
        assert!(matches!(
            a.reserve_agents(1),
            Err(QuotaError::StoreBytes { used: 1001, .. })
        ));
        assert!(a.take_command().is_err());
        assert_eq!(a.take_turn(Instant::now()), Err(STORE_RECHECK));
        a.set_store_bytes(1000, 2);
        let _slots = a.reserve_agents(1).expect("at the bound is under it");
        assert_eq!(a.take_turn(Instant::now()), Ok(()));
    }

    #[test]
    fn agents_past_the_quota_are_refused_and_reservations_come_back() {
        let namespaces = Namespaces::default();
        namespaces.set_quotas(&[("a".into(), quota(Some(3), None, None))]);
        let a = namespaces.get("a");
        a.count_agent(true);
        let two = a.reserve_agents(2).expect("3 fit");
        assert!(a.reserve_agents(1).is_err(), "a fourth does not");
        drop(two);
        let _slots = a.reserve_agents(2).expect("given back on drop");
        assert!(
            namespaces.get("b").reserve_agents(1000).is_ok(),
            "b is unbounded"
        );
    }

    #[test]
    fn commands_past_the_quota_are_refused_until_one_ends() {
        let namespaces = Namespaces::default();
        namespaces.set_quotas(&[("a".into(), quota(None, None, Some(1)))]);
        let a = namespaces.get("a");
        let first = a.take_command().expect("one runs");
        assert!(matches!(
            a.take_command(),
            Err(QuotaError::Commands { limit: 1, .. })
        ));
        drop(first);
        let _slot = a.take_command().expect("its slot came back");
    }

    #[test]
    fn turns_pass_in_a_burst_then_are_spaced_and_a_cleared_quota_frees_them() {
        let namespaces = Namespaces::default();
        namespaces.set_quotas(&[("a".into(), quota(None, Some(6), None))]);
        let a = namespaces.get("a");
        let now = Instant::now();
        for _ in 0..6 {
            assert_eq!(a.take_turn(now), Ok(()));
        }
        let wait = a.take_turn(now).expect_err("the seventh waits");
        assert!(
            wait > Duration::from_secs(9) && wait <= Duration::from_secs(10),
            "{wait:?}"
        );
        assert_eq!(a.take_turn(now + wait), Ok(()));
        assert_eq!(a.report().turns_deferred, 1);
        namespaces.set_quotas(&[]);
        assert_eq!(a.quota(), Quota::default());
        assert_eq!(a.take_turn(now), Ok(()));
    }
}
