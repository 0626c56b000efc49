//! The gate every gRPC request passes on every listener: who the caller
//! is (the Unix socket's peer, the bootstrap token, or a scoped token),
//! whether its role may call the method, and, for a write, an entry in the
//! audit trail, stored durably before the answer goes out.
//!
//! A refused write is recorded too (PERMISSION_DENIED, with the caller);
//! a request with no valid credential is not, since its caller is nobody
//! the trail could name, and recording it would let anyone who reaches
//! the port fill the trail.

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::{BodyExt as _, Full, Limited};
use tonic::body::Body;
use tonic::Status;
use tower::{Layer, Service};

use super::listen::{Conn, Peer};
use super::token::Token;
use crate::access::audit::{self, Audit};
use crate::access::oidc::Oidc;
use crate::access::policy::{self, Needs};
use crate::access::scope::{self, Scope};
use crate::access::tokens::Tokens;
use crate::access::{target, wire, Caller, Credential, Role};
use crate::api::budget::MAX_GRPC_MESSAGE_BYTES;
use crate::api::scope::{Kind, Scopes};
use crate::daemon::DiskLow;

/// The namespace of a caller that names none.
pub use holarchy_supervision::namespace::DEFAULT as DEFAULT_NAMESPACE;

/// What the gate checks with, shared by every request of one listener.
#[derive(Debug)]
pub struct Keys {
    /// The bootstrap token: an admin's. `None` on the Unix socket's gate.
    pub bootstrap: Option<Token>,
    pub tokens: Arc<Tokens>,
    pub audit: Arc<Audit>,
    /// OIDC tokens' verifier (`serve --oidc-issuer`), if configured.
    pub oidc: Option<Arc<Oidc>>,
    /// What namespace each id a request names is in.
    pub scopes: Arc<Scopes>,
    /// Whether the disk takes writes: a write it refuses is refused
    /// before its entry is written, as recording it would spend the
    /// reserve the refusal keeps.
    pub disk: DiskLow,
    /// The runtime, whose namespaces' store quotas hold the writes that
    /// grow the store.
    pub runtime: Arc<holarchy_actors::Runtime>,
}

/// Operators' writes that add to what the store holds for a namespace
/// and that the runtime does not hold itself: refused while it is over
/// its store quota. (The runtime refuses new agents, commands and
/// operators' messages, and holds turns.)
const GROWS_THE_STORE: [&str; 2] = ["MemoryService/WriteMemory", "TaskService/SendTaskInput"];

#[derive(Debug, Clone)]
pub struct GateLayer(pub Arc<Keys>);

impl<S> Layer<S> for GateLayer {
    type Service = Gate<S>;

