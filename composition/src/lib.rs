//! Composition: an autonomous agent described once as `role + ingress +
//! skills + constraints` (an *instance*), and the contracts around it: the
//! normalised inbound event, the decision a turn records, and the layered
//! constraints that bound what the agent may do.
//!
//! Everything here is parsing, validation and rules over values; the one
//! module that touches the disk is [`skill`], which reads the operator's
//! skill folders, bounded. The store keeps the records, the actors enforce
//! the rules, the daemon's edges (gRPC, HTTP, schedules) feed events in.

pub mod approval;
pub mod constraint;
pub mod decision;
pub mod event;
pub mod instance;
pub mod manifest;
pub mod role;
pub mod schedule;
pub mod skill;
pub mod webhook;
