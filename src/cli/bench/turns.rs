//! `holarchy bench turns`: turn throughput of a running daemon. Creates N
//! public agents on the scripted brain, sends M messages round-robin over
//! them with C calls in flight (each optionally a script of K `AgentGet`
//! calls), follows the event log until every turn's `run_finished` is
//! durable, and reports acknowledged and handled turns per second, latency
//! from send to the turn's end, and what the daemon spent per turn: CPU,
//! bytes written and context switches from `/proc` (a daemon on this host
//! only), store growth from its status. Prints a table, one JSON line, and
//! with `--out FILE` writes that line there too.
//!
//! The daemon's status reports no flush count, so flushes per turn are not
//! measured (null in the JSON, a note in the table).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use serde_json::{json, Value};

use super::load::{self, Load};
use super::Cli;
use crate::api::pb;
use crate::cli::progress::Progress;
use crate::client::{self, Clients, Target};

mod drive;
mod process;
mod report;
mod watch;

use process::{Process, Reading};

#[derive(Debug, Args)]
pub struct TurnsArgs {
    /// Public agents to create (scripted brain).
    #[arg(long, default_value_t = 1_000)]
    pub agents: usize,
    /// Messages to send, spread round-robin over the agents.
    #[arg(long, default_value_t = 50_000)]
    pub messages: usize,
    /// SendMessage calls in flight.
    #[arg(long, default_value_t = 512)]
    pub concurrency: usize,
    /// AgentGet calls each turn makes (0: a plain message, one reply).
    #[arg(long, default_value_t = 0)]
    pub tool_calls: usize,
    /// Agents per CreateAgents call.
    #[arg(long, default_value_t = 1_000)]
    pub batch: usize,
    /// Also write the JSON line (always printed) to this file. Nothing is
    /// written under the working directory unless asked.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// At the end, archive the agents this run created, so `agent list`
    /// is as it was (see `bench idle --cleanup`).
    #[arg(long)]
    pub cleanup: bool,
}

/// Calls in flight per connection: under the daemon's default of 256
/// streams per connection, so no call waits for a stream to free up, and
/// the load is spread over several connections as many clients' would be.
const STREAMS_PER_CONNECTION: usize = 128;

/// Callers creating the agents at once.
const CREATE_CALLERS: usize = 4;

async fn status(clients: &mut Clients) -> anyhow::Result<pb::GetStatusResponse> {
    Ok(clients
        .runtime
        .get_status(pb::GetStatusRequest {})
        .await?
        .into_inner())
}

/// The daemon's process, when its counters can be read here: over the
/// Unix socket (so the daemon is on this host) and a pid whose command
/// line is a holarchy daemon's.
fn daemon_process(target: &Target, pid: u32) -> Option<Process> {
    let local = matches!(target, Target::Unix(_)) && pid != 0;
    local.then(|| Process::pid(pid)).filter(Process::is_daemon)
}

