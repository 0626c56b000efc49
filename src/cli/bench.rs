//! `holarchy bench idle`: a load tool for operators. It drives a running
//! daemon over gRPC: creates N idle agents (durable batches, concurrent
//! callers; with `--tree`, each spawning private children), samples GetAgent
//! and ListAgents latency at 1,000, 10,000, 100,000 and N agents, measures the
//! daemon's memory per agent (from its status), SendMessage until
//! acknowledged and until the turn is seen starting; with `--archive M` the
//! daemon's memory once M of the agents are archived, and with `--restart`
//! (last) the time from `kill -9` to a daemon answering with every live
//! agent back.
//! Prints a table and one JSON line.

use std::time::Instant;

use clap::Args;
use serde_json::{json, Value};

use crate::api::pb;
use crate::client::{Clients, Target};

mod load;
mod probe;
mod restart;

use load::{Load, Progress};

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
    /// Latency samples per call kind and checkpoint.
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

/// GetAgent and ListAgents latencies with `ids` created.
async fn checkpoint(c: &mut Clients, ids: &[String], samples: usize) -> anyhow::Result<Value> {
    let at = status(c).await?;
    let get = probe::get_agent(c, ids, samples).await?;
    let list = probe::list_agents(c, samples.clamp(1, 50)).await?;
    Ok(json!({
        "agents": ids.len(),
        "daemon_rss_bytes": at.rss_bytes,
        "heap_allocated_bytes": at.heap_allocated_bytes,
        "get_agent_us": probe::percentiles(get),
        "list_agents_1000_us": probe::percentiles(list),
    }))
}

pub async fn idle(
    mut clients: Clients,
    target: &Target,
    args: &IdleArgs,
    json_only: bool,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.archive <= args.agents,
        "cannot archive more agents than are created"
    );
    anyhow::ensure!(
        args.agents > 0 && args.batch > 0 && args.concurrency > 0 && args.samples > 0,
        "agents, batch, concurrency and samples must be positive"
    );
    let quiet = json_only;
    let start = status(&mut clients).await?;
    let before = start.rss_bytes;
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
    let mut checkpoints = Vec::new();
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
        let made = load::create(&clients, &load, ids.len()..stop, &progress, ids.len()).await?;
        creating += t.elapsed();
        ids.extend(made);
        if args.tree > 0 {
            // Latencies are of an idle daemon: let the children come up.
            progress.finish();
            let t = Instant::now();
            let base = start.private_agents as usize;
            load::await_children(&mut clients, base, stop * args.tree, quiet).await?;
            settling += t.elapsed();
        }
        // Latency at N is sampled once the population is complete.
        if stop < args.agents {
            checkpoints.push(checkpoint(&mut clients, &ids, args.samples).await?);
        }
    }
    progress.finish();
    let create_per_s = args.agents as f64 / creating.as_secs_f64().max(1e-9);
    // Children come up during creation too, so the tree's rate is over both.
    let tree_s = (args.tree > 0).then(|| (creating + settling).as_secs_f64());
    let total = args.agents + private;
    let after = status(&mut clients).await?;
    checkpoints.push(checkpoint(&mut clients, &ids, args.samples).await?);
    let empty = probe::empty_call(&clients, args.samples).await?;
    let send = probe::send_message(&mut clients, &ids, args.samples).await?;

    // Archive before any restart, so its memory is compared with a
    // checkpoint of the same process.
    let archived = if args.archive > 0 {
        let t = Instant::now();
        load::archive(&clients, &ids[..args.archive], quiet).await?;
        let archive_s = t.elapsed().as_secs_f64();
        let rss = settled_rss(&mut clients).await?;
        let heap = status(&mut clients).await?;
        let left = args.agents - args.archive;
        let same_size = checkpoints
            .iter()
            .find(|p| p["agents"].as_u64() == Some(left as u64))
            .and_then(|p| p["daemon_rss_bytes"].as_u64());
        Some(json!({
            "archived": args.archive,
            "archive_per_s": args.archive as f64 / archive_s,
            "daemon_rss_bytes": rss,
            "heap_allocated_bytes": heap.heap_allocated_bytes,
            "heap_resident_bytes": heap.heap_resident_bytes,
            "left": left,
            "daemon_rss_bytes_when_as_many": same_size,
            "ratio": same_size.map(|b| rss as f64 / b.max(1) as f64),
        }))
    } else {
        None
    };

    let restarted = if args.restart {
        let r = restart::kill_and_restart(&mut clients, target).await?;
        anyhow::ensure!(
            r.status.recovered_agents as usize >= agents_before + total - args.archive,
            "the daemon came back with {} agents, not {}; see {}",
            r.status.recovered_agents,
            agents_before + total - args.archive,
            r.log.display()
        );
        Some(json!({
            "restart_s": r.elapsed.as_secs_f64(),
            "recovered_agents": r.status.recovered_agents,
            // The whole process, recovered: no baseline to subtract here.
            "daemon_rss_bytes": r.status.rss_bytes,
            "log": r.log.display().to_string(),
        }))
    } else {
        None
    };

    let report = json!({
        "bench": "holarchy bench idle",
        "agents": args.agents,
        "tree_fanout": args.tree,
        "total_agents": total,
        "concurrency": args.concurrency,
        "batch": args.batch,
        "create_per_s": create_per_s,
        "tree_s": tree_s,
        "tree_agents_per_s": tree_s.map(|s| (args.agents + private) as f64 / s),
        "daemon_rss_per_agent_bytes": after.rss_bytes.saturating_sub(before) as f64 / total as f64,
        "checkpoints": checkpoints,
        "empty_call_us": probe::percentiles(empty),
        "send_message_ack_us": probe::percentiles(send.acknowledged),
        "send_message_to_turn_seen_us": probe::percentiles(send.turn_seen),
        "archive": archived,
        "restart": restarted,
    });
    if !json_only {
        print_table(&report);
    }
    println!("{report}");
    Ok(())
}

