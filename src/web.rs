//! The daemon's HTTP listener, `serve --http-listen ADDR`: signed webhook
//! deliveries on `POST /ingress/<provider>/<instance>` (see [`webhook`]
//! for what each answer means), the operators' `/healthz`, `/readyz`
//! and `/metrics` (see [`operator`]), and the web console at `/` with its
//! JSON API under `/api/` (see [`console`]).
//!
//! Plain HTTP/1.1 on the hyper that tonic already runs, on the daemon's
//! tokio runtime. Every resource a sender can hold is bounded: connections
//! (a pool, of which one peer holds at most its share, and a reserve that
//! keeps the health routes answering; see [`connections`]), the time to send
//! the headers (shorter while the pool is nearly full), the body's size
//! (checked against `Content-Length` before a byte of it is read, then
//! while reading), and the time one request may take. On shutdown it
//! answers probes only (`/readyz` 503), lets requests under way finish
//! within a grace period, and ends once the runtime has stopped (see
//! [`Serving`]).

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
use tokio::sync::{oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};
use tracing::{debug, info, warn};

use crate::daemon::tls::{Alpn, MaybeTls};

pub mod connections;
pub mod console;
pub mod host;
pub mod operator;
pub mod webhook;

use connections::{Connections, Pool, Slot};
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
    /// TLS on this listener (`serve --tls-cert`): set by the daemon, which
    /// reloads it on SIGHUP.
    pub tls: Option<Arc<crate::daemon::tls::Tls>>,
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
            tls: None,
        }
    }
}

/// What every connection's task shares.
struct Shared {
    connections: Connections,
    config: HttpConfig,
    runtime: Arc<Runtime>,
    metrics: Arc<crate::metrics::Metrics>,
    console: Arc<Console>,
    disk_low: crate::daemon::DiskLow,
}

/// The listener as the daemon's shutdown sees it. At the stop, the
/// listener keeps accepting, but only for probes: `/readyz` answers 503
/// (`stopping`) and anything else but `/healthz` 503 with `Retry-After`,
/// so a load balancer takes the daemon out of rotation and a webhook
/// sender retries, rather than both meeting a closed port while the
/// daemon drains. The requests under way at the stop finish (within the
/// grace) before [`Serving::drained`] resolves, so the runtime they need
/// outlives them; [`Serving::close`] ends the listener once the runtime
/// has stopped.
#[derive(Debug)]
pub struct Serving {
    drained: oneshot::Receiver<()>,
    close: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl Serving {
    /// Resolves once the requests under way at the stop have ended.
    pub async fn drained(&mut self) {
        // A listener that ended early has nothing under way either.
        let _ = (&mut self.drained).await;
    }

    /// Stops accepting, lets the probes under way finish, and ends.
    pub async fn close(self) -> Result<(), tokio::task::JoinError> {
        let _ = self.close.send(true);
        self.task.await
    }
}

/// Serves webhooks, the operators' routes and the console on `listener`
/// until `stop` turns true, then only probes until [`Serving::close`].
pub fn serve(
    listener: TcpListener,
    config: HttpConfig,
    runtime: Arc<Runtime>,
    metrics: Arc<crate::metrics::Metrics>,
    console: Arc<Console>,
    disk_low: crate::daemon::DiskLow,
    stop: watch::Receiver<bool>,
) -> Serving {
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    info!(
        addr = %config.listen,
        console = %format!("{scheme}://{}/", config.listen),
        max_body = config.max_body,
        max_connections = config.max_connections,
        max_connections_per_peer = config.max_connections_per_peer,
        "serving webhooks, the operators' routes and the web console over {scheme}"
    );
    let (close, closed) = watch::channel(false);
    let (drained_tx, drained) = oneshot::channel();
    let shared = Arc::new(Shared {
        connections: Connections::new(config.max_connections, config.max_connections_per_peer),
        config,
        runtime,
        metrics,
        console,
        disk_low,
    });
    let task = tokio::spawn(async move {
        let mut connections = JoinSet::new();
        accept(&listener, &shared, &mut connections, &stop, stop.clone()).await;
        let grace = shared.config.shutdown_grace;
        let mut probes = JoinSet::new();
        let under_way = async {
            drain(connections, grace).await;
            let _ = drained_tx.send(());
        };
        tokio::join!(
            under_way,
            accept(&listener, &shared, &mut probes, &stop, closed)
        );
        drop(listener);
        drain(probes, grace).await;
    });
    Serving {
        drained,
        close,
        task,
    }
}

/// Accepts connections into `connections` until `until` turns true; each
/// answers as `stop` says (everything, or probes only once it is true).
async fn accept(
    listener: &TcpListener,
    shared: &Arc<Shared>,
    connections: &mut JoinSet<()>,
    stop: &watch::Receiver<bool>,
    mut until: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            () = shared.connections.room() => {}
            () = stopped(&mut until) => return,
        }
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stopped(&mut until) => return,
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
        let Some(slot) = shared.connections.admit(peer.ip()) else {
            // Dropping the stream closes it: the peer holds its share and
            // the reserve's, or the reserve is full.
            debug!(peer = %peer, "http connection refused: the peer holds its share");
            continue;
        };
        // Reap finished connections so the set stays small.
        while connections.try_join_next().is_some() {}
        connections.spawn(connection(
            stream,
            peer,
            slot,
            shared.clone(),
            stop.clone(),
            until.clone(),
        ));
    }
}

