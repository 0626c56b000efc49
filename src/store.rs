//! Durable storage on sled: one tree per record kind, values behind a format
//! version byte, keys big-endian so scans come back in id order.
//!
//! - [`agent_trees`]: the two trees of agents' records, public and private.
//! - [`codec`]: the versioned bincode encoding of values.
//! - [`event_log`]: the event log's runs of consecutive events.
//! - [`group_commit`]: the writer thread: grouped commits, and one flush
//!   shared by every writer waiting on it.
//! - [`memory_index`]: the full-text index of agents' notes.
//! - [`stats`]: where commits wait (lock, flush, callers per flush).
//! - [`sled_store`]: [`SledStore`], the embedded store (the default): the
//!   actors' [`holarchy_actors::Store`] trait, plus the reads the API needs.
//! - [`postgres`]: [`PgStore`], the same on a PostgreSQL database.
//! - [`opened`]: [`Opened`], whichever of the two a daemon runs on.

pub mod agent_trees;
pub mod codec;
pub mod copy;
pub mod dump;
pub mod event_log;
pub mod group_commit;
pub mod memory_index;
pub mod opened;
pub mod postgres;
pub mod sled_store;
pub mod slots;
pub mod stats;
pub mod view;

pub use opened::Opened;
pub use postgres::PgStore;
pub use sled_store::SledStore;