    fn layer(&self, inner: S) -> Gate<S> {
        Gate {
            inner,
            keys: self.0.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Gate<S> {
    inner: S,
    keys: Arc<Keys>,
}

impl<S, R> Service<http::Request<Body>> for Gate<S>
where
    S: Service<http::Request<Body>, Response = http::Response<R>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    R: Default + Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        // The ready service answers this call; a fresh clone waits for
        // the next one (tower's rule for services that are cloned).
        let fresh = self.inner.clone();
        let ready = std::mem::replace(&mut self.inner, fresh);
        Box::pin(pass(ready, self.keys.clone(), request))
    }
}

async fn pass<S, R>(
    mut inner: S,
    keys: Arc<Keys>,
    mut request: http::Request<Body>,
) -> Result<http::Response<R>, S::Error>
where
    S: Service<http::Request<Body>, Response = http::Response<R>>,
    R: Default,
{
    let path = request.uri().path().to_owned();
    let needs = policy::needs(&path);
    let conn = request.extensions().get::<Conn>().cloned();
    let authorization = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .map(|value| value.as_bytes().to_vec());
    let asked = request
        .headers()
        .get(NAMESPACE_HEADER)
        .map(|value| value.as_bytes().to_vec());
    let caller = match identify(&keys, conn.as_ref(), authorization, asked).await {
        Ok(caller) => caller,
        Err(status) => return Ok(status.into_http()),
    };
    if let Some(conn) = &conn {
        // A right credential lifts the connection's authentication
        // deadline (see `listen`).
        conn.authenticate();
    }
    let action = policy::method(&path).unwrap_or("unknown method");
    let scope = scope::of(action);
    if !needs.audited && !scope.reads_request() {
        if !caller.may(needs.role) {
            return Ok(refusal(&caller, action, needs).into_http());
        }
        request.extensions_mut().insert(caller);
        return inner.call(request).await;
    }
    // One unary message, or a stream's opening one: read whole (bounded
    // as tonic bounds it) for its target and its scope.
    let (mut parts, body) = request.into_parts();
    let bytes = match Limited::new(body, MAX_GRPC_MESSAGE_BYTES + 5)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            // The code tonic gives a message over its bound.
            let status = Status::out_of_range(format!(
                "the request is over {MAX_GRPC_MESSAGE_BYTES} bytes, or ended early"
            ));
            if needs.audited {
                record(&keys, &caller, action, String::new(), &status).await;
            }
            return Ok(status.into_http());
        }
    };
    let target = if needs.audited {
        target::of(action, &bytes)
    } else {
        String::new()
    };
    let refused = if !caller.may(needs.role) {
        Some(refusal(&caller, action, needs))
    } else if scope == Scope::InstanceApply && caller.namespace != DEFAULT_NAMESPACE {
        Some(Status::failed_precondition(
            "instances live in the default namespace in this release: apply it as a caller of `default`",
        ))
    } else if GROWS_THE_STORE.contains(&action) {
        keys.runtime
            .namespaces()
            .get(&caller.namespace)
            .store_refusal()
            .map(|refusal| Status::resource_exhausted(refusal.to_string()))
    } else {
        None
    };
    if let Some(status) = refused {
        if needs.audited {
            record(&keys, &caller, action, target, &status).await;
        }
        return Ok(status.into_http());
    }
    // Read again once the write is done (a count of references, not a
    // copy), for whom its `operator_action` names.
    let asked = bytes.clone();
    let (bytes, stand_ins) = match scoped(&keys.scopes, scope, &bytes, &caller.namespace) {
        Ok(scoped) => scoped,
        Err(err) => {
            let status = Status::unavailable(format!(
                "cannot read the store to scope this call ({err}): nothing was done; try again"
            ));
            return Ok(status.into_http());
        }
    };
    if !stand_ins.is_empty() {
        // The body's length changed with the ids in it.
        parts.headers.remove(http::header::CONTENT_LENGTH);
    }
    parts.extensions.insert(caller.clone());
    let request = http::Request::from_parts(parts, Body::new(Full::new(bytes)));
    if !needs.audited {
        let mut response = inner.call(request).await?;
        put_back(&mut response, &stand_ins);
        return Ok(response);
    }
    if let Some(why) = keys.disk.refuses_writes() {
        return Ok(Status::unavailable(format!("{why}; retry later")).into_http());
    }
    let begun = keys
        .audit
        .begin(audit::Call {
            caller: &caller,
            action,
            target,
            outcome: audit::UNFINISHED,
            detail: "",
            namespace: &caller.namespace,
        })
        .await;
    // No write runs unrecorded: a trail that cannot be written stops it.
    let pending = match begun {
        Ok(pending) => pending,
        Err(err) => {
            tracing::error!(error = %err, action, caller = %caller.who(), "cannot record an audit entry");
            let status = Status::unavailable(format!(
                "the audit trail cannot be written ({err}): nothing was done; try again"
            ));
            return Ok(status.into_http());
        }
    };
    let mut response = inner.call(request).await?;
    put_back(&mut response, &stand_ins);
    let status = outcome(&response);
    let code = crate::metrics::code_str(status.code());
    if let Err(err) = keys.audit.finish(pending, code, status.message()).await {
        // The action itself is done (or refused) and answered as such: a
        // store that cannot take the entry is failing, and the daemon's
        // store watch restarts on that.
        tracing::error!(error = %err, action, caller = %caller.who(), "cannot record an audit entry");
    }
    let acted_on = (status.code() == tonic::Code::Ok)
        .then(|| acted_on(&keys.scopes, action, scope, &asked, &caller.namespace))
        .flatten();
    if let Some(agent_id) = acted_on {
        let logged = keys
            .runtime
            .log_operator_action(agent_id, caller.who(), action.to_owned())
            .await;
        if let Err(err) = logged {
            // Done and in the trail; the log misses who did it.
            tracing::warn!(error = %err, action, "cannot log an operator's action in the event log");
        }
    }
    Ok(response)
}

