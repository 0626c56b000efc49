//! `holarchy export`, as the README shows it: an instance takes published
//! events and runs turns that reply or call a tool; the export writes each
//! inbound event, decision and tool call once, as the log holds them, and
//! an export resumed from the cursor it printed adds only what is new.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{json, Value};

use crate::cli::{handled, text, Holarchy};
use crate::common::{data_dir, Daemon};

const DESK: &str = r#"
name = "desk"

[[ingress]]
source = "publish"
"#;

/// Every line of `dir/name`, each one JSON object.
fn lines(dir: &Path, name: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join(name)).expect("the file is there");
    text.lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|err| panic!("{name}: {line:?} is not JSON: {err}"));
            assert!(value.is_object(), "{name}: {line}");
            value
        })
        .collect()
}

fn cursors(lines: &[Value]) -> Vec<u64> {
    lines
        .iter()
        .map(|line| line["cursor"].as_u64().expect("cursor"))
        .collect()
}

/// The cursors of the log's events of `kind`, from `holarchy events`.
fn logged(cli: &Holarchy, kind: &str) -> Vec<u64> {
    cli.json(&["events"])
        .iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| e["cursor"].as_u64().expect("cursor"))
        .collect()
}

fn publish(cli: &Holarchy, key: &str) -> String {
    let published = cli.json_one(&[
        "instance",
        "publish",
        "desk",
        "--type",
        "ticket.opened",
        "--dedupe-key",
        key,
        "--payload",
        r#"{"ticket":1}"#,
    ]);
    text(&published, "event_id").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_writes_every_event_decision_and_action_once_and_resumes_from_its_cursor() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    let manifest = root.path().join("desk.toml");
    std::fs::write(&manifest, DESK).expect("manifest written");
    cli.ok(&["instance", "apply", manifest.to_str().expect("utf-8")]);

    let first = publish(&cli, "t1");
    assert_eq!(publish(&cli, "t1"), first, "a retry is the same event");
    let second = publish(&cli, "t2");
    let call = json!({ "tool_calls": [{ "name": "AgentGet", "input": {} }] }).to_string();
    cli.ok(&["agent", "send", "desk", &call]);
    handled(&cli, "desk", 3);

    let dir = root.path().join("export");
    let dir_arg = dir.to_str().expect("utf-8");
    let summary = cli.json_one(&["export", "--since", "0", dir_arg]);
    let events = lines(&dir, "events.ndjson");
    let decisions = lines(&dir, "decisions.ndjson");
    let actions = lines(&dir, "actions.ndjson");

    // Each file holds its kind of event, every one of them, once.
    assert_eq!(cursors(&events), logged(&cli, "event_received"));
    assert_eq!(cursors(&decisions), logged(&cli, "decided"));
    assert_eq!(cursors(&actions), logged(&cli, "tool_called"));
    assert_eq!(summary["events"], 2, "{summary}");
    assert_eq!(summary["decisions"], 3, "{summary}");
    assert_eq!(summary["actions"], 1, "{summary}");
    let last = summary["last_cursor"].as_u64().expect("last cursor");
    let end = cli
        .json(&["events"])
        .iter()
        .filter_map(|e| e["cursor"].as_u64())
        .max()
        .expect("a log");
    assert_eq!(last, end, "{summary}");

    let ids: BTreeSet<&str> = events.iter().map(|e| text(e, "id")).collect();
    assert_eq!(ids, BTreeSet::from([first.as_str(), second.as_str()]));
    for event in &events {
        assert_eq!(event["type"], "ticket.opened", "{event}");
        assert_eq!(event["instance"], "desk", "{event}");
        assert!(text(event, "at").ends_with('Z'), "{event}");
        // The contract's fields the log does not carry come from the
        // event store.
        assert_eq!(event["payload"]["ticket"], 1, "{event}");
        assert_eq!(event["scope"], "desk", "{event}");
        assert!(text(event, "logged_at").ends_with('Z'), "{event}");
    }
    // Two events replied to, one tool call: derived decisions of the desk.
    let kinds: Vec<&str> = decisions.iter().map(|d| text(d, "kind")).collect();
    assert_eq!(kinds, ["comment", "comment", "tool_calls"], "{decisions:?}");
    for decision in &decisions {
        assert_eq!(decision["instance"], "desk", "{decision}");
        assert_eq!(decision["explicit"], false, "{decision}");
        let run = text(decision, "run_id");
        assert_eq!(decision["idempotency_key"], format!("run:{run}"));
        assert!(!text(decision, "agent_id").is_empty(), "{decision}");
    }
    let action = &actions[0];
    assert_eq!(action["tool"], "AgentGet", "{action}");
    assert_eq!(action["input"], json!({}), "the input as JSON");
    assert_eq!(
        action["output"]["agent"]["name"], "desk",
        "the output as JSON: {action}"
    );
    assert_eq!(action["is_error"], false);
    assert_eq!(action["run_id"], decisions[2]["run_id"]);

    // Resumed from its cursor with nothing new: nothing written.
    let before: Vec<String> = ["events", "decisions", "actions"]
        .iter()
        .map(|name| std::fs::read_to_string(dir.join(format!("{name}.ndjson"))).expect("read"))
        .collect();
    let since = last.to_string();
    let again = cli.json_one(&["export", "--since", &since, dir_arg]);
    assert_eq!(
        (&again["events"], &again["decisions"], &again["actions"]),
        (&json!(0), &json!(0), &json!(0)),
        "{again}"
    );
    assert_eq!(again["last_cursor"], last);
    let after: Vec<String> = ["events", "decisions", "actions"]
        .iter()
        .map(|name| std::fs::read_to_string(dir.join(format!("{name}.ndjson"))).expect("read"))
        .collect();
    assert_eq!(before, after);

    // A new turn: the next export adds its decision, and only that.
    cli.ok(&["agent", "send", "desk", "bye"]);
    handled(&cli, "desk", 4);
    let people = cli.ok(&["export", "--since", &since, dir_arg]);
    assert!(
        people.starts_with("exported 0 events, 1 decisions, 0 actions"),
        "{people}"
    );
    let decisions = lines(&dir, "decisions.ndjson");
    assert_eq!(cursors(&decisions), logged(&cli, "decided"));
    assert_eq!(decisions.len(), 4);
}
