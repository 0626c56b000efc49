//! holarchy: a durable, event-driven runtime for long-lived agents, each a
//! supervised ractor actor, driven over gRPC.
//!
//! # Layout
//! - [`access`]: operators' roles, scoped tokens, what each method needs,
//!   and the audit trail.
//! - [`store`]: sled storage behind the actors' `Store` trait, group commit.
//! - [`api`]: the tonic services; they translate proto to domain and back.
//! - [`daemon`]: `holarchy serve`: data directory, lock, listeners, shutdown.
//! - [`web`]: the HTTP listener (`serve --http-listen`): webhooks, the
//!   operators' routes and the console.
//! - [`client`]: connecting to a daemon over its Unix socket or TCP.
//! - [`memory`]: returning freed heap to the OS after many agents end.
//! - [`cli`]: the operator commands, clients of the same API.
//! - [`problems`]: a failed run's or tool's error in one line, as the CLI
//!   and the console both say it.
//! - [`escape`]: agents' text made safe to print in a terminal.
//!
//! The model lives in `holarchy-supervision`, the actors in `holarchy-actors`.

pub mod access;
pub mod api;
pub mod cli;
pub mod client;
pub mod daemon;
pub mod escape;
pub mod memory;
pub mod metrics;
pub mod problems;
pub mod replay;
pub mod store;
pub mod telemetry;
pub mod web;
