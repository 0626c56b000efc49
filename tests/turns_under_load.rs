//! Turns at full rate across `kill -9`: many SendMessage calls in flight
//! over 50 scripted agents, the daemon killed in the middle of the run and
//! started again on the same data directory; every acknowledged message
//! must be in the store and end up handled exactly once.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::{data_dir, events, messages, Daemon};
use holarchy::api::pb;
use holarchy::client::Clients;

const AGENTS: usize = 50;
/// Enough that the kill lands while hundreds of turns are queued, running
/// or being flushed, few enough for a debug build to finish in seconds.
const MESSAGES: usize = 3_000;
const IN_FLIGHT: usize = 128;
/// The kill comes once this many messages are acknowledged.
const KILL_AFTER: usize = MESSAGES / 2;

fn scripted() -> Option<pb::BrainConfig> {
    Some(pb::BrainConfig {
        kind: Some(pb::brain_config::Kind::Scripted(pb::ScriptedBrain {})),
    })
}

async fn create_agents(c: &mut Clients) -> Vec<String> {
    let agents = (0..AGENTS)
        .map(|i| pb::CreateAgentRequest {
            context_tokens: None,
            mcp_servers: Vec::new(),
            network: String::new(),
            name: format!("load-{i}"),
            initial_message: None,
            brain: scripted(),
            labels: Default::default(),
        })
        .collect();
    c.agents
        .create_agents(pb::CreateAgentsRequest { agents })
        .await
        .expect("agents created")
        .into_inner()
        .agent_ids
}

