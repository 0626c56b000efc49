//! Replays through the real daemon (docs/replay.md):
//!
//! 1. scripted throughput: one agent's recorded scripted turns (each with
//!    a tool call) replayed against themselves, turns per second;
//! 2. live turns beside a replay: `holarchy bench turns` on other agents,
//!    alone and with a replay running the whole time, alternated, as the
//!    ratio of handled turns per second;
//! 3. a command brain against itself (`--command-turns N`, 0 to skip):
//!    N recorded turns of `tests/replay/brain.py` (notes, files, reads),
//!    replayed; every turn "same" and the agent's records, event log,
//!    notes and workspace files byte-identical before and after.
//!
//! ```sh
//! cargo bench --bench replay -- [--turns 10000] [--rounds 3] [--command-turns 1000] [--pace N]
//! ```
//!
//! `--pace N` is the daemon's `--replay-turns-per-second` (its default
//! otherwise).
//!
//! Prints a table and one JSON line, and writes the JSON to
//! `target/bench-results/replay.json`.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use futures::StreamExt;
use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::{json, Value};

#[path = "support/cli.rs"]
mod cli;
#[path = "support/daemon.rs"]
mod daemon;

const HOLARCHY: &str = env!("CARGO_BIN_EXE_holarchy");

async fn create(c: &mut Clients, name: &str, brain: Option<pb::BrainConfig>) -> String {
    c.agents
        .create_agent(pb::CreateAgentRequest {
            name: name.into(),
            brain,
            ..Default::default()
        })
        .await
        .expect("created")
        .into_inner()
        .agent_id
}

async fn turns_completed(c: &mut Clients, agent: &str) -> u64 {
    c.agents
        .get_agent(pb::GetAgentRequest {
            agent: Some(pb::get_agent_request::Agent::AgentId(agent.into())),
        })
        .await
        .expect("agent")
        .into_inner()
        .agent
        .expect("summary")
        .turns_completed
}

