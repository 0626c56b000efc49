//! A stdio MCP server: its process and the transport over its pipes.
//!
//! The process runs in a unit (see [`crate::sandbox`]) like an agent's
//! command: it dies with the daemon (even by `kill -9`), everything it
//! starts goes with it, and it is confined by Landlock to its private
//! directory (its working directory, `HOME` and `TMPDIR`), the
//! configuration's `read_write` directories, and read-only access to the
//! system, its own files and their package folders, and the
//! configuration's `read_only` paths (see [`super::grants`]); `npx` and
//! `uvx` run what their caches hold (see [`super::launch`]). Its
//! environment is the daemon's short allowlist plus the configuration's
//! `env`, never the daemon's secrets.
//!
//! The transport is newline-delimited JSON-RPC, each line bounded: a
//! server that sends a longer one loses its connection (and is restarted
//! at the next use) rather than filling the daemon's memory.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::RoleClient;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{oneshot, watch};
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};

use super::config::StdioConfig;
use super::peer_log::{shown, LogLimit, MAX_SHOWN};
use super::{grants, launch};
use crate::sandbox::SandboxConfig;

/// Longest JSON-RPC message a server may send on one line.
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;
/// Bytes kept of the end of a server's stderr, for the error that says
/// why it stopped.
const STDERR_TAIL: usize = 2048;

/// Why a connection closed, as the transport saw it; read when the error
/// of a call or a start is told.
pub type ClosedWhy = Arc<Mutex<Option<String>>>;

/// A running stdio server's process. Dropping it (or [`Process::stop`])
/// ends the unit and everything in it; its reaper task then collects the
/// unit's exit, so no zombie is left.
#[derive(Debug)]
pub struct Process {
    stop: Mutex<Option<oneshot::Sender<()>>>,
    exited: watch::Receiver<Option<String>>,
    stderr: Arc<Mutex<VecDeque<u8>>>,
}

impl Process {
    /// Ends the server now (SIGHUP to its unit, which kills its tree).
    pub fn stop(&self) {
        drop(
            self.stop
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
    }

    /// How it ended, once it has.
    pub fn exit(&self) -> Option<String> {
        self.exited.borrow().clone()
    }

    /// Waits until the unit was reaped.
    pub async fn stopped(&self) {
        let mut exited = self.exited.clone();
        let _ = exited.wait_for(Option::is_some).await;
    }

    /// The end of what it printed on stderr.
    pub fn stderr_tail(&self) -> String {
        let tail = self.stderr.lock().unwrap_or_else(PoisonError::into_inner);
        let bytes: Vec<u8> = tail.iter().copied().collect();
        String::from_utf8_lossy(&bytes).trim().to_owned()
    }

    /// Its exit and stderr, for an error message.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(exit) = self.exit() {
            parts.push(exit);
        }
        let stderr = self.stderr_tail();
        if !stderr.is_empty() {
            parts.push(format!("stderr: {stderr}"));
        }
        parts.join("; ")
    }
}

/// Why a stdio server's process was not started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("cannot make its private directory: {0}")]
    PrivateDir(std::io::Error),
    #[error("`read_write` path {}: {source}", path.display())]
    ReadWriteUnreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("`read_write` path {} is not a directory", .0.display())]
    ReadWriteNotDir(PathBuf),
    #[error("`read_write` path {} is, holds or is inside a path the daemon protects", .0.display())]
    ReadWriteProtected(PathBuf),
    #[error(transparent)]
    Launch(#[from] launch::LaunchError),
    #[error(transparent)]
    Grants(#[from] grants::GrantError),
    #[error("cannot describe its unit: {0}")]
    Unit(serde_json::Error),
    #[error("cannot start `{command}`: {source}")]
    Start {
        command: String,
        source: std::io::Error,
    },
    #[error("its pipes were not made")]
    Pipes,
}

/// Starts `config`'s program as server `name`. The caller holds the
/// process for as long as it talks to it over the transport; `log` limits
/// the log lines about what it prints.
pub fn spawn(
    name: &str,
    config: &StdioConfig,
    sandbox: &SandboxConfig,
    log: Arc<LogLimit>,
) -> Result<(Process, StdioTransport), SpawnError> {
    let private = sandbox
        .tmp_dir(format!("mcp-{name}"))
        .map_err(SpawnError::PrivateDir)?;
    let mut writable = vec![private.clone()];
    for path in &config.read_write {
        writable.push(writable_dir(path, sandbox)?);
    }
    let launch = launch::resolve(config, sandbox, &grants::daemon_env)?;
    let run = &launch.config;
    let mut read_only = grants::grants(run, sandbox, &grants::daemon_env)?.read_only;
    read_only.extend(launch.read_only);
    let mut spec = sandbox.spec(writable, read_only, Duration::ZERO);
    // A server lives as long as the daemon uses it.
    spec.wall_time_ms = 0;
    spec.network = config.network.clone();
    let mut command = sandbox
        .command(&spec, &run.command, &run.args)
        .map_err(SpawnError::Unit)?;
    command.current_dir(&private);
    crate::process::scrub(&mut command, &config.env, Some(&private));
    let mut child = command
        .process_group(0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| SpawnError::Start {
            command: config.command.clone(),
            source,
        })?;
    let (stdin, stdout, stderr) =
        match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
            (Some(stdin), Some(stdout), Some(stderr)) => (stdin, stdout, stderr),
            _ => return Err(SpawnError::Pipes),
        };
    let tail = Arc::new(Mutex::new(VecDeque::new()));
    tokio::spawn(keep_tail(stderr, tail.clone()));
    let (stop, stopped) = oneshot::channel::<()>();
    let (exited_tx, exited) = watch::channel(None);
    let pid = child.id();
    tokio::spawn(async move {
        let status = tokio::select! {
            status = child.wait() => status,
            _ = stopped => {
                // Only before the unit is reaped is its pid surely its own.
                hang_up(pid);
                child.wait().await
            }
        };
        let exit = match status {
            Ok(status) => format!("it exited with {status}"),
            Err(err) => format!("waiting for it failed: {err}"),
        };
        let _ = exited_tx.send(Some(exit));
    });
    let closed = ClosedWhy::default();
    let transport = StdioTransport {
        lines: FramedRead::new(stdout, LinesCodec::new_with_max_length(MAX_LINE_BYTES)),
        stdin: Arc::new(tokio::sync::Mutex::new(Some(stdin))),
        closed,
        server: name.to_owned(),
        log,
    };
    let process = Process {
        stop: Mutex::new(Some(stop)),
        exited,
        stderr: tail,
    };
    Ok((process, transport))
}

