//! The tour's first part, on agent `ops`: talking to an agent, reading it
//! back, and supervising a private child through its task handle.

use serde_json::{json, Value};

use crate::cli::{handled, last_word, text, until, Holarchy};
use crate::common::{self, data_dir, Daemon};

/// `agent create|send|messages|get|list`, `events` and `status`, human
/// and JSON, as the tour runs them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_takes_messages_once_and_reports_them() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);

    let created = cli.ok(&["agent", "create", "ops", "--message", "hello"]);
    assert!(created.starts_with("created ops agt_"), "{created}");
    let ops = last_word(&created);
    let sent = cli.ok(&["agent", "send", "ops", "check the build"]);
    assert!(sent.starts_with("sent msg_"), "{sent}");

    // A retry with the same dedupe key is the same message, not a new one.
    let first = cli.ok(&[
        "agent",
        "send",
        "ops",
        "pay once",
        "--dedupe-key",
        "invoice-7",
    ]);
    let paid = last_word(&first);
    let retry = cli.ok(&[
        "agent",
        "send",
        "ops",
        "pay once",
        "--dedupe-key",
        "invoice-7",
    ]);
    assert_eq!(retry.trim(), format!("already sent {paid}"));
    let again = cli.json_one(&[
        "agent",
        "send",
        "ops",
        "pay once",
        "--dedupe-key",
        "invoice-7",
    ]);
    assert_eq!(again["duplicate"], true);
    assert_eq!(text(&again, "message_id"), paid);

    let scripted = json!({"reply": "on it", "tool_calls": [{"name": "AgentGet", "input": {}}]});
    cli.ok(&["agent", "send", "ops", &scripted.to_string()]);

    let all = handled(&cli, "ops", 4);
    let texts: Vec<&str> = all.iter().map(|m| text(m, "text")).collect();
    assert_eq!(
        texts,
        [
            "hello",
            "check the build",
            "pay once",
            &scripted.to_string()
        ],
        "in order, the deduplicated one once"
    );
    assert!(all.iter().all(|m| m["provenance"] == "operator"));
    assert_eq!(all[1]["reply"], "ack: check the build");
    assert_eq!(all[3]["reply"], "on it");
    let human = cli.ok(&["agent", "messages", "ops"]);
    assert!(
        human.contains("[handled] operator: check the build"),
        "{human}"
    );
    assert!(human.contains("-> ack: check the build"), "{human}");
    assert!(human.contains("-> on it"), "{human}");

    let detail = cli.ok(&["agent", "get", "ops"]);
    for line in [
        format!("agent        {ops}"),
        "name         ops".to_owned(),
        "profile      public_named (public, self_owned)".to_owned(),
        "state        active / idle".to_owned(),
        "brain        scripted".to_owned(),
    ] {
        assert!(
            detail.lines().any(|l| l == line),
            "no {line:?} in\n{detail}"
        );
    }
    let by_id = cli.json_one(&["agent", "get", &ops]);
    assert_eq!(by_id["name"], "ops");
    assert_eq!(by_id["preset"], "public_named");
    assert_eq!(by_id["visibility"], "public");
    assert!(by_id["turns_completed"].as_u64().expect("turns") >= 4);

    let table = cli.ok(&["agent", "list"]);
    let mut rows = table.lines();
    assert!(rows.next().expect("header").starts_with("NAME"), "{table}");
    let row = rows.next().expect("a row for ops");
    // Names first; the id cut to its tail.
    assert!(
        row.starts_with("ops ")
            && row.contains(&ops[ops.len() - 6..])
            && row.contains("public_named"),
        "{row}"
    );
    let listed = cli.json(&["agent", "list"]);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["agent_id"], ops.as_str());

    // The event log holds the story in order: created, queued, the tool
    // call, the reply to it.
    let events = cli.json(&["events"]);
    let position = |wanted: &dyn Fn(&Value) -> bool| {
        events
            .iter()
            .position(wanted)
            .unwrap_or_else(|| panic!("event missing from {events:#?}"))
    };
    let created_at = position(&|e| e["kind"] == "agent_created");
    let queued_at = position(&|e| e["kind"] == "message_queued");
    let called_at = position(&|e| e["kind"] == "tool_called" && e["detail"]["tool"] == "AgentGet");
    let replied_at = position(&|e| e["kind"] == "replied" && e["detail"]["text"] == "on it");
    assert!(created_at < queued_at && queued_at < called_at && called_at < replied_at);
    assert!(events.iter().all(|e| e["agent_id"] == ops.as_str()));
    let log = cli.ok(&["events"]);
    let line = log
        .lines()
        .find(|l| l.contains("tool_called"))
        .unwrap_or_else(|| panic!("no tool_called in\n{log}"));
    // Its agent by name and the tail of its id, never the whole id.
    let ops_tail = &ops[ops.len() - 6..];
    assert!(
        line.contains(&format!("ops ({ops_tail})"))
            && !line.contains(&ops)
            && line.trim_end().ends_with("AgentGet"),
        "{line}"
    );

    let status = cli.ok(&["status"]);
    assert!(status.starts_with("holarchy "), "{status}");
    assert!(
        status.contains("agents     1 public, 0 private"),
        "{status}"
    );
    let status = cli.json_one(&["status"]);
    assert_eq!(status["public_agents"], 1);
    assert_eq!(status["pid"], daemon.pid());
    assert_eq!(
        text(&status, "data_dir"),
        daemon.data_dir.to_str().expect("utf-8")
    );
    assert!(status["event_cursor"].as_u64().expect("cursor") >= events.len() as u64);
}

