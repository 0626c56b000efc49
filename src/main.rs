//! The `holarchy` binary: parses the command line, sets up tracing, and
//! hands over to the library.

use std::io::IsTerminal;

use holarchy::cli::{self, Cli};
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

#[cfg(any(feature = "jemalloc", feature = "mimalloc"))]
#[global_allocator]
static ALLOCATOR: holarchy::memory::Allocator = holarchy::memory::ALLOCATOR;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // First, before any secret is read: other processes of this user may
    // not read our environment or memory through /proc or ptrace.
    let undumpable = holarchy::daemon::process::forbid_dumps();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .finish()
        .with(filter_fn(|meta| !is_actor_loop_span(meta)))
        .init();
    if let Err(err) = undumpable {
        tracing::warn!(error = %err, "cannot turn off PR_SET_DUMPABLE");
    }
    match cli::run(Cli::parse_args()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            // A refusal from the daemon reads best as its code and message.
            match err.downcast_ref::<tonic::Status>() {
                Some(status) => eprintln!(
                    "holarchy: {}: {}",
                    code_name(status.code()),
                    status.message()
                ),
                None => eprintln!("holarchy: {err:#}"),
            }
            std::process::ExitCode::FAILURE
        }
    }
}

fn code_name(code: tonic::Code) -> String {
    format!("{code:?}")
        .chars()
        .enumerate()
        .flat_map(|(i, c)| {
            let sep = (i > 0 && c.is_uppercase()).then_some(' ');
            sep.into_iter().chain(c.to_lowercase())
        })
        .collect()
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
