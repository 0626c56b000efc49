//! Tool errors keep their kind: each plane's typed error is classified
//! once (refused, invalid input, not found, failed), and a brain reads
//! `{"error": "<message>", "kind": "<kind>"}`. The classifications of
//! errors several planes share live here; each plane's own beside its
//! tools.

use holarchy_supervision::bounds::InvalidInput;
use holarchy_supervision::Refusal;
use serde_json::{json, Value};

use super::input::InputError;
use super::placeholder::InputTooLarge;
use crate::limits::LimitError;
use crate::protocol::{DeliverError, NotRunning};
use crate::store::StoreError;
use crate::workspace::worktree::WorktreeError;

/// Any error, kept as the message it prints.
type Reason = Box<dyn std::error::Error + Send + Sync>;

/// What kind of failure a tool error is, for a brain deciding what to do
/// next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Well formed, but not allowed: the profile, a bound, or the state of
    /// what it names forbids it. Asking again the same way will not help.
    Refused,
    /// The input is malformed, out of range or inconsistent.
    InvalidInput,
    /// Something the input names (a task, a wait, a workspace) does not
    /// exist, or is not the caller's.
    NotFound,
    /// The runtime could not do it (storage, a process, git, an agent
    /// restarting); it may work later.
    Failed,
}

impl ErrorKind {
    pub const fn name(self) -> &'static str {
        match self {
            ErrorKind::Refused => "refused",
            ErrorKind::InvalidInput => "invalid_input",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Failed => "failed",
        }
    }
}

/// A tool call that did not succeed: a result the brain reads, not a
/// failure of the turn.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("{0}")]
    Refused(Reason),
    #[error("{0}")]
    InvalidInput(Reason),
    #[error("{0}")]
    NotFound(Reason),
    #[error("{0}")]
    Failed(Reason),
}

impl ToolError {
    pub fn new(kind: ErrorKind, reason: impl Into<Reason>) -> Self {
        let reason = reason.into();
        match kind {
            ErrorKind::Refused => ToolError::Refused(reason),
            ErrorKind::InvalidInput => ToolError::InvalidInput(reason),
            ErrorKind::NotFound => ToolError::NotFound(reason),
            ErrorKind::Failed => ToolError::Failed(reason),
        }
    }

    pub fn kind(&self) -> ErrorKind {
        match self {
            ToolError::Refused(_) => ErrorKind::Refused,
            ToolError::InvalidInput(_) => ErrorKind::InvalidInput,
            ToolError::NotFound(_) => ErrorKind::NotFound,
            ToolError::Failed(_) => ErrorKind::Failed,
        }
    }

    /// The result a brain reads.
    pub fn to_json(&self) -> Value {
        error_json(self.kind(), &self.to_string())
    }
}

/// A tool error's result, for errors decided before any tool runs (the
/// turn's bounds) as much as for a tool's own.
pub fn error_json(kind: ErrorKind, message: &str) -> Value {
    json!({ "error": message, "kind": kind.name() })
}

/// The kind of a typed error. Every match lists every variant: a new
/// variant has to be classified before it compiles.
pub trait Classify {
    fn kind(&self) -> ErrorKind;
}

/// `From<E> for ToolError` through `E`'s classification, so `?` and a
/// tool's `Error` type keep the kind.
macro_rules! classified {
    ($($error:ty),* $(,)?) => {$(
        impl From<$error> for ToolError {
            fn from(err: $error) -> Self {
                let kind = $crate::tools::Classify::kind(&err);
                ToolError::new(kind, err)
            }
        }
    )*};
}
pub(super) use classified;

classified!(
    InputError,
    InputTooLarge,
    StoreError,
    LimitError,
    InvalidInput,
    DeliverError,
    WorktreeError
);

impl Classify for InputError {
    fn kind(&self) -> ErrorKind {
        match self {
            InputError::NotAnObject(_) | InputError::Parse { .. } => ErrorKind::InvalidInput,
        }
    }
}

impl Classify for InputTooLarge {
    fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidInput
    }
}

impl Classify for StoreError {
    fn kind(&self) -> ErrorKind {
        match self {
            // A public agent's name is taken: choose another.
            StoreError::NameTaken(_) => ErrorKind::Refused,
            // A guarded write found the record moved on (a timer fired).
            StoreError::Precondition(_) => ErrorKind::Refused,
            // A search too costly: ask for less.
            StoreError::OverBudget(_) => ErrorKind::InvalidInput,
            StoreError::SupervisorGone(_)
            | StoreError::UnsupportedVersion { .. }
            | StoreError::Corrupt { .. }
            | StoreError::Backend(_)
            | StoreError::Closed => ErrorKind::Failed,
        }
    }
}

impl Classify for LimitError {
    fn kind(&self) -> ErrorKind {
        // Every bound is a refusal that names its flag.
        ErrorKind::Refused
    }
}

impl Classify for InvalidInput {
    fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidInput
    }
}

impl Classify for Refusal {
    fn kind(&self) -> ErrorKind {
        match self {
            Refusal::PrivateTarget
            | Refusal::NotSupervisor
            | Refusal::NotChild
            | Refusal::Archived => ErrorKind::Refused,
        }
    }
}

impl Classify for DeliverError {
    fn kind(&self) -> ErrorKind {
        match self {
            DeliverError::Invalid(e) => e.kind(),
            DeliverError::NotFound(_) => ErrorKind::NotFound,
            DeliverError::Refused(e) => e.kind(),
            DeliverError::NotRunning { why, .. } => match why {
                // Between a failure and its restart, or going away: later.
                NotRunning::Restarting | NotRunning::Stopping => ErrorKind::Failed,
                NotRunning::Ended(_) => ErrorKind::Refused,
            },
            DeliverError::QueueFull { .. } | DeliverError::Quota(_) => ErrorKind::Refused,
            DeliverError::Store(e) => e.kind(),
            DeliverError::Unavailable(_) => ErrorKind::Failed,
        }
    }
}

impl Classify for WorktreeError {
    fn kind(&self) -> ErrorKind {
        match self {
            // The caller's workspace cannot hold a worktree.
            WorktreeError::NotARepository(_) | WorktreeError::NoCommit(_) => ErrorKind::Refused,
            WorktreeError::Git { .. } | WorktreeError::Io(_) => ErrorKind::Failed,
            WorktreeError::Store(e) => e.kind(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_error_reads_as_its_message_and_kind() {
        let err = ToolError::from(LimitError::Waits { limit: 3 });
        assert_eq!(err.kind(), ErrorKind::Refused);
        let json = err.to_json();
        assert_eq!(json["kind"], "refused");
        assert!(json["error"]
            .as_str()
            .is_some_and(|e| e.contains("--max-waits")));
    }
}
