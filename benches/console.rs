//! The web console's tree under a wide agent, through the real daemon:
//! starts the `holarchy` binary with its HTTP listener, has one public
//! agent spawn N private children through its own scripted turns (real
//! spawns, as an agent makes them), then times what the console asks for
//! when an operator expands that agent: the first page of its level
//! (`GET /api/tree?agent=ID`, 200 nodes), a page deep in the level, and
//! the roots.
//!
//! ```sh
//! cargo bench --bench console -- [--children 10000] [--samples 20]
//! ```
//!
//! Prints a table and one JSON line and writes the JSON to
//! `target/bench-results/console.json`.

use std::time::{Duration, Instant};

use holarchy::api::pb;
use serde_json::{json, Value};

#[path = "support/cli.rs"]
mod cli;
#[path = "support/daemon.rs"]
mod daemon;
use daemon::Daemon;

/// Spawns one scripted turn makes (one message of at most 64 KiB).
const PER_TURN: usize = 400;

fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("an address").to_string()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let children = cli::number(&args, "--children", 10_000);
    let samples = cli::number(&args, "--samples", 20).max(1);
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("data");
    let addr = free_addr();
    let max_children = children.to_string();
    let per_turn = PER_TURN.to_string();
    let mut daemon = Daemon::start(
        &data_dir,
        &[
            "--http-listen",
            &addr,
            "--console-public-read",
            "--max-children",
            &max_children,
            "--max-tool-calls-per-step",
            &per_turn,
        ],
        &dir.path().join("daemon.log"),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    let report = runtime.block_on(measure(&daemon, &addr, children, samples));
    daemon.stop();
    print_table(&report);
    println!("{report}");
    cli::write_report(&cli::report_path("console"), &report);
}

async fn get(http: &reqwest::Client, url: &str) -> (Duration, Value) {
    let started = Instant::now();
    let answer = http.get(url).send().await.expect("the console answers");
    assert!(answer.status().is_success(), "{url}: {}", answer.status());
    let body: Value = answer.json().await.expect("JSON");
    (started.elapsed(), body)
}

/// Times `url` `samples` times: (median, max) in milliseconds.
async fn timed(http: &reqwest::Client, url: &str, samples: usize) -> (f64, f64) {
    let mut times = Vec::with_capacity(samples);
    for _ in 0..samples {
        times.push(get(http, url).await.0.as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], times[times.len() - 1])
}

async fn measure(daemon: &Daemon, addr: &str, children: usize, samples: usize) -> Value {
    let mut c = daemon.clients().await;
    let wide = c
        .agents
        .create_agent(pb::CreateAgentRequest {
            name: "wide".into(),
            ..Default::default()
        })
        .await
        .expect("created")
        .into_inner()
        .agent_id;
    let started = Instant::now();
    let mut left = children;
    let mut turns = 0;
    while left > 0 {
        let batch = left.min(PER_TURN);
        let calls: Vec<_> = (0..batch)
            .map(|i| {
                json!({ "name": "SpawnAgent", "input": {
                "preset": "private_child", "initial_message": format!("c{i}") } })
            })
            .collect();
        c.agents
            .send_message(pb::SendMessageRequest {
                agent_id: wide.clone(),
                text: json!({ "tool_calls": calls }).to_string(),
                dedupe_key: String::new(),
            })
            .await
            .expect("queued");
        left -= batch;
        turns += 1;
    }
    // Every turn handled: every spawn is stored.
    loop {
        let handled = c
            .agents
            .list_messages(pb::ListMessagesRequest {
                agent_id: wide.clone(),
                page_size: 1000,
                page_token: String::new(),
            })
            .await
            .expect("messages")
            .into_inner()
            .messages
            .iter()
            .filter(|m| m.status == pb::MessageStatus::Handled as i32)
            .count();
        if handled == turns {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "spawns took over 30 minutes"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let spawned_s = started.elapsed().as_secs_f64();

    let http = reqwest::Client::new();
    let level = format!("http://{addr}/api/tree?agent={wide}");
    // The whole level, page after page: it holds every child and its
    // handle.
    let mut agents = 0;
    let mut pages = 0;
    let mut page = String::new();
    let mut last_page = String::new();
    loop {
        let url = if page.is_empty() {
            level.clone()
        } else {
            format!("{level}&page={page}")
        };
        let (_, body) = get(&http, &url).await;
        agents += body["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .filter(|n| n["type"] == "agent")
            .count();
        pages += 1;
        let next = body["next"].as_str().unwrap_or_default().to_owned();
        if next.is_empty() {
            break;
        }
        last_page = next.clone();
        page = next;
    }
    assert_eq!(agents, children, "every child is on the level");
    let (first_ms, first_max_ms) = timed(&http, &level, samples).await;
    let deep = format!("{level}&page={last_page}");
    let (deep_ms, deep_max_ms) = timed(&http, &deep, samples).await;
    let (roots_ms, roots_max_ms) = timed(&http, &format!("http://{addr}/api/tree"), samples).await;
    json!({
        "bench": "console",
        "private_children": children,
        "spawn_turns": turns,
        "spawn_s": spawned_s,
        "spawns_per_s": children as f64 / spawned_s,
        "level_pages": pages,
        "samples": samples,
        "first_page_median_ms": first_ms,
        "first_page_max_ms": first_max_ms,
        "last_page_median_ms": deep_ms,
        "last_page_max_ms": deep_max_ms,
        "roots_median_ms": roots_ms,
        "roots_max_ms": roots_max_ms,
    })
}

fn print_table(r: &Value) {
    let ms = |v: &Value| v.as_f64().map_or("n/a".into(), |x| format!("{x:.1} ms"));
    println!(
        "the console's tree under one agent with {} private children",
        r["private_children"]
    );
    println!(
        "{:<44} {:>12} {:>12}",
        "GET /api/tree (200 nodes a page)", "median", "max"
    );
    for (label, key) in [
        ("first page of the agent's level", "first_page"),
        ("last page of the agent's level", "last_page"),
        ("the roots", "roots"),
    ] {
        println!(
            "{label:<44} {:>12} {:>12}",
            ms(&r[format!("{key}_median_ms")]),
            ms(&r[format!("{key}_max_ms")])
        );
    }
    println!(
        "spawned in {:.1} s ({:.0} a second)",
        r["spawn_s"].as_f64().unwrap_or_default(),
        r["spawns_per_s"].as_f64().unwrap_or_default()
    );
}
