//! Chaos: the real daemon killed with `kill -9` at random moments while
//! several clients drive mixed work at it (single and batched creations,
//! messages with and without dedupe keys, `SendMessages` batches, private
//! spawns, commands with input and stops, timers, notes, pauses, resumes,
//! aborts and archives; published events and signed webhooks, calls
//! parked for approval and decided by racing operators, a schedule, MCP
//! tool calls, instance applies, and worktree children patching their
//! worktrees), and after every restart each promise checked against a
//! ledger of what was acknowledged. CI runs 20 kills;
//! `CHAOS_KILLS=200 cargo test --release --test chaos -- --nocapture` is
//! the long run (docs/reliability.md).
//!
//! The binary has its own `main` (`harness = false`): started by the
//! daemon with [`SERVE_STDIO`], it is the MCP server the load calls.

mod common;

#[path = "chaos/check.rs"]
mod check;
#[path = "chaos/check_ops.rs"]
mod check_ops;
#[path = "chaos/fixtures.rs"]
mod fixtures;
#[path = "chaos/ledger.rs"]
mod ledger;
#[path = "chaos/load.rs"]
mod load;
#[path = "chaos/operate.rs"]
mod operate;
#[path = "chaos/run.rs"]
mod run;
#[path = "chaos/worktrees.rs"]
mod worktrees;
// Only its stdio server is used here.
#[allow(dead_code)]
#[path = "mcp/server.rs"]
mod server;

use std::process::ExitCode;

/// The first argument that makes this binary the stdio MCP server.
const SERVE_STDIO: &str = "--serve-mcp-stdio";
/// The header the shared server's HTTP side reads (unused here).
const HEADER_NAME: &str = "x-test-key";

async fn kills_under_mixed_load_lose_nothing_acknowledged() {
    let root = tempfile::tempdir().expect("tempdir");
    let opts = run::Options::from_env(20);
    let report = run::run(&common::data_dir(&root), &opts).await;
    run::print(&report);
    assert!(report.kills >= opts.kills);
    assert!(
        ledger::Ledger::total(&report.acked) > 0,
        "nothing was acknowledged: the load never ran"
    );
    assert!(
        report.violations().is_empty(),
        "{} broken promises (seed {}): {:#?}",
        report.violations().len(),
        report.seed,
        report.violations()
    );
}

const TESTS: &[(&str, common::runner::Test)] =
    &[("kills_under_mixed_load_lose_nothing_acknowledged", || {
        Box::pin(kills_under_mixed_load_lose_nothing_acknowledged())
    })];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some(SERVE_STDIO) => server::serve_stdio(),
        _ => common::runner::run(TESTS, &args),
    }
}
