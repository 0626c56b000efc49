//! `holarchy serve`: its flags, the daemon's configuration made from them,
//! and the signals that stop it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use holarchy_actors::sandbox::TaskLimits;
use holarchy_actors::secrets::Secrets;
use holarchy_supervision::restart::RestartPolicy;

use super::{limit_args, BrainArgs, ConnectionArgs};

pub mod config_file;
use crate::daemon::{self, GivenToken, ServeConfig};

/// How the daemon writes its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Read settings from this TOML file: each key is a long flag of
    /// `serve` (`max-queue = 2048`, `skills-dir = ["skills"]`) or
    /// `data-dir`; relative paths are read beside the file. The command
    /// line and the environment override it.
    #[arg(
        help_heading = "Configuration",
        long,
        env = "HOLARCHY_CONFIG",
        value_name = "FILE"
    )]
    pub config: Option<PathBuf>,
    /// Print the settings in effect (from the command line, the
    /// environment, the config file and the defaults) as TOML, and exit.
    #[arg(help_heading = "Configuration", long)]
    pub print_config: bool,
    /// What `--print-config` prints, rendered while the command line is
    /// parsed (it needs to know where each value came from).
    #[arg(skip)]
    pub effective_config: Option<String>,
    /// Also serve gRPC on TCP at this address (requires the bearer token).
    #[arg(help_heading = "Network", long)]
    pub listen: Option<SocketAddr>,
    /// Serve TLS on the TCP listeners (--listen, --http-listen) with this
    /// certificate chain (PEM, leaf first). Read again on SIGHUP.
    #[arg(
        help_heading = "Network",
        long,
        value_name = "FILE",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM). Read again on SIGHUP.
    #[arg(
        help_heading = "Network",
        long,
        value_name = "FILE",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
    /// Require TCP clients to show a certificate issued by this CA (PEM),
    /// beside the bearer token.
    #[arg(
        help_heading = "Network",
        long,
        value_name = "FILE",
        requires = "tls_cert"
    )]
    pub tls_client_ca: Option<PathBuf>,
    /// Also take OIDC bearer tokens (JWTs) whose `iss` is this, signed by
    /// a key of --oidc-jwks, for --oidc-audience, with a role claim.
    #[arg(
        help_heading = "Network",
        long,
        value_name = "URL",
        requires_all = ["oidc_audience", "oidc_jwks"]
    )]
    pub oidc_issuer: Option<String>,
    /// The `aud` an OIDC token must carry (this daemon's client id).
    #[arg(help_heading = "Network", long, requires = "oidc_issuer")]
    pub oidc_audience: Option<String>,
    /// The issuer's public keys, a JWKS document (its `jwks_uri`, saved);
    /// read again on SIGHUP.
    #[arg(
        help_heading = "Network",
        long,
        value_name = "FILE",
        requires = "oidc_issuer"
    )]
    pub oidc_jwks: Option<PathBuf>,
    /// The claim holding the caller's role: viewer, operator or admin.
    #[arg(help_heading = "Network", long, default_value = "holarchy_role")]
    pub oidc_role_claim: String,
    /// The claim holding the caller's namespace (absent: `default`).
    #[arg(help_heading = "Network", long, default_value = "holarchy_namespace")]
    pub oidc_namespace_claim: String,
    /// Seconds each shutdown step may take.
    #[arg(help_heading = "Storage", long, default_value_t = 10)]
    pub shutdown_timeout: u64,
    /// Days the audit trail keeps an entry (`holarchy audit`).
    #[arg(help_heading = "Storage", long, default_value_t = 90, value_parser = clap::value_parser!(u64).range(1..=36_500))]
    pub audit_retention_days: u64,
    /// How long the event log keeps an event (`holarchy events`; the
    /// memory search's hits on tool calls go with it): `90d`, `12h`, `2w`,
    /// or `forever`.
    #[arg(help_heading = "Storage", long, default_value = "90d", value_parser = parse_retention)]
    pub event_retention: Retention,
    /// How many recorded turn inputs each agent keeps for replays
    /// (`holarchy replay`): what its brain was shown, for brains that read
    /// context (command, openai, anthropic). 0 records none; its turns can
    /// then be replayed only through a brain that reads no context.
    #[arg(help_heading = "Storage", long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub replay_keep_turns: u64,
    /// Turns all replays together may start a second: a replay shares the
    /// daemon's cores with the live agents, and this keeps it from taking
    /// them (docs/replay.md).
    #[arg(help_heading = "Limits", long, default_value_t = 1200, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub replay_turns_per_second: u32,
    /// Messages an agent may hold waiting before ingress is refused.
    #[arg(help_heading = "Limits", long, default_value_t = 1024)]
    pub max_queue: usize,
    /// Restarts a supervisor grants a failing child within the period
    /// before it gives up (OTP's intensity).
    #[arg(help_heading = "Limits", long, default_value_t = 3)]
    pub restart_max: u32,
    /// The restart period, in seconds.
    #[arg(help_heading = "Limits", long, default_value_t = 5)]
    pub restart_period: u64,
    /// Root partitions: supervisor actors the public agents are spread
    /// over (default: one per core; at least 1, at most 1024).
    #[arg(help_heading = "Limits", long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub partitions: Option<u16>,
    /// Threads that run the actors (default: one per core). A store read
    /// or commit waits on its thread, so more threads than cores raise
    /// turns/s and lower single creations/s: on 2 cores, 6 against 2 gave
    /// 1.05-1.49x the scripted turns/s on sled and 1.21-1.32x on
    /// PostgreSQL, but 0.74-0.87x the single `CreateAgent`s/s on sled
    /// (docs/benchmarks.md, session 24).
    #[arg(help_heading = "Limits", long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub worker_threads: Option<u16>,
    /// A folder of skills (one subfolder with a SKILL.md each); repeat for
    /// more. Where two hold a skill of the same name, the first wins.
    #[arg(help_heading = "Brains", long = "skills-dir", value_name = "DIR")]
    pub skills_dirs: Vec<PathBuf>,
    /// Bytes of output each command task keeps (oldest dropped first).
    #[arg(help_heading = "Sandbox", long, default_value_t = 1024 * 1024)]
    pub output_capacity: u64,
    /// MiB of sled's page cache (it holds hot records in memory; its real
    /// footprint is about three times this).
    #[arg(help_heading = "Storage", long, default_value_t = crate::store::sled_store::DEFAULT_CACHE_MIB)]
    pub store_cache_mib: u64,
    /// Keep agents, messages, tasks, events and memory in this PostgreSQL
    /// database instead of the embedded store under the data directory: a
    /// URL (postgres://user@host:5432/db, or ?host=/run/postgresql for a
    /// socket) or a key=value string, without its password. See
    /// docs/storage.md.
    #[arg(
        help_heading = "Storage",
        long,
        env = "HOLARCHY_STORE",
        value_name = "URL"
    )]
    pub store: Option<String>,
    /// A file holding the database's password (or set
    /// HOLARCHY_STORE_PASSWORD); a password never goes on the command line.
    #[arg(
        help_heading = "Storage",
        long,
        value_name = "FILE",
        requires = "store"
    )]
    pub store_password_file: Option<PathBuf>,
    /// The brain of agents created without one.
    #[command(flatten, next_help_heading = "Brains")]
    pub default_brain: BrainArgs,
    /// Every brain's context budget in tokens (500 to 2,000,000); by
    /// default 32,000 for openai and anthropic brains and 16,000 for others.
    #[arg(help_heading = "Brains", long, value_parser = clap::value_parser!(u64).range(500..=2_000_000))]
    pub context_tokens: Option<u64>,
    /// Send spans (gRPC calls, turns, brain steps, tool calls) to this
    /// OpenTelemetry collector over OTLP/HTTP, e.g. http://127.0.0.1:4318
    /// (its /v1/traces is added to a URL without a path). Off by default.
    #[arg(help_heading = "Observability", long)]
    pub otlp_endpoint: Option<String>,
    /// The log's format on stderr: `text` (a line per event, for people)
    /// or `json` (an object per line, for a log collector).
    #[arg(help_heading = "Observability", long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Count nothing for `GET /metrics` (which then answers 404): no turn,
    /// tool-call or gRPC counters on the hot paths.
    #[arg(help_heading = "Observability", long)]
    pub no_metrics: bool,
    /// Retries of a model request (openai, anthropic) on network errors,
    /// 429 and 5xx.
    #[arg(help_heading = "Brains", long, default_value_t = 4)]
    pub model_retries: u32,
    /// The first retry's delay, in milliseconds; it doubles each time.
    #[arg(help_heading = "Brains", long, default_value_t = 500)]
    pub model_retry_base_ms: u64,
    /// The longest wait before a retry of a model request, in
    /// milliseconds: the backoff stops doubling there, and a server's
    /// longer `Retry-After` is cut to it.
    #[arg(help_heading = "Brains", long, default_value_t = 8000)]
    pub model_retry_cap_ms: u64,
    /// Milliseconds a model request may stay silent (no headers yet, or no
    /// byte of its answer, not even a keepalive) before the attempt counts
    /// as broken and is retried.
    #[arg(help_heading = "Brains", long, default_value_t = 180_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub model_idle_timeout_ms: u64,
    /// Refuse to start unless the kernel can confine agents' programs
    /// fully (Landlock ABI 6 or later).
    #[arg(help_heading = "Sandbox", long)]
    pub require_sandbox: bool,
    /// MiB that must stay free under the data directory. Below it, calls
    /// that write answer UNAVAILABLE, no turn starts and `/readyz` says not
    /// ready; above 1.25 times it, everything resumes by itself. What is
    /// already running finishes in that room.
    #[arg(help_heading = "Storage", long, value_name = "MIB", default_value_t = crate::daemon::DEFAULT_MIN_FREE_DISK >> 20)]
    pub min_free_disk: u64,
    /// Milliseconds one flush may run before new work is held back: calls
    /// that write answer UNAVAILABLE at once instead of queueing behind a
    /// stalled disk, and everything resumes when the flush ends.
    #[arg(help_heading = "Storage", long, value_name = "MS", default_value_t = crate::daemon::DEFAULT_MAX_FLUSH_STALL.as_millis() as u64)]
    pub max_flush_stall_ms: u64,
    /// Processes one command (or brain step) may run at once, beyond what
    /// the daemon's user runs (RLIMIT_NPROC; not applied to root).
    #[arg(help_heading = "Sandbox", long, default_value_t = TaskLimits::default().max_processes)]
    pub task_max_processes: u64,
    /// Files each process of a command may hold open (RLIMIT_NOFILE).
    #[arg(help_heading = "Sandbox", long, default_value_t = TaskLimits::default().max_open_files)]
    pub task_max_open_files: u64,
    /// Bytes a second of a command's output the daemon takes; past it the
    /// command waits on its full pipe.
    #[arg(help_heading = "Sandbox", long, default_value_t = TaskLimits::default().output_bytes_per_sec)]
    pub task_output_rate: u64,
    /// Seconds a command may run before it is killed; 0 for no bound.
    #[arg(help_heading = "Sandbox", long, default_value_t = 3600)]
    pub task_wall_time: u64,
    /// A path no agent may attach or use as a workspace, nor any path
    /// inside it or above it (repeatable; the data directory always is).
    /// Name the daemon's configuration and secrets here.
    #[arg(help_heading = "Sandbox", long = "protect", value_name = "PATH")]
    pub protected: Vec<PathBuf>,
    /// Let agents attach workspaces only beneath these directories
    /// (repeatable; none given: anywhere not protected).
    #[arg(help_heading = "Sandbox", long = "workspace-allow", value_name = "DIR")]
    pub workspace_allow: Vec<PathBuf>,
    /// Serve webhooks over HTTP at this address:
    /// `POST /ingress/<provider>/<instance>` (off unless given).
    #[arg(help_heading = "Network", long, value_name = "ADDR")]
    pub http_listen: Option<SocketAddr>,
    /// Let anyone who can reach the HTTP listener read the web console's
    /// read-only view (agents' ids, names, states, lineage and counts)
    /// without the daemon's token. Off: every console read takes the
    /// token, so no local program or webhook sender sees even the tree.
    #[arg(help_heading = "Network", long)]
    pub console_public_read: bool,
    /// What the console's reads have always been without
    /// `--console-public-read`; accepted so older command lines still
    /// start.
    #[arg(
        help_heading = "Network",
        long,
        hide = true,
        conflicts_with = "console_public_read"
    )]
    pub console_private: bool,
    /// A name the console answers under (its `Host`), beside IP addresses
    /// and `localhost` (repeatable): the name a reverse proxy or a browser
    /// uses. Any other name is answered 421, so a page that re-points its
    /// own DNS name at the listener (DNS rebinding) reads nothing.
    #[arg(
        help_heading = "Network",
        long = "http-allowed-host",
        value_name = "NAME"
    )]
    pub http_allowed_hosts: Vec<String>,
    /// Connections of the HTTP listener one peer (an IPv4 address, an IPv6
    /// /64) may hold at once; 0 for no bound (behind a reverse proxy, every
    /// connection comes from the proxy). `/healthz` and `/readyz` keep a
    /// reserve of their own either way.
    #[arg(help_heading = "Network", long, default_value_t = crate::web::DEFAULT_MAX_PER_PEER)]
    pub http_max_connections_per_peer: usize,
    /// MCP servers agents may be allowed (`agent create --mcp-server`): a
    /// JSON file with an `mcpServers` map (see docs/mcp.md). Checked at
    /// start; the servers themselves start on first use.
    #[arg(help_heading = "Brains", long, value_name = "FILE")]
    pub mcp_config: Option<PathBuf>,
    /// Largest webhook body, in bytes; a larger one is answered 413.
    #[arg(help_heading = "Network", long, default_value_t = crate::web::DEFAULT_MAX_BODY)]
    pub max_webhook_bytes: usize,
    /// Caps and timeouts on connections.
    #[command(flatten, next_help_heading = "Network")]
    pub connections: ConnectionArgs,
    /// Bounds on what agents can make the daemon do.
    #[command(flatten, next_help_heading = "Limits")]
    pub limits: limit_args::LimitArgs,
}

