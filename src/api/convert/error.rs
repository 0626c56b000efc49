//! The one place errors become gRPC statuses: [`ApiError`], what each
//! domain error maps to, and the bounds on what a status message quotes.

use holarchy_actors::plane::command::CommandError;
use holarchy_actors::plane::task::TaskError;
use holarchy_actors::plane::wait::WaitError;
use holarchy_actors::protocol::{ControlError, NotRunning};
use holarchy_actors::runtime::Bounded;
use holarchy_actors::workspace::worktree::WorktreeError;
use holarchy_actors::{
    ArchiveError, BrainError, CreateError, DeliverError, RuntimeError, StoreError,
};
use holarchy_supervision::bounds::InvalidInput;
use holarchy_supervision::brain::BrainConfigError;
use holarchy_supervision::{IdParseError, Refusal};
use tonic::Status;

/// Every way an API call can fail, by the status it maps to.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    AlreadyExists(String),
    #[error("{0}")]
    PermissionDenied(String),
    #[error("{0}")]
    FailedPrecondition(String),
    #[error("{0}")]
    ResourceExhausted(String),
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Internal(String),
    /// A record on disk that cannot be read.
    #[error("{0}")]
    DataLoss(String),
    /// A change that did not finish in time; it may still complete.
    #[error("{0}")]
    DeadlineExceeded(String),
}

/// The most bytes of one client input an error message quotes.
pub const MAX_QUOTE: usize = 200;

/// The longest status message sent back, in bytes. A backstop: inputs are
/// quoted through [`quote`], but a message built from a deeper error (a
/// path, a brain's complaint) is cut here too, so no reply echoes a
/// client's megabytes.
pub const MAX_STATUS_MESSAGE: usize = 1024;

/// `input` cut to at most [`MAX_QUOTE`] bytes, for an error message that
/// names it. A cut quote ends with `…` and the input's full length, so the
/// reader knows it saw only the start.
pub fn quote(input: &str) -> String {
    cut(input, MAX_QUOTE)
}

/// `text` cut to at most `max` bytes at a char boundary, with a note of the
/// full length when anything was cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    format!(
        "{}… ({} bytes)",
        holarchy_supervision::bounds::head(text, max),
        text.len()
    )
}

impl From<ApiError> for Status {
    fn from(err: ApiError) -> Self {
        let cut = |m: String| cut(&m, MAX_STATUS_MESSAGE);
        match err {
            ApiError::InvalidArgument(m) => Status::invalid_argument(cut(m)),
            ApiError::NotFound(m) => Status::not_found(cut(m)),
            ApiError::AlreadyExists(m) => Status::already_exists(cut(m)),
            ApiError::PermissionDenied(m) => Status::permission_denied(cut(m)),
            ApiError::FailedPrecondition(m) => Status::failed_precondition(cut(m)),
            ApiError::ResourceExhausted(m) => Status::resource_exhausted(cut(m)),
            ApiError::Unavailable(m) => Status::unavailable(cut(m)),
            ApiError::Internal(m) => Status::internal(cut(m)),
            ApiError::DataLoss(m) => Status::data_loss(cut(m)),
            ApiError::DeadlineExceeded(m) => Status::deadline_exceeded(cut(m)),
        }
    }
}

impl From<InvalidInput> for ApiError {
    fn from(err: InvalidInput) -> Self {
        ApiError::InvalidArgument(err.to_string())
    }
}

impl From<IdParseError> for ApiError {
    fn from(err: IdParseError) -> Self {
        ApiError::InvalidArgument(err.to_string())
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NameTaken(name) => {
                ApiError::AlreadyExists(format!("an agent named `{}` already exists", quote(&name)))
            }
            StoreError::Closed => ApiError::Unavailable("the daemon is shutting down".into()),
            StoreError::OverBudget(why) => ApiError::InvalidArgument(why),
            StoreError::SupervisorGone(_) | StoreError::Precondition(_) => {
                ApiError::FailedPrecondition(err.to_string())
            }
            // The start named it (`holarchy status`); a restore from a
            // backup is the way back.
            StoreError::UnsupportedVersion { .. } | StoreError::Corrupt { .. } => {
                ApiError::DataLoss(format!(
                    "{err}; `holarchy status` lists the damaged records: restore them from a backup"
                ))
            }
            // The disk refused a write (full, or failing): the daemon opens
            // its store again once it takes writes (see `daemon`), so the
            // call is worth retrying, with the same dedupe key.
            StoreError::Backend(_) => ApiError::Unavailable(format!(
                "{err}; the daemon reopens its store once it takes writes again (the disk, or the PostgreSQL server): retry later"
            )),
        }
    }
}

