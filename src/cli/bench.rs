//! `holarchy bench idle`: a load tool for operators. It drives a running
//! daemon over gRPC: creates N idle agents (durable batches, concurrent
//! callers; with `--tree`, each spawning private children), samples GetAgent
//! and ListAgents latency at 1,000, 10,000, 100,000 and N agents, measures the
//! daemon's memory per agent (from its status), SendMessage until
//! acknowledged and until the turn is seen starting; with `--compare-tcp`
//! every latency over the Unix socket and over TCP side by side; with
//! `--archive M` the daemon's memory once M of the agents are archived, and
//! with `--restart` (last) the time from `kill -9` to a daemon answering
//! with every live agent back.
//! Prints a table and one JSON line; a figure it did not get is `n/a` in
//! the table and null in the JSON, never 0.

use std::time::Instant;

use anyhow::Context;
use clap::Args;
use serde_json::{json, Map, Value};

use super::progress::Progress;
use super::Cli;
use crate::api::pb;
use crate::client::{self, Clients, Target};
use crate::daemon::TOKEN_FILE;

mod load;
mod probe;
mod restart;
mod table;
mod turns;

pub use turns::{turns, TurnsArgs};

use load::Load;
use probe::{PerTransport, Transport};

#[derive(Debug, Args)]
pub struct IdleArgs {
    /// Public agents to create.
    #[arg(long, default_value_t = 10_000)]
    pub agents: usize,
    /// Concurrent callers.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Agents per CreateAgents call.
    #[arg(long, default_value_t = 1_000)]
    pub batch: usize,
    /// Latency samples per call kind and checkpoint (per transport).
    #[arg(long, default_value_t = 1_000)]
    pub samples: usize,
    /// Private children each agent spawns through its own SpawnAgent call.
    #[arg(long, default_value_t = 0)]
    pub tree: usize,
    /// Then archive this many of the new agents and read the daemon's
    /// memory again (compared with its memory at the checkpoint holding as
    /// many agents as are left).
    #[arg(long, default_value_t = 0)]
    pub archive: usize,
    /// Last, kill the daemon with SIGKILL, start it again with the same
    /// command line, and time its recovery (a daemon on this host only).
    #[arg(long)]
    pub restart: bool,
    /// Also sample every latency over TCP at this URL (the same daemon's
    /// `--listen` address, e.g. http://127.0.0.1:7420), in turns with the
    /// Unix socket, and print both side by side. The token is `--token` or
    /// HOLARCHY_TOKEN, else <data-dir>/token.
    #[arg(long, value_name = "URL")]
    pub compare_tcp: Option<String>,
    /// At the end, archive the agents this run created (their children
    /// with them), so `agent list` is as it was. Without it they stay:
    /// run a bench on a daemon of its own (`serve --data-dir` a scratch
    /// directory), not on the one you work with.
    #[arg(long)]
    pub cleanup: bool,
}

/// Says on stderr what a run left in the daemon, and archives it with
/// `--cleanup` (over a new connection: a `--restart` replaced the
/// daemon the old one spoke to).
pub(super) async fn leave_or_clean(
    target: &Target,
    run: &str,
    ids: &[String],
    cleanup: bool,
    quiet: bool,
) -> anyhow::Result<()> {
    if cleanup {
        let clients = client::connect(target).await?;
        load::archive(&clients, ids, quiet).await?;
        eprintln!(
            "archived the {} agent(s) this run created (bench-{run}-*)",
            ids.len()
        );
    } else {
        eprintln!(
            "this run left {} agent(s) in the daemon, named bench-{run}-*: --cleanup archives them at the end",
            ids.len()
        );
    }
    Ok(())
}

/// Agent counts at which latencies are sampled (besides N itself), so one
/// run shows how they grow with the population.
const CHECKPOINTS: [usize; 3] = [1_000, 10_000, 100_000];

