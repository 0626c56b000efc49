//! Inbound events and schedule progress in trees of their own, outside
//! the batch path. An event is inserted by compare-and-swap against
//! "absent", so of two deliveries with one dedupe key exactly one is kept;
//! both writes count for the group commit, so the next `durable()` flushes
//! them.

use holarchy_actors::{InboundStore, StoreError, StoredEvent};
use holarchy_composition::event::InboundEvent;
use holarchy_composition::schedule::ScheduleState;

use super::{backend, SledStore, INBOUND, SCHEDULES};
use crate::store::codec::{decode, encode};

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
        let removed = [&self.inbound, &self.schedules]
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
