//! The `holarchy` binary: parses the command line, sets up tracing, and
//! hands over to the library.

use std::io::IsTerminal;
use std::sync::Arc;

use holarchy::cli::{self, Cli};
use holarchy_actors::secrets::Secrets;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::{Layer as _, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

#[cfg(any(feature = "jemalloc", feature = "mimalloc"))]
#[global_allocator]
static ALLOCATOR: holarchy::memory::Allocator = holarchy::memory::ALLOCATOR;

/// jemalloc backs the heap with transparent huge pages (the kernel here
/// gives them on `madvise` only). Starting 1,000,000 agents touches about
/// 10 GB, and on 4 KiB pages half of recovery went to page faults; on huge
/// pages `kill -9` to answering took 9.3 s instead of 15.9 s for the same
/// 1,000,000 agents, with 0.9 % more RSS (docs/benchmarks.md, "Commit path
/// and recovery"). jemalloc reads this before `main`.
// SAFETY: the one definition of jemalloc's (weak) `malloc_conf` in the
// program: a NUL-terminated string that lives as long as the process.
#[cfg(all(feature = "jemalloc", target_os = "linux"))]
#[allow(unsafe_code)]
#[export_name = "_rjem_malloc_conf"]
static JEMALLOC_CONF: Option<&u8> = Some(&b"thp:always\0"[0]);

fn main() -> std::process::ExitCode {
    // A unit (the supervisor of one agent's program) is this binary too;
    // it must run before any thread starts.
    if let Some(code) = holarchy_actors::sandbox::run_if_unit() {
        return code;
    }
    let cli = Cli::parse_args();
    // Still one thread: the secrets leave the environment now, so no
    // child the daemon ever starts can inherit them.
    let secrets = Arc::new(Secrets::take_from_env());
    if let Some(token) = &cli.token {
        secrets.add(token);
    }
    // What other processes see of ours (/proc/<pid>/environ, cmdline)
    // keeps the secrets' text even after they leave the environment. This
    // comes before the daemon makes itself non-dumpable (`serve`), after
    // which a non-root process cannot read its own /proc files.
    let scrubbed = secrets.scrub_process_memory();
    // A client runs on one thread. tonic drives a channel's connection
    // from tasks of its own, which a multi-thread runtime runs on a worker
    // while the command's calls wait on the main thread: two thread
    // hand-offs per call, about 70 us of a 150 us health check here. A
    // load generator also leaves the daemon it measures more of the
    // machine (docs/benchmarks.md).
    let mut builder = if cli.command.is_daemon() {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        if let cli::Command::Serve(args) = &cli.command {
            builder.worker_threads(args.worker_threads());
        }
        builder
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("holarchy: cannot start the async runtime: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    // Spans go to a collector only when `serve` names one.
    let otlp = match &cli.command {
        cli::Command::Serve(args) => args.otlp_endpoint.as_deref(),
        _ => None,
    };
    let (traces, tracer) =
        match otlp.map(|url| holarchy::telemetry::otlp(url, runtime.handle().clone())) {
            None => (None, None),
            Some(Ok((provider, tracer))) => (Some(provider), Some(tracer)),
            Some(Err(err)) => {
                eprintln!("holarchy: --otlp-endpoint: {err}");
                return std::process::ExitCode::FAILURE;
            }
        };
    let json_log = matches!(
        &cli.command,
        cli::Command::Serve(args) if args.log_format == cli::LogFormat::Json
    );
    let lines = if json_log {
        tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .boxed()
    };
    tracing_subscriber::registry()
        // The MCP SDK logs each server's self-description (its text
        // unbounded) at info: only its warnings by default.
        .with(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,rmcp=warn")),
        )
        .with(lines)
        .with(filter_fn(|meta| {
            !is_actor_loop_span(meta) && !is_index_chatter(meta)
        }))
        .with(tracer.map(|tracer| tracing_opentelemetry::layer().with_tracer(tracer)))
        .init();
    if let Err(err) = scrubbed {
        tracing::warn!(error = %err, "cannot scrub secrets from the process's initial environment");
    }
    // Taken before `run` consumes the command line: a failure's hint says
    // where the client looked.
    let reporter = cli.reporter();
    let ran = runtime.block_on(cli::run(cli, secrets));
    if let Some(provider) = traces {
        // What is still batched goes out before the process ends.
        if let Err(err) = provider.shutdown_with_timeout(std::time::Duration::from_secs(5)) {
            tracing::warn!(error = %err, "the last spans were not exported");
        }
    }
    match ran {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => reporter.report(&err),
    }
}

/// ractor wraps each actor's whole life in an INFO span `Actor{id=..}`.
/// The subscriber's registry keeps a slot per open span and never gives a
/// slot's memory back, so at `info` that span cost every agent that ever
/// lived about 300 B after it was gone (measured with jemalloc's heap
/// profiler at 1,000,000 agents, 900,000 archived). Agents log with their
/// own `agent_id` fields instead.
fn is_actor_loop_span(meta: &tracing::Metadata<'_>) -> bool {
    meta.is_span() && meta.name() == "Actor" && meta.target().starts_with("ractor")
}

/// tantivy logs each commit of the memory index, and each file it
/// deletes, at `info`: several lines a second under load. Only its
/// warnings and errors are kept.
fn is_index_chatter(meta: &tracing::Metadata<'_>) -> bool {
    meta.target().starts_with("tantivy") && *meta.level() > tracing::Level::WARN
}