/// Where a write's `operator_action` goes once it is done: the agent it
/// acts on (`Some(Some(id))`), or the log of no agent (`Some(None)`: an
/// instance's, a token's, a quota's), which the default namespace's
/// watchers read, so only for callers in it. `None`: not here (a sent
/// message's and a created agent's go in their own commits; a delivered
/// trigger or published event is input its own events record, at a
/// machine's rate; a replay's are in the trail only, as is a write whose
/// agent cannot be found).
fn acted_on(
    scopes: &Scopes,
    action: &str,
    scope: Scope,
    frame: &[u8],
    namespace: &str,
) -> Option<Option<holarchy_supervision::AgentId>> {
    let named = |field: u32| {
        wire::message_of(frame).and_then(|message| wire::strings(message, field).next())
    };
    let owner = |kind: Kind, field: u32| {
        let text = named(field)?;
        scopes.owner(kind, text).ok().flatten().map(Some)
    };
    match scope {
        Scope::Agent(_) if action.starts_with("AgentService/SendMessage") => None,
        // A replay writes nothing of any agent's, the event log included:
        // who started, cancelled or deleted one is in the audit trail.
        _ if action.starts_with("ReplayService/") => None,
        Scope::Agent(field) => owner(Kind::Agent, field),
        Scope::Task(field) => owner(Kind::Task, field),
        Scope::Approval(field) => owner(Kind::Approval, field),
        Scope::WorkItem(field) => owner(Kind::WorkItem, field),
        Scope::Creates | Scope::EachAgent(..) => None,
        _ if matches!(
            action,
            "TriggerService/DeliverTrigger" | "InstanceService/PublishEvent"
        ) =>
        {
            None
        }
        _ => (namespace == DEFAULT_NAMESPACE).then_some(None),
    }
}

/// The request `frame` as the service gets it: each id it names of
/// another namespace than `namespace` replaced by one that exists nowhere,
/// with the pairs (stand-in, original) to put back in the answer.
fn scoped(
    scopes: &Scopes,
    scope: Scope,
    frame: &Bytes,
    namespace: &str,
) -> Result<(Bytes, Vec<(String, String)>), holarchy_actors::StoreError> {
    let mut pairs = Vec::new();
    let Some(message) = wire::message_of(frame) else {
        return Ok((frame.clone(), pairs));
    };
    let (kind, number) = match scope {
        Scope::Agent(n) | Scope::AgentOrListing(n) => (Kind::Agent, n),
        Scope::Task(n) => (Kind::Task, n),
        Scope::Approval(n) => (Kind::Approval, n),
        Scope::WorkItem(n) => (Kind::WorkItem, n),
        Scope::Instance(n) => (Kind::Instance, n),
        Scope::EachAgent(list, n) => {
            let mut failed = None;
            let rewritten = wire::map_field(message, list, |item| {
                match stand_in(scopes, Kind::Agent, item, n, namespace, &mut pairs) {
                    Ok(item) => item,
                    Err(err) => {
                        failed = Some(err);
                        item.to_vec()
                    }
                }
            });
            if let Some(err) = failed {
                return Err(err);
            }
            return Ok(if pairs.is_empty() {
                (frame.clone(), pairs)
            } else {
                (Bytes::from(wire::frame(&rewritten)), pairs)
            });
        }
        _ => return Ok((frame.clone(), pairs)),
    };
    let rewritten = stand_in(scopes, kind, message, number, namespace, &mut pairs)?;
    Ok(if pairs.is_empty() {
        (frame.clone(), pairs)
    } else {
        (Bytes::from(wire::frame(&rewritten)), pairs)
    })
}

