//! `holarchy serve`: owns a data directory, recovers the runtime from it,
//! and serves the gRPC API on a Unix socket (and, when asked, on TCP with a
//! bearer token) until told to stop.
//!
//! Shutdown order: stop accepting gRPC (open watches end), stop the actors
//! top-down, then flush and close the store.

mod certificate;
mod disk;
pub mod gate;
mod incarnation;
mod listen;
pub mod notify;
pub mod process;
mod retention;
mod safe_dirs;
mod services;
pub mod tls;
pub mod token;

pub use disk::DiskLow;
pub use listen::{Conn, ConnectionLimits, Peer};
pub use token::{GivenToken, Token, MIN_TOKEN_LEN};

use std::fs::{File, OpenOptions};
use std::future::Future;
use std::io::Write as _;
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use holarchy_actors::sandbox::SandboxReport;
use holarchy_actors::RuntimeConfig;
use tracing::{info, warn};

use crate::store::sled_store::StoreConfig;
use crate::store::{Opened, PgStore, SledStore};

/// File names inside the data directory.
pub const SOCKET_FILE: &str = "holarchy.sock";
pub const LOCK_FILE: &str = "holarchy.lock";
pub const TOKEN_FILE: &str = "token";
pub(crate) const DB_DIR: &str = "db";
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
    /// TLS on the TCP listeners (gRPC and HTTP), when set.
    pub tls: Option<tls::TlsFiles>,
    /// The TCP bearer token as given; if neither value is set, read from
    /// `<data>/token`, or made up and written there.
    pub token: GivenToken,
    /// Caps and timeouts on connections.
    pub connections: ConnectionLimits,
    /// How long each shutdown step may take.
    pub shutdown_timeout: Duration,
    pub store: StoreConfig,
    /// Keep everything in this PostgreSQL database instead of sled under
    /// the data directory; its password already in it (never logged).
    pub database: Option<tokio_postgres::Config>,
    pub runtime: RuntimeConfig,
    /// Refuse to start unless agents' programs can be fully confined.
    pub require_sandbox: bool,
    /// Serve webhooks over HTTP (see `ingress`); off when `None`.
    pub http: Option<crate::web::HttpConfig>,
    /// Below this many free bytes under the data directory, new work is
    /// refused until space returns (see `disk`).
    pub min_free_disk: u64,
    /// A flush running this long holds new work back (see `disk`).
    pub max_flush_stall: Duration,
    /// Where readiness and the start of shutdown are reported (systemd's
    /// `NOTIFY_SOCKET`); nowhere by default.
    pub notify: notify::Notifier,
    /// How long the audit trail keeps an entry.
    pub audit_retention: Duration,
    /// How long the event log keeps an event; `None`: for ever.
    pub event_retention: Option<Duration>,
    /// Also take OIDC tokens from this issuer (`serve --oidc-issuer`).
    pub oidc: Option<crate::access::oidc::OidcConfig>,
    /// Turns every replay together may start a second
    /// (`serve --replay-turns-per-second`).
    pub replay_turns_per_second: u32,
}

/// The default of [`ServeConfig::event_retention`]: 90 days, as the
/// audit trail's.
pub const DEFAULT_EVENT_RETENTION: Duration = Duration::from_secs(90 * 86_400);

/// The default of [`ServeConfig::min_free_disk`]: room for what is
/// already running to finish.
pub const DEFAULT_MIN_FREE_DISK: u64 = 128 << 20;

/// The default of [`ServeConfig::max_flush_stall`]: a healthy flush takes
/// milliseconds; seconds mean a disk that stalls.
pub const DEFAULT_MAX_FLUSH_STALL: Duration = Duration::from_secs(5);

