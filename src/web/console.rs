//! The operators' web console on the HTTP listener: the page and its
//! assets at `/` and `/console/...` (see [`assets`]), and the small JSON
//! API under `/api/...` the page reads (see [`routes`]).
//!
//! Every answer comes from the gRPC services themselves, called in
//! process: the console adds routing, authorisation and JSON, never a
//! rule of its own, so what it shows is what `holarchy` shows, and what
//! it sends (a message, a task's input) is refused exactly where `holarchy
//! agent send` and `holarchy task input` are (a private agent takes no
//! operator message). Its reads beside them: the names a search starts
//! with, through the same read model (each name found is then read with
//! `GetAgent`), and the live agents' counts by state that `/metrics`
//! reads too (see [`overview`]). Replays, an agent's recorded turns run
//! through a candidate, are read through `ReplayService` (see
//! [`replays`]).
//!
//! Authorisation: the daemon's bearer token, sent by the page as
//! `Authorization: Bearer ...`. Without it the console serves the page and
//! its login check only; with `serve --console-public-read` it also shows
//! structure (the tree, states, counts) to anyone. The contents of agents
//! (messages, outputs, events, brains) and every write always need it. A
//! wrong token is refused outright (401), so a page never mistakes a typo
//! for a login. Every console request must name an allowed `Host` (see
//! [`super::host`]), or is answered 421. A body is read only for a write
//! from the operator, and only up to [`inputs::MAX_BODY`].

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, HOST};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};
use tokio::sync::{watch, Semaphore};

use holarchy_actors::sandbox::SandboxReport;
use holarchy_actors::Runtime;

use crate::access::audit::Audit;
use crate::access::{Caller as AccessCaller, Role};
use crate::api::agent_service::AgentApi;
use crate::api::plane_service::PlaneApi;
use crate::api::read_model::ReadModel;
use crate::api::replay_service::ReplayApi;
use crate::api::runtime_service::RuntimeApi;
use crate::api::supervision_service::SupervisionApi;
use crate::api::task_service::TaskApi;
use crate::api::workspace_service::WorkspaceApi;
use crate::daemon::gate::Keys;

use super::host::AllowedHosts;

mod assets;
mod inputs;
mod overview;
mod query;
mod replays;
mod routes;
mod stream;
mod tree_filter;
mod views;

/// What every answer of the listener is: a whole body, or a stream (the
/// console's followed events).
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Longest path taken; the console's own are far shorter.
const MAX_PATH: usize = 256;
/// Longest query string taken.
const MAX_QUERY: usize = 512;
/// Event streams open at once; each holds a connection of the listener.
const MAX_STREAMS: usize = 32;

/// The console's share of the daemon: the gRPC services it answers
/// through and the token that lifts its reads to contents and writes.
#[derive(Debug)]
pub struct Console {
    agents: AgentApi,
    tasks: TaskApi,
    tree: SupervisionApi,
    planes: PlaneApi,
    workspaces: WorkspaceApi,
    replays: ReplayApi,
    /// Only its `GetActivity` is called (the overview's totals and
    /// queues), which reads neither its data directory nor its sandbox
    /// report.
    activity: RuntimeApi,
    /// For the live agents' counts by state (`Runtime::levels`), which no
    /// gRPC call returns; `/metrics` reads the same.
    runtime: Arc<Runtime>,
    store: Arc<dyn ReadModel>,
    /// The credentials the TCP listener takes (the bootstrap token, scoped
    /// and OIDC tokens), and the trail the console's writes are recorded
    /// in.
    keys: Arc<Keys>,
    streams: Arc<Semaphore>,
    shutdown: watch::Receiver<bool>,
    /// Reads of structure need no token (`serve --console-public-read`).
    public_read: bool,
    hosts: AllowedHosts,
}

/// Who asks, as far as the routes care: a request with no token is
/// anyone's; one with a viewer's token reads contents; one with an
/// operator's or admin's also writes (one with a wrong token is refused
/// before this).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Caller {
    Anonymous,
    Viewer,
    Operator,
}

impl Caller {
    /// Whether the caller gave a token: it sees agents' contents.
    fn signed_in(self) -> bool {
        self != Caller::Anonymous
    }
}

