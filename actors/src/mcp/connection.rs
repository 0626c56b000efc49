//! One live connection to a server: opened (process started or HTTP
//! session made, MCP handshake, tools listed), used for calls, and ended.
//! A connection never recovers: once closed it is replaced by a new one
//! (see [`super::McpServers`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientCapabilities, ClientInfo, ClientRequest,
    Implementation, JsonObject, PaginatedRequestParams, ProtocolVersion, ServerResult,
};
use rmcp::service::{ClientInitializeError, PeerRequestOptions, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceError, ServiceExt};

use super::config::{HttpConfig, ServerConfig, Transport};
use super::guard::Guarded;
use super::listing::{self, Listing, MAX_PAGES};
use super::peer_log::LogLimit;
use super::stdio::{self, ClosedWhy, Process, SpawnError};
use crate::sandbox::SandboxConfig;
use crate::secrets::Secrets;

/// How long an HTTP server may take to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stdio server that failed its start is given to exit, so the
/// error can say how it ended and what it printed.
const EXIT_GRACE: Duration = Duration::from_millis(500);

/// Why a call did not return a result.
#[derive(Debug)]
pub enum CallError {
    /// The connection closed before the answer (the server exited, or the
    /// HTTP server went away): what is known of why.
    Closed(String),
    /// No answer within the server's timeout; the call was cancelled.
    Timeout(Duration),
    /// The server answered with a JSON-RPC error.
    Rejected { code: i32, message: String },
    /// The answer was not a call's result.
    Unexpected,
}

/// Why a connection was not made; its server's slot keeps it as the
/// reason its start failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// `how`: how a stdio server's process ended and the end of its
    /// stderr, when it told anything.
    #[error("the MCP handshake failed: {source}{}", then(.how))]
    Handshake {
        // Boxed: the SDK's error holds a whole message and is several
        // times the size of the others.
        source: Box<ClientInitializeError>,
        how: String,
    },
    #[error("listing its tools failed: {0}")]
    Listing(ServiceError),
    #[error("its header's variable `{0}` is not set in the daemon's environment")]
    HeaderUnset(String),
    #[error("the value of `{0}` is not a valid header value")]
    HeaderValue(String),
    #[error("cannot make its HTTP client: {0}")]
    Client(reqwest::Error),
    #[error("it did not answer the handshake and list its tools within {} ms", .0.as_millis())]
    StartTimeout(Duration),
}

/// `how`, after the rest of a message, if there is anything to say.
fn then(how: &str) -> String {
    if how.is_empty() {
        String::new()
    } else {
        format!("; {how}")
    }
}

/// A live connection.
pub struct Connection {
    service: RunningService<RoleClient, ClientInfo>,
    pub tools: Listing,
    pub started: Instant,
    process: Option<Process>,
    closed_why: ClosedWhy,
    /// Set once a call found the transport gone.
    dead: AtomicBool,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("tools", &self.tools.tools.len())
            .field("started", &self.started)
            .finish_non_exhaustive()
    }
}

/// What the daemon tells servers about itself. It offers no capability:
/// no sampling, no roots, no elicitation.
fn client_info() -> ClientInfo {
    ClientInfo {
        meta: None,
        protocol_version: ProtocolVersion::default(),
        capabilities: ClientCapabilities::default(),
        client_info: Implementation {
            name: "holarchy".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            ..Implementation::default()
        },
    }
}

impl Connection {
    /// Starts server `config` and lists its tools. The caller bounds the
    /// time it takes (dropping the future ends whatever was started).
    /// `log` limits the log lines about what the server sends.
    pub async fn open(
        config: &ServerConfig,
        sandbox: &SandboxConfig,
        secrets: &Secrets,
        log: Arc<LogLimit>,
    ) -> Result<Self, OpenError> {
        let name = &config.name;
        match &config.transport {
            Transport::Stdio(stdio) => {
                let (process, transport) = stdio::spawn(name, stdio, sandbox, log.clone())?;
                let closed_why = transport.closed_why();
                match client_info()
                    .serve(Guarded::new(transport, name, log))
                    .await
                {
                    Ok(service) => {
                        Self::listed(&config.name, service, Some(process), closed_why).await
                    }
                    Err(source) => {
                        let _ = tokio::time::timeout(EXIT_GRACE, process.stopped()).await;
                        process.stop();
                        Err(OpenError::Handshake {
                            source: Box::new(source),
                            how: process.describe(),
                        })
                    }
                }
            }
            Transport::Http(http) => {
                let transport = Guarded::new(http_transport(http, secrets)?, name, log);
                let service = client_info().serve(transport).await.map_err(|source| {
                    OpenError::Handshake {
                        source: Box::new(source),
                        how: String::new(),
                    }
                })?;
                Self::listed(&config.name, service, None, ClosedWhy::default()).await
            }
        }
    }

