//! The decision a turn records: a small, auditable vocabulary with a
//! reason, a target and an idempotency key, given by the brain or derived
//! from what the turn did.
