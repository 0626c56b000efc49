//! How a failed client command ends: one message with each cause said
//! once, a hint saying what to do where the failure tells us, and an exit
//! code by kind of failure, so a script can tell "the daemon is not there"
//! from "no such agent" without reading text. Under `--json` the same goes
//! to stderr as one JSON object. The codes are documented in
//! docs/operations.md ("Exit codes"); changing one breaks scripts.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;

use super::escape;
use crate::client::{AddrError, Unreachable};

/// What kind of failure ended a command, each with its own exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Anything the others do not cover (an internal error, a failed
    /// write): exit 1.
    Failed,
    /// The daemon cannot be reached, is shutting down, or is too busy to
    /// answer now; retrying later may work: exit 3.
    Unavailable,
    /// What the command names does not exist: exit 4.
    NotFound,
    /// The caller may not do this: a missing or wrong token, or an action
    /// refused to this agent (a private one takes no operator message):
    /// exit 5.
    Denied,
    /// The input is wrong, whatever the daemon's state: exit 6.
    Invalid,
    /// The input is fine but the daemon's state refuses it now (an
    /// archived agent, a name taken, nothing running to abort): exit 7.
    Precondition,
}

impl Kind {
    /// Exit 2 is clap's, for a command line that does not parse.
    pub const fn exit_code(self) -> u8 {
        match self {
            Kind::Failed => 1,
            Kind::Unavailable => 3,
            Kind::NotFound => 4,
            Kind::Denied => 5,
            Kind::Invalid => 6,
            Kind::Precondition => 7,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Kind::Failed => "failed",
            Kind::Unavailable => "unavailable",
            Kind::NotFound => "not_found",
            Kind::Denied => "denied",
            Kind::Invalid => "invalid",
            Kind::Precondition => "precondition",
        }
    }

    /// Every gRPC code has a kind; listed whole so a code is never
    /// classed by accident.
    pub const fn of_code(code: tonic::Code) -> Kind {
        use tonic::Code;
        match code {
            Code::Unavailable | Code::DeadlineExceeded | Code::ResourceExhausted => {
                Kind::Unavailable
            }
            Code::NotFound => Kind::NotFound,
            Code::PermissionDenied | Code::Unauthenticated => Kind::Denied,
            Code::InvalidArgument | Code::OutOfRange => Kind::Invalid,
            Code::FailedPrecondition | Code::AlreadyExists | Code::Aborted => Kind::Precondition,
            Code::Ok
            | Code::Cancelled
            | Code::Unknown
            | Code::Unimplemented
            | Code::Internal
            | Code::DataLoss => Kind::Failed,
        }
    }
}

/// A failure the client finds itself, before or around a call, with its
/// kind (a refused argument, an unreadable file).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CliError {
    pub kind: Kind,
    pub message: String,
}

impl CliError {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Kind::Invalid, message)
    }
}

/// Where the client looked for its daemon, and with what token: what a
/// hint needs to say what to do next.
#[derive(Debug, Clone)]
pub enum Place {
    Unix {
        /// The data directory named (flag or variable); `None` when the
        /// default was used.
        data_dir: Option<PathBuf>,
        /// Whether `--socket` named the socket, rather than a data
        /// directory.
        named: bool,
    },
    Tcp {
        addr: String,
        token: TokenOrigin,
    },
}

/// Where a TCP client's token came from.
#[derive(Debug, Clone)]
pub enum TokenOrigin {
    /// `--token` or `HOLARCHY_TOKEN`.
    Given,
    /// Read from `<data-dir>/token`.
    File(PathBuf),
    /// None; the file looked for, when a data directory was named.
    Missing(Option<PathBuf>),
}

/// Prints a failed command's error (to stderr) and returns its exit code.
#[derive(Debug, Clone)]
pub struct Reporter {
    pub json: bool,
    pub place: Place,
}

/// A failure, read off an error's chain.
#[derive(Debug, PartialEq, Eq)]
struct Report {
    kind: Kind,
    /// The gRPC code's name, when the daemon refused.
    grpc: Option<String>,
    message: String,
    hint: Option<String>,
}

impl Reporter {
    pub fn report(&self, err: &anyhow::Error) -> ExitCode {
        let report = self.read(err);
        if self.json {
            let mut error = json!({
                "kind": report.kind.name(),
                "exit_code": report.kind.exit_code(),
                "message": report.message,
            });
            if let Some(code) = &report.grpc {
                error["grpc_code"] = json!(code);
            }
            if let Some(hint) = &report.hint {
                error["hint"] = json!(hint);
            }
            eprintln!("{}", json!({ "error": error }));
        } else {
            // Messages may quote what an agent wrote: escaped like stdout.
            eprintln!("holarchy: {}", escape::block(&report.message));
            if let Some(hint) = &report.hint {
                eprintln!("holarchy: {}", escape::block(hint));
            }
        }
        ExitCode::from(report.kind.exit_code())
    }