impl Console {
    pub fn new(
        runtime: Arc<Runtime>,
        store: Arc<dyn ReadModel>,
        replays: Arc<crate::replay::Replays>,
        keys: Arc<Keys>,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        Self {
            agents: AgentApi::new(runtime.clone(), store.clone(), shutdown.clone()),
            tasks: TaskApi::new(runtime.clone(), shutdown.clone()),
            tree: SupervisionApi::new(runtime.clone(), store.clone()),
            planes: PlaneApi::new(runtime.clone(), store.clone()),
            workspaces: WorkspaceApi::new(runtime.clone()),
            replays: ReplayApi::new(runtime.clone(), replays),
            activity: RuntimeApi::new(
                runtime.clone(),
                store.clone(),
                std::path::PathBuf::new(),
                SandboxReport {
                    landlock_abi: 0,
                    network_namespace: false,
                },
            ),
            runtime,
            store,
            keys,
            streams: Arc::new(Semaphore::new(MAX_STREAMS)),
            shutdown,
            public_read: false,
            hosts: AllowedHosts::default(),
        }
    }

    /// With `public_read`, the read-only routes answer without the token
    /// (structure only); without it, every API route but `/api/session`
    /// (the page's login check) takes the token.
    pub fn public_read(self, public_read: bool) -> Self {
        Self {
            public_read,
            ..self
        }
    }

    /// The names a request's `Host` may carry beside IP addresses and
    /// `localhost`.
    pub fn allowed_hosts(self, hosts: AllowedHosts) -> Self {
        Self { hosts, ..self }
    }

    /// Whether `path` is the console's: the page, its assets or its API.
    pub fn owns(path: &str) -> bool {
        path == "/" || path.starts_with("/console/") || path == "/api" || path.starts_with("/api/")
    }

    /// Answers one request for a path [`Console::owns`]; never fails
    /// (every failure is an HTTP status). The body is read only by the
    /// routes that take one, after the caller was found to be the
    /// operator.
    pub async fn handle(&self, request: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
        if !self.hosts.admits(request.headers().get(HOST)) {
            return error(
                StatusCode::MISDIRECTED_REQUEST,
                "the console answers under its address, localhost, or a name given to serve --http-allowed-host",
            );
        }
        let path = request.uri().path();
        let query = request.uri().query().unwrap_or_default();
        if path.len() > MAX_PATH {
            return error(StatusCode::URI_TOO_LONG, "the path is too long");
        }
        if query.len() > MAX_QUERY {
            return error(
                StatusCode::URI_TOO_LONG,
                &format!("the query is over {MAX_QUERY} bytes"),
            );
        }
        if !path.starts_with("/api") {
            return assets::answer(request.method(), path);
        }
        let who = match request.headers().get(AUTHORIZATION) {
            None => None,
            Some(given) => match self.identify(given.as_bytes(), peer).await {
                Some(who) => Some(who),
                None => return error(StatusCode::UNAUTHORIZED, "wrong, revoked or expired token"),
            },
        };
        let caller = match &who {
            None => Caller::Anonymous,
            Some(who) if who.may(Role::Operator) => Caller::Operator,
            Some(_) => Caller::Viewer,
        };
        if !self.public_read && caller == Caller::Anonymous && path != "/api/session" {
            return error(
                StatusCode::UNAUTHORIZED,
                "this console takes the daemon's token for reads too (serve --console-public-read opens its read-only view)",
            );
        }
        let query = match query::parse(query) {
            Ok(query) => query,
            Err(why) => return error(StatusCode::BAD_REQUEST, &why.to_string()),
        };
        let (parts, body) = request.into_parts();
        let call = routes::Call {
            method: &parts.method,
            path: parts.uri.path(),
            query: &query,
            caller,
            who: who.as_ref(),
            headers: &parts.headers,
            body,
        };
        // Every call the console makes in process carries its caller, so
        // the services keep it to its namespace as the gate would.
        let acting = who.clone();
        let mut answer = ACTING.scope(acting, routes::answer(self, call)).await;
        let headers = answer.headers_mut();
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        assets::harden(headers);
        answer
    }
}

impl Console {
    /// The caller an `Authorization` header names (the bootstrap token, a
    /// scoped or an OIDC token), in its own namespace; `None` for anything
    /// else.
    async fn identify(&self, authorization: &[u8], peer: SocketAddr) -> Option<AccessCaller> {
        let bearer = authorization.strip_prefix(b"Bearer ")?;
        let found = crate::daemon::gate::bearer_of(&self.keys, bearer)
            .await
            .ok()?;
        found.caller(None, peer.to_string(), None).ok()
    }