/// `message` with its field `number` replaced by a stand-in when it names
/// something of another namespace.
fn stand_in(
    scopes: &Scopes,
    kind: Kind,
    message: &[u8],
    number: u32,
    namespace: &str,
    pairs: &mut Vec<(String, String)>,
) -> Result<Vec<u8>, holarchy_actors::StoreError> {
    let Some(text) = wire::strings(message, number).next() else {
        return Ok(message.to_vec());
    };
    if text.is_empty() {
        return Ok(message.to_vec());
    }
    let Some(fake) = scopes.stand_in(kind, text, namespace)? else {
        return Ok(message.to_vec());
    };
    pairs.push((fake.clone(), text.to_owned()));
    Ok(wire::map_field(message, number, |_| {
        fake.clone().into_bytes()
    }))
}

/// Puts the caller's own text back where the answer names a stand-in, so
/// it reads as the answer for a missing id. Ids and instance names hold
/// no character that `grpc-message` escapes, so the header is edited as
/// it stands.
fn put_back<R>(response: &mut http::Response<R>, stand_ins: &[(String, String)]) {
    if stand_ins.is_empty() {
        return;
    }
    let Some(message) = response.headers().get("grpc-message") else {
        return;
    };
    let mut text = String::from_utf8_lossy(message.as_bytes()).into_owned();
    for (fake, original) in stand_ins {
        text = text.replace(fake.as_str(), original);
    }
    if let Ok(value) = http::HeaderValue::from_str(&text) {
        response.headers_mut().insert("grpc-message", value);
    }
}

/// The metadata a machine's operator names a namespace with.
pub const NAMESPACE_HEADER: &str = "holarchy-namespace";

/// Who sent `request`, or why it is refused.
async fn identify(
    keys: &Keys,
    conn: Option<&Conn>,
    authorization: Option<Vec<u8>>,
    asked: Option<Vec<u8>>,
) -> Result<Caller, Status> {
    let peer = conn.map(Conn::peer);
    if let Some(Peer::Unix { uid }) = peer {
        // The socket is 0600 and refuses agents' programs: whoever is here
        // is the daemon's user (or root), the machine's own operator.
        let uid = uid.unwrap_or(u32::MAX);
        let found = Found {
            credential: Credential::Uid(uid),
            role: Role::Admin,
            namespace: None,
        };
        return found.caller(None, "unix".into(), asked.as_deref());
    }
    let from = match peer {
        Some(Peer::Tcp(addr)) => addr.to_string(),
        _ => "unknown".into(),
    };
    let certificate = conn.and_then(Conn::certificate).map(str::to_owned);
    let bearer = authorization
        .as_deref()
        .and_then(|value| value.strip_prefix(b"Bearer "))
        .ok_or_else(|| Status::unauthenticated("missing or wrong bearer token"))?;
    bearer_of(keys, bearer)
        .await?
        .caller(certificate, from, asked.as_deref())
}

/// A credential found valid, before its namespace is settled.
#[derive(Debug)]
pub struct Found {
    pub credential: Credential,
    pub role: Role,
    /// The namespace the credential is bound to; `None` for the machine's
    /// operators, who may name any.
    pub namespace: Option<String>,
}

impl Found {
    /// The caller, in the namespace `asked` names (the
    /// [`NAMESPACE_HEADER`]) where it may name one, else in its own.
    pub fn caller(
        self,
        certificate: Option<String>,
        from: String,
        asked: Option<&[u8]>,
    ) -> Result<Caller, Status> {
        let asked = match asked {
            Some(bytes) => {
                let text = std::str::from_utf8(bytes).unwrap_or("");
                holarchy_supervision::namespace::check(text).map_err(|err| {
                    Status::invalid_argument(format!("{NAMESPACE_HEADER}: {err}"))
                })?;
                Some(text.to_owned())
            }
            None => None,
        };
        let (namespace, global) = match (self.namespace, asked) {
            (None, asked) => (asked.unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned()), true),
            (Some(own), Some(asked)) if asked != own => {
                return Err(Status::permission_denied(format!(
                    "this credential acts in namespace `{own}` only, not `{asked}`"
                )))
            }
            (Some(own), _) => (own, false),
        };
        Ok(Caller {
            credential: self.credential,
            role: self.role,
            certificate,
            from,
            namespace,
            global,
        })
    }
}

