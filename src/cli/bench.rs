//! `holarchy bench idle`: a load tool for operators. It drives a running
//! daemon over gRPC: creates N idle agents (durable batches, concurrent
//! callers), then measures the daemon's memory per agent (from its status),
//! GetAgent and ListAgents latency, and SendMessage acknowledgement latency,
//! and prints a table and one JSON line.

use std::io::Write as _;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use serde_json::json;

use crate::api::pb;
use crate::client::Clients;

#[derive(Debug, Args)]
pub struct IdleArgs {
    /// Agents to create.
    #[arg(long, default_value_t = 10_000)]
    pub agents: usize,
    /// Concurrent callers.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Agents per CreateAgents call.
    #[arg(long, default_value_t = 1_000)]
    pub batch: usize,
    /// Latency samples per call kind.
    #[arg(long, default_value_t = 1_000)]
    pub samples: usize,
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let at = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[at].as_secs_f64() * 1e6
}

async fn rss(clients: &mut Clients) -> anyhow::Result<u64> {
    Ok(clients
        .runtime
        .get_status(pb::GetStatusRequest {})
        .await?
        .into_inner()
        .rss_bytes)
}

/// A cheap spread over the created ids, without a random-number crate.
fn pick(ids: &[String], i: usize) -> &str {
    &ids[(i.wrapping_mul(2_654_435_761)) % ids.len()]
}

pub async fn idle(clients: Clients, args: &IdleArgs, json_only: bool) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.agents > 0 && args.batch > 0 && args.concurrency > 0,
        "agents, batch and concurrency must be positive"
    );
    let mut c = clients.clone();
    let before = rss(&mut c).await?;
    // Names unique to this run, so runs against one daemon do not collide.
    let run = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0)
    );
    let started = Instant::now();
    let batches: Vec<(usize, usize)> = (0..args.agents)
        .step_by(args.batch)
        .map(|start| (start, (start + args.batch).min(args.agents)))
        .collect();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut workers = Vec::new();
    for worker in 0..args.concurrency {
        let mut c = clients.clone();
        let mine: Vec<(usize, usize)> = batches
            .iter()
            .copied()
            .skip(worker)
            .step_by(args.concurrency)
            .collect();
        let tx = tx.clone();
        let run = run.clone();
        workers.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for (start, end) in mine {
                let agents = (start..end)
                    .map(|i| pb::CreateAgentRequest {
                        name: format!("bench-{run}-{i}"),
                        initial_message: None,
                        brain: None,
                    })
                    .collect();
                let made = c
                    .agents
                    .create_agents(pb::CreateAgentsRequest { agents })
                    .await?
                    .into_inner()
                    .agent_ids;
                let _ = tx.send(made.len());
                ids.extend(made);
            }
            anyhow::Ok(ids)
        }));
    }
    drop(tx);
    let mut done = 0;
    while let Some(n) = rx.recv().await {
        done += n;
        if !json_only {
            eprint!("\rcreated {done}/{} agents", args.agents);
            let _ = std::io::stderr().flush();
        }
    }
    let mut ids = Vec::with_capacity(args.agents);
    for worker in workers {
        ids.extend(worker.await.context("creator task")??);
    }
    let create_s = started.elapsed().as_secs_f64();
    if !json_only {
        eprintln!();
    }
    let after = rss(&mut c).await?;

    let mut get = Vec::with_capacity(args.samples);
    for i in 0..args.samples {
        let request = pb::GetAgentRequest {
            agent: Some(pb::get_agent_request::Agent::AgentId(
                pick(&ids, i).to_owned(),
            )),
        };
        let t = Instant::now();
        c.agents.get_agent(request).await?;
        get.push(t.elapsed());
    }
    get.sort();
    let mut list = Vec::new();
    for _ in 0..args.samples.clamp(1, 50) {
        let t = Instant::now();
        c.agents
            .list_agents(pb::ListAgentsRequest {
                page_size: 1000,
                page_token: String::new(),
                include_private: false,
            })
            .await?;
        list.push(t.elapsed());
    }
    list.sort();
    let mut send = Vec::with_capacity(args.samples);
    for i in 0..args.samples.min(args.agents) {
        let request = pb::SendMessageRequest {
            agent_id: pick(&ids, i).to_owned(),
            text: "ping".into(),
            dedupe_key: String::new(),
        };
        let t = Instant::now();
        c.agents.send_message(request).await?;
        send.push(t.elapsed());
    }
    send.sort();

    let report = json!({
        "bench": "holarchy bench idle",
        "agents": args.agents,
        "concurrency": args.concurrency,
        "batch": args.batch,
        "create_per_s": args.agents as f64 / create_s,
        "daemon_rss_per_agent_bytes": after.saturating_sub(before) as f64 / args.agents as f64,
        "get_agent_us": { "p50": percentile(&get, 0.5), "p99": percentile(&get, 0.99) },
        "list_agents_1000_us": { "p50": percentile(&list, 0.5), "p99": percentile(&list, 0.99) },
        "send_message_ack_us": { "p50": percentile(&send, 0.5), "p99": percentile(&send, 0.99) },
    });
    if !json_only {
        println!("{:<44} {:>12}", "figure", "value");
        println!(
            "{:<44} {:>12.0}",
            "durable creations / s",
            report["create_per_s"].as_f64().unwrap_or(0.0)
        );
        println!(
            "{:<44} {:>10.0} B",
            "daemon RSS per idle agent",
            report["daemon_rss_per_agent_bytes"].as_f64().unwrap_or(0.0)
        );
        for (name, key) in [
            ("GetAgent", "get_agent_us"),
            ("ListAgents, a page of 1,000", "list_agents_1000_us"),
            ("SendMessage, until acknowledged", "send_message_ack_us"),
        ] {
            println!(
                "{:<44} {:>9.0} us p50 {:>9.0} us p99",
                name,
                report[key]["p50"].as_f64().unwrap_or(0.0),
                report[key]["p99"].as_f64().unwrap_or(0.0)
            );
        }
    }
    println!("{report}");
    Ok(())
}
