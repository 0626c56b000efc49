//! Inbound events, the webhook bodies they came with, and schedule
//! progress in trees of their own, outside the batch path. An event is
//! inserted by compare-and-swap against "absent", so of two deliveries
//! with one dedupe key exactly one is kept; one whose instance bounds
//! replays is inserted in one transaction with its body's record, so of
//! two deliveries of one body exactly one is kept. Every write counts for
//! the group commit, so the next `durable()` flushes it.

use holarchy_actors::{InboundStore, ReplayGuard, StoreError, StoredEvent};
use holarchy_composition::event::InboundEvent;
use holarchy_composition::schedule::ScheduleState;
use serde::{Deserialize, Serialize};
use sled::transaction::{ConflictableTransactionError, TransactionError, Transactional};

use super::{backend, SledStore, INBOUND, REPLAYS, SCHEDULES};
use crate::store::codec::{decode, encode};

/// A webhook body kept: the dedupe key of the event it first came with,
/// and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct BodySeen {
    dedupe_key: String,
    at_ms: u64,
}

/// `<instance>\0<rest>`: instance names hold no NUL, so one instance's keys
/// never run into another's.
fn key(instance: &str, rest: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(instance.len() + 1 + rest.len());
    key.extend_from_slice(instance.as_bytes());
    key.push(0);
    key.extend_from_slice(rest);
    key
}

fn schedule_key(instance: &str, schedule: &str) -> Vec<u8> {
    key(instance, schedule.as_bytes())
}

impl InboundStore for SledStore {
    fn put_inbound(&self, instance: &str, event: &InboundEvent) -> Result<StoredEvent, StoreError> {
        let key = key(instance, event.dedupe_key.as_bytes());
        let value = encode(INBOUND, event)?;
        self.group.begin_write();
        let swapped = self
            .inbound
            .compare_and_swap(&key, None::<&[u8]>, Some(value))
            .map_err(backend);
        self.group.end_write();
        match swapped? {
            Ok(()) => Ok(StoredEvent {
                event: event.clone(),
                duplicate: false,
            }),
            Err(conflict) => {
                let kept = conflict.current.ok_or_else(|| {
                    StoreError::Backend("an inbound event vanished while stored".into())
                })?;
                Ok(StoredEvent {
                    event: decode(INBOUND, &kept)?,
                    duplicate: true,
                })
            }
        }
    }

    fn put_inbound_unless_replayed(
        &self,
        instance: &str,
        event: &InboundEvent,
        guard: ReplayGuard<'_>,
    ) -> Result<StoredEvent, StoreError> {
        let event_key = key(instance, event.dedupe_key.as_bytes());
        let body_key = key(instance, guard.digest.as_bytes());
        let value = encode(INBOUND, event)?;
        let seen = encode(
            REPLAYS,
            &BodySeen {
                dedupe_key: event.dedupe_key.clone(),
                at_ms: event.at_ms,
            },
        )?;
        let corrupt = ConflictableTransactionError::Abort;
        self.group.begin_write();
        let outcome = (&self.inbound, &self.replays).transaction(|(inbound, replays)| {
            // The same delivery again: its dedupe key answers, as ever.
            if let Some(kept) = inbound.get(&event_key)? {
                let kept = decode(INBOUND, &kept).map_err(corrupt)?;
                return Ok(Some(kept));
            }
            if let Some(bytes) = replays.get(&body_key)? {
                let first: BodySeen = decode(REPLAYS, &bytes).map_err(corrupt)?;
                let age = event.at_ms.saturating_sub(first.at_ms);
                if age < guard.window_ms {
                    let first_key = key(instance, first.dedupe_key.as_bytes());
                    if let Some(kept) = inbound.get(first_key)? {
                        let kept = decode(INBOUND, &kept).map_err(corrupt)?;
                        return Ok(Some(kept));
                    }
                }
            }
            replays.insert(body_key.as_slice(), seen.as_slice())?;
            inbound.insert(event_key.as_slice(), value.as_slice())?;
            Ok(None)
        });
        self.group.end_write();
        match outcome {
            Ok(Some(kept)) => Ok(StoredEvent {
                event: kept,
                duplicate: true,
            }),
            Ok(None) => Ok(StoredEvent {
                event: event.clone(),
                duplicate: false,
            }),
            Err(TransactionError::Abort(err)) => Err(err),
            Err(TransactionError::Storage(err)) => Err(backend(err)),
        }
    }

    fn inbound(
        &self,
        instance: &str,
        dedupe_key: &str,
    ) -> Result<Option<InboundEvent>, StoreError> {
        match self
            .inbound
            .get(key(instance, dedupe_key.as_bytes()))
            .map_err(backend)?
        {
            Some(bytes) => decode(INBOUND, &bytes).map(Some),
            None => Ok(None),
        }
    }

