//! Where applied instances are kept. Apart from the batch path: an apply is
//! rare and guarded by its own compare-and-swap, so it adds nothing to the
//! transactions every turn takes. Its agent carries the instance's name in
//! its composition, so an agent created before a crash cut the apply short
//! is adopted by the next apply of the same manifest.

use holarchy_composition::instance::InstanceRecord;

use super::StoreError;

pub trait InstanceStore: Send + Sync {
    fn instance(&self, name: &str) -> Result<Option<InstanceRecord>, StoreError>;
    /// Every instance, by name.
    fn instances(&self) -> Result<Vec<InstanceRecord>, StoreError>;
    /// Replaces instance `name` with `new` (deletes it when `None`), but
    /// only while the stored one's digest is still `expect` (`None`: none
    /// is stored); fails with [`StoreError::Precondition`] otherwise, so
    /// two applies racing cannot both win. Durable once a later
    /// [`super::Store::durable`] resolves.
    fn swap_instance(
        &self,
        name: &str,
        expect: Option<&str>,
        new: Option<&InstanceRecord>,
    ) -> Result<(), StoreError>;
}