/// The credential a bearer is: the bootstrap token, an OIDC token, or a
/// scoped token; or why it is none.
pub async fn bearer_of(keys: &Keys, bearer: &[u8]) -> Result<Found, Status> {
    let unauthenticated = || Status::unauthenticated("missing or wrong bearer token");
    if let Some(bootstrap) = &keys.bootstrap {
        let mut header = b"Bearer ".to_vec();
        header.extend_from_slice(bearer);
        if bootstrap.admits(Some(&header)) {
            return Ok(Found {
                credential: Credential::Bootstrap,
                role: Role::Admin,
                namespace: None,
            });
        }
    }
    if let Some(oidc) = keys.oidc.as_ref().filter(|_| Oidc::looks_like_jwt(bearer)) {
        return match oidc.verify(bearer) {
            Ok(verified) => Ok(Found {
                credential: Credential::Oidc(verified.subject),
                role: verified.role,
                namespace: Some(verified.namespace),
            }),
            Err(refused) => Err(Status::unauthenticated(refused.to_string())),
        };
    }
    if crate::access::tokens::parse(bearer).is_none() {
        return Err(unauthenticated());
    }
    let tokens = keys.tokens.clone();
    let bearer = bearer.to_vec();
    let checked = tokio::task::spawn_blocking(move || tokens.check(&bearer, audit::now_ms())).await;
    match checked {
        Ok(Ok(Some(token))) => Ok(Found {
            credential: Credential::Token(token.id),
            role: token.role,
            namespace: Some(token.namespace),
        }),
        Ok(Ok(None)) => Err(Status::unauthenticated(
            "the token is unknown, revoked or expired: ask an admin for a new one",
        )),
        Ok(Err(err)) => Err(Status::unavailable(format!(
            "cannot check the token now: {err}"
        ))),
        Err(_) => Err(Status::unavailable("cannot check the token now")),
    }
}

fn refusal(caller: &Caller, action: &str, needs: Needs) -> Status {
    Status::permission_denied(format!(
        "{action} needs the {} role and this caller ({}) has {}: ask an admin for a token with that role (`holarchy token create --role {}`)",
        needs.role,
        caller.who(),
        caller.role,
        needs.role,
    ))
}

/// The status a response carries in its headers (a refusal answered at
/// once), or OK: a unary answer that got as far as a body succeeded.
fn outcome<R>(response: &http::Response<R>) -> Status {
    let headers = response.headers();
    match headers.get("grpc-status") {
        Some(code) => {
            let code = std::str::from_utf8(code.as_bytes())
                .ok()
                .and_then(|c| c.parse::<i32>().ok())
                .map_or(tonic::Code::Unknown, tonic::Code::from);
            let message = headers
                .get("grpc-message")
                .map(|m| percent_decoded(m.as_bytes()))
                .unwrap_or_default();
            Status::new(code, message)
        }
        None => Status::ok(""),
    }
}

/// gRPC's percent-encoding of `grpc-message` undone.
fn percent_decoded(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((high * 16 + low) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn record(keys: &Keys, caller: &Caller, action: &str, target: String, status: &Status) {
    let call = audit::Call {
        caller,
        action,
        target,
        outcome: crate::metrics::code_str(status.code()),
        detail: status.message(),
        namespace: &caller.namespace,
    };
    if let Err(err) = keys.audit.record(call).await {
        // The action itself is done (or refused) and answered as such: a
        // store that cannot take the entry is failing, and the daemon's
        // store watch restarts on that.
        tracing::error!(error = %err, action, caller = %caller.who(), "cannot record an audit entry");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grpc_message_is_percent_decoded() {
        assert_eq!(percent_decoded(b"a%20b%25c"), "a b%c");
        assert_eq!(percent_decoded(b"end%2"), "end%2");
        assert_eq!(percent_decoded(b"%zz %+1x"), "%zz %+1x");
    }
}
