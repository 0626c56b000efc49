//! Where inbound events and schedule progress are kept. Apart from the
//! batch path, like instances: an event is stored once per dedupe key by
//! an insert-if-absent of its own, before it is routed, and a schedule's
//! last fired slot is a small record rewritten once per firing.

use holarchy_composition::event::InboundEvent;
use holarchy_composition::schedule::ScheduleState;

use super::StoreError;

/// What [`InboundStore::put_inbound`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// The event as kept: the one given, or the first one stored under
    /// its dedupe key.
    pub event: InboundEvent,
    /// An event with the same dedupe key was already kept for this
    /// instance; nothing was written.
    pub duplicate: bool,
}

/// A webhook body's replay bound, for
/// [`InboundStore::put_inbound_unless_replayed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayGuard<'a> {
    /// The body's digest (`sha256:<hex>`): what its signature covers.
    pub digest: &'a str,
    /// How long a body kept is remembered, in milliseconds.
    pub window_ms: u64,
}

pub trait InboundStore: Send + Sync {
    /// Keeps `event` for `instance` unless one with its dedupe key is
    /// already kept (one atomic insert-if-absent, so two deliveries racing
    /// keep one). Durable once a later [`super::Store::durable`] resolves.
    fn put_inbound(&self, instance: &str, event: &InboundEvent) -> Result<StoredEvent, StoreError>;
    /// [`Self::put_inbound`], and more: unless the same body (`guard`'s
    /// digest) was kept under another dedupe key less than the guard's
    /// window before `event.at_ms`, in which case nothing is written and
    /// the event first kept with that body is found, as a duplicate. The
    /// body is remembered with the event, both in one atomic step, so of
    /// two deliveries of one body racing one is the replay; a body past
    /// its window (or whose event is gone) is remembered anew. Durable
    /// once a later [`super::Store::durable`] resolves.
    fn put_inbound_unless_replayed(
        &self,
        instance: &str,
        event: &InboundEvent,
        guard: ReplayGuard<'_>,
    ) -> Result<StoredEvent, StoreError>;
    /// The event kept for `instance` under `dedupe_key`.
    fn inbound(&self, instance: &str, dedupe_key: &str)
        -> Result<Option<InboundEvent>, StoreError>;
    /// The progress of `instance`'s schedule `schedule` (its stable id;
    /// default: it never fired).
    fn schedule_state(&self, instance: &str, schedule: &str) -> Result<ScheduleState, StoreError>;
    /// Replaces it. Durable once a later [`super::Store::durable`]
    /// resolves; losing it in a crash only makes the next start try the
    /// same slot again, which the event's dedupe key absorbs.
    fn put_schedule_state(
        &self,
        instance: &str,
        schedule: &str,
        state: ScheduleState,
    ) -> Result<(), StoreError>;
    /// Removes every stored event, remembered body and schedule state of
    /// `instance` (its delete): a re-created instance of the same name
    /// starts clean.
    fn forget_instance(&self, instance: &str) -> Result<(), StoreError>;
}
