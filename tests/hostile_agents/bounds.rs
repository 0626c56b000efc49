//! Hostile agents: every bound on what one agent can make the daemon do
//! (spawn depth, children, waits, commands, tool calls, steps, texts,
//! total agents, turn pace) refuses with a tool error or a gRPC status, and
//! the daemon carries on.

use std::path::{Path, PathBuf};

use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::json;

use crate::common::{self, create_on, data_dir, eventually, send, Daemon};

/// A command brain running the shell script `script`, written to `path`.
fn script_brain(path: &Path, script: &str) -> pb::BrainConfig {
    std::fs::write(path, script).expect("brain written");
    let status = std::process::Command::new("chmod")
        .arg("+x")
        .arg(path)
        .status()
        .expect("chmod runs");
    assert!(status.success());
    common::command_brain(&path.display().to_string(), &[])
}

/// A command brain: `first` at each turn's first step, `later` after.
fn shell_brain(dir: &Path, name: &str, first: &str, later: &str) -> pb::BrainConfig {
    let path: PathBuf = dir.join(name);
    let script = format!(
        "#!/bin/sh\ninput=$(cat)\ncase \"$input\" in\n  *'\"step\":1,'*) echo '{first}' ;;\n  *) echo '{later}' ;;\nesac\n"
    );
    script_brain(&path, &script)
}

/// Every `tool_called` event's detail for `tool`, oldest first.
async fn calls_of(c: &mut Clients, tool: &str) -> Vec<serde_json::Value> {
    common::events(c, 0)
        .await
        .into_iter()
        .filter(|e| e.kind == "tool_called" && e.text == tool)
        .map(|e| serde_json::from_str(&e.detail_json).expect("detail is JSON"))
        .collect()
}

