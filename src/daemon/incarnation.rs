//! One incarnation of the daemon's store and runtime: opened store in,
//! recovered runtime, gRPC (and HTTP) servers, until a shutdown or until
//! the disk refuses a write. sled keeps such a failure for good, so the
//! incarnation ends as a crash would (nothing acknowledged is lost: every
//! answer waited for its flush), and `daemon::run` starts the next one
//! once it takes writes (the disk, or the PostgreSQL server).

use std::fs::Permissions;
use std::future::Future;
use std::os::unix::fs::PermissionsExt;
use std::pin::Pin;
use std::sync::Arc;

use anyhow::{bail, Context};
use holarchy_actors::sandbox::SandboxReport;
use holarchy_actors::{Runtime, RuntimeConfig, ScriptedBrain};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tracing::{info, warn};

use super::gate::{GateLayer, Keys};
use super::services::{Over, Services};
use super::{disk, listen, ServeConfig, Token, SOCKET_FILE};
use crate::access::audit::Audit;
use crate::access::tokens::Tokens;
use crate::api::pb;
use crate::api::read_model::ReadModel;
use crate::store::Opened;

/// What every incarnation starts from, settled once per process.
pub(super) struct Setup<'a> {
    pub config: &'a ServeConfig,
    pub runtime_config: RuntimeConfig,
    pub tcp_token: Option<Token>,
    pub sandbox: SandboxReport,
    /// TLS for the TCP listeners, reloaded in place on SIGHUP.
    pub tls: Option<Arc<super::tls::Tls>>,
    /// OIDC tokens' verifier, its keys reloaded in place on SIGHUP.
    pub oidc: Option<Arc<crate::access::oidc::Oidc>>,
}

/// How an incarnation ended.
pub(super) enum Ended {
    /// Told to stop: the process exits.
    Shutdown,
    /// The disk refused a write or a flush; the reason.
    StoreFailed(String),
}