async fn status(clients: &mut Clients) -> anyhow::Result<pb::GetStatusResponse> {
    Ok(clients
        .runtime
        .get_status(pb::GetStatusRequest {})
        .await?
        .into_inner())
}

/// A byte count the daemon reports as 0 when it cannot tell (RSS off
/// Linux, heap figures without jemalloc): null then, not 0.
fn known(bytes: u64) -> Value {
    if bytes == 0 {
        Value::Null
    } else {
        json!(bytes)
    }
}

/// The daemon's RSS once it stops falling: allocators give freed memory
/// back over seconds (jemalloc decays dirty pages over about ten), so one
/// early reading would count memory already on its way back.
async fn settled_rss(clients: &mut Clients) -> anyhow::Result<u64> {
    let mut readings = vec![status(clients).await?.rss_bytes];
    while readings.len() < 60 {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        readings.push(status(clients).await?.rss_bytes);
        if let [.., five_ago, _, _, _, _, now] = readings[..] {
            // Less than 1% lower than five seconds ago: settled.
            if now as f64 > five_ago as f64 * 0.99 {
                return Ok(now);
            }
        }
    }
    Ok(readings.last().copied().unwrap_or(0))
}

/// The transports latencies are sampled over: the one the load goes
/// through, then, with `--compare-tcp`, TCP to the same daemon.
async fn transports(
    cli: &Cli,
    args: &IdleArgs,
    target: &Target,
    clients: Clients,
) -> anyhow::Result<Vec<Transport>> {
    let name = match target {
        Target::Unix(_) => "unix",
        Target::Tcp { .. } => "tcp",
    };
    let mut out = vec![Transport { name, clients }];
    let Some(url) = &args.compare_tcp else {
        return Ok(out);
    };
    anyhow::ensure!(
        matches!(target, Target::Unix(_)),
        "--compare-tcp compares TCP with the Unix socket: leave out --addr"
    );
    let token = match &cli.token {
        Some(token) => token.clone(),
        None => {
            let path = cli.data_dir().join(TOKEN_FILE);
            std::fs::read_to_string(&path)
                .with_context(|| {
                    format!(
                        "--compare-tcp needs the token: give --token or HOLARCHY_TOKEN, \
                         or let the bench read {}",
                        path.display()
                    )
                })?
                .trim()
                .to_owned()
        }
    };
    // --compare-tcp over TLS checks the daemon's certificate as any
    // https:// --addr does.
    let tcp = Target::Tcp {
        url: client::tcp_url(url)?,
        token: Some(token),
        tls: client::TlsOptions {
            ca: cli.ca.clone(),
            identity: cli.client_cert.clone(),
        },
    };
    let mut tcp_clients = client::connect(&tcp).await?;
    let local = status(&mut out[0].clients).await?.pid;
    let remote = status(&mut tcp_clients)
        .await
        .with_context(|| format!("over TCP at {url}"))?
        .pid;
    anyhow::ensure!(
        local == remote,
        "{url} is another daemon (pid {remote}) than the Unix socket's (pid {local})"
    );
    out.push(Transport {
        name: "tcp",
        clients: tcp_clients,
    });
    Ok(out)
}

/// One JSON object of figures per transport.
type Figures = Vec<Map<String, Value>>;

/// Puts one figure, sampled over every transport, into each one's figures.
fn put(figures: &mut Figures, key: &str, samples: PerTransport) {
    for (f, s) in figures.iter_mut().zip(samples) {
        f.insert(key.to_owned(), probe::percentiles(s));
    }
}

