//! The planes: what an agent acts on. Each plane holds its actor (if it
//! has one) and the operations that tools and the API run on it.
//!
//! - [`command`]: shell commands, one actor each, under their agent.
//! - [`task`]: an agent's tasks (child-agent handles and commands).
//! - [`wait`]: timers and external triggers, one actor per armed wait.
//! - [`work`]: work items and the agent's focus.
//! - [`spawn`]: `SpawnAgent`, which starts children through the supervisor.
//!
//! The workspaces the planes act in are a module below them
//! ([`crate::workspace`]), which cleanups reach too.

pub mod command;
pub mod spawn;
pub mod task;
pub mod wait;
pub mod work;
