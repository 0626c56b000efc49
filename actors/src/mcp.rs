//! MCP servers the daemon's agents may use (`serve --mcp-config`), through
//! the official Rust SDK (`rmcp`), client side only: their tools, nothing
//! else of MCP (no resources, prompts, sampling, roots, elicitation; their
//! notifications are ignored).
//!
//! [`McpServers`] owns one slot per configured server. A server starts on
//! first use (the first catalog listing or call that needs it), its tools
//! are listed once per connection, and calls share the connection. A
//! server that dies is started again at the next use, no sooner than its
//! backoff allows: the first restart after a healthy run is immediate, and
//! each failure in a row doubles the wait (0.5 s up to a minute). A server
//! that cannot start fails the calls that need it with a tool error that
//! says why, never the daemon or a turn. [`McpServers::shutdown`] ends
//! every server with the daemon.
//!
//! Which agents may use which servers is part of each agent (its record's
//! `mcp_servers`); the tools layer (`tools::mcp`) checks it.
//!
//! # Layout
//! - `config`: the configuration file and its bounds.
//! - `connection`: one live connection (stdio or streamable HTTP).
//! - `stdio`: a stdio server's confined process and its bounded transport.
//! - `grants`: what a stdio server may read besides the system (its
//!   package folder, `read_only`).
//! - `launch`: `npx` and `uvx` servers run from what their caches hold.
//! - `guard`: the transport layer that answers servers' requests itself
//!   and drops their notifications, before the SDK sees them.
//! - `peer_log`: servers' text in the daemon's log, escaped, cut and
//!   limited per server.
//! - `listing`: servers' tool lists and results, bounded for brains.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::JsonObject;
use serde_json::Value;
use tracing::{info, warn};

use crate::sandbox::SandboxConfig;
use crate::secrets::Secrets;

pub mod config;
mod connection;
mod grants;
mod guard;
mod launch;
pub mod listing;
mod peer_log;
mod stdio;

pub use config::{McpConfig, McpConfigError, ServerConfig};
pub use connection::{CallError, Connection, OpenError};
pub use listing::{Listing, McpTool, PREFIX};
use peer_log::{shown, LogLimit, MAX_REASON};

/// The wait before the second start in a row of a failing server; it
/// doubles with each further failure.
const BACKOFF_BASE: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// A connection up this long before it died was healthy: its death starts
/// a new run of failures.
const HEALTHY_RUN: Duration = Duration::from_secs(60);

/// Why an MCP server's tool could not be listed or called.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("no MCP server named `{0}` in the daemon's configuration")]
    UnknownServer(String),
    #[error("MCP server `{server}` could not start: {reason}")]
    Start {
        server: String,
        reason: Box<OpenError>,
    },
    #[error("MCP server `{server}` is down ({reason}); the next start is allowed in {} ms", retry_in.as_millis())]
    Down {
        server: String,
        reason: String,
        retry_in: Duration,
    },
    #[error("MCP server `{server}` stopped during the call ({reason}); it is started again at the next use")]
    Closed { server: String, reason: String },
    #[error("MCP server `{server}` did not answer within {} ms; the call was cancelled", after.as_millis())]
    Timeout { server: String, after: Duration },
    #[error("MCP server `{server}` has no tool `{tool}`")]
    NoTool { server: String, tool: String },
    #[error("MCP server `{server}` refused the call (code {code}): {message}")]
    Rejected {
        server: String,
        code: i32,
        message: String,
    },
    #[error("MCP server `{server}` sent an answer that is not a tool's result")]
    Unexpected { server: String },
    #[error("the tool reported an error: {message}")]
    ToolFailed { message: String },
    #[error("the daemon is shutting down")]
    ShuttingDown,
}