fn error_of(detail: &serde_json::Value) -> Option<String> {
    (detail["is_error"] == true).then(|| detail["output"].as_str().unwrap_or_default().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_propagating_delegator_chain_stops_at_the_depth_bound() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    // Each agent of the chain spawns a delegator that does the same: one
    // message would grow it without end.
    let grow = r#"{"tool_calls":[{"name":"SpawnAgent","input":{"preset":"private_delegator","initial_message":"grow"}}]}"#;
    let brain = shell_brain(root.path(), "grow.sh", grow, r#"{"reply":"grown"}"#);
    let id = create_on(&mut c, "chain", brain).await;
    send(&mut c, &id, "grow").await;

    let refusal = eventually("a spawn refused at the depth bound", || {
        let mut c = c.clone();
        async move {
            calls_of(&mut c, "SpawnAgent")
                .await
                .iter()
                .find_map(error_of)
        }
    })
    .await;
    assert!(
        refusal.contains("depth 33") && refusal.contains("--max-spawn-depth"),
        "{refusal}"
    );
    let spawns = calls_of(&mut c, "SpawnAgent").await;
    assert_eq!(spawns.len(), 33, "32 levels made, the 33rd refused");
    assert_eq!(spawns.iter().filter(|d| d["is_error"] == true).count(), 1);
    let status = crate::common::status(&mut c).await;
    assert_eq!((status.public_agents, status.private_agents), (1, 32));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_over_the_tool_call_bound_runs_none_of_its_calls() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let id = common::create(&mut c, "busy", None).await;
    let calls: Vec<_> = (0..129)
        .map(|_| json!({ "name": "AgentGet", "input": {} }))
        .collect();
    send(&mut c, &id, &common::script(json!(calls))).await;
    common::handled(&c, &id, 1).await;
    assert!(calls_of(&mut c, "AgentGet").await.is_empty());
    let (failed, output) = common::tool_call(&mut c, &id, "tool_calls").await;
    assert!(failed);
    let error = output["error"].as_str().expect("error text");
    assert!(
        error.contains("129 tool calls") && error.contains("limit is 128"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brain_that_never_stops_calling_tools_is_cut_at_the_step_bound() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with(&data_dir(&root), &["--max-steps-per-turn", "2"]).await;
    let mut c = daemon.clients().await;
    let again = r#"{"tool_calls":[{"name":"AgentGet","input":{}}]}"#;
    let brain = shell_brain(root.path(), "again.sh", again, again);
    let id = create_on(&mut c, "restless", brain).await;
    send(&mut c, &id, "go").await;
    common::handled(&c, &id, 1).await;
    assert_eq!(calls_of(&mut c, "AgentGet").await.len(), 2);
    let detail: serde_json::Value = common::events(&mut c, 0)
        .await
        .into_iter()
        .rev()
        .find(|e| e.kind == "run_finished" && e.agent_id == id)
        .map(|e| serde_json::from_str(&e.detail_json).expect("JSON"))
        .expect("run finished");
    assert!(
        detail["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("step_limit") && d.contains("2 steps")),
        "{detail}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_waits_and_commands_are_bounded_per_agent() {
    let root = tempfile::tempdir().expect("tempdir");
    let flags = [
        "--max-children",
        "2",
        "--max-waits",
        "2",
        "--max-agent-commands",
        "1",
    ];
    let daemon = Daemon::start_with(&data_dir(&root), &flags).await;
    let mut c = daemon.clients().await;
    let id = common::create(&mut c, "greedy", None).await;
    let spawn = json!({ "name": "SpawnAgent", "input": { "preset": "private_child", "initial_message": "hi" } });
    let sleep = json!({ "name": "Sleep", "input": { "duration_ms": 3_600_000u64 } });
    let exec = json!({ "name": "ExecCommand", "input": { "command": "sleep 30", "yield_ms": 0 } });
    let script = json!([spawn, spawn, spawn, sleep, sleep, sleep, exec, exec]);
    send(&mut c, &id, &common::script(script)).await;
    common::handled(&c, &id, 1).await;

    for (tool, flag) in [
        ("SpawnAgent", "--max-children"),
        ("Sleep", "--max-waits"),
        ("ExecCommand", "--max-agent-commands"),
    ] {
        let calls = calls_of(&mut c, tool).await;
        let errors: Vec<String> = calls.iter().filter_map(error_of).collect();
        let expected = if tool == "ExecCommand" { 2 } else { 3 };
        assert_eq!(calls.len(), expected, "{tool}");
        assert_eq!(errors.len(), 1, "{tool}: {errors:?}");
        assert!(errors[0].contains(flag), "{tool}: {}", errors[0]);
        let last = calls.last().expect("calls");
        assert_eq!(last["is_error"], true, "{tool}: the last call is refused");
    }
    let agent = common::get_agent(&mut c, &id).await;
    assert_eq!(agent.waiting_on.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_and_task_input_texts_over_64_kib_are_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    // Room for a 70 KB text in a tool's input, so the text bound is what
    // refuses it.
    let flags = ["--max-tool-input-bytes", "200000"];
    let daemon = Daemon::start_with(&data_dir(&root), &flags).await;
    let mut c = daemon.clients().await;
    let id = common::create(&mut c, "verbose", None).await;
    let big = "{{results[0].task_handle.initial_output}}";
    let script = json!([
        { "name": "ExecCommand", "input": { "command": "head -c 70000 /dev/zero | tr '\\0' x" } },
        { "name": "ExecCommand", "input": { "command": "cat", "yield_ms": 0 } },
        { "name": "Enqueue", "input": { "text": big } },
        { "name": "TaskInput", "input": { "task_id": "{{results[1].task_handle.task_id}}", "text": big } },
    ]);
    send(&mut c, &id, &common::script(script)).await;
    common::handled(&c, &id, 1).await;
    for tool in ["Enqueue", "TaskInput"] {
        let (failed, output) = common::tool_call(&mut c, &id, tool).await;
        assert!(failed, "{tool}: {output}");
        let error = output["error"].as_str().expect("error text");
        assert!(
            error.contains("70000 bytes") && error.contains("65536"),
            "{tool}: {error}"
        );
    }
    assert_eq!(
        common::messages(&mut c, &id).await.len(),
        1,
        "nothing queued"
    );

    let tasks = c
        .tasks
        .list_tasks(pb::ListTasksRequest {
            agent_id: id.clone(),
            ..Default::default()
        })
        .await
        .expect("tasks")
        .into_inner()
        .tasks;
    let cat = tasks
        .iter()
        .find(|t| t.status == "running")
        .expect("cat runs");
    let refused = c
        .tasks
        .send_task_input(pb::SendTaskInputRequest {
            task_id: cat.task_id.clone(),
            text: "x".repeat(70_000),
        })
        .await
        .expect_err("over the message limit");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    assert!(refused.message().contains("limit"), "{refused:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_refuses_agents_past_its_total() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with(&data_dir(&root), &["--max-agents", "2"]).await;
    let mut c = daemon.clients().await;
    let first = common::create(&mut c, "first", None).await;
    common::create(&mut c, "second", None).await;
    let refused = c
        .agents
        .create_agent(pb::CreateAgentRequest {
            context_tokens: None,
            mcp_servers: Vec::new(),
            network: String::new(),
            name: "third".into(),
            initial_message: None,
            brain: None,
            labels: Default::default(),
        })
        .await
        .expect_err("past the total");
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
    assert!(refused.message().contains("--max-agents"), "{refused:?}");

    let spawn = json!([{ "name": "SpawnAgent", "input": { "preset": "private_child", "initial_message": "hi" } }]);
    send(&mut c, &first, &common::script(spawn)).await;
    common::handled(&c, &first, 1).await;
    let (failed, output) = common::tool_call(&mut c, &first, "SpawnAgent").await;
    assert!(failed, "{output}");
    assert!(output["error"]
        .as_str()
        .is_some_and(|e| e.contains("--max-agents")));
    // Refused means nothing changed.
    let listed = c
        .agents
        .list_agents(pb::ListAgentsRequest::default())
        .await
        .expect("agents")
        .into_inner()
        .agents;
    assert_eq!(listed.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_queues_itself_runs_at_a_bounded_rate() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with(&data_dir(&root), &["--max-turns-per-minute", "30"]).await;
    let mut c = daemon.clients().await;
    let again = r#"{"tool_calls":[{"name":"Enqueue","input":{"text":"again"}}]}"#;
    let brain = shell_brain(
        root.path(),
        "again.sh",
        again,
        r#"{"reply":"queued again"}"#,
    );
    let id = create_on(&mut c, "looper", brain).await;
    let started = std::time::Instant::now();
    send(&mut c, &id, "again").await;

    // A burst of 30 turns, then each next one waits for the pace (one every
    // 2 s): seen as no run in flight, its message queued, the agent active.
    let count = |messages: &[pb::Message], status: pb::MessageStatus| {
        messages
            .iter()
            .filter(|m| m.status == status as i32)
            .count()
    };
    let handled = eventually("the burst spent and the next turn deferred", || {
        let mut c = c.clone();
        let id = id.clone();
        async move {
            let agent = common::get_agent(&mut c, &id).await;
            let messages = common::messages(&mut c, &id).await;
            let handled = count(&messages, pb::MessageStatus::Handled);
            let deferred = agent.current_run_id.is_empty()
                && agent.state == pb::LifecycleState::Active as i32
                && handled >= 30
                && count(&messages, pb::MessageStatus::Queued) == 1;
            deferred.then_some(handled)
        }
    })
    .await;
    // The burst, plus one turn per 2 s of the pace since the start (and one
    // for rounding): far fewer than the loop would run unbounded.
    let allowed = 30 + started.elapsed().as_secs() as usize / 2 + 1;
    assert!(
        handled <= allowed,
        "{handled} turns ran in {:?}",
        started.elapsed()
    );
    // Deferred, not failed: it runs once the pace allows.
    eventually("the deferred turn runs", || {
        let mut c = c.clone();
        let id = id.clone();
        async move {
            let messages = common::messages(&mut c, &id).await;
            (count(&messages, pb::MessageStatus::Handled) > handled
                && count(&messages, pb::MessageStatus::Failed) == 0)
                .then_some(())
        }
    })
    .await;
}

/// A command brain that says whether the earlier turns it was shown are
/// the newest: `newest` if it saw `old-10049`, `sixth` if it saw
/// `old-10044` (one more than the five it should see).
fn recent_turns_probe(dir: &Path) -> pb::BrainConfig {
    let path: PathBuf = dir.join("probe.sh");
    let script = r#"#!/bin/sh
input=$(cat)
newest=no
oldest=no
case "$input" in *'"text":"old-10049"'*) newest=yes ;; esac
case "$input" in *'"text":"old-00000"'*) oldest=yes ;; esac
echo "{\"reply\":\"newest=$newest oldest=$oldest\"}"
"#;
    script_brain(&path, script)
}

/// Writes `count` handled messages `old-00000`.. for `agent` straight into
/// a stopped daemon's store: a long history, without running its turns.
async fn seed_history(data: &Path, agent: &str, count: usize) {
    use holarchy::store::sled_store::StoreConfig;
    use holarchy::store::SledStore;
    use holarchy_actors::{Batch, Store, Write};
    use holarchy_supervision::{AgentId, MessageRecord, MessageStatus, Provenance, RunId};

    let agent_id: AgentId = agent.parse().expect("agent id");
    let store = SledStore::open(&data.join("db"), &StoreConfig::default()).expect("store");
    let mut batch = Batch::new();
    for n in 0..count {
        let mut message = MessageRecord::queued(
            agent_id,
            Provenance::Operator,
            format!("old-{n:05}"),
            None,
            1,
        );
        message.status = MessageStatus::Handled {
            run_id: RunId::generate(),
        };
        message.reply = Some(format!("done {n}"));
        message.attempts = 1;
        batch = batch.write(Write::PutMessage(message));
    }
    store.commit(batch).expect("commit");
    store.durable().await.expect("durable");
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_a_long_history_the_brain_sees_the_newest_turns() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let id = create_on(&mut c, "veteran", recent_turns_probe(root.path())).await;
    let status = daemon.terminate(std::time::Duration::from_secs(30)).await;
    assert!(status.success(), "{status:?}");
    // More than the 10,000 oldest messages a turn start used to read.
    seed_history(&dir, &id, 10_050).await;

    let daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let probe = send(&mut c, &id, "probe").await;
    let reply = eventually("the probe answered", || {
        let mut c = c.clone();
        let (id, probe) = (id.clone(), probe.clone());
        async move {
            common::messages(&mut c, &id)
                .await
                .into_iter()
                .find(|m| m.message_id == probe && m.status == pb::MessageStatus::Handled as i32)
                .map(|m| m.reply)
        }
    })
    .await;
    // The context holds the newest turns that fit its budget (many more
    // than five now), never the oldest.
    assert_eq!(reply, "newest=yes oldest=no");
}

/// The peak resident memory of a process so far (`VmHWM`), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM")
        * 1024
}

/// A brain that runs a command printing 1 MiB, then asks for 128 pages of
/// its output at every later step: its 8 steps would keep 224 MiB of
/// results in the turn (copied into each step's brain input, and stored in
/// one batch) without the turn's budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_paging_a_large_output_is_held_to_its_result_budget() {
    let root = tempfile::tempdir().expect("tempdir");
    let flags = ["--store-cache-mib", "8"];
    let daemon = Daemon::start_with(&data_dir(&root), &flags).await;
    let mut c = daemon.clients().await;
    let print = json!({ "tool_calls": [{ "name": "ExecCommand", "input": {
        "command": "yes x | head -c 1048576", "yield_ms": 20_000u64 } }] });
    let page = json!({ "name": "TaskOutput", "input": { "task_id": "{{results[0].task_handle.task_id}}" } });
    let pages = json!({ "tool_calls": vec![page; 128] });
    let brain = shell_brain(
        root.path(),
        "pager.sh",
        &print.to_string(),
        &pages.to_string(),
    );
    let id = create_on(&mut c, "pager", brain).await;
    let before = peak_rss(daemon.pid());
    send(&mut c, &id, "read it all").await;
    common::handled(&c, &id, 1).await;
    let after = peak_rss(daemon.pid());

    let exec = calls_of(&mut c, "ExecCommand").await;
    assert_eq!(exec.len(), 1);
    let kept = exec[0]["output"].as_str().expect("output");
    assert!(kept.len() <= 256 * 1024, "{} bytes kept", kept.len());
    assert!(kept.contains("--max-tool-result-bytes"), "the cut says so");

    let pages = calls_of(&mut c, "TaskOutput").await;
    // A command brain takes 8 steps: the first runs the command.
    assert_eq!(pages.len(), 7 * 128, "every call is answered");
    let ran = pages.iter().filter(|d| d["is_error"] == false).count();
    // 8 MiB of budget, about 256 KiB a page (cut): about 30 pages ran.
    assert!(
        (20..=40).contains(&ran),
        "{ran} pages ran: {:?} / {}",
        pages.first(),
        &exec[0]["output"].as_str().unwrap_or_default()[..300]
    );
    let refused: Vec<String> = pages.iter().filter_map(error_of).collect();
    assert_eq!(ran + refused.len(), pages.len());
    assert!(
        refused[0].contains("--max-turn-result-bytes"),
        "{}",
        refused[0]
    );
    let kept: usize = pages
        .iter()
        .map(|d| d["output"].as_str().map_or(0, str::len))
        .sum();
    assert!(kept < 12 * 1024 * 1024, "{kept} bytes of pages stored");

    eprintln!(
        "paging turn: daemon peak RSS {} MiB before, {} MiB after",
        before >> 20,
        after >> 20
    );
    assert!(
        after.saturating_sub(before) < 192 * 1024 * 1024,
        "the daemon's peak grew by {} MiB during one turn",
        (after - before) >> 20
    );
}

/// Command-brain steps are processes: with one slot in the daemon, two
/// agents' steps run one after the other, never at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brain_processes_share_the_daemons_slots() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with(&data_dir(&root), &["--max-brain-processes", "1"]).await;
    let mut c = daemon.clients().await;
    // Replies with when its step started and ended, in nanoseconds.
    let timed = r#"cat >/dev/null; a=$(date +%s%N); sleep 0.5; b=$(date +%s%N); printf '{"reply":"%s %s"}' "$a" "$b""#;
    let mut ids = Vec::new();
    for name in ["first", "second"] {
        let brain = common::command_brain("/bin/sh", &["-c", timed]);
        ids.push(common::create_on(&mut c, name, brain).await);
    }
    for id in &ids {
        send(&mut c, id, "when?").await;
    }
    let mut spans = Vec::new();
    for id in &ids {
        let reply = common::handled(&c, id, 1).await[0].reply.clone();
        let times: Vec<u128> = reply
            .split_whitespace()
            .map(|t| t.parse().expect("a time"))
            .collect();
        spans.push((times[0], times[1]));
    }
    spans.sort_unstable();
    assert!(
        spans[0].1 <= spans[1].0,
        "two brain steps overlapped with one slot: {spans:?}"
    );
}
