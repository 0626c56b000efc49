//! `holarchy serve`: owns a data directory, recovers the runtime from it,
//! and serves the gRPC API on a Unix socket (and, when asked, on TCP with a
//! bearer token) until told to stop.
//!
//! Shutdown order: stop accepting gRPC (open watches end), stop the actors
//! top-down, then flush and close the store.

mod listen;
pub mod process;
mod safe_dirs;
pub mod token;

pub use listen::ConnectionLimits;
pub use token::{GivenToken, Token, MIN_TOKEN_LEN};

use std::fs::{File, OpenOptions, Permissions};
use std::future::Future;
use std::io::Write as _;
use std::net::SocketAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use holarchy_actors::sandbox::SandboxReport;
use holarchy_actors::{Runtime, RuntimeConfig, ScriptedBrain};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;
use tonic::service::InterceptorLayer;
use tracing::{info, warn};

use crate::api::agent_service::AgentApi;
use crate::api::approval_service::ApprovalApi;
use crate::api::budget::MAX_GRPC_MESSAGE_BYTES;
use crate::api::instance_service::InstanceApi;
use crate::api::memory_service::MemoryApi;
use crate::api::pb;
use crate::api::pb::agent_service_server::AgentServiceServer;
use crate::api::pb::approval_service_server::ApprovalServiceServer;
use crate::api::pb::instance_service_server::InstanceServiceServer;
use crate::api::pb::memory_service_server::MemoryServiceServer;
use crate::api::pb::runtime_service_server::RuntimeServiceServer;
use crate::api::pb::supervision_service_server::SupervisionServiceServer;
use crate::api::pb::task_service_server::TaskServiceServer;
use crate::api::pb::trigger_service_server::TriggerServiceServer;
use crate::api::pb::work_service_server::WorkServiceServer;
use crate::api::pb::workspace_service_server::WorkspaceServiceServer;
use crate::api::plane_service::PlaneApi;
use crate::api::runtime_service::RuntimeApi;
use crate::api::supervision_service::SupervisionApi;
use crate::api::task_service::TaskApi;
use crate::api::workspace_service::WorkspaceApi;
use crate::store::sled_store::StoreConfig;
use crate::store::SledStore;

/// File names inside the data directory.
pub const SOCKET_FILE: &str = "holarchy.sock";
pub const LOCK_FILE: &str = "holarchy.lock";
pub const TOKEN_FILE: &str = "token";
const DB_DIR: &str = "db";
const WORKSPACES_DIR: &str = "workspaces";
const WORKTREES_DIR: &str = "worktrees";
/// Agents' private directories (HOME and TMPDIR of their programs).
const TMP_DIR: &str = "tmp";

/// How the daemon runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub data_dir: PathBuf,
    /// Also listen on TCP here; callers then need the bearer token.
    pub listen: Option<SocketAddr>,
    /// The TCP bearer token as given; if neither value is set, read from
    /// `<data>/token`, or made up and written there.
    pub token: GivenToken,
    /// Caps and timeouts on connections.
    pub connections: ConnectionLimits,
    /// How long each shutdown step may take.
    pub shutdown_timeout: Duration,
    pub store: StoreConfig,
    pub runtime: RuntimeConfig,
    /// Refuse to start unless agents' programs can be fully confined.
    pub require_sandbox: bool,
    /// Serve webhooks over HTTP (see `ingress`); off when `None`.
    pub http: Option<crate::ingress::HttpConfig>,
}

impl ServeConfig {
    pub fn new(data_dir: PathBuf) -> Self {
        Self {
            data_dir,
            listen: None,
            token: GivenToken::default(),
            connections: ConnectionLimits::default(),
            shutdown_timeout: Duration::from_secs(10),
            store: StoreConfig::default(),
            runtime: RuntimeConfig::default(),
            require_sandbox: false,
            http: None,
        }
    }
}

/// The data directory the CLI uses when neither `--data-dir` nor
/// `HOLARCHY_DATA_DIR` names one.
pub fn default_data_dir() -> PathBuf {
    dirs::data_dir()
        .map(|d| d.join("holarchy"))
        .unwrap_or_else(|| PathBuf::from(".holarchy"))
}

/// Holds the data directory's lock for the daemon's lifetime. The OS drops
/// the lock if the process dies, even by `kill -9`.
#[derive(Debug)]
struct DirLock {
    _file: File,
}

fn lock_data_dir(dir: &Path) -> anyhow::Result<DirLock> {
    let path = dir.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("cannot open lock file {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            bail!(
                "another holarchy daemon already serves {} (pid {})",
                dir.display(),
                holder.trim()
            );
        }
        Err(std::fs::TryLockError::Error(err)) => {
            return Err(err).with_context(|| format!("cannot lock {}", path.display()));
        }
    }
    file.set_len(0)?;
    write!(file, "{}", std::process::id())?;
    Ok(DirLock { _file: file })
}

