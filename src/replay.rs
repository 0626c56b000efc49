//! Replays (issue: see docs/replay.md): an agent's recorded turns run again
//! through a candidate brain, role, skills or constraints, without side
//! effects, and a report of where the candidate's decisions differ.
//!
//! - [`model`]: what a replay and its reports are, as stored.
//! - [`store`]: where they are kept (sled or PostgreSQL).
//! - [`recorded`]: the turns a replay chooses, read back from the log.
//! - [`jobs`]: replays as bounded background jobs.
//!
//! The turn itself is replayed by `holarchy_actors::replay`.

pub mod jobs;
pub mod model;
pub mod recorded;
pub mod store;

pub use jobs::{JobError, Replays};