/// Asks the unit to kill its whole tree at once.
fn hang_up(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGHUP,
        );
    }
}

/// A `read_write` directory, canonical, and never one that holds, or is
/// inside, what the daemon protects (its data directory, its program, its
/// user's credentials).
fn writable_dir(path: &Path, sandbox: &SandboxConfig) -> Result<PathBuf, SpawnError> {
    let canonical =
        std::fs::canonicalize(path).map_err(|source| SpawnError::ReadWriteUnreadable {
            path: path.to_owned(),
            source,
        })?;
    if !canonical.is_dir() {
        return Err(SpawnError::ReadWriteNotDir(path.to_owned()));
    }
    let touches = sandbox
        .protected
        .iter()
        .any(|p| p.starts_with(&canonical) || canonical.starts_with(p));
    if touches {
        return Err(SpawnError::ReadWriteProtected(path.to_owned()));
    }
    Ok(canonical)
}

/// Keeps the last [`STDERR_TAIL`] bytes of `pipe` until it closes.
async fn keep_tail(mut pipe: impl AsyncRead + Unpin, tail: Arc<Mutex<VecDeque<u8>>>) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
        tail.extend(&buf[..n]);
        let over = tail.len().saturating_sub(STDERR_TAIL);
        tail.drain(..over);
    }
}

/// JSON-RPC over a server's stdin and stdout, one message a line.
pub struct StdioTransport {
    lines: FramedRead<ChildStdout, LinesCodec>,
    stdin: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    closed: ClosedWhy,
    server: String,
    log: Arc<LogLimit>,
}

impl std::fmt::Debug for StdioTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioTransport").finish_non_exhaustive()
    }
}

impl StdioTransport {
    /// Where the transport notes why it closed.
    pub fn closed_why(&self) -> ClosedWhy {
        self.closed.clone()
    }

    fn note(&self, why: String) {
        let mut closed = self.closed.lock().unwrap_or_else(PoisonError::into_inner);
        closed.get_or_insert(why);
    }
}

impl rmcp::transport::Transport<RoleClient> for StdioTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let stdin = self.stdin.clone();
        let line = serde_json::to_vec(&item).map(|mut line| {
            line.push(b'\n');
            line
        });
        async move {
            let line = line.map_err(std::io::Error::other)?;
            let mut stdin = stdin.lock().await;
            let Some(pipe) = stdin.as_mut() else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the server's stdin is closed",
                ));
            };
            pipe.write_all(&line).await?;
            pipe.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.lines.next().await {
                Some(Ok(line)) => {
                    if line.trim().is_empty() {
                        continue;
                    }
                    // A line that is no message (a log line printed to the
                    // wrong stream) is skipped, as clients do.
                    match serde_json::from_str(&line) {
                        Ok(message) => return Some(message),
                        Err(err) => {
                            // Only a line that is logged spends the budget.
                            if tracing::enabled!(tracing::Level::DEBUG) && self.log.allow() {
                                tracing::debug!(
                                    server = %self.server,
                                    error = %shown(&err.to_string(), MAX_SHOWN),
                                    "an MCP server printed a line that is not a message"
                                );
                            }
                        }
                    }
                }
                Some(Err(LinesCodecError::MaxLineLengthExceeded)) => {
                    self.note(format!(
                        "it sent a message over {MAX_LINE_BYTES} bytes, so the daemon closed the connection"
                    ));
                    return None;
                }
                Some(Err(LinesCodecError::Io(err))) => {
                    self.note(format!("reading from it failed: {err}"));
                    return None;
                }
                None => {
                    self.note("it closed its stdout".into());
                    return None;
                }
            }
        }
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        let stdin = self.stdin.clone();
        async move {
            // Closing stdin is how a stdio server is asked to end.
            drop(stdin.lock().await.take());
            Ok(())
        }
    }
}
