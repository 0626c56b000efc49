//! The pure model of holarchy: identities, profiles, durable records and the
//! rules that decide over them. Nothing here does I/O or knows of ractor,
//! tonic or sled, so every rule can be property-tested in microseconds.
//!
//! # Layout
//! - [`ids`]: compact, sortable identifiers (agent, message, run) and event cursors.
//! - [`profile`]: `Profile {visibility, ownership, tool_families}` and its presets.
//! - [`record`]: the records the store keeps (agents, messages) and their states.
//! - [`event`]: the append-only event log entries.
//! - [`ingress`]: who may put a message on which agent's queue.
//! - [`restart`]: OTP-style restart intensity for supervisors.
//! - [`recovery`]: what a restarting daemon respawns and requeues.
//! - [`limits`]: input validation shared by the API and the actors.

pub mod event;
pub mod ids;
pub mod ingress;
pub mod limits;
pub mod profile;
pub mod record;
pub mod recovery;
pub mod restart;

pub use event::{Event, EventKind, RunOutcome};
pub use ids::{AgentId, EventCursor, IdParseError, MessageId, RunId};
pub use ingress::{admit, Refusal, Target};
pub use profile::{Ownership, Preset, Profile, ToolFamilies, ToolFamily, Visibility};
pub use record::{AgentRecord, LifecycleState, MessageRecord, MessageStatus, Provenance};