/// Sends messages round-robin over `agents` from `IN_FLIGHT` callers until
/// all are sent or the daemon goes away; returns each acknowledged
/// message's id with its agent's. A call that fails (the daemon was killed
/// under it) ends its caller: its message may or may not be stored, and
/// was never promised.
async fn send_until_killed(
    connections: Vec<Clients>,
    agents: Arc<Vec<String>>,
    acked: Arc<AtomicUsize>,
) -> Vec<(String, String)> {
    let out = Arc::new(Mutex::new(Vec::new()));
    let mut callers = Vec::new();
    for w in 0..IN_FLIGHT {
        let mut c = connections[w % connections.len()].clone();
        let (agents, acked, out) = (agents.clone(), acked.clone(), out.clone());
        callers.push(tokio::spawn(async move {
            for i in (w..MESSAGES).step_by(IN_FLIGHT) {
                let agent_id = agents[i % agents.len()].clone();
                let reply = c
                    .agents
                    .send_message(pb::SendMessageRequest {
                        agent_id: agent_id.clone(),
                        text: format!("m{i}"),
                        dedupe_key: String::new(),
                    })
                    .await;
                let Ok(reply) = reply else { return };
                out.lock()
                    .expect("no caller panicked")
                    .push((agent_id, reply.into_inner().message_id));
                acked.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for caller in callers {
        caller.await.expect("caller task");
    }
    let sent = out.lock().expect("no caller panicked").clone();
    sent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_messages_survive_kill_9_at_full_rate_and_are_handled_once() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let agents = Arc::new(create_agents(&mut c).await);
    assert_eq!(agents.len(), AGENTS);

    // Four connections, as four clients would: no call waits for one of
    // a connection's streams.
    let mut connections = Vec::new();
    for _ in 0..4 {
        connections.push(daemon.clients().await);
    }
    let acked = Arc::new(AtomicUsize::new(0));
    let sending = tokio::spawn(send_until_killed(
        connections,
        agents.clone(),
        acked.clone(),
    ));
    common::eventually("half the messages acknowledged", || {
        let n = acked.load(Ordering::Relaxed);
        async move { (n >= KILL_AFTER).then_some(()) }
    })
    .await;
    daemon.kill9();
    let sent = sending.await.expect("senders");
    assert!(
        sent.len() >= KILL_AFTER && sent.len() < MESSAGES,
        "the kill must land mid-run: {} of {MESSAGES} acknowledged",
        sent.len()
    );

    let daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    // Every acknowledged message is stored, and every stored one (also
    // those whose call the kill cut off) gets handled.
    let stored: HashMap<String, pb::Message> =
        common::eventually("every stored message handled", || {
            let mut c = c.clone();
            let agents = agents.clone();
            async move {
                let mut all = HashMap::new();
                for agent in agents.iter() {
                    for m in messages(&mut c, agent).await {
                        if m.status != pb::MessageStatus::Handled as i32 {
                            return None;
                        }
                        all.insert(m.message_id.clone(), m);
                    }
                }
                Some(all)
            }
        })
        .await;
    let lost: Vec<&(String, String)> = sent
        .iter()
        .filter(|(_, id)| !stored.contains_key(id))
        .collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged messages lost across kill -9, e.g. {:?}",
        lost.len(),
        lost.first()
    );
    for (agent, id) in &sent {
        assert_eq!(&stored[id].agent_id, agent, "{id} stored on another agent");
    }

    // Exactly one completed turn per message. A message whose turn was
    // running when the daemon died shows an `interrupted` run_finished
    // (written by recovery) before the completed one: that is the promised
    // behaviour (at-least-once turns, exactly-once completion), not a
    // duplicate.
    let ours: HashSet<&str> = agents.iter().map(String::as_str).collect();
    let mut ends: HashMap<String, Vec<(String, String)>> = HashMap::new();
    for e in events(&mut c, 0).await {
        if e.kind == "run_finished" && ours.contains(e.agent_id.as_str()) {
            ends.entry(e.message_id)
                .or_default()
                .push((e.text, e.run_id));
        }
    }
    let mut interrupted = 0;
    for (id, message) in &stored {
        let runs = ends.get(id).map(Vec::as_slice).unwrap_or_default();
        let completed: Vec<&(String, String)> =
            runs.iter().filter(|(o, _)| o == "completed").collect();
        assert_eq!(
            completed.len(),
            1,
            "message {id} must be completed exactly once, its runs: {runs:?}"
        );
        assert_eq!(
            completed[0].1, message.run_id,
            "{id}: the stored run is the completed one"
        );
        let others: Vec<&(String, String)> =
            runs.iter().filter(|(o, _)| o != "completed").collect();
        assert!(
            others.iter().all(|(o, _)| o == "interrupted"),
            "message {id}: only interrupted runs may precede its completion: {runs:?}"
        );
        assert_eq!(
            message.attempts as usize,
            runs.len(),
            "{id}: one attempt per run"
        );
        interrupted += others.len();
    }
    eprintln!(
        "{} acknowledged of {MESSAGES}, {} stored, {interrupted} turns interrupted by the kill and run again",
        sent.len(),
        stored.len()
    );
}

/// `holarchy bench turns` against a real daemon: every turn is seen
/// handled, the daemon's CPU is read from `/proc`, and a figure the daemon
/// does not report (flushes) is null, not 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_turns_sees_every_turn_handled_and_reports_its_cost() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let out = root.path().join("turns.json");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_holarchy"));
    command
        .arg("--data-dir")
        .arg(&daemon.data_dir)
        .args(["bench", "turns", "--agents", "20", "--messages", "200"])
        .args(["--concurrency", "16", "--tool-calls", "1", "--out"])
        .arg(&out)
        .env_remove("HOLARCHY_ADDR")
        .env_remove("HOLARCHY_SOCKET");
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .expect("bench runs");
    assert!(
        output.status.success(),
        "bench turns failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let written = std::fs::read_to_string(&out).expect("JSON written");
    let report: serde_json::Value = serde_json::from_str(written.trim()).expect("one JSON line");
    assert_eq!(report["acknowledged"], 200);
    assert_eq!(report["handled"], 200);
    assert_eq!(report["not_completed"], 0);
    // Its message queued and who sent it, the run's start, its step, reply
    // and end.
    assert_eq!(report["events_per_turn"].as_f64(), Some(7.0), "{report}");
    assert!(report["daemon_cpu_us_per_turn"]
        .as_f64()
        .is_some_and(|us| us > 0.0));
    // The store's own account: every turn flushed and written, in a few
    // transactions at most (its message queued with its start, its end).
    assert!(
        report["flushes_per_turn"].as_f64().is_some_and(|f| f > 0.0),
        "{report}"
    );
    assert!(
        report["transactions_per_turn"]
            .as_f64()
            .is_some_and(|t| t > 0.0 && t <= 10.0),
        "{report}"
    );
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("handled / s"), "{table}");
}
