//! `GetActivity` (what `holarchy top` asks for every refresh) through the
//! real daemon: its latency with a few busy agents and one long queue, then
//! again with many idle agents beside them. The call reads the hot set,
//! not every agent, so the second figure should not grow with the idle
//! ones.
//!
//! ```sh
//! cargo bench --bench activity -- [--idle 100000] [--calls 300]
//! ```
//!
//! Prints a table and one JSON line and writes the JSON to
//! `target/bench-results/activity.json`.

use std::time::Instant;

use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::{json, Value};

#[path = "support/cli.rs"]
mod cli;
#[path = "support/daemon.rs"]
mod daemon;
use daemon::Daemon;

/// Agents created in one `CreateAgents` call while the idle ones are made.
const BATCH: usize = 10_000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let idle = cli::number(&args, "--idle", 100_000);
    let calls = cli::number(&args, "--calls", 300).max(1);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut daemon = Daemon::start(
        &dir.path().join("data"),
        &[],
        &dir.path().join("daemon.log"),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    let report = runtime.block_on(measure(&daemon, idle, calls));
    daemon.stop();
    print_table(&report);
    println!("{report}");
    cli::write_report(&cli::report_path("activity"), &report);
}

async fn create(c: &mut Clients, name: &str) -> String {
    c.agents
        .create_agent(pb::CreateAgentRequest {
            name: name.into(),
            ..Default::default()
        })
        .await
        .expect("created")
        .into_inner()
        .agent_id
}

async fn send(c: &mut Clients, agent: &str, text: String) {
    c.agents
        .send_message(pb::SendMessageRequest {
            agent_id: agent.into(),
            text,
            dedupe_key: String::new(),
        })
        .await
        .expect("queued");
}

async fn activity(c: &mut Clients) -> pb::GetActivityResponse {
    c.runtime
        .get_activity(pb::GetActivityRequest { limit: 100 })
        .await
        .expect("activity")
        .into_inner()
}

/// `calls` calls, one after another: (p50, p99, max) in milliseconds.
async fn timed(c: &mut Clients, calls: usize) -> (f64, f64, f64) {
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        activity(c).await;
        samples.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99), at(1.0))
}

async fn measure(daemon: &Daemon, idle: usize, calls: usize) -> Value {
    let mut c = daemon.clients().await;
    // One paused agent with a long queue, five with turns to run.
    let stuck = create(&mut c, "stuck").await;
    c.agents
        .pause_agent(pb::PauseAgentRequest {
            agent_id: stuck.clone(),
        })
        .await
        .expect("paused");
    for i in 0..50 {
        send(&mut c, &stuck, format!("later {i}")).await;
    }
    for n in 0..5 {
        let busy = create(&mut c, &format!("busy-{n}")).await;
        for i in 0..10 {
            send(&mut c, &busy, format!("job {i}")).await;
        }
    }
    let few = timed(&mut c, calls).await;
    let few_hot = activity(&mut c).await.hot_agents;

    let started = Instant::now();
    let mut made = 0;
    while made < idle {
        let count = (idle - made).min(BATCH);
        let agents = (made..made + count)
            .map(|i| pb::CreateAgentRequest {
                name: format!("idle-{i}"),
                ..Default::default()
            })
            .collect();
        c.agents
            .create_agents(pb::CreateAgentsRequest { agents })
            .await
            .expect("created");
        made += count;
    }
    let created_s = started.elapsed().as_secs_f64();
    let many = timed(&mut c, calls).await;
    let last = activity(&mut c).await;
    assert_eq!(
        last.longest_queues.first().map(|q| q.queue_length),
        Some(50),
        "the paused agent's queue leads"
    );
    let status = c
        .runtime
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("status")
        .into_inner();
    json!({
        "bench": "activity",
        "calls": calls,
        "limit": 100,
        "few": { "agents": 6, "hot_agents": few_hot, "p50_ms": few.0, "p99_ms": few.1, "max_ms": few.2 },
        "many": {
            "agents": status.public_agents,
            "hot_agents": last.hot_agents,
            "p50_ms": many.0, "p99_ms": many.1, "max_ms": many.2,
        },
        "idle_created": idle,
        "idle_created_s": created_s,
        "p50_ratio": many.0 / few.0,
    })
}

fn print_table(r: &Value) {
    let ms = |v: &Value| v.as_f64().map_or("n/a".into(), |x| format!("{x:.3} ms"));
    println!("GetActivity (limit 100), {} calls each", r["calls"]);
    println!(
        "{:<36} {:>12} {:>12} {:>12}",
        "live agents", "p50", "p99", "max"
    );
    for key in ["few", "many"] {
        let row = &r[key];
        println!(
            "{:<36} {:>12} {:>12} {:>12}",
            format!("{} ({} hot)", row["agents"], row["hot_agents"]),
            ms(&row["p50_ms"]),
            ms(&row["p99_ms"]),
            ms(&row["max_ms"])
        );
    }
    println!(
        "p50 with the idle agents vs without: {:.2}x; {} idle agents created in {:.1} s",
        r["p50_ratio"].as_f64().unwrap_or_default(),
        r["idle_created"],
        r["idle_created_s"].as_f64().unwrap_or_default()
    );
}