/// Recovers the runtime from `store` and serves until a shutdown or a
/// store failure.
pub(super) async fn serve(
    setup: &Setup<'_>,
    store: Opened,
    mut shutdown: Pin<&mut impl Future<Output = ()>>,
) -> anyhow::Result<Ended> {
    let Setup {
        config,
        runtime_config,
        tcp_token,
        sandbox,
        tls,
        oidc,
    } = setup;
    let (config, runtime_config, tcp_token, sandbox, tls, oidc) = (
        *config,
        runtime_config.clone(),
        tcp_token.clone(),
        *sandbox,
        tls.clone(),
        oidc.clone(),
    );
    let limits = &config.connections;
    let started = std::time::Instant::now();
    let runtime = Arc::new(
        Runtime::start(store.actors(), Arc::new(ScriptedBrain), runtime_config)
            .await
            .context("cannot start the runtime")?,
    );
    info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "runtime recovered"
    );

    let trimmer = tokio::spawn(crate::memory::trim_after_drops(runtime.clone()));

    let (stop_tx, stop_rx) = watch::channel(false);
    let (holding, disk_low) = disk::channel(&config.data_dir, config.min_free_disk);
    let disk_guard = tokio::spawn(disk::guard(
        disk::Watched {
            dir: config.data_dir.clone(),
            min_free: config.min_free_disk,
            max_flush: config.max_flush_stall,
            store: store.clone(),
            runtime: runtime.clone(),
        },
        holding,
        stop_rx.clone(),
    ));
    let socket = config.data_dir.join(SOCKET_FILE);
    // We hold the lock, so a socket file left here is a dead daemon's.
    let _ = std::fs::remove_file(&socket);
    let unix =
        UnixListener::bind(&socket).with_context(|| format!("cannot bind {}", socket.display()))?;
    std::fs::set_permissions(&socket, Permissions::from_mode(0o600))?;
    // Bound before either server answers: a client that saw SERVING on the
    // socket finds TCP listening too.
    let tcp_listener = match config.listen {
        Some(addr) => Some(
            TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?,
        ),
        None => None,
    };
    let http_listener = match &config.http {
        Some(http) => Some(
            TcpListener::bind(http.listen)
                .await
                .with_context(|| format!("cannot listen for webhooks on {}", http.listen))?,
        ),
        None => None,
    };

    let tokens = Arc::new(Tokens::new(store.access()));
    let audit = Arc::new(Audit::new(store.access(), config.audit_retention));
    let quotas = crate::access::quotas::Quotas::new(store.access(), runtime.clone(), reads(&store));
    {
        let quotas = quotas.clone();
        tokio::task::spawn_blocking(move || quotas.load())
            .await
            .context("reading the namespaces' quotas")?
            .context("cannot read the namespaces' quotas")?;
    }
    let quota_refresh = tokio::spawn(quotas.clone().refresh_until(stop_rx.clone()));
    let event_retention = config.event_retention.map(|keep| {
        tokio::spawn(super::retention::trim_until(
            store.clone(),
            keep,
            stop_rx.clone(),
        ))
    });
    let replays = crate::replay::Replays::open(
        runtime.clone(),
        reads(&store),
        replay_store(&store),
        config.replay_turns_per_second,
    )
    .await
    .context("cannot read the stored replays")?;
    let services = Services::new(Over {
        runtime: runtime.clone(),
        store: reads(&store),
        data_dir: config.data_dir.clone(),
        sandbox,
        stop: stop_rx.clone(),
        tokens: tokens.clone(),
        audit: audit.clone(),
        quotas,
        listeners: listeners(
            &socket,
            tcp_listener.as_ref(),
            http_listener.as_ref(),
            tls.is_some(),
        ),
        replays: replays.clone(),
    })
    .await?;
    let scopes = Arc::new(crate::api::scope::Scopes::new(
        reads(&store),
        runtime.clone(),
    ));
    let unix_keys = Arc::new(Keys {
        bootstrap: None,
        tokens: tokens.clone(),
        audit: audit.clone(),
        oidc: None,
        scopes: scopes.clone(),
        disk: disk_low.clone(),
        runtime: runtime.clone(),
    });

    let mut grpc_metrics = crate::metrics::GrpcMetrics::new(&[
        pb::FILE_DESCRIPTOR_SET,
        tonic_health::pb::FILE_DESCRIPTOR_SET,
    ]);
    if !config.runtime.metrics {
        grpc_metrics = grpc_metrics.off();
    }
    let metrics = Arc::new(if config.runtime.metrics {
        crate::metrics::Metrics::new(runtime.clone(), store.clone(), &grpc_metrics)
    } else {
        crate::metrics::Metrics::off()
    });
    let router = limits
        .server()
        .layer(crate::metrics::GrpcLayer(grpc_metrics.clone()))
        .layer(GateLayer(unix_keys))
        .layer(disk::GuardLayer(disk_low.clone()))
        .add_routes(services.routes());
    let mut unix_stop = stop_rx.clone();
    let unix_server = tokio::spawn(router.serve_with_incoming_shutdown(
        listen::unix(unix, limits),
        async move {
            let _ = unix_stop.wait_for(|s| *s).await;
        },
    ));

    let (public_read, allowed_hosts) = config.http.as_ref().map_or_else(Default::default, |h| {
        (h.console_public_read, h.allowed_hosts.clone())
    });
    // What TCP callers (gRPC and the console) may show.
    let tcp_keys = tcp_token.map(|token| {
        Arc::new(Keys {
            bootstrap: Some(token),
            tokens,
            audit,
            oidc: oidc.clone(),
            scopes,
            disk: disk_low.clone(),
            runtime: runtime.clone(),
        })
    });
    let console = tcp_keys.clone().map(|keys| {
        Arc::new(
            crate::web::console::Console::new(
                runtime.clone(),
                reads(&store),
                replays.clone(),
                keys,
                stop_rx.clone(),
            )
            .public_read(public_read)
            .allowed_hosts(allowed_hosts),
        )
    });
    let tcp_server = match (tcp_listener, tcp_keys) {
        (Some(listener), Some(keys)) => {
            info!(
                addr = %listener.local_addr()?,
                tls = tls.is_some(),
                client_certificates = tls.as_ref().is_some_and(|t| t.requires_client_certificates()),
                max_connections = limits.max_tcp,
                auth_timeout_s = limits.auth_timeout.as_secs_f64(),
                idle_timeout_s = limits.idle_timeout.as_secs_f64(),
                "listening on tcp"
            );
            let mut tcp_stop = stop_rx.clone();
            let router = limits
                .server()
                .layer(crate::metrics::GrpcLayer(grpc_metrics))
                .layer(GateLayer(keys))
                .layer(listen::TrackStreamsLayer)
                .layer(disk::GuardLayer(disk_low.clone()))
                .add_routes(services.routes());
            let stopped = async move {
                let _ = tcp_stop.wait_for(|s| *s).await;
            };
            let connections = listen::tcp(listener, limits);
            Some(match tls.clone() {
                Some(tls) => tokio::spawn(router.serve_with_incoming_shutdown(
                    listen::tls(connections, tls, limits.max_tcp),
                    stopped,
                )),
                None => tokio::spawn(router.serve_with_incoming_shutdown(connections, stopped)),
            })
        }
        _ => None,
    };
    let mut http_server = match (http_listener, config.http.clone(), console) {
        (Some(listener), Some(http), Some(console)) => Some(crate::web::serve(
            listener,
            crate::web::HttpConfig { tls, ..http },
            runtime.clone(),
            metrics,
            console,
            disk_low.clone(),
            stop_rx.clone(),
        )),
        _ => None,
    };
    info!(socket = %socket.display(), "serving");
    // The socket is bound and its server runs: a client connecting now is
    // answered, so a unit that waits for this can be used at once.
    config.notify.send("READY=1\nSTATUS=serving");

    // The root supervisor stopping on its own would leave a daemon that
    // answers SERVING but can do nothing: shut down and report it instead.
    let (root_died, failed) = tokio::select! {
        () = shutdown.as_mut() => (false, None),
        () = runtime.stopped() => (true, None),
        why = store.failed() => (false, Some(why)),
    };
    // sled can hang a flush after a refused write while holding its lock
    // (see `disk`), freezing every thread that reads: then no timeout
    // below can fire. A plain thread ends the process instead, leaving
    // the store as a crash would (nothing acknowledged is lost), for a
    // service manager to start again.
    let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    if failed.is_some() {
        let stopped = stopped.clone();
        let limit = config.shutdown_timeout.saturating_mul(3);
        let _ = std::thread::Builder::new()
            .name("store-watchdog".into())
            .spawn(move || {
                std::thread::sleep(limit);
                if !stopped.load(std::sync::atomic::Ordering::SeqCst) {
                    tracing::error!("the store hung after the disk refused a write: exiting so the daemon can be started again");
                    std::process::exit(75);
                }
            });
    }
    info!("shutting down");
    match &failed {
        None => config.notify.send("STOPPING=1\nSTATUS=shutting down"),
        Some(_) => config
            .notify
            .send("STATUS=the store failed: opening it again once it takes writes"),
    }
    let _ = stop_tx.send(true);
    services.not_serving().await;
    let timeout = config.shutdown_timeout;
    for server in [Some(unix_server), tcp_server].into_iter().flatten() {
        match tokio::time::timeout(timeout, server).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(err))) => warn!(error = %err, "grpc server ended with an error"),
            Ok(Err(join)) => warn!(error = %join, "grpc server task failed"),
            Err(_) => warn!("grpc server did not drain in time"),
        }
    }
    // Webhooks under way need the runtime; probes go on answering
    // `/readyz` 503 until it has stopped.
    if let Some(server) = http_server.as_mut() {
        if tokio::time::timeout(timeout, server.drained())
            .await
            .is_err()
        {
            warn!("webhook server did not drain in time");
        }
    }
    // Replays run on the runtime's brains: stopped (each marked
    // interrupted, to be resumed) before it is.
    replays.shutdown().await;
    runtime.shutdown(timeout).await;
    if let Some(server) = http_server {
        match tokio::time::timeout(timeout, server.close()).await {
            Ok(Ok(())) => {}
            Ok(Err(join)) => warn!(error = %join, "webhook server task failed"),
            Err(_) => warn!("webhook server did not close in time"),
        }
    }
    trimmer.abort();
    let _ = disk_guard.await;
    let _ = quota_refresh.await;
    if let Some(trimming) = event_retention {
        let _ = trimming.await;
    }
    store.close().await;
    let _ = std::fs::remove_file(&socket);
    stopped.store(true, std::sync::atomic::Ordering::SeqCst);
    if let Some(why) = failed {
        info!("store and runtime stopped after a store failure");
        return Ok(Ended::StoreFailed(why));
    }
    info!("stopped");
    if root_died {
        bail!("the runtime's root supervisor stopped unexpectedly; see the log above");
    }
    Ok(Ended::Shutdown)
}