    async fn listed(
        name: &str,
        service: RunningService<RoleClient, ClientInfo>,
        process: Option<Process>,
        closed_why: ClosedWhy,
    ) -> Result<Self, OpenError> {
        let mut tools = Vec::new();
        let mut cursor = None;
        let mut more = false;
        for page in 0..MAX_PAGES {
            let params = PaginatedRequestParams { meta: None, cursor };
            let listed = service
                .list_tools(Some(params))
                .await
                .map_err(OpenError::Listing)?;
            tools.extend(listed.tools);
            cursor = listed.next_cursor;
            if cursor.is_none() {
                break;
            }
            more = page + 1 == MAX_PAGES;
        }
        Ok(Self {
            tools: listing::sanitize(name, tools, more),
            service,
            started: Instant::now(),
            process,
            closed_why,
            dead: AtomicBool::new(false),
        })
    }

    /// Whether the connection is gone for good.
    pub fn is_closed(&self) -> bool {
        self.dead.load(Ordering::Acquire)
            || self.service.peer().is_transport_closed()
            || self.process.as_ref().is_some_and(|p| p.exit().is_some())
    }

    /// What is known of why it closed: the transport's note, the process's
    /// exit and the end of its stderr.
    pub fn why_closed(&self) -> String {
        let mut parts = Vec::new();
        if let Some(why) = self
            .closed_why
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        {
            parts.push(why);
        }
        if let Some(process) = &self.process {
            let how = process.describe();
            if !how.is_empty() {
                parts.push(how);
            }
        }
        if parts.is_empty() {
            "the connection closed".into()
        } else {
            parts.join("; ")
        }
    }

    /// Calls the server's tool `tool` with `arguments`, within `timeout`
    /// (a call past it is cancelled on the server).
    pub async fn call(
        &self,
        tool: &str,
        arguments: JsonObject,
        timeout: Duration,
    ) -> Result<rmcp::model::CallToolResult, CallError> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(CallToolRequestParams {
            meta: None,
            name: tool.to_owned().into(),
            arguments: Some(arguments),
            task: None,
        }));
        let options = PeerRequestOptions {
            timeout: Some(timeout),
            meta: None,
        };
        let answer = match self
            .service
            .peer()
            .send_request_with_option(request, options)
            .await
        {
            Ok(handle) => handle.await_response().await,
            Err(err) => Err(err),
        };
        match answer {
            Ok(ServerResult::CallToolResult(result)) => Ok(result),
            Ok(_) => Err(CallError::Unexpected),
            Err(ServiceError::McpError(err)) => Err(CallError::Rejected {
                code: err.code.0,
                message: listing::cut(&err.message, 2048),
            }),
            Err(ServiceError::Timeout { timeout }) => Err(CallError::Timeout(timeout)),
            Err(_) => {
                self.dead.store(true, Ordering::Release);
                // The process's exit may trail the closed pipe a moment.
                if let Some(process) = &self.process {
                    let _ = tokio::time::timeout(EXIT_GRACE, process.stopped()).await;
                }
                Err(CallError::Closed(self.why_closed()))
            }
        }
    }

    /// Ends the connection and, for a stdio server, its process; waits (at
    /// most `within`) until the process was reaped.
    pub async fn shut(&self, within: Duration) {
        self.service.cancellation_token().cancel();
        if let Some(process) = &self.process {
            process.stop();
            let _ = tokio::time::timeout(within, process.stopped()).await;
        }
    }
}

/// The streamable-HTTP transport to `http`, with its header's value read
/// now from the daemon's environment (and so redacted from everything
/// stored from then on). The value lives in this connection's HTTP client
/// only, marked sensitive so no debug output shows it.
fn http_transport(
    http: &HttpConfig,
    secrets: &Secrets,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, OpenError> {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(header) = &http.header {
        let value = secrets
            .var(&header.value_env)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| OpenError::HeaderUnset(header.value_env.clone()))?;
        let mut value =
            reqwest::header::HeaderValue::from_str(&format!("{}{value}", header.value_prefix))
                .map_err(|_| OpenError::HeaderValue(header.value_env.clone()))?;
        value.set_sensitive(true);
        headers.insert(header.name.clone(), value);
    }
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .connect_timeout(CONNECT_TIMEOUT)
        // The header must never follow a redirect to another host.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(OpenError::Client)?;
    Ok(StreamableHttpClientTransport::with_client(
        client,
        StreamableHttpClientTransportConfig::with_uri(http.url.as_str()),
    ))
}