impl ServeArgs {
    /// The actors' runtime threads: as asked, else one per core.
    pub fn worker_threads(&self) -> usize {
        self.worker_threads.map_or_else(
            || std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
            usize::from,
        )
    }
}

/// Runs the daemon on `data_dir` as `args` say, until a signal stops it.
pub(super) async fn serve(
    args: &ServeArgs,
    data_dir: PathBuf,
    token: GivenToken,
    secrets: Arc<Secrets>,
) -> anyhow::Result<()> {
    if let Some(settings) = &args.effective_config {
        print!("{settings}");
        return Ok(());
    }
    let mut config = ServeConfig::new(data_dir);
    config.listen = args.listen;
    config.notify = daemon::notify::Notifier::from_env();
    config.token = token;
    config.connections = args.connections.limits()?;
    config.shutdown_timeout = Duration::from_secs(args.shutdown_timeout);
    config.audit_retention = Duration::from_secs(args.audit_retention_days * 86_400);
    config.event_retention = args.event_retention.0;
    config.replay_turns_per_second = args.replay_turns_per_second;
    if let (Some(issuer), Some(audience), Some(jwks)) =
        (&args.oidc_issuer, &args.oidc_audience, &args.oidc_jwks)
    {
        config.oidc = Some(crate::access::oidc::OidcConfig {
            issuer: issuer.clone(),
            audience: audience.clone(),
            jwks: jwks.clone(),
            role_claim: args.oidc_role_claim.clone(),
            namespace_claim: args.oidc_namespace_claim.clone(),
        });
    }
    config.runtime.max_queue_len = args.max_queue;
    config.runtime.output_capacity = args.output_capacity;
    config.runtime.limits = args.limits.limits();
    config.store.cache_capacity = args.store_cache_mib.saturating_mul(1024 * 1024);
    if let Some(url) = &args.store {
        let password = store_password(args.store_password_file.as_deref(), &secrets)?;
        if let Some(password) = &password {
            // Scrubbed from anything an agent or a log could show.
            secrets.add(password);
        }
        config.database = Some(crate::store::postgres::database(url, password)?);
    }
    config.runtime.context_tokens = args.context_tokens.and_then(|n| usize::try_from(n).ok());
    config.runtime.turn_inputs_kept = usize::try_from(args.replay_keep_turns).unwrap_or(usize::MAX);
    config.runtime.trace_causes = args.otlp_endpoint.is_some();
    config.runtime.metrics = !args.no_metrics;
    config.runtime.model_retry.max_retries = args.model_retries;
    config.runtime.model_retry.base = Duration::from_millis(args.model_retry_base_ms);
    config.runtime.model_retry.cap = Duration::from_millis(args.model_retry_cap_ms);
    config.runtime.model_retry.idle = Duration::from_millis(args.model_idle_timeout_ms);
    config.runtime.secrets = secrets;
    config.require_sandbox = args.require_sandbox;
    config.min_free_disk = args.min_free_disk.saturating_mul(1 << 20);
    config.max_flush_stall = std::time::Duration::from_millis(args.max_flush_stall_ms);
    config
        .runtime
        .sandbox
        .protected
        .extend(args.protected.iter().cloned());
    config.runtime.sandbox.allowed_roots = args.workspace_allow.clone();
    config.runtime.sandbox.limits = TaskLimits {
        max_processes: args.task_max_processes,
        max_open_files: args.task_max_open_files,
        output_bytes_per_sec: args.task_output_rate,
        wall_time: (args.task_wall_time > 0).then(|| Duration::from_secs(args.task_wall_time)),
    };
    if let Some(brain) = args.default_brain.config() {
        brain.validate()?;
        config.runtime.default_brain = brain;
    }
    if let Some(partitions) = args.partitions {
        config.runtime.partitions = usize::from(partitions);
    }
    config.runtime.skill_roots = args.skills_dirs.clone();
    if let Some(path) = &args.mcp_config {
        let mcp = holarchy_actors::mcp::McpConfig::load(path)?;
        config.runtime.mcp = Arc::new(mcp);
    }
    let allowed_hosts = crate::web::host::AllowedHosts::new(&args.http_allowed_hosts)?;
    config.http = args.http_listen.map(|addr| crate::web::HttpConfig {
        console_public_read: args.console_public_read,
        allowed_hosts,
        max_connections_per_peer: args.http_max_connections_per_peer,
        ..crate::web::HttpConfig::new(addr, args.max_webhook_bytes)
    });
    config.tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            if config.listen.is_none() && config.http.is_none() {
                anyhow::bail!(
                    "--tls-cert serves TLS on the TCP listeners, and there is none: add --listen HOST:PORT (gRPC) or --http-listen HOST:PORT (webhooks and the console)"
                );
            }
            Some(daemon::tls::TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: args.tls_client_ca.clone(),
            })
        }
        _ => None,
    };
    config.runtime.restart_policy = RestartPolicy {
        max_restarts: args.restart_max,
        period_ms: args.restart_period.saturating_mul(1000),
    };
    daemon::run(config, shutdown_signal()).await
}