/// The data directory and the directories the daemon keeps in it, each
/// made 0700 or checked that no other user can write into it.
fn prepare_dirs(data_dir: &Path) -> anyhow::Result<()> {
    safe_dirs::prepare(data_dir).context("unsafe data directory")?;
    for sub in [DB_DIR, WORKSPACES_DIR, WORKTREES_DIR, TMP_DIR] {
        safe_dirs::prepare(&data_dir.join(sub))
            .context("unsafe directory in the data directory")?;
    }
    Ok(())
}

/// Runs the daemon until `shutdown` resolves.
pub async fn run(config: ServeConfig, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    process::harden();
    prepare_dirs(&config.data_dir)?;
    let _lock = lock_data_dir(&config.data_dir)?;
    // Settled before anything starts, so a bad token or token file refuses
    // the start at once.
    // The web console on the HTTP listener takes the same token as TCP.
    let tcp_token = match config.listen.or(config.http.as_ref().map(|h| h.listen)) {
        Some(_) => Some(token::resolve(
            &config.token,
            &config.data_dir.join(TOKEN_FILE),
        )?),
        None => {
            token::check_given(&config.token)?;
            None
        }
    };
    if let Some(token) = &tcp_token {
        config.runtime.secrets.add(token.as_str());
    }
    let limits = &config.connections;

    let sandbox = SandboxReport::probe();
    if sandbox.complete() {
        info!(sandbox = %sandbox.describe(), "agents' programs are confined");
    } else if config.require_sandbox {
        bail!(
            "--require-sandbox: agents' programs cannot be fully confined here ({})",
            sandbox.describe()
        );
    } else {
        warn!(sandbox = %sandbox.describe(), "agents' programs are not fully confined");
    }

    let mut runtime_config = config.runtime.clone();
    runtime_config.workspace_root = config.data_dir.join(WORKSPACES_DIR);
    runtime_config.worktree_root = config.data_dir.join(WORKTREES_DIR);
    runtime_config.sandbox.tmp_root = config.data_dir.join(TMP_DIR);
    runtime_config
        .sandbox
        .protected
        .push(config.data_dir.clone());
    let store = Arc::new(
        SledStore::open(&config.data_dir.join(DB_DIR), &config.store)
            .context("cannot open the store")?,
    );
    let started = std::time::Instant::now();
    let runtime = Arc::new(
        Runtime::start(store.clone(), Arc::new(ScriptedBrain), runtime_config)
            .await
            .context("cannot start the runtime")?,
    );
    info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "runtime recovered"
    );

    let trimmer = tokio::spawn(crate::memory::trim_after_drops(runtime.clone()));

    let (stop_tx, stop_rx) = watch::channel(false);
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<AgentServiceServer<AgentApi>>().await;
    health
        .set_serving::<RuntimeServiceServer<RuntimeApi>>()
        .await;
    let reflection_v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let reflection_v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()?;
    // Every service decodes and encodes at most MAX_GRPC_MESSAGE_BYTES,
    // set here rather than left to tonic's defaults (which do not bound
    // what the server sends); responses stay far below it (api::budget).
    let agents = AgentServiceServer::new(AgentApi::new(
        runtime.clone(),
        store.clone(),
        stop_rx.clone(),
    ))
    .max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES)
    .max_encoding_message_size(MAX_GRPC_MESSAGE_BYTES);
    let status = RuntimeServiceServer::new(RuntimeApi::new(
        runtime.clone(),
        store.clone(),
        config.data_dir.clone(),
        sandbox,
    ))
    .max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES)
    .max_encoding_message_size(MAX_GRPC_MESSAGE_BYTES);

    let tasks = TaskServiceServer::new(TaskApi::new(runtime.clone(), stop_rx.clone()))
        .max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_GRPC_MESSAGE_BYTES);
    let work = WorkServiceServer::new(PlaneApi::new(runtime.clone(), store.clone()))
        .max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_GRPC_MESSAGE_BYTES);
    let triggers = TriggerServiceServer::new(PlaneApi::new(runtime.clone(), store.clone()))
        .max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_GRPC_MESSAGE_BYTES);
    health.set_serving::<WorkServiceServer<PlaneApi>>().await;
    health.set_serving::<TriggerServiceServer<PlaneApi>>().await;
    let workspaces = WorkspaceServiceServer::new(WorkspaceApi::new(runtime.clone()))
        .max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_GRPC_MESSAGE_BYTES);
    health
        .set_serving::<WorkspaceServiceServer<WorkspaceApi>>()
        .await;
    let instances = InstanceServiceServer::new(InstanceApi::new(runtime.clone()))
        .max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_GRPC_MESSAGE_BYTES);
    health
        .set_serving::<InstanceServiceServer<InstanceApi>>()
        .await;
    let approvals = ApprovalServiceServer::new(ApprovalApi::new(runtime.clone()))
        .max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_GRPC_MESSAGE_BYTES);
    health
        .set_serving::<ApprovalServiceServer<ApprovalApi>>()
        .await;
    let memory = MemoryServiceServer::new(MemoryApi::new(runtime.clone()))
        .max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_GRPC_MESSAGE_BYTES);
    health.set_serving::<MemoryServiceServer<MemoryApi>>().await;
    let tree = SupervisionServiceServer::new(SupervisionApi::new(runtime.clone(), store.clone()))
        .max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_GRPC_MESSAGE_BYTES);
    health.set_serving::<TaskServiceServer<TaskApi>>().await;
    health
        .set_serving::<SupervisionServiceServer<SupervisionApi>>()
        .await;

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
        .add_service(health_service.clone())
        .add_service(reflection_v1.clone())
        .add_service(reflection_v1alpha.clone())
        .add_service(agents.clone())
        .add_service(status.clone())
        .add_service(tasks.clone())
        .add_service(tree.clone())
        .add_service(work.clone())
        .add_service(triggers.clone())
        .add_service(workspaces.clone())
        .add_service(instances.clone())
        .add_service(approvals.clone())
        .add_service(memory.clone());
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
    let console = tcp_token.clone().map(|token| {
        Arc::new(
            crate::ingress::console::Console::new(
                runtime.clone(),
                store.clone(),
                token,
                stop_rx.clone(),
            )
            .public_read(public_read)
            .allowed_hosts(allowed_hosts),
        )
    });
    let tcp_server = match (tcp_listener, tcp_token) {
        (Some(listener), Some(token)) => {
            // A right token also lifts the connection's authentication
            // deadline (see `listen`).
            let check = move |request: tonic::Request<()>| {
                let authorization = request.metadata().get("authorization");
                if !token.admits(authorization.map(|v| v.as_bytes())) {
                    return Err(tonic::Status::unauthenticated(
                        "missing or wrong bearer token",
                    ));
                }
                if let Some(conn) = request.extensions().get::<listen::Conn>() {
                    conn.authenticate();
                }
                Ok(request)
            };
            info!(
                addr = %listener.local_addr()?,
                max_connections = limits.max_tcp,
                auth_timeout_s = limits.auth_timeout.as_secs_f64(),
                idle_timeout_s = limits.idle_timeout.as_secs_f64(),
                "listening on tcp"
            );
            let mut tcp_stop = stop_rx.clone();
            let router = limits
                .server()
                .layer(crate::metrics::GrpcLayer(grpc_metrics))
                .layer(InterceptorLayer::new(check))
                .layer(listen::TrackStreamsLayer)
                .add_service(health_service)
                .add_service(reflection_v1)
                .add_service(reflection_v1alpha)
                .add_service(agents)
                .add_service(status)
                .add_service(tasks)
                .add_service(tree)
                .add_service(work)
                .add_service(triggers)
                .add_service(workspaces)
                .add_service(instances)
                .add_service(approvals)
                .add_service(memory);
            Some(tokio::spawn(router.serve_with_incoming_shutdown(
                listen::tcp(listener, limits),
                async move {
                    let _ = tcp_stop.wait_for(|s| *s).await;
                },
            )))
        }
        _ => None,
    };
    let mut http_server = match (http_listener, config.http.clone(), console) {
        (Some(listener), Some(http), Some(console)) => Some(crate::ingress::serve(
            listener,
            http,
            runtime.clone(),
            metrics,
            console,
            stop_rx.clone(),
        )),
        _ => None,
    };
    info!(socket = %socket.display(), "serving");

    // The root supervisor stopping on its own would leave a daemon that
    // answers SERVING but can do nothing: shut down and report it instead.
    let root_died = tokio::select! {
        () = shutdown => false,
        () = runtime.stopped() => true,
    };
    info!("shutting down");
    let _ = stop_tx.send(true);
    health
        .set_not_serving::<AgentServiceServer<AgentApi>>()
        .await;
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
    runtime.shutdown(timeout).await;
    if let Some(server) = http_server {
        match tokio::time::timeout(timeout, server.close()).await {
            Ok(Ok(())) => {}
            Ok(Err(join)) => warn!(error = %join, "webhook server task failed"),
            Err(_) => warn!("webhook server did not close in time"),
        }
    }
    trimmer.abort();
    store.close().await;
    let _ = std::fs::remove_file(&socket);
    info!("stopped");
    if root_died {
        bail!("the runtime's root supervisor stopped unexpectedly; see the log above");
    }
    Ok(())
}
