//! Pure planners: one per structural procedure, each taking what it reads
//! (records, a request, the time) and returning a [`Plan`] of writes and
//! directives. Nothing here commits or signals; the runtime's executor
//! does, so every rule is tested here without a runtime.
//!
//! [`Plan`]: crate::effect::Plan

pub mod agent;
pub mod cleanup;
pub mod command;
pub mod create;
pub mod finish;
pub mod instance;
pub mod interrupt;
pub mod repair;
pub mod spawn;
pub mod turn;
pub mod wait;
pub mod workspace;
