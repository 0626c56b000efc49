//! Instances in their own tree, written by compare-and-swap on the stored
//! bytes: the digest check and the write are one atomic step, with no lock
//! and no part in the transactions of the batch path.

use holarchy_actors::{InstanceStore, StoreError};
use holarchy_composition::instance::InstanceRecord;

use super::{backend, SledStore, INSTANCES};
use crate::store::codec::{decode_instance, encode_instance};

impl InstanceStore for SledStore {
    fn instance(&self, name: &str) -> Result<Option<InstanceRecord>, StoreError> {
        match self.instances.get(name.as_bytes()).map_err(backend)? {
            Some(bytes) => decode_instance(INSTANCES, &bytes).map(Some),
            None => Ok(None),
        }
    }

    fn instances(&self) -> Result<Vec<InstanceRecord>, StoreError> {
        self.instances
            .iter()
            .map(|entry| decode_instance(INSTANCES, &entry.map_err(backend)?.1))
            .collect()
    }

    fn swap_instance(
        &self,
        name: &str,
        expect: Option<&str>,
        new: Option<&InstanceRecord>,
    ) -> Result<(), StoreError> {
        let old = self.instances.get(name.as_bytes()).map_err(backend)?;
        let stored = match &old {
            Some(bytes) => Some(decode_instance(INSTANCES, bytes)?.digest),
            None => None,
        };
        if stored.as_deref() != expect {
            return Err(changed(name));
        }
        let value = new
            .map(|record| encode_instance(INSTANCES, record))
            .transpose()?;
        // Counted as a write, so the next `durable()` flushes it.
        self.group.begin_write();
        let swapped = self
            .instances
            .compare_and_swap(name.as_bytes(), old, value)
            .map_err(backend);
        self.group.end_write();
        match swapped? {
            Ok(()) => Ok(()),
            Err(_) => Err(changed(name)),
        }
    }
}

fn changed(name: &str) -> StoreError {
    StoreError::Precondition(format!(
        "instance `{name}` was changed by another apply meanwhile; apply again"
    ))
}