impl ServeConfig {
    pub fn new(data_dir: PathBuf) -> Self {
        Self {
            data_dir,
            listen: None,
            tls: None,
            token: GivenToken::default(),
            connections: ConnectionLimits::default(),
            shutdown_timeout: Duration::from_secs(10),
            store: StoreConfig::default(),
            database: None,
            runtime: RuntimeConfig::default(),
            require_sandbox: false,
            http: None,
            min_free_disk: DEFAULT_MIN_FREE_DISK,
            max_flush_stall: DEFAULT_MAX_FLUSH_STALL,
            notify: notify::Notifier::default(),
            audit_retention: crate::access::audit::DEFAULT_RETENTION,
            event_retention: Some(DEFAULT_EVENT_RETENTION),
            oidc: None,
            replay_turns_per_second: crate::replay::jobs::DEFAULT_TURNS_PER_SECOND,
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
    let tls = match &config.tls {
        Some(files) => Some(Arc::new(tls::Tls::load(files.clone()).context(
            "cannot serve TLS (check --tls-cert, --tls-key and --tls-client-ca)",
        )?)),
        None => None,
    };
    let oidc = match &config.oidc {
        Some(oidc) => Some(
            crate::access::oidc::Oidc::load(oidc.clone())
                .context("cannot take OIDC tokens (check --oidc-jwks)")?,
        ),
        None => None,
    };
    warn_plain_text(&config, tls.is_some());
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
    info!(network = %sandbox.describe_network(), "agents' network policies");

    let mut runtime_config = config.runtime.clone();
    runtime_config.workspace_root = config.data_dir.join(WORKSPACES_DIR);
    runtime_config.worktree_root = config.data_dir.join(WORKTREES_DIR);
    runtime_config.sandbox.tmp_root = config.data_dir.join(TMP_DIR);
    runtime_config
        .sandbox
        .protected
        .push(config.data_dir.clone());
    let setup = incarnation::Setup {
        config: &config,
        runtime_config,
        tcp_token,
        sandbox,
        tls: tls.clone(),
        oidc: oidc.clone(),
    };
    let shutdown = std::pin::pin!(shutdown);
    // The reload lives exactly as long as the incarnations: dropped with
    // them, never detached.
    tokio::select! {
        served = incarnations(&config, &setup, shutdown) => served,
        () = tls::reload_on_hangup(tls, oidc) => Ok(()),
    }
}

/// Warns of a TCP listener that speaks plain text beyond this host: its
/// token (and the console's) crosses the network in clear.
fn warn_plain_text(config: &ServeConfig, tls: bool) {
    if tls {
        return;
    }
    let listeners = [
        ("--listen", config.listen),
        ("--http-listen", config.http.as_ref().map(|h| h.listen)),
    ];
    for (flag, addr) in listeners {
        if let Some(addr) = addr.filter(|a| !a.ip().is_loopback()) {
            warn!(
                %addr,
                "{flag} serves plain text on an address beyond this host: bearer tokens cross the network in clear; give --tls-cert and --tls-key"
            );
        }
    }
}

/// Serves incarnation after incarnation until a shutdown.
async fn incarnations(
    config: &ServeConfig,
    setup: &incarnation::Setup<'_>,
    mut shutdown: std::pin::Pin<&mut impl Future<Output = ()>>,
) -> anyhow::Result<()> {
    let mut after_failure = None;
    loop {
        let Some(store) = open_store(config, after_failure.as_deref(), shutdown.as_mut()).await?
        else {
            info!("stopped while waiting for the disk");
            return Ok(());
        };
        match incarnation::serve(setup, store, shutdown.as_mut()).await? {
            incarnation::Ended::Shutdown => return Ok(()),
            // Nothing acknowledged is lost: every answer waited for a
            // flush, and the store and runtime come back as from a crash,
            // without the process exiting (no agent is given up on for a
            // disk's fault).
            incarnation::Ended::StoreFailed(why) => {
                warn!(reason = %why, "the store failed: opening it again once it takes writes (sled: the disk under the data directory; PostgreSQL: the server named by --store)");
                after_failure = Some(why);
            }
        }
    }
}

/// Opens the PostgreSQL store: connects, migrates and starts its
/// committer. A database that cannot be reached at the first start stops
/// the start with the reason (a service manager starts it again); after a
/// failure (`after`) it is tried every [`REOPEN_EVERY`] until it answers,
/// or `None` once told to stop.
async fn open_database(
    database: &tokio_postgres::Config,
    after: Option<&str>,
    mut shutdown: std::pin::Pin<&mut impl Future<Output = ()>>,
) -> anyhow::Result<Option<Opened>> {
    let mut attempts: u64 = 0;
    loop {
        let settings = database.clone();
        let opened = tokio::task::spawn_blocking(move || PgStore::open(settings))
            .await
            .context("opening the PostgreSQL store")?;
        let err = match opened {
            Ok(store) => {
                info!(attempts, "the store is PostgreSQL");
                return Ok(Some(Opened::Postgres(Arc::new(store))));
            }
            Err(err) => err,
        };
        if after.is_none() {
            return Err(err).context(
                "cannot open the PostgreSQL store (check --store, the password, and that the server answers)",
            );
        }
        if attempts.is_multiple_of(20) {
            warn!(error = %err, "the PostgreSQL store cannot open yet: trying again until the database answers");
        }
        attempts += 1;
        tokio::select! {
            () = shutdown.as_mut() => return Ok(None),
            () = tokio::time::sleep(REOPEN_EVERY) => {}
        }
    }
}

/// How long a store that cannot be opened is waited for between attempts.
const REOPEN_EVERY: Duration = Duration::from_millis(500);
/// Free bytes below which a store that will not open is waited for, not
/// given up on, at the first start.
const LOW_DISK_BYTES: u64 = 16 << 20;

/// Opens the store. After a failure (`after`), or on a disk nearly full,
/// it waits for the disk to take writes again, trying every
/// [`REOPEN_EVERY`], instead of giving up; `None` if told to stop meanwhile.
async fn open_store(
    config: &ServeConfig,
    after: Option<&str>,
    mut shutdown: std::pin::Pin<&mut impl Future<Output = ()>>,
) -> anyhow::Result<Option<Opened>> {
    if let Some(database) = &config.database {
        return open_database(database, after, shutdown).await;
    }
    let path = config.data_dir.join(DB_DIR);
    let mut attempts: u64 = 0;
    loop {
        let err = match SledStore::open(&path, &config.store) {
            Ok(store) => {
                if attempts > 0 {
                    info!(attempts, "the store opened again");
                }
                return Ok(Some(Opened::Sled(Arc::new(store))));
            }
            Err(err) => err,
        };
        if after.is_none()
            && disk::free_bytes(&config.data_dir).is_none_or(|free| free >= LOW_DISK_BYTES)
        {
            return Err(err).context("cannot open the store");
        }
        // Once at first, then every 10 s or so: the log says why the
        // daemon is not serving.
        if attempts.is_multiple_of(20) {
            warn!(error = %err, free_bytes = disk::free_bytes(&config.data_dir), "the store cannot open yet: waiting for the disk to take writes (free space under the data directory)");
        }
        attempts += 1;
        tokio::select! {
            () = shutdown.as_mut() => return Ok(None),
            () = tokio::time::sleep(REOPEN_EVERY) => {}
        }
    }
}