impl From<Refusal> for ApiError {
    fn from(err: Refusal) -> Self {
        match err {
            Refusal::PrivateTarget | Refusal::NotSupervisor | Refusal::NotChild => {
                ApiError::PermissionDenied(err.to_string())
            }
            Refusal::Archived => ApiError::FailedPrecondition(err.to_string()),
        }
    }
}

impl From<CreateError> for ApiError {
    fn from(err: CreateError) -> Self {
        match err {
            CreateError::Invalid(e) => e.into(),
            CreateError::InvalidBrain(e) => e.into(),
            CreateError::InvalidNamespace(_) | CreateError::InvalidLabel(_) => {
                ApiError::InvalidArgument(err.to_string())
            }
            CreateError::NameTaken(_) => ApiError::AlreadyExists(err.to_string()),
            CreateError::UnknownMcpServer(_) | CreateError::DuplicateMcpServer(_) => {
                ApiError::InvalidArgument(err.to_string())
            }
            CreateError::TooMany { .. } => ApiError::InvalidArgument(err.to_string()),
            CreateError::Limit(_) => ApiError::ResourceExhausted(err.to_string()),
            CreateError::Store(e) => e.into(),
            CreateError::Spawn(_) => ApiError::Internal(err.to_string()),
            CreateError::Unavailable(_) => ApiError::Unavailable(err.to_string()),
        }
    }
}

impl From<DeliverError> for ApiError {
    fn from(err: DeliverError) -> Self {
        match err {
            DeliverError::Invalid(e) => e.into(),
            DeliverError::NotFound(_) => ApiError::NotFound(err.to_string()),
            DeliverError::Refused(refusal) => refusal.into(),
            // Passing states: the client should retry, not give up.
            DeliverError::NotRunning { why, .. } => match why {
                NotRunning::Restarting | NotRunning::Stopping => {
                    ApiError::Unavailable(err.to_string())
                }
                NotRunning::Ended(_) => ApiError::FailedPrecondition(err.to_string()),
            },
            DeliverError::QueueFull { .. } | DeliverError::Quota(_) => {
                ApiError::ResourceExhausted(err.to_string())
            }
            DeliverError::Store(e) => e.into(),
            DeliverError::Unavailable(_) => ApiError::Unavailable(err.to_string()),
        }
    }
}

impl From<RuntimeError> for ApiError {
    fn from(err: RuntimeError) -> Self {
        match err {
            RuntimeError::Recovery(e) => e.into(),
            RuntimeError::Spawn(_) | RuntimeError::Unavailable(_) => {
                ApiError::Unavailable(err.to_string())
            }
        }
    }
}

impl From<TaskError> for ApiError {
    fn from(err: TaskError) -> Self {
        match err {
            TaskError::NotFound(_) => ApiError::NotFound(err.to_string()),
            TaskError::NotRunning { .. } => ApiError::FailedPrecondition(err.to_string()),
            // Git refused (a broken or locked repository): the operator
            // must act on the repository before the stop can finish.
            TaskError::Worktree(WorktreeError::Store(e)) => e.into(),
            TaskError::Worktree(_) => ApiError::FailedPrecondition(err.to_string()),
            TaskError::Deliver(e) => e.into(),
            TaskError::Command(e) => e.into(),
            TaskError::Store(e) => e.into(),
        }
    }
}

impl From<ControlError> for ApiError {
    fn from(err: ControlError) -> Self {
        match err {
            ControlError::NotFound(_) => ApiError::NotFound(err.to_string()),
            ControlError::Private(_) => ApiError::PermissionDenied(err.to_string()),
            ControlError::NotRunning { why, .. } => match why {
                NotRunning::Restarting | NotRunning::Stopping => {
                    ApiError::Unavailable(err.to_string())
                }
                NotRunning::Ended(_) => ApiError::FailedPrecondition(err.to_string()),
            },
            ControlError::NoRun | ControlError::StaleRun { .. } => {
                ApiError::FailedPrecondition(err.to_string())
            }
            ControlError::Store(e) => e.into(),
            ControlError::Unavailable(_) => ApiError::Unavailable(err.to_string()),
        }
    }
}