/// Every configured server, started on demand.
pub struct McpServers {
    slots: BTreeMap<String, Slot>,
    sandbox: SandboxConfig,
    secrets: Arc<Secrets>,
    closed: AtomicBool,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServers")
            .field("servers", &self.slots.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// One server: its configuration, its connection if live, and its run of
/// failures.
struct Slot {
    config: ServerConfig,
    /// Held while a connection is made, so one start serves every caller
    /// waiting for it.
    state: tokio::sync::Mutex<SlotState>,
    /// Failures (failed starts, deaths of short-lived connections) since
    /// the last healthy run or successful call.
    failures: AtomicU32,
    /// Log lines about what the server sends, limited across its
    /// connections.
    log: Arc<LogLimit>,
}

#[derive(Default)]
struct SlotState {
    live: Option<Arc<Connection>>,
    /// No start before this instant.
    retry_at: Option<Instant>,
    last_error: Option<String>,
}

/// The wait before the next start after `failures` failures in a row.
fn backoff(failures: u32) -> Duration {
    match failures {
        0 | 1 => Duration::ZERO,
        n => BACKOFF_BASE
            .saturating_mul(1u32.checked_shl(n - 2).unwrap_or(u32::MAX))
            .min(BACKOFF_MAX),
    }
}

impl McpServers {
    pub fn new(config: &McpConfig, sandbox: SandboxConfig, secrets: Arc<Secrets>) -> Self {
        let slots = config
            .servers()
            .map(|server| {
                // Values of secret-looking variables given to a stdio
                // server are redacted like the daemon's own.
                if let config::Transport::Stdio(stdio) = &server.transport {
                    for (name, value) in &stdio.env {
                        if crate::secrets::is_secret_name(name) {
                            secrets.add(value);
                        }
                    }
                }
                let slot = Slot {
                    config: server.clone(),
                    state: tokio::sync::Mutex::default(),
                    failures: AtomicU32::new(0),
                    log: Arc::new(LogLimit::new(&server.name)),
                };
                (server.name.clone(), slot)
            })
            .collect();
        Self {
            slots,
            sandbox,
            secrets,
            closed: AtomicBool::new(false),
        }
    }

    /// Whether `name` is a configured server.
    pub fn knows(&self, name: &str) -> bool {
        self.slots.contains_key(name)
    }

    /// The live connection to `server`, started if need be.
    pub async fn connection(&self, server: &str) -> Result<Arc<Connection>, McpError> {
        let slot = self
            .slots
            .get(server)
            .ok_or_else(|| McpError::UnknownServer(server.to_owned()))?;
        if self.closed.load(Ordering::Acquire) {
            return Err(McpError::ShuttingDown);
        }
        let mut state = slot.state.lock().await;
        if let Some(live) = &state.live {
            if !live.is_closed() {
                return Ok(live.clone());
            }
            let reason = live.why_closed();
            let failures = if live.started.elapsed() >= HEALTHY_RUN {
                slot.failures.store(1, Ordering::Release);
                1
            } else {
                slot.failures.fetch_add(1, Ordering::AcqRel) + 1
            };
            slot.log.flush();
            warn!(server, reason = %shown(&reason, MAX_REASON), failures, "MCP server stopped");
            state.retry_at = Some(Instant::now() + backoff(failures));
            state.last_error = Some(format!("it stopped: {reason}"));
            // The last holder of the connection ends what is left of it.
            state.live = None;
        }
        if let Some(at) = state.retry_at {
            let now = Instant::now();
            if now < at {
                return Err(McpError::Down {
                    server: server.to_owned(),
                    reason: state.last_error.clone().unwrap_or_default(),
                    retry_in: at - now,
                });
            }
        }
        let config = &slot.config;
        let start_time = config.start_timeout;
        let opened = tokio::time::timeout(
            start_time,
            Connection::open(config, &self.sandbox, &self.secrets, slot.log.clone()),
        )
        .await
        .unwrap_or(Err(OpenError::StartTimeout(start_time)));
        match opened {
            Ok(connection) => {
                let live = Arc::new(connection);
                if self.closed.load(Ordering::Acquire) {
                    live.shut(Duration::from_secs(1)).await;
                    return Err(McpError::ShuttingDown);
                }
                info!(
                    server,
                    tools = live.tools.tools.len(),
                    left_out = live.tools.left_out.len(),
                    "MCP server started"
                );
                for note in &live.tools.left_out {
                    warn!(server, note = %shown(note, MAX_REASON), "MCP tool left out of catalogs");
                }
                state.retry_at = None;
                state.last_error = None;
                state.live = Some(live.clone());
                Ok(live)
            }
            Err(reason) => {
                let failures = slot.failures.fetch_add(1, Ordering::AcqRel) + 1;
                warn!(server, reason = %shown(&reason.to_string(), MAX_REASON), failures, "MCP server could not start");
                state.retry_at = Some(Instant::now() + backoff(failures));
                state.last_error = Some(format!("it could not start: {reason}"));
                Err(McpError::Start {
                    server: server.to_owned(),
                    reason: Box::new(reason),
                })
            }
        }
    }

    /// Calls `server`'s tool `tool` (its own name) with `arguments`.
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: JsonObject,
    ) -> Result<Value, McpError> {
        let live = self.connection(server).await?;
        if live.tools.find(tool).is_none() {
            return Err(McpError::NoTool {
                server: server.to_owned(),
                tool: listing::cut(tool, listing::MAX_NAME),
            });
        }
        let timeout = self
            .slots
            .get(server)
            .map_or(config::DEFAULT_TIMEOUT, |s| s.config.timeout);
        let result = live
            .call(tool, arguments, timeout)
            .await
            .map_err(|err| match err {
                CallError::Closed(reason) => McpError::Closed {
                    server: server.to_owned(),
                    reason,
                },
                CallError::Timeout(after) => McpError::Timeout {
                    server: server.to_owned(),
                    after,
                },
                CallError::Rejected { code, message } => McpError::Rejected {
                    server: server.to_owned(),
                    code,
                    message,
                },
                CallError::Unexpected => McpError::Unexpected {
                    server: server.to_owned(),
                },
            })?;
        // An answer is a sign of health: the server's run of failures ends.
        if let Some(slot) = self.slots.get(server) {
            slot.failures.store(0, Ordering::Release);
        }
        listing::result_json(result).map_err(|reported| McpError::ToolFailed {
            message: listing::cut(&reported.to_string(), 4096),
        })
    }

    /// Ends every server (stdio processes killed and reaped) and refuses
    /// new starts. Waits at most `within` for each.
    pub async fn shutdown(&self, within: Duration) {
        self.closed.store(true, Ordering::Release);
        for (name, slot) in &self.slots {
            // A start in progress holds the lock up to its timeout; what it
            // starts is ended as it finds the daemon closing.
            let Ok(mut state) = tokio::time::timeout(within, slot.state.lock()).await else {
                warn!(server = %name, "MCP server busy starting at shutdown");
                continue;
            };
            if let Some(live) = state.live.take() {
                live.shut(within).await;
                info!(server = %name, "MCP server stopped");
            }
            slot.log.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_back_off_exponentially_up_to_a_minute() {
        let waits: Vec<u128> = (0..12).map(|n| backoff(n).as_millis()).collect();
        assert_eq!(
            waits,
            [0, 0, 500, 1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000]
        );
        assert_eq!(backoff(u32::MAX), BACKOFF_MAX);
    }
}