/// Waits for `connections` to end, at most `grace`, then ends the rest.
async fn drain(mut connections: JoinSet<()>, grace: Duration) {
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

/// Serves one connection until it ends, or until `end` and a grace
/// period; its `slot` is given back when it ends. Admitted after the
/// daemon's `stop`, it answers one probe, as the reserve does.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    slot: Slot,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
    mut end: watch::Receiver<bool>,
) {
    let header_timeout = match slot.pool {
        Pool::General { pressed: false } => shared.config.header_timeout,
        Pool::General { pressed: true } | Pool::Reserve => {
            shared.config.header_timeout.min(PRESSED_HEADER_TIMEOUT)
        }
    };
    // The handshake gets the time the headers get: a peer that stalls in
    // it holds its place no longer than one that stalls in its request.
    let stream = match &shared.config.tls {
        None => MaybeTls::Plain(stream),
        Some(tls) => {
            let handshake = tls.acceptor(Alpn::Http1).accept(stream);
            match tokio::time::timeout(header_timeout, handshake).await {
                Ok(Ok(secured)) => MaybeTls::Tls(Box::new(secured)),
                Ok(Err(err)) => {
                    debug!(peer = %peer, error = %err, "a TLS handshake failed");
                    return;
                }
                Err(_) => {
                    debug!(peer = %peer, "a TLS handshake timed out");
                    return;
                }
            }
        }
    };
    let grace = shared.config.shutdown_grace;
    let health_only = slot.pool == Pool::Reserve || *stop.borrow();
    let stopping = stop;
    let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
        let shared = shared.clone();
        // Anything but a read writes (a webhook's event, a console action):
        // held back with the gRPC calls that write.
        let held =
            if request.method() == hyper::Method::GET || request.method() == hyper::Method::HEAD {
                None
            } else {
                shared.disk_low.refuses_writes()
            };
        let operator = match shared.disk_low.held() {
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
            if let Some(why) = held {
                return Ok(operator::held(&why).map(BodyExt::boxed_unsync));
            }
            let timeout = shared.config.request_timeout;
            // The timeout bounds the time to the answer's head: a console
            // event stream goes on after it, bounded apart.
            let answer = if Console::owns(request.uri().path()) {
                tokio::time::timeout(timeout, shared.console.handle(request, peer))
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
        () = stopped(&mut end) => {
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
