//! The daemon's HTTP listener, `serve --http-listen ADDR`: signed webhook
//! deliveries on `POST /ingress/<provider>/<instance>` (see [`webhook`]
//! for what each answer means), the operators' `/healthz`, `/readyz`
//! and `/metrics` (see [`operator`]), and the web console at `/` with its
//! JSON API under `/api/` (see [`console`]).
//!
//! Plain HTTP/1.1 on the hyper that tonic already runs, on the daemon's
//! tokio runtime. Every resource a sender can hold is bounded: connections
//! (a semaphore; past it, new connections wait in the kernel's backlog),
//! the time to send the headers, the body's size (checked against
//! `Content-Length` before a byte of it is read, then while reading), and
//! the time one request may take. On shutdown it stops accepting, lets
//! requests under way finish within a grace period, and ends.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use holarchy_actors::Runtime;
use http_body_util::BodyExt;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

pub mod console;
pub mod operator;
pub mod webhook;

use console::Console;

/// The body limit when `--max-webhook-bytes` is not given: 1 MiB, as the
/// event contract's payload limit.
pub const DEFAULT_MAX_BODY: usize = holarchy_composition::event::DEFAULT_MAX_PAYLOAD_BYTES;

/// How the webhook endpoint runs.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    pub listen: SocketAddr,
    /// Largest body taken; a larger one is answered 413 unread.
    pub max_body: usize,
    /// Connections served at once.
    pub max_connections: usize,
    /// Time a client has to send its request's headers.
    pub header_timeout: Duration,
    /// Time one request may take, body and routing included.
    pub request_timeout: Duration,
    /// Time requests under way get to finish at shutdown.
    pub shutdown_grace: Duration,
    /// Every console route but the page and its login check takes the
    /// token (`serve --console-private`).
    pub console_private: bool,
}

impl HttpConfig {
    pub fn new(listen: SocketAddr, max_body: usize) -> Self {
        Self {
            listen,
            max_body,
            max_connections: 256,
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(5),
            console_private: false,
        }
    }
}

/// Serves webhooks, the operators' routes and the console on `listener`
/// until `stop` turns true, then drains.
pub async fn serve(
    listener: TcpListener,
    config: HttpConfig,
    runtime: Arc<Runtime>,
    metrics: Arc<crate::metrics::Metrics>,
    console: Arc<Console>,
    mut stop: watch::Receiver<bool>,
) {
    info!(
        addr = %config.listen,
        max_body = config.max_body,
        max_connections = config.max_connections,
        "serving webhooks over http"
    );
    let slots = Arc::new(Semaphore::new(config.max_connections.max(1)));
    let mut connections = JoinSet::new();
    loop {
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = stopped(&mut stop) => break,
        };
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
        let runtime = runtime.clone();
        let metrics = metrics.clone();
        let console = console.clone();
        let config = config.clone();
        let mut stop = stop.clone();
        let stopping = stop.clone();
        // Reap finished connections so the set stays small.
        while connections.try_join_next().is_some() {}
        connections.spawn(async move {
            let _permit = permit;
            let (header_timeout, grace) = (config.header_timeout, config.shutdown_grace);
            let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let runtime = runtime.clone();
                let console = console.clone();
                let config = config.clone();
                let operator = operator::answer(
                    request.method(),
                    request.uri().path(),
                    &metrics,
                    *stopping.borrow(),
                );
                async move {
                    if let Some(answer) = operator {
                        return Ok::<_, Infallible>(answer.map(BodyExt::boxed_unsync));
                    }
                    // The timeout bounds the time to the answer's head: a
                    // console event stream goes on after it, bounded apart.
                    let answer = if Console::owns(request.uri().path()) {
                        tokio::time::timeout(config.request_timeout, console.handle(request))
                            .await
                            .unwrap_or_else(|_| webhook::timed_out().map(BodyExt::boxed_unsync))
                    } else {
                        tokio::time::timeout(
                            config.request_timeout,
                            webhook::handle(&runtime, config.max_body, request),
                        )
                        .await
                        .unwrap_or_else(|_| webhook::timed_out())
                        .map(BodyExt::boxed_unsync)
                    };
                    Ok::<_, Infallible>(answer)
                }
            });
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout);
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
        });
    }
    drop(listener);
    let grace = config.shutdown_grace;
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

/// Resolves once `stop` turns true (or its sender is gone). The guard
/// `wait_for` returns is dropped here, so no caller holds it across an
/// await.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}