/// Sends `texts` to `agent`, 64 in flight, and waits until every turn is
/// done.
async fn record(c: &Clients, agent: &str, texts: Vec<String>) {
    let total = texts.len() as u64;
    let sends = futures::stream::iter(texts).map(|text| {
        let mut c = c.clone();
        let agent = agent.to_owned();
        async move {
            loop {
                let sent = c
                    .agents
                    .send_message(pb::SendMessageRequest {
                        agent_id: agent.clone(),
                        text: text.clone(),
                        ..Default::default()
                    })
                    .await;
                match sent {
                    Ok(_) => return,
                    // One agent's queue holds 1,024: wait for room.
                    Err(status) if status.code() == tonic::Code::ResourceExhausted => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Err(status) => panic!("send: {status}"),
                }
            }
        }
    });
    // A few in flight: one agent takes its turns one at a time, and a
    // deep queue only makes each wait longer.
    sends.buffer_unordered(16).collect::<Vec<()>>().await;
    let mut c = c.clone();
    while turns_completed(&mut c, agent).await < total {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn replay(c: &mut Clients, agent: &str, turns: u32, concurrency: u32) -> String {
    c.replays
        .start_replay(pb::StartReplayRequest {
            agent_id: agent.into(),
            max_turns: turns,
            budget: Some(pb::ReplayBudget {
                concurrency,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("replay started")
        .into_inner()
        .replay_id
}

async fn get(c: &mut Clients, id: &str) -> pb::Replay {
    c.replays
        .get_replay(pb::GetReplayRequest {
            replay_id: id.into(),
            page_size: 1,
            ..Default::default()
        })
        .await
        .expect("replay")
        .into_inner()
        .replay
        .expect("replay")
}

async fn ended(c: &mut Clients, id: &str) -> pb::Replay {
    loop {
        let replay = get(c, id).await;
        if replay.status != "running" {
            return replay;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `holarchy bench turns` against the daemon: handled turns per second.
fn live_turns(data_dir: &std::path::Path, out: &std::path::Path) -> f64 {
    let status = Command::new(HOLARCHY)
        .arg("--data-dir")
        .arg(data_dir)
        .args([
            "bench",
            "turns",
            "--agents",
            "100",
            "--messages",
            "20000",
            "--concurrency",
            "256",
            "--cleanup",
            "--out",
        ])
        .arg(out)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("bench turns runs");
    assert!(status.success(), "bench turns failed");
    let line = std::fs::read_to_string(out).expect("its report");
    let report: Value = serde_json::from_str(line.trim()).expect("JSON");
    report["handled_per_s"].as_f64().expect("handled_per_s")
}

/// Everything of `agent` a replay must leave as it was.
async fn snapshot(c: &mut Clients, agent: &str) -> (Vec<(&'static str, String)>, usize) {
    let mut parts = Vec::new();
    let mut all = String::new();
    let summary = c
        .agents
        .get_agent(pb::GetAgentRequest {
            agent: Some(pb::get_agent_request::Agent::AgentId(agent.into())),
        })
        .await
        .expect("agent")
        .into_inner()
        .agent;
    // The record itself: what GetAgent shows beside it (how far the
    // memory's index got) moves on its own.
    parts.push(("record", format!("{summary:?}")));
    let mut token = String::new();
    loop {
        let page = c
            .agents
            .list_messages(pb::ListMessagesRequest {
                agent_id: agent.into(),
                page_token: token.clone(),
                page_size: 1000,
            })
            .await
            .expect("messages")
            .into_inner();
        all.push_str(&format!("{:?}", page.messages));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    parts.push(("messages", std::mem::take(&mut all)));
    let mut events = c
        .agents
        .watch_events(pb::WatchEventsRequest::default())
        .await
        .expect("events")
        .into_inner();
    let mut count = 0;
    while let Some(event) = events.next().await {
        all.push_str(&format!("{:?}", event.expect("event")));
        count += 1;
    }
    parts.push(("events", std::mem::take(&mut all)));
    let notes = c
        .memory
        .list_memory(pb::ListMemoryRequest {
            agent_id: agent.into(),
            page_size: 1000,
            page_token: String::new(),
        })
        .await
        .expect("notes")
        .into_inner();
    parts.push(("notes", format!("{:?}", notes.notes)));
    let workspaces = c
        .workspaces
        .list_workspaces(pb::ListWorkspacesRequest {
            agent_id: agent.into(),
            page_token: String::new(),
        })
        .await
        .expect("workspaces")
        .into_inner();
    let mut files = BTreeMap::new();
    for root in workspaces.workspaces.iter().map(|w| w.root.clone()) {
        for entry in std::fs::read_dir(&root).expect("workspace").flatten() {
            files.insert(
                entry.path(),
                std::fs::read(entry.path()).unwrap_or_default(),
            );
        }
    }
    parts.push(("files", format!("{files:?}")));
    (parts, count)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let turns = cli::number(&args, "--turns", 10_000);
    let rounds = cli::number(&args, "--rounds", 3);
    let command_turns = cli::number(&args, "--command-turns", 1_000);
    let pace = cli::number(&args, "--pace", 0);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    let report = runtime.block_on(run(turns, rounds, command_turns, pace));
    println!("{report}");
    cli::write_report(&cli::report_path("replay"), &report);
}

async fn run(turns: usize, rounds: usize, command_turns: usize, pace: usize) -> Value {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("data");
    // One agent records every turn: past the default 600 a minute its
    // turns would wait for the limit, not the store.
    let pace_flag = pace.to_string();
    let mut flags = vec!["--max-turns-per-minute", "100000000"];
    if pace > 0 {
        flags.extend(["--replay-turns-per-second", pace_flag.as_str()]);
    }
    let mut daemon = daemon::Daemon::start(&data_dir, &flags, &dir.path().join("daemon.log"));
    let mut c = daemon.clients().await;

    // 1. Scripted throughput.
    let agent = create(&mut c, "recorded", None).await;
    let script = |i: usize| {
        json!({"reply": format!("turn {i}"), "tool_calls": [{"name": "AgentGet", "input": {}}]})
            .to_string()
    };
    let started = Instant::now();
    record(&c, &agent, (0..turns).map(script).collect()).await;
    let recording = started.elapsed();
    let mut throughput = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        let id = replay(&mut c, &agent, turns as u32, 4).await;
        let done = ended(&mut c, &id).await;
        let took = started.elapsed().as_secs_f64();
        assert_eq!(done.same as usize, turns, "{done:?}");
        throughput.push(turns as f64 / took);
        c.replays
            .delete_replay(pb::ReplayRequest { replay_id: id })
            .await
            .expect("deleted");
    }

    // 2. Live turns alone and beside a replay, alternated.
    let out = dir.path().join("live.json");
    let (mut alone, mut beside, mut overlapped) = (Vec::new(), Vec::new(), true);
    for _ in 0..rounds {
        alone.push(live_turns(&data_dir, &out));
        let id = replay(&mut c, &agent, turns as u32, 4).await;
        beside.push(live_turns(&data_dir, &out));
        overlapped &= get(&mut c, &id).await.status == "running";
        c.replays
            .cancel_replay(pb::ReplayRequest {
                replay_id: id.clone(),
            })
            .await
            .ok();
        c.replays
            .delete_replay(pb::ReplayRequest { replay_id: id })
            .await
            .expect("deleted");
    }

    // 3. A command brain against itself.
    let command = if command_turns > 0 {
        let script = format!("{}/tests/replay/brain.py", env!("CARGO_MANIFEST_DIR"));
        let brain = pb::BrainConfig {
            kind: Some(pb::brain_config::Kind::Command(pb::CommandBrain {
                program: "python3".into(),
                args: vec![script],
                env: Default::default(),
                timeout_ms: 20_000,
            })),
        };
        let agent = create(&mut c, "command", Some(brain)).await;
        let texts = (0..command_turns)
            .map(|i| match i % 3 {
                0 => format!("note: k{i} value {i}"),
                1 => format!("ask: k{}", i - 1),
                _ => format!("plain {i}"),
            })
            .collect();
        let started = Instant::now();
        record(&c, &agent, texts).await;
        let recorded_s = started.elapsed().as_secs_f64();
        let (before, events) = snapshot(&mut c, &agent).await;
        let started = Instant::now();
        let id = replay(&mut c, &agent, command_turns as u32, 2).await;
        let done = ended(&mut c, &id).await;
        let replayed_s = started.elapsed().as_secs_f64();
        let (after, _) = snapshot(&mut c, &agent).await;
        json!({
            "turns": command_turns,
            "same": done.same,
            "different": done.selected - done.same,
            "unrecorded_calls": done.unrecorded_calls,
            "identical_before_and_after": before == after,
            "differing": before.iter().zip(&after).filter(|(b, a)| b != a).map(|(b, _)| b.0).collect::<Vec<_>>(),
            "events_compared": events,
            "record_s": recorded_s,
            "replay_s": replayed_s,
        })
    } else {
        Value::Null
    };
    daemon.stop();

    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let (alone_m, beside_m) = (median(alone.clone()), median(beside.clone()));
    let report = json!({
        "bench": "replay",
        "replay_turns_per_second_flag": if pace > 0 { json!(pace) } else { json!("default") },
        "scripted_turns": turns,
        "recording_s": recording.as_secs_f64(),
        "replay_turns_per_s": throughput,
        "replay_turns_per_s_median": median(throughput.clone()),
        "live_turns_per_s_alone": alone,
        "live_turns_per_s_beside_a_replay": beside,
        "live_ratio_beside_over_alone": beside_m / alone_m.max(1e-9),
        "replay_ran_through_every_live_run": overlapped,
        "command": command,
    });
    println!("| figure | value |\n|---|---|");
    println!(
        "| scripted turns replayed / s (median of {rounds}) | {:.0} |",
        median(throughput)
    );
    println!("| live turns / s alone (median) | {alone_m:.0} |");
    println!("| live turns / s beside a replay (median) | {beside_m:.0} |");
    println!(
        "| ratio beside / alone | {:.3} |",
        beside_m / alone_m.max(1e-9)
    );
    if let Some(command) = report["command"].as_object() {
        println!(
            "| command-brain turns replayed against themselves | {} |",
            command["turns"]
        );
        println!("| ... of them the same | {} |", command["same"]);
        println!(
            "| records, log, notes, files identical after | {} |",
            command["identical_before_and_after"]
        );
    }
    report
}