/// GetAgent and ListAgents latencies with `ids` created, added to each
/// transport's checkpoints.
async fn checkpoint(
    transports: &mut [Transport],
    figures: &mut Figures,
    ids: &[String],
    samples: usize,
) -> anyhow::Result<()> {
    let at = status(&mut transports[0].clients).await?;
    let get = probe::get_agent(transports, ids, samples).await?;
    let list = probe::list_agents(transports, samples.clamp(1, 50)).await?;
    for ((f, get), list) in figures.iter_mut().zip(get).zip(list) {
        let point = json!({
            "agents": ids.len(),
            "daemon_rss_bytes": known(at.rss_bytes),
            "heap_allocated_bytes": known(at.heap_allocated_bytes),
            "get_agent_us": probe::percentiles(get),
            "list_agents_1000_us": probe::percentiles(list),
        });
        let points = f.entry("checkpoints").or_insert_with(|| json!([]));
        if let Some(points) = points.as_array_mut() {
            points.push(point);
        }
    }
    Ok(())
}

pub async fn idle(cli: &Cli, args: &IdleArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.archive <= args.agents,
        "cannot archive more agents than are created"
    );
    anyhow::ensure!(
        args.agents > 0 && args.batch > 0 && args.concurrency > 0 && args.samples > 0,
        "agents, batch, concurrency and samples must be positive"
    );
    let quiet = cli.json;
    let target = cli.target()?;
    let first = client::connect(&target).await?;
    let mut transports = transports(cli, args, &target, first).await?;
    let mut figures: Figures = vec![Map::new(); transports.len()];
    // The load goes through the first transport; only latencies are
    // sampled over all of them.
    let start = status(&mut transports[0].clients).await?;
    let agents_before = (start.public_agents + start.private_agents) as usize;
    // Names unique to this run, so runs against one daemon do not collide.
    let run = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0)
    );
    let load = Load {
        run: &run,
        concurrency: args.concurrency,
        batch: args.batch,
        fanout: args.tree,
    };

    let progress = Progress::new("public agents", args.agents, quiet);
    let mut ids: Vec<String> = Vec::with_capacity(args.agents);
    let mut creating = std::time::Duration::ZERO;
    // A checkpoint where as many agents exist as the archive will leave, so
    // the memory after it is compared with the same population.
    let left = (args.archive > 0).then(|| args.agents - args.archive);
    let mut stops: Vec<usize> = CHECKPOINTS
        .iter()
        .copied()
        .chain(left)
        .filter(|&n| n > 0 && n < args.agents)
        .chain([args.agents])
        .collect();
    stops.sort_unstable();
    stops.dedup();
    let private = args.agents * args.tree;
    let mut settling = std::time::Duration::ZERO;
    for stop in stops {
        let t = Instant::now();
        let made = load::create(
            &transports[0].clients,
            &load,
            ids.len()..stop,
            &progress,
            ids.len(),
        )
        .await?;
        creating += t.elapsed();
        ids.extend(made);
        if args.tree > 0 {
            // Latencies are of an idle daemon: let the children come up.
            progress.finish();
            let t = Instant::now();
            let base = start.private_agents as usize;
            load::await_children(&mut transports[0].clients, base, stop * args.tree, quiet).await?;
            settling += t.elapsed();
        }
        // Latency at N is sampled once the population is complete.
        if stop < args.agents {
            checkpoint(&mut transports, &mut figures, &ids, args.samples).await?;
        }
    }
    progress.finish();
    let create_per_s = args.agents as f64 / creating.as_secs_f64().max(1e-9);
    // Children come up during creation too, so the tree's rate is over both.
    let tree_s = (args.tree > 0).then(|| (creating + settling).as_secs_f64());
    let total = args.agents + private;
    let after = status(&mut transports[0].clients).await?;
    checkpoint(&mut transports, &mut figures, &ids, args.samples).await?;
    let empty = probe::empty_call(&mut transports, args.samples).await?;
    put(&mut figures, "empty_call_us", empty);
    let send = probe::send_message(&mut transports, &ids, args.samples).await?;
    put(&mut figures, "send_message_ack_us", send.acknowledged);
    put(&mut figures, "send_message_to_turn_seen_us", send.turn_seen);

    let mut transports = transports.into_iter();
    let (first, compared) = (transports.next(), transports.next());
    let first = first.context("no transport")?;
    let (transport, mut clients) = (first.name, first.clients);
    // Archive before any restart, so its memory is compared with a
    // checkpoint of the same process.
    let archived = if args.archive > 0 {
        let left = args.agents - args.archive;
        let archived = &ids[..args.archive];
        Some(archive(&mut clients, archived, left, &figures[0], quiet).await?)
    } else {
        None
    };
    let restarted = if args.restart {
        let expected = agents_before + total - args.archive;
        Some(restart(&mut clients, &target, expected).await?)
    } else {
        None
    };

    // Not reported (0) on either side: unknown, not zero.
    let per_agent = (start.rss_bytes > 0 && after.rss_bytes > 0)
        .then(|| (after.rss_bytes as f64 - start.rss_bytes as f64) / total as f64);
    let mut report = json!({
        "bench": "holarchy bench idle",
        "transport": transport,
        "agents": args.agents,
        "tree_fanout": args.tree,
        "total_agents": total,
        "concurrency": args.concurrency,
        "batch": args.batch,
        "create_per_s": create_per_s,
        "tree_s": tree_s,
        "tree_agents_per_s": tree_s.map(|s| (args.agents + private) as f64 / s),
        "daemon_rss_per_agent_bytes": per_agent,
        "archive": archived,
        "restart": restarted,
    });
    let mut figures = figures.into_iter();
    if let (Some(object), Some(first)) = (report.as_object_mut(), figures.next()) {
        object.extend(first);
        if let (Some(compared), Some(theirs)) = (compared, figures.next()) {
            object.insert(compared.name.to_owned(), Value::Object(theirs));
        }
    }
    if !quiet {
        table::print(&report);
    }
    println!("{report}");
    // Those archived above are gone from listings already.
    leave_or_clean(&target, &run, &ids[args.archive..], args.cleanup, quiet).await
}