    fn schedule_state(&self, instance: &str, schedule: &str) -> Result<ScheduleState, StoreError> {
        match self
            .schedules
            .get(schedule_key(instance, schedule))
            .map_err(backend)?
        {
            Some(bytes) => decode(SCHEDULES, &bytes),
            None => Ok(ScheduleState::default()),
        }
    }

    fn put_schedule_state(
        &self,
        instance: &str,
        schedule: &str,
        state: ScheduleState,
    ) -> Result<(), StoreError> {
        let value = encode(SCHEDULES, &state)?;
        self.group.begin_write();
        let written = self
            .schedules
            .insert(schedule_key(instance, schedule), value)
            .map_err(backend);
        self.group.end_write();
        written.map(|_| ())
    }

    fn forget_instance(&self, instance: &str) -> Result<(), StoreError> {
        let prefix = key(instance, &[]);
        self.group.begin_write();
        let removed = [&self.inbound, &self.replays, &self.schedules]
            .into_iter()
            .try_for_each(|tree| {
                for entry in tree.scan_prefix(&prefix) {
                    let (key, _) = entry.map_err(backend)?;
                    tree.remove(key).map_err(backend)?;
                }
                Ok(())
            });
        self.group.end_write();
        removed
    }
}

#[cfg(test)]
mod tests {
    use holarchy_composition::event::from_github;

    use super::super::{SledStore, StoreConfig};
    use super::*;

    const HOUR_MS: u64 = 3_600_000;
    const BODY: &[u8] = br#"{"action":"opened","issue":{"number":7}}"#;

    fn delivery(id: &str, at_ms: u64) -> InboundEvent {
        from_github("issues", id, BODY, 1 << 20, at_ms).expect("an event")
    }

    fn guard(window_ms: u64) -> ReplayGuard<'static> {
        ReplayGuard {
            digest: "sha256:body",
            window_ms,
        }
    }

    #[tokio::test]
    async fn a_body_kept_is_a_replay_under_any_delivery_within_its_window() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
        let first = delivery("d-1", 1_000);
        let kept = store
            .put_inbound_unless_replayed("hook", &first, guard(HOUR_MS))
            .expect("kept");
        assert!(!kept.duplicate);

        // The same delivery again: its dedupe key answers.
        let again = store
            .put_inbound_unless_replayed("hook", &delivery("d-1", 2_000), guard(HOUR_MS))
            .expect("found");
        assert_eq!((again.duplicate, again.event.id), (true, first.id.clone()));
        // The same body under a new delivery id: the first event, and
        // nothing kept under the new key.
        let replay = store
            .put_inbound_unless_replayed("hook", &delivery("d-2", 3_000), guard(HOUR_MS))
            .expect("found");
        assert_eq!(
            (replay.duplicate, replay.event.id),
            (true, first.id.clone())
        );
        assert_eq!(store.inbound("hook", "github:d-2").expect("read"), None);
        // Another instance's bodies are its own.
        let elsewhere = store
            .put_inbound_unless_replayed("other", &delivery("d-2", 3_000), guard(HOUR_MS))
            .expect("kept");
        assert!(!elsewhere.duplicate);

        // Past the window the body is new again, and remembered anew.
        let late = delivery("d-3", 1_000 + HOUR_MS);
        let kept_late = store
            .put_inbound_unless_replayed("hook", &late, guard(HOUR_MS))
            .expect("kept");
        assert!(!kept_late.duplicate);
        let after_late = store
            .put_inbound_unless_replayed("hook", &delivery("d-4", 2_000 + HOUR_MS), guard(HOUR_MS))
            .expect("found");
        assert_eq!(after_late.event.id, late.id);

        // An instance deleted forgets its bodies with its events.
        store.forget_instance("hook").expect("forgotten");
        let fresh = store
            .put_inbound_unless_replayed("hook", &delivery("d-5", 3_000 + HOUR_MS), guard(HOUR_MS))
            .expect("kept");
        assert!(!fresh.duplicate);
    }

    #[tokio::test]
    async fn a_remembered_body_whose_event_is_gone_is_taken_anew() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
        let first = delivery("d-1", 1_000);
        store
            .put_inbound_unless_replayed("hook", &first, guard(HOUR_MS))
            .expect("kept");
        store
            .inbound
            .remove(key("hook", b"github:d-1"))
            .expect("removed");
        let second = delivery("d-2", 2_000);
        let kept = store
            .put_inbound_unless_replayed("hook", &second, guard(HOUR_MS))
            .expect("kept");
        assert_eq!((kept.duplicate, kept.event.id), (false, second.id.clone()));
        let replay = store
            .put_inbound_unless_replayed("hook", &delivery("d-3", 3_000), guard(HOUR_MS))
            .expect("found");
        assert_eq!(replay.event.id, second.id);
    }
}