fn print_table(report: &Value) {
    let num = |v: &Value| v.as_f64().unwrap_or(0.0);
    let latency = |name: &str, v: &Value| {
        println!(
            "{:<48} {:>9.0} us p50 {:>9.0} us p99",
            name,
            num(&v["p50"]),
            num(&v["p99"])
        );
    };
    println!("{:<48} {:>12}", "figure", "value");
    println!(
        "{:<48} {:>12.0}",
        "durable creations / s (public)",
        num(&report["create_per_s"])
    );
    if let Some(rate) = report["tree_agents_per_s"].as_f64() {
        println!(
            "{:<48} {:>12.0}",
            "tree agents (public + private) up / s", rate
        );
    }
    println!(
        "{:<48} {:>10.0} B",
        format!(
            "daemon RSS per idle agent ({} agents)",
            report["total_agents"]
        ),
        num(&report["daemon_rss_per_agent_bytes"])
    );
    for point in report["checkpoints"].as_array().into_iter().flatten() {
        let n = &point["agents"];
        latency(&format!("GetAgent at {n} agents"), &point["get_agent_us"]);
        latency(
            &format!("ListAgents (page of 1,000) at {n} agents"),
            &point["list_agents_1000_us"],
        );
    }
    latency(
        "an empty call (health check): the transport",
        &report["empty_call_us"],
    );
    latency(
        "SendMessage, until acknowledged",
        &report["send_message_ack_us"],
    );
    latency(
        "SendMessage, until the turn is seen starting",
        &report["send_message_to_turn_seen_us"],
    );
    if let Some(archive) = report["archive"].as_object() {
        println!(
            "{:<48} {:>12.0}",
            "durable archives / s",
            num(&archive["archive_per_s"])
        );
        println!(
            "{:<48} {:>10.0} MB",
            format!("daemon RSS, {} left after archiving", archive["left"]),
            num(&archive["daemon_rss_bytes"]) / 1e6
        );
        if let Some(ratio) = archive["ratio"].as_f64() {
            println!(
                "{:<48} {:>11.2}x",
                format!("  vs RSS when {} had been created", archive["left"]),
                ratio
            );
        }
    }
    if let Some(restart) = report["restart"].as_object() {
        println!(
            "{:<48} {:>10.3} s",
            format!(
                "kill -9 to answering with {} agents",
                restart["recovered_agents"]
            ),
            num(&restart["restart_s"])
        );
    }
}