/// Archives `ids` and reads the daemon's memory once it settles, next to
/// its memory at the checkpoint with as many agents as are left.
async fn archive(
    clients: &mut Clients,
    ids: &[String],
    left: usize,
    figures: &Map<String, Value>,
    quiet: bool,
) -> anyhow::Result<Value> {
    let t = Instant::now();
    load::archive(clients, ids, quiet).await?;
    let archive_s = t.elapsed().as_secs_f64();
    let rss = settled_rss(clients).await?;
    let heap = status(clients).await?;
    let same_size = figures["checkpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["agents"].as_u64() == Some(left as u64))
        .and_then(|p| p["daemon_rss_bytes"].as_u64());
    Ok(json!({
        "archived": ids.len(),
        "archive_per_s": ids.len() as f64 / archive_s,
        "daemon_rss_bytes": known(rss),
        "heap_allocated_bytes": known(heap.heap_allocated_bytes),
        "heap_resident_bytes": known(heap.heap_resident_bytes),
        "left": left,
        "daemon_rss_bytes_when_as_many": same_size,
        "ratio": same_size.filter(|_| rss > 0).map(|b| rss as f64 / b.max(1) as f64),
    }))
}

/// `kill -9`, restart, and the time until `expected` agents are back.
async fn restart(clients: &mut Clients, target: &Target, expected: usize) -> anyhow::Result<Value> {
    let r = restart::kill_and_restart(clients, target).await?;
    anyhow::ensure!(
        r.status.recovered_agents as usize >= expected,
        "the daemon came back with {} agents, not {expected}; see {}",
        r.status.recovered_agents,
        r.log.display()
    );
    Ok(json!({
        "restart_s": r.elapsed.as_secs_f64(),
        "lock_free_s": r.lock_free.as_secs_f64(),
        "recovered_agents": r.status.recovered_agents,
        // The whole process, recovered: no baseline to subtract here.
        "daemon_rss_bytes": known(r.status.rss_bytes),
        "pid": r.status.pid,
        "log": r.log.display().to_string(),
    }))
}
