//! The daemon's HTTP listener, `serve --http-listen ADDR`: signed webhook
//! deliveries on `POST /ingress/<provider>/<instance>` (see [`webhook`]
//! for what each answer means), the operators' `/healthz`, `/readyz`
//! and `/metrics` (see [`operator`]), and the web console at `/` with its
//! JSON API under `/api/` (see [`console`]).
//!
//! Plain HTTP/1.1 on the hyper that tonic already runs, on the daemon's
//! tokio runtime. Every resource a sender can hold is bounded: connections
//! (a pool, of which one peer holds at most its share, and a reserve that
//! keeps the health routes answering; see [`admission`]), the time to send
//! the headers (shorter while the pool is nearly full), the body's size
//! (checked against `Content-Length` before a byte of it is read, then
//! while reading), and the time one request may take. On shutdown it stops
//! accepting, lets requests under way finish within a grace period, and
//! ends.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use holarchy_actors::Runtime;
use http_body_util::BodyExt;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

pub mod admission;
pub mod console;
pub mod host;
pub mod operator;
pub mod webhook;

use admission::{Admission, Pool, Slot};
use console::Console;

/// The body limit when `--max-webhook-bytes` is not given: 1 MiB, as the
/// event contract's payload limit.
pub const DEFAULT_MAX_BODY: usize = holarchy_composition::event::DEFAULT_MAX_PAYLOAD_BYTES;

/// Connections one peer may hold when `--http-max-connections-per-peer`
/// is not given.
pub const DEFAULT_MAX_PER_PEER: usize = 32;
/// The header (and idle) timeout of a connection admitted while the pool
/// is nearly full, and of every connection of the reserve.
const PRESSED_HEADER_TIMEOUT: Duration = Duration::from_secs(2);

/// How the webhook endpoint runs.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    pub listen: SocketAddr,
    /// Largest body taken; a larger one is answered 413 unread.
    pub max_body: usize,
    /// Connections served at once (beside the health routes' reserve).
    pub max_connections: usize,
    /// Of those, what one peer (an IPv4 address, an IPv6 /64) may hold; 0:
    /// no bound (`serve --http-max-connections-per-peer`).
    pub max_connections_per_peer: usize,
    /// Time a client has to send its request's headers.
    pub header_timeout: Duration,
    /// Time one request may take, body and routing included.
    pub request_timeout: Duration,
    /// Time requests under way get to finish at shutdown.
    pub shutdown_grace: Duration,
    /// Anyone who can reach the console reads its read-only view (the
    /// tree, states, counts) without the token
    /// (`serve --console-public-read`).
    pub console_public_read: bool,
    /// Names the console answers under beside IP addresses and
    /// `localhost` (`serve --http-allowed-host`).
    pub allowed_hosts: host::AllowedHosts,
}

impl HttpConfig {
    pub fn new(listen: SocketAddr, max_body: usize) -> Self {
        Self {
            listen,
            max_body,
            max_connections: 256,
            max_connections_per_peer: DEFAULT_MAX_PER_PEER,
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(5),
            console_public_read: false,
            allowed_hosts: host::AllowedHosts::default(),
        }
    }
}

/// What every connection's task shares.
struct Shared {
    config: HttpConfig,
    runtime: Arc<Runtime>,
    metrics: Arc<crate::metrics::Metrics>,
    console: Arc<Console>,
    disk_low: crate::daemon::DiskLow,
}

/// Serves webhooks, the operators' routes and the console on `listener`
/// until `stop` turns true, then drains.
pub async fn serve(
    listener: TcpListener,
    config: HttpConfig,
    runtime: Arc<Runtime>,
    metrics: Arc<crate::metrics::Metrics>,
    console: Arc<Console>,
    disk_low: crate::daemon::DiskLow,
    mut stop: watch::Receiver<bool>,
) {
    info!(
        addr = %config.listen,
        max_body = config.max_body,
        max_connections = config.max_connections,
        max_connections_per_peer = config.max_connections_per_peer,
        "serving webhooks over http"
    );
    let admission = Admission::new(config.max_connections, config.max_connections_per_peer);
    let shared = Arc::new(Shared {
        config,
        runtime,
        metrics,
        console,
        disk_low,
    });
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            () = admission.room() => {}
            () = stopped(&mut stop) => break,
        }
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stopped(&mut stop) => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(err) => {
                // Out of descriptors, say: keep serving the others.
                warn!(error = %err, "webhook accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(slot) = admission.admit(peer.ip()) else {
            // Dropping the stream closes it: the peer holds its share and
            // the reserve's, or the reserve is full.
            debug!(peer = %peer, "http connection refused: the peer holds its share");
            continue;
        };
        // Reap finished connections so the set stays small.
        while connections.try_join_next().is_some() {}
        connections.spawn(connection(stream, peer, slot, shared.clone(), stop.clone()));
    }
    drop(listener);
    let grace = shared.config.shutdown_grace;
    if tokio::time::timeout(grace, async {
        while connections.join_next().await.is_some() {}
    })
    .await
    .is_err()
    {
        warn!("webhook connections did not drain in time");
        connections.abort_all();
    }
}

/// Serves one connection until it ends, or until `stop` and a grace
/// period; its `slot` is given back when it ends.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    slot: Slot,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let header_timeout = match slot.pool {
        Pool::General { pressed: false } => shared.config.header_timeout,
        Pool::General { pressed: true } | Pool::Reserve => {
            shared.config.header_timeout.min(PRESSED_HEADER_TIMEOUT)
        }
    };
    let grace = shared.config.shutdown_grace;
    let health_only = slot.pool == Pool::Reserve;
    let stopping = stop.clone();
    let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
        let shared = shared.clone();
        let disk_low = shared.disk_low.borrow().clone();
        let operator = match disk_low {
            Some(why) if request.uri().path() == "/readyz" && !*stopping.borrow() => {
                Some(operator::not_ready(&why))
            }
            _ => operator::answer(
                request.method(),
                request.uri().path(),
                &shared.metrics,
                *stopping.borrow(),
            ),
        };
        async move {
            if health_only {
                return Ok::<_, Infallible>(operator::health_or_busy(
                    request.uri().path(),
                    operator,
                ));
            }
            if let Some(answer) = operator {
                return Ok(answer.map(BodyExt::boxed_unsync));
            }
            let timeout = shared.config.request_timeout;
            // The timeout bounds the time to the answer's head: a console
            // event stream goes on after it, bounded apart.
            let answer = if Console::owns(request.uri().path()) {
                tokio::time::timeout(timeout, shared.console.handle(request))
                    .await
                    .unwrap_or_else(|_| webhook::timed_out().map(BodyExt::boxed_unsync))
            } else {
                tokio::time::timeout(
                    timeout,
                    webhook::handle(&shared.runtime, shared.config.max_body, request),
                )
                .await
                .unwrap_or_else(|_| webhook::timed_out())
                .map(BodyExt::boxed_unsync)
            };
            Ok(answer)
        }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        // A reserve connection answers one probe, then gives its place back.
        .keep_alive(!health_only);
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    let ended = tokio::select! {
        ended = connection.as_mut() => ended,
        () = stopped(&mut stop) => {
            connection.as_mut().graceful_shutdown();
            match tokio::time::timeout(grace, connection).await {
                Ok(ended) => ended,
                Err(_) => Ok(()),
            }
        }
    };
    if let Err(err) = ended {
        debug!(peer = %peer, error = %err, "webhook connection ended with an error");
    }
    drop(slot);
}

/// Resolves once `stop` turns true (or its sender is gone). The guard
/// `wait_for` returns is dropped here, so no caller holds it across an
/// await.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}