    fn read(&self, err: &anyhow::Error) -> Report {
        if let Some(unreachable) = err.downcast_ref::<Unreachable>() {
            // The transport's layers each repeat the one cause; the root
            // is the one a person can act on.
            let root = err
                .chain()
                .last()
                .map(ToString::to_string)
                .unwrap_or_default();
            return Report {
                kind: Kind::Unavailable,
                grpc: None,
                message: format!("{unreachable}: {root}"),
                hint: Some(self.start_hint()),
            };
        }
        let mut kind = Kind::Failed;
        let mut grpc = None;
        let mut parts: Vec<String> = Vec::new();
        for cause in err.chain() {
            let text = if let Some(status) = cause.downcast_ref::<tonic::Status>() {
                kind = Kind::of_code(status.code());
                grpc = Some(code_name(status.code()));
                format!("{}: {}", code_name(status.code()), status.message())
            } else {
                if let Some(own) = cause.downcast_ref::<CliError>() {
                    kind = own.kind;
                } else if cause.downcast_ref::<AddrError>().is_some() {
                    kind = Kind::Invalid;
                }
                cause.to_string()
            };
            let said = parts.last().is_some_and(|last| last.contains(&text));
            if !text.is_empty() && !said {
                parts.push(text);
            }
            // A status's own source is the transport's view of the same
            // failure, already in its message.
            if grpc.is_some() {
                break;
            }
        }
        let hint = match grpc.as_deref() {
            Some("unauthenticated") => Some(self.token_hint()),
            Some("unavailable") => Some(self.start_hint()),
            Some("already exists") => Some(
                "`holarchy agent list --all` shows who holds the name; an archived agent frees \
                 it with `holarchy agent delete NAME`"
                    .to_owned(),
            ),
            _ => None,
        };
        Report {
            kind,
            grpc: grpc.map(|g| g.replace(' ', "_")),
            message: parts.join(": "),
            hint,
        }
    }

    /// What to do when nothing answers where the client looked.
    fn start_hint(&self) -> String {
        match &self.place {
            Place::Unix { named: true, .. } => {
                "is a daemon serving that socket? `holarchy serve --data-dir DIR` serves DIR/holarchy.sock".to_owned()
            }
            Place::Unix {
                data_dir: Some(dir),
                ..
            } => format!(
                "is it running? start it with `holarchy serve --data-dir {}`",
                dir.display()
            ),
            Place::Unix { data_dir: None, .. } => {
                "is it running? start it with `holarchy serve`".to_owned()
            }
            Place::Tcp { addr, .. } => {
                let addr = addr.trim();
                match addr.strip_prefix("https://") {
                    Some(listen) => format!(
                        "is it running, and serving TLS there? start it with `holarchy serve --listen {listen} --tls-cert CERT --tls-key KEY`; if it is, check that --ca names the CA that issued its certificate"
                    ),
                    None => {
                        let listen = addr.trim_start_matches("http://");
                        format!(
                            "is it running, and serving TCP there? start it with `holarchy serve --listen {listen}`"
                        )
                    }
                }
            }
        }
    }

    /// Where the token lives, when the daemon refused the one given.
    fn token_hint(&self) -> String {
        let lives = "the daemon's token is in <data-dir>/token on its host";
        match &self.place {
            Place::Tcp {
                token: TokenOrigin::Given,
                ..
            } => format!("the token given (--token or HOLARCHY_TOKEN) is not the daemon's: {lives}"),
            Place::Tcp {
                token: TokenOrigin::File(path),
                ..
            } => format!(
                "the token in {} is not this daemon's: is --addr the daemon whose data directory that is?",
                path.display()
            ),
            Place::Tcp {
                token: TokenOrigin::Missing(Some(path)),
                ..
            } => format!(
                "no token was given and {} does not exist: {lives}; pass it in HOLARCHY_TOKEN",
                path.display()
            ),
            Place::Tcp {
                token: TokenOrigin::Missing(None),
                ..
            }
            | Place::Unix { .. } => format!(
                "no token was given: {lives}; pass it in HOLARCHY_TOKEN, or give --data-dir DIR to read DIR/token"
            ),
        }
    }
}

/// A gRPC code as words: `FailedPrecondition` is "failed precondition".
pub fn code_name(code: tonic::Code) -> String {
    format!("{code:?}")
        .chars()
        .enumerate()
        .flat_map(|(i, c)| {
            let sep = (i > 0 && c.is_uppercase()).then_some(' ');
            sep.into_iter().chain(c.to_lowercase())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unix() -> Reporter {
        Reporter {
            json: false,
            place: Place::Unix {
                data_dir: Some("/d".into()),
                named: false,
            },
        }
    }

    #[test]
    fn a_refusal_reads_as_its_code_and_each_cause_once() {
        let err = anyhow::Error::new(tonic::Status::not_found("no agent named `x`"))
            .context("cannot find agent `x`");
        let report = unix().read(&err);
        assert_eq!(report.kind, Kind::NotFound);
        assert_eq!(report.grpc.as_deref(), Some("not_found"));
        assert_eq!(
            report.message,
            "cannot find agent `x`: not found: no agent named `x`"
        );
    }

    #[test]
    fn a_cause_its_wrapper_already_quotes_is_not_repeated() {
        let io = std::io::Error::other("connection refused");
        let err = anyhow::Error::new(io)
            .context("connect error: connection refused")
            .context("while sending");
        assert_eq!(
            unix().read(&err).message,
            "while sending: connect error: connection refused"
        );
    }

    #[test]
    fn every_kind_has_its_own_exit_code() {
        let kinds = [
            Kind::Failed,
            Kind::Unavailable,
            Kind::NotFound,
            Kind::Denied,
            Kind::Invalid,
            Kind::Precondition,
        ];
        let codes: std::collections::BTreeSet<u8> = kinds.iter().map(|k| k.exit_code()).collect();
        assert_eq!(codes.len(), kinds.len());
        assert!(
            !codes.contains(&0) && !codes.contains(&2),
            "0 is success, 2 clap's"
        );
    }

    #[test]
    fn an_own_error_keeps_its_kind_under_context() {
        let err = anyhow::Error::new(CliError::invalid("bad")).context("reading the message");
        assert_eq!(unix().read(&err).kind, Kind::Invalid);
    }
}