/// `SpawnAgent` of a private delegator, then `tree`, `task list|get|
/// input|output|stop`, `agent list --include-private` and `agent archive`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ops_supervises_private_children_through_task_handles() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    let ops = last_word(&cli.ok(&["agent", "create", "ops"]));

    let audit = spawn_delegator(&cli, "lead the audit");
    let child = text(&audit, "child_agent_id").to_owned();
    let task = text(&audit, "task_id").to_owned();
    // The list puts the label first and cuts ids to their tails.
    let short = |id: &str| id[id.len() - 6..].to_owned();
    let listed = cli.ok(&["task", "list", "ops"]);
    let row = listed
        .lines()
        .find(|l| l.contains(&short(&task)))
        .unwrap_or_else(|| panic!("no {task} in\n{listed}"));
    assert!(
        row.starts_with("lead the audit ")
            && row.contains("child_agent_task")
            && row.contains("running")
            && row.contains(&short(&child))
            && !row.contains(&task)
            && !row.contains(&child),
        "{listed}"
    );
    // The child's page names its supervisor and creator, with the tail of
    // ops's id that any command takes for ops.
    let tail = &ops[ops.len() - 6..];
    let detail = cli.ok(&["agent", "get", &child]);
    for line in [
        format!("lineage      ops ({tail})"),
        format!("supervisor   ops ({tail})"),
    ] {
        assert!(
            detail.lines().any(|l| l == line),
            "no {line:?} in\n{detail}"
        );
    }
    let by_tail = cli.ok(&["agent", "get", tail]);
    assert!(
        by_tail.lines().any(|l| l == "name         ops"),
        "{by_tail}"
    );
    let top = cli.ok(&["agent", "get", "ops"]);
    assert!(top.lines().any(|l| l == "supervisor   -"), "{top}");

    let tree = cli.ok(&["tree"]);
    let lines: Vec<&str> = tree.lines().collect();
    assert!(
        lines[0].starts_with(&format!("agent \"ops\" {} (", short(&ops))),
        "{tree}"
    );
    assert!(
        tree.contains(&format!(
            "task \"lead the audit\" {} (child_agent_task, running)",
            short(&task)
        )),
        "{tree}"
    );
    // Not a terminal: plain indentation, the child under its handle.
    let child_line = lines
        .iter()
        .find(|l| l.contains(&short(&child)))
        .unwrap_or_else(|| panic!("no child in\n{tree}"));
    assert!(
        child_line.starts_with("    agent ") && child_line.ends_with("[private]"),
        "{tree}"
    );
    assert!(tree.contains("2 agents, 1 tasks"), "{tree}");
    // One level down shows ops's handle and child; the roots alone, neither.
    let shallow = cli.ok(&["tree", "--depth", "1"]);
    assert!(
        shallow.contains(&short(&task)) && shallow.contains(&short(&child)),
        "{shallow}"
    );
    let roots = cli.ok(&["tree", "--depth", "0"]);
    assert!(
        roots.contains(&short(&ops))
            && !roots.contains(&short(&task))
            && !roots.contains(&short(&child)),
        "{roots}"
    );
    let shape = cli.json_one(&["tree"]);
    let node = |id: &str| {
        shape["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .find(|n| n["id"] == id)
            .unwrap_or_else(|| panic!("no node {id} in {shape}"))
            .clone()
    };
    assert_eq!(node(&child)["parent_id"], ops.as_str());
    assert_eq!(node(&child)["visibility"], "private");
    assert_eq!(node(&task)["parent_id"], ops.as_str());
    assert_eq!(node(&ops)["depth"], 0);
    // Public agents hang under one of the root partitions; private ones
    // under their supervisors.
    let partitions = shape["partitions"].as_u64().expect("partitions");
    assert!(partitions >= 1, "{shape}");
    let partition = node(&ops)["partition"].as_u64().expect("ops's partition");
    assert!(partition < partitions, "{shape}");
    assert!(node(&child)["partition"].is_null(), "{shape}");
    assert!(
        lines[0].ends_with(&format!("[partition {partition}]")),
        "{tree}"
    );
    assert!(
        tree.contains(&format!("under {partitions} root partitions")),
        "{tree}"
    );

    // Private agents are listed only on request, and take no operator
    // messages: operators reach them through the parent's handle.
    let public = cli.json(&["agent", "list"]);
    assert!(public.iter().all(|a| a["agent_id"] != child.as_str()));
    let everyone = cli.json(&["agent", "list", "--include-private"]);
    assert!(everyone
        .iter()
        .any(|a| a["agent_id"] == child.as_str() && a["visibility"] == "private"));
    let human = cli.ok(&["agent", "list", "--include-private"]);
    let header = human.lines().next().expect("header");
    let row = human
        .lines()
        .find(|l| l.contains(&child[child.len() - 6..]) && l.contains("private_delegator"))
        .unwrap_or_else(|| panic!("no private child in\n{human}"));
    // The columns line up, however long the profile's name.
    assert_eq!(row.find("active"), header.find("STATE"), "\n{human}");
    let refused = cli.fails(&["agent", "send", &child, "hi"]);
    assert!(refused.contains("permission denied"), "{refused}");

    let input = cli.ok(&[
        "task",
        "input",
        &task,
        r#"{"reply":"audit done","done":true}"#,
    ]);
    assert!(input.starts_with("sent msg_"), "{input}");
    let finished = until("the audit to complete", || {
        let handle = cli.json_one(&["task", "get", &task]);
        (handle["status"] == "completed").then_some(handle)
    });
    assert_eq!(finished["output"], "audit done");
    assert_eq!(cli.ok(&["task", "output", &task]).trim(), "audit done");
    let output = cli.json_one(&["task", "output", &task]);
    assert_eq!(
        (output["status"].as_str(), output["output"].as_str()),
        (Some("completed"), Some("audit done"))
    );
    let got = cli.ok(&["task", "get", &task]);
    assert!(
        got.starts_with(&task) && got.contains("completed") && got.contains("-> audit done"),
        "{got}"
    );
    // ops hears the result as a message from its child.
    let heard = handled(&cli, "ops", 2);
    assert!(
        heard
            .iter()
            .any(|m| m["provenance"] == "child_result" && m["text"] == "audit done"),
        "{heard:#?}"
    );

    // Stopping a handle takes its child down.
    let second = spawn_delegator(&cli, "lead the review");
    let second_task = text(&second, "task_id").to_owned();
    let stopped = cli.ok(&["task", "stop", &second_task]);
    assert!(
        stopped.starts_with(&second_task) && stopped.contains("stopped"),
        "{stopped}"
    );
    let again = cli.fails(&["task", "stop", &second_task]);
    assert!(again.contains("failed precondition"), "{again}");
    let second_child = cli.json_one(&["agent", "get", text(&second, "child_agent_id")]);
    assert_eq!(second_child["state"], "archived");
    assert!(!cli.ok(&["tree"]).contains(&short(&second_task)));

    // Archiving ops takes every private descendant with it.
    let third = spawn_delegator(&cli, "lead the cleanup");
    let archived = cli.ok(&["agent", "archive", "ops"]);
    assert!(
        archived.starts_with(&format!("archived {ops}: ")),
        "{archived}"
    );
    for agent in [ops.as_str(), text(&third, "child_agent_id")] {
        assert_eq!(cli.json_one(&["agent", "get", agent])["state"], "archived");
    }
    assert_eq!(
        cli.json_one(&["task", "get", text(&third, "task_id")])["status"],
        "stopped"
    );
    let closed = cli.fails(&["agent", "send", "ops", "are you there?"]);
    assert!(
        closed.contains("failed precondition") && closed.contains("archived"),
        "{closed}"
    );
}

/// ops spawns a private delegator; its task handle, as `--json task list`
/// prints it, once running.
pub(crate) fn spawn_delegator(cli: &Holarchy, handoff: &str) -> Value {
    let spawn = common::script(json!([{ "name": "SpawnAgent", "input": {
        "preset": "private_delegator", "initial_message": handoff } }]));
    cli.ok(&["agent", "send", "ops", &spawn]);
    until(&format!("a task for {handoff:?}"), || {
        cli.json(&["task", "list", "ops"])
            .into_iter()
            .find(|t| t["label"] == handoff && t["status"] == "running")
    })
}