pub async fn turns(cli: &Cli, args: &TurnsArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.agents > 0 && args.messages > 0 && args.concurrency > 0 && args.batch > 0,
        "agents, messages, concurrency and batch must be positive"
    );
    let quiet = cli.json;
    let target = cli.target()?;
    let mut clients = client::connect(&target).await?;
    let before_create = status(&mut clients).await?;
    let daemon = daemon_process(&target, before_create.pid);
    if daemon.is_none() && !quiet {
        eprintln!(
            "the daemon's /proc is not readable from here (TCP, or another host or pid \
             namespace): CPU, bytes written and context switches per turn are n/a"
        );
    }

    // Names unique to this run, so runs against one daemon do not collide.
    let run = format!(
        "turns-{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0)
    );
    let progress = Progress::new("public agents", args.agents, quiet);
    let load = Load {
        run: &run,
        concurrency: CREATE_CALLERS,
        batch: args.batch,
        fanout: 0,
    };
    let created = Instant::now();
    let ids = load::create(&clients, &load, 0..args.agents, &progress, 0).await?;
    let create_s = created.elapsed().as_secs_f64();
    progress.finish();

    // A connection for the watch, so its stream never competes with the
    // calls for a connection's streams, and as many for the calls as keep
    // each under the daemon's limit.
    let mut watcher = client::connect(&target).await?;
    let mut connections = Vec::new();
    for _ in 0..args.concurrency.div_ceil(STREAMS_PER_CONNECTION) {
        connections.push(client::connect(&target).await?);
    }
    let start = status(&mut clients).await?;
    let stream = watch::open(&mut watcher, start.event_cursor).await?;
    let agents: HashSet<String> = ids.iter().cloned().collect();
    let created_ids = ids.clone();
    let handled = Arc::new(AtomicUsize::new(0));
    let acknowledged = Arc::new(AtomicUsize::new(0));
    let plan = drive::Plan {
        agents: Arc::new(ids),
        messages: args.messages,
        concurrency: args.concurrency,
        tool_calls: args.tool_calls,
    };

    let me = Process::current();
    let daemon_before = daemon.as_ref().and_then(Process::read);
    let client_before = me.read();
    let t0 = Instant::now();
    let t0_ms = report::wall_ms();
    let following = tokio::spawn(watch::follow(
        stream,
        agents,
        args.messages,
        handled.clone(),
    ));
    let callers = drive::start(&plan, &connections, acknowledged.clone());
    let sent = run_until_handled(callers, following, &handled, args.messages, quiet).await;
    let (sent, seen) = sent?;
    let daemon_after = daemon.as_ref().and_then(Process::read);
    let client_after = me.read();
    let end = status(&mut clients).await?;

    let figures = report::Figures {
        t0,
        t0_ms,
        sent: &sent,
        seen: &seen,
        daemon: spent(daemon_before, daemon_after),
        client: spent(client_before, client_after),
        store_growth: end.store_bytes.checked_sub(start.store_bytes),
        store_work: (
            end.store_flushes.saturating_sub(start.store_flushes),
            end.store_transactions
                .saturating_sub(start.store_transactions),
        ),
    };
    let mut report = figures.to_json();
    if let Some(object) = report.as_object_mut() {
        object.extend(
            json!({
                "bench": "holarchy bench turns",
                "transport": match target { Target::Unix(_) => "unix", Target::Tcp { .. } => "tcp" },
                "agents": args.agents,
                "messages": args.messages,
                "concurrency": args.concurrency,
                "tool_calls": args.tool_calls,
                "connections": connections.len(),
                "create_per_s": args.agents as f64 / create_s.max(1e-9),
                "daemon_pid": daemon.as_ref().map(|_| start.pid),
            })
            .as_object()
            .cloned()
            .unwrap_or_default(),
        );
    }
    if !quiet {
        report::print(&report);
    }
    println!("{report}");
    if let Some(out) = &args.out {
        write(out, &report);
    }
    super::leave_or_clean(&target, &run, &created_ids, args.cleanup, quiet).await
}

/// Shows progress until every caller is done and the watch has seen every
/// turn end; the first failure of either ends the run.
async fn run_until_handled(
    mut callers: tokio::task::JoinSet<anyhow::Result<Vec<drive::Sent>>>,
    mut following: tokio::task::JoinHandle<anyhow::Result<watch::Seen>>,
    handled: &AtomicUsize,
    messages: usize,
    quiet: bool,
) -> anyhow::Result<(Vec<drive::Sent>, watch::Seen)> {
    let progress = Progress::new("turns handled", messages, quiet);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut sent = Vec::with_capacity(messages);
    let mut seen = None;
    while seen.is_none() || !callers.is_empty() {
        tokio::select! {
            _ = tick.tick() => progress.show(handled.load(Ordering::Relaxed)),
            Some(joined) = callers.join_next(), if !callers.is_empty() => {
                match joined.context("a caller panicked").and_then(|r| r) {
                    Ok(part) => sent.extend(part),
                    Err(err) => {
                        callers.abort_all();
                        following.abort();
                        return Err(err);
                    }
                }
            }
            joined = &mut following, if seen.is_none() => {
                match joined.context("the watch panicked").and_then(|r| r) {
                    Ok(s) => seen = Some(s),
                    Err(err) => {
                        callers.abort_all();
                        return Err(err);
                    }
                }
            }
        }
    }
    progress.show(handled.load(Ordering::Relaxed));
    progress.finish();
    let seen = seen.context("the watch ended without a result")?;
    Ok((sent, seen))
}

/// What a process spent between two readings, when both were taken.
fn spent(before: Option<Reading>, after: Option<Reading>) -> Option<report::Spent> {
    let (b, a) = (before?, after?);
    Some(report::Spent {
        cpu_s: a.cpu_s - b.cpu_s,
        write_bytes: a
            .write_bytes
            .zip(b.write_bytes)
            .map(|(a, b)| a.saturating_sub(b)),
        context_switches: a
            .context_switches
            .zip(b.context_switches)
            .map(|(a, b)| a.saturating_sub(b)),
    })
}

/// Writes the JSON line to `out`; a failure to write is said, not fatal:
/// the figures are already on stdout.
fn write(out: &std::path::Path, report: &Value) {
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        let _ = std::fs::create_dir_all(parent);
    }
    match std::fs::write(out, format!("{report}\n")) {
        Ok(()) => eprintln!("wrote {}", out.display()),
        Err(err) => eprintln!("could not write {}: {err}", out.display()),
    }
}