impl From<WaitError> for ApiError {
    fn from(err: WaitError) -> Self {
        match err {
            WaitError::UnknownToken => ApiError::PermissionDenied(err.to_string()),
            WaitError::RevokedToken | WaitError::NotFound(_) | WaitError::WorkItemNotFound(_) => {
                ApiError::NotFound(err.to_string())
            }
            WaitError::NotArmed { .. } | WaitError::OwnerGone => {
                ApiError::FailedPrecondition(err.to_string())
            }
            WaitError::BadDuration => ApiError::InvalidArgument(err.to_string()),
            WaitError::Limit(_) => ApiError::ResourceExhausted(err.to_string()),
            WaitError::Deliver(e) => e.into(),
            WaitError::Store(e) => e.into(),
        }
    }
}

impl From<BrainConfigError> for ApiError {
    fn from(err: BrainConfigError) -> Self {
        ApiError::InvalidArgument(err.to_string())
    }
}

impl From<BrainError> for ApiError {
    fn from(err: BrainError) -> Self {
        match err {
            BrainError::NotFound(_) => ApiError::NotFound(err.to_string()),
            BrainError::NotLive(_) => ApiError::FailedPrecondition(err.to_string()),
            BrainError::Invalid(e) => e.into(),
            BrainError::Store(e) => e.into(),
        }
    }
}

impl From<CommandError> for ApiError {
    fn from(err: CommandError) -> Self {
        match err {
            CommandError::BadCommand | CommandError::BadYield | CommandError::BadEnv => {
                ApiError::InvalidArgument(err.to_string())
            }
            CommandError::OwnerGone | CommandError::Ended => {
                ApiError::FailedPrecondition(err.to_string())
            }
            CommandError::StdinFull => ApiError::Unavailable(err.to_string()),
            CommandError::Start(_) => ApiError::Internal(err.to_string()),
            CommandError::Limit(_) => ApiError::ResourceExhausted(err.to_string()),
            CommandError::Store(e) => e.into(),
        }
    }
}

impl<E> From<Bounded<E>> for ApiError
where
    E: std::error::Error + 'static,
    ApiError: From<E>,
{
    fn from(err: Bounded<E>) -> Self {
        match err {
            Bounded::TimedOut(_) => ApiError::DeadlineExceeded(err.to_string()),
            Bounded::Panicked(_) => ApiError::Internal(err.to_string()),
            Bounded::Failed(err) => err.into(),
        }
    }
}

impl From<ArchiveError> for ApiError {
    fn from(err: ArchiveError) -> Self {
        match err {
            ArchiveError::NotFound(_) => ApiError::NotFound(err.to_string()),
            ArchiveError::Private(_) => ApiError::PermissionDenied(err.to_string()),
            ArchiveError::NotLive { .. } => ApiError::FailedPrecondition(err.to_string()),
            ArchiveError::Store(e) => e.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_inputs_are_quoted_whole() {
        assert_eq!(quote("ops"), "ops");
        assert_eq!(quote(&"a".repeat(MAX_QUOTE)), "a".repeat(MAX_QUOTE));
    }

    #[test]
    fn long_inputs_are_cut_at_a_char_boundary_with_their_length() {
        let quoted = quote(&"a".repeat(100_000));
        assert_eq!(quoted, format!("{}… (100000 bytes)", "a".repeat(MAX_QUOTE)));
        // 'é' is two bytes: byte 200 falls inside the 101st, so the cut
        // keeps 100 of them rather than splitting one.
        let accents = "é".repeat(150);
        let quoted = quote(&accents);
        assert!(quoted.starts_with(&"é".repeat(100)));
        assert!(quoted.ends_with("… (300 bytes)"), "{quoted}");
        assert!(quoted.len() <= MAX_QUOTE + "… (300 bytes)".len());
    }

    proptest::proptest! {
        #[test]
        fn a_quote_never_holds_more_than_the_bound_of_the_input(text in ".{0,400}") {
            let quoted = quote(&text);
            let kept = quoted.split("… (").next().unwrap_or_default();
            proptest::prop_assert!(kept.len() <= MAX_QUOTE);
            proptest::prop_assert!(text.starts_with(kept));
        }
    }

    #[test]
    fn every_status_message_is_bounded() {
        let status = Status::from(ApiError::NotFound("x".repeat(1_000_000)));
        assert!(status.message().len() <= MAX_STATUS_MESSAGE + 32);
    }
}