/// Where the daemon answers, one line each, as `holarchy status` shows it.
fn listeners(
    socket: &std::path::Path,
    grpc: Option<&TcpListener>,
    http: Option<&TcpListener>,
    tls: bool,
) -> Vec<String> {
    let addr = |l: &TcpListener| {
        l.local_addr()
            .map_or_else(|_| "?".to_owned(), |a| a.to_string())
    };
    let scheme = if tls { "https" } else { "http" };
    let mut out = vec![format!("unix {}", socket.display())];
    if let Some(grpc) = grpc {
        let secured = if tls { " (tls)" } else { " (plain text)" };
        out.push(format!("grpc {}{secured}", addr(grpc)));
    }
    if let Some(http) = http {
        let at = addr(http);
        out.push(format!(
            "http {at}: webhooks, /metrics, console {scheme}://{at}/"
        ));
    }
    out
}

/// The store as replays keep their records.
fn replay_store(store: &Opened) -> Arc<dyn crate::replay::store::ReplayStore> {
    match store {
        Opened::Sled(store) => store.clone(),
        Opened::Postgres(store) => store.clone(),
    }
}

/// The store as the services read it.
fn reads(store: &Opened) -> Arc<dyn ReadModel> {
    match store {
        Opened::Sled(store) => store.clone(),
        Opened::Postgres(store) => store.clone(),
    }
}