/// Resolves on the first Ctrl-C or SIGTERM; a second Ctrl-C exits at once.
/// One SIGINT listener serves both, so a second Ctrl-C that comes before
/// the exit watch is first polled is kept, not lost.
///
/// The listeners are installed when this is called, not when the future is
/// first polled: the daemon polls it only once it serves, and a SIGTERM
/// sent as soon as it answered would otherwise find the default action and
/// kill it without a shutdown.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let listen = |kind: SignalKind, name: &str| match signal(kind) {
        Ok(stream) => Some(stream),
        Err(err) => {
            tracing::warn!(error = %err, "cannot listen for {name}");
            None
        }
    };
    let mut interrupt = listen(SignalKind::interrupt(), "SIGINT");
    let mut term = listen(SignalKind::terminate(), "SIGTERM");
    async move {
        tokio::select! {
            () = received(interrupt.as_mut()) => {}
            () = received(term.as_mut()) => {}
        }
        tokio::spawn(async move {
            received(interrupt.as_mut()).await;
            eprintln!("second interrupt: exiting now");
            std::process::exit(130);
        });
    }
}

/// The next signal on `stream`; never, without one.
async fn received(stream: Option<&mut tokio::signal::unix::Signal>) {
    match stream {
        Some(stream) => {
            stream.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// The database's password: from `file` (its first line), else from
/// `HOLARCHY_STORE_PASSWORD`, else none (trust or peer authentication).
/// The variable is read from `secrets`: its name looks secret, so it left
/// the process environment before any thread started.
pub(super) fn store_password(
    file: Option<&std::path::Path>,
    secrets: &Secrets,
) -> anyhow::Result<Option<String>> {
    if let Some(file) = file {
        let text = std::fs::read_to_string(file).with_context(|| {
            format!("cannot read the database password from {}", file.display())
        })?;
        let password = text.lines().next().unwrap_or_default().to_owned();
        anyhow::ensure!(
            !password.is_empty(),
            "{} holds no password on its first line",
            file.display()
        );
        return Ok(Some(password));
    }
    Ok(secrets
        .var("HOLARCHY_STORE_PASSWORD")
        .filter(|p| !p.is_empty()))
}

/// A retention: a span, or none (`forever`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention(pub Option<Duration>);

fn parse_retention(text: &str) -> Result<Retention, String> {
    if text == "forever" {
        return Ok(Retention(None));
    }
    super::access::parse_span(text)
        .map(|ms| Retention(Some(Duration::from_millis(ms))))
        .map_err(|why| format!("{why}, or `forever`"))
}