    /// The trail the console's writes are recorded in.
    fn audit(&self) -> &Audit {
        &self.keys.audit
    }
}

tokio::task_local! {
    /// The caller a console request acts for, while it is answered.
    static ACTING: Option<AccessCaller>;
}

/// `message` as a request of the console's caller (see [`ACTING`]).
fn req<T>(message: T) -> tonic::Request<T> {
    let caller = ACTING.try_with(Clone::clone).ok().flatten();
    crate::api::scope::on_behalf(message, caller.as_ref())
}

/// The namespace the console's caller acts in (`default` for one
/// without a token, under `--console-public-read`).
fn acting_namespace() -> String {
    ACTING
        .try_with(|caller| caller.as_ref().map(|c| c.namespace.clone()))
        .ok()
        .flatten()
        .unwrap_or_else(|| holarchy_supervision::namespace::DEFAULT.to_owned())
}

/// A whole body.
fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

fn json_answer(status: StatusCode, body: &Value) -> Response<Body> {
    let mut answer = Response::new(full(body.to_string()));
    *answer.status_mut() = status;
    answer.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    answer
}

fn error(status: StatusCode, why: &str) -> Response<Body> {
    let mut answer = json_answer(status, &json!({ "error": why }));
    assets::harden(answer.headers_mut());
    answer
}

/// An error answer before it is made: small, so results carrying it stay
/// small.
#[derive(Debug)]
struct Refusal {
    status: StatusCode,
    why: String,
}

/// A query the console cannot read is the caller's mistake.
impl From<query::QueryError> for Refusal {
    fn from(err: query::QueryError) -> Self {
        Self::bad(err.to_string())
    }
}

impl Refusal {
    fn new(status: StatusCode, why: impl Into<String>) -> Self {
        Self {
            status,
            why: why.into(),
        }
    }

    fn bad(why: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, why)
    }

    /// The HTTP status a gRPC status maps to, with its message: what a
    /// console call gets for what a gRPC call would be refused with.
    fn of(status: &tonic::Status) -> Self {
        use tonic::Code;
        let http = match status.code() {
            Code::InvalidArgument | Code::OutOfRange => StatusCode::BAD_REQUEST,
            Code::NotFound => StatusCode::NOT_FOUND,
            Code::PermissionDenied => StatusCode::FORBIDDEN,
            Code::Unauthenticated => StatusCode::UNAUTHORIZED,
            Code::AlreadyExists | Code::FailedPrecondition | Code::Aborted => StatusCode::CONFLICT,
            Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
            Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        // An internal error's text may name internals; the log has it.
        if http == StatusCode::INTERNAL_SERVER_ERROR {
            return Self::new(http, "internal error");
        }
        Self::new(http, status.message())
    }

    fn answer(&self) -> Response<Body> {
        error(self.status, &self.why)
    }

    /// The gRPC code's name this refusal stands for, as the audit trail
    /// writes outcomes.
    fn code_name(&self) -> &'static str {
        match self.status {
            StatusCode::BAD_REQUEST | StatusCode::METHOD_NOT_ALLOWED => "INVALID_ARGUMENT",
            StatusCode::UNAUTHORIZED => "UNAUTHENTICATED",
            StatusCode::FORBIDDEN => "PERMISSION_DENIED",
            StatusCode::NOT_FOUND => "NOT_FOUND",
            StatusCode::CONFLICT => "FAILED_PRECONDITION",
            StatusCode::TOO_MANY_REQUESTS | StatusCode::PAYLOAD_TOO_LARGE => "RESOURCE_EXHAUSTED",
            StatusCode::SERVICE_UNAVAILABLE => "UNAVAILABLE",
            StatusCode::GATEWAY_TIMEOUT => "DEADLINE_EXCEEDED",
            _ => "INTERNAL",
        }
    }
}

/// Every method but GET and HEAD is refused on reads, and every one but
/// POST on writes.
fn method_is(method: &Method, wanted: &Method) -> bool {
    method == wanted || (wanted == Method::GET && method == Method::HEAD)
}
