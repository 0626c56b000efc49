//! Tables people read: names first, columns as wide as their content, ids
//! cut to the tail that tells them apart and taken back by any part only
//! one agent's id has (its start or that tail), as git and docker take
//! them; ages instead of epochs. `--json` keeps every id whole.

use serde_json::json;

use crate::cli::{text, until, Holarchy};
use crate::common::{self, data_dir, Daemon};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_put_names_first_and_short_ids_name_one_agent() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    let long = "a-name-longer-than-any-column-used-to-be";
    for name in ["ops", long, "builder"] {
        cli.ok(&["agent", "create", name]);
    }

    let table = cli.ok(&["agent", "list"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    assert!(lines[0].starts_with("NAME "), "names first: {table}");
    // Columns sized to content: every row's ID column starts where the
    // header's does, after the longest name.
    let id_at = lines[0].find("ID").expect("an ID column");
    assert!(id_at > long.len(), "{table}");
    for line in &lines[1..] {
        assert_ne!(line.as_bytes()[id_at], b' ', "aligned: {table}");
        assert_eq!(line.as_bytes()[id_at - 1], b' ', "aligned: {table}");
    }
    assert!(table.contains(" ago"), "ages, not epochs: {table}");

    let ops = cli.json_one(&["agent", "get", "ops"]);
    let id = text(&ops, "agent_id").to_owned();
    let row = lines
        .iter()
        .find(|l| l.starts_with("ops "))
        .expect("ops row");
    let short = row.split_whitespace().nth(1).expect("a short id");
    assert!(
        id.ends_with(short) && short.len() < id.len(),
        "{short} of {id}"
    );

    // The short id, a unique start, and the whole id all name ops.
    for part in [
        short.to_owned(),
        short.to_lowercase(),
        id[..id.len() - 2].to_owned(),
        id.clone(),
    ] {
        let got = cli.json_one(&["agent", "get", &part]);
        assert_eq!(text(&got, "agent_id"), id, "`{part}` names ops");
    }
    cli.ok(&["agent", "pause", short]);
    assert_eq!(
        text(&cli.json_one(&["agent", "get", "ops"]), "state"),
        "paused"
    );

    // Agents created together share their ids' start: it names no one.
    // As much of it as ops and builder share (their creations may fall
    // either side of a change in the ids' time digits).
    let builder = cli.json_one(&["agent", "get", "builder"]);
    let builder = text(&builder, "agent_id");
    let shared = id
        .bytes()
        .zip(builder.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    assert!(shared >= 8, "{id} and {builder} made seconds apart");
    let ambiguous = cli.run(&["agent", "get", &id[..shared]]);
    assert_eq!(ambiguous.status.code(), Some(6), "{}", ambiguous.stderr);
    assert!(
        ambiguous.stderr.contains("give more of the id"),
        "{}",
        ambiguous.stderr
    );
    for name in ["(ops)", "(builder)"] {
        assert!(
            ambiguous.stderr.contains(name),
            "candidates listed: {}",
            ambiguous.stderr
        );
    }
    let nobody = cli.run(&["agent", "get", "ZZZZZZZZ"]);
    assert_eq!(nobody.status.code(), Some(4), "{}", nobody.stderr);

    // Scripts still get every id whole.
    let listed = cli.json(&["agent", "list"]);
    assert!(listed.iter().any(|a| text(a, "agent_id") == id));
}

/// `events`, `tree` and `task list` name agents and tasks first and cut
/// their ids to tails, as the tables do; a task's tail names it to every
/// task command; `--json` keeps every id whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_tree_and_task_lists_show_names_and_short_ids_never_whole_ones() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    cli.ok(&["agent", "create", "ops", "--message", "hello"]);
    cli.ok(&["agent", "create", "builder"]);
    let spawn = common::script(json!([{ "name": "SpawnAgent", "input": {
        "preset": "private_delegator", "initial_message": "lead the audit" } }]));
    cli.ok(&["agent", "send", "ops", &spawn]);
    let task = until("ops's task", || {
        cli.json(&["task", "list", "ops"])
            .into_iter()
            .find(|t| t["status"] == "running")
    });
    let task_id = text(&task, "task_id").to_owned();
    let child = text(&task, "child_agent_id").to_owned();
    let agents = cli.json(&["agent", "list", "--include-private"]);
    let mut ids: Vec<String> = agents
        .iter()
        .map(|a| text(a, "agent_id").to_owned())
        .collect();
    assert!(ids.contains(&child), "{agents:?}");
    ids.push(task_id.clone());
    let id_of = |name: &str| {
        let agent = agents
            .iter()
            .find(|a| a["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {agents:?}"));
        text(agent, "agent_id").to_owned()
    };
    let short = |id: &str| id[id.len() - 6..].to_owned();
    let whole = |output: &str, what: &str| {
        for id in &ids {
            assert!(
                !output.contains(id.as_str()),
                "{what} shows the whole id {id}:\n{output}"
            );
        }
    };

    let events = cli.ok(&["events"]);
    whole(&events, "events");
    let ops = id_of("ops");
    let created = events
        .lines()
        .find(|l| l.contains("agent_created") && l.contains(&short(&ops)))
        .unwrap_or_else(|| panic!("no creation of ops in\n{events}"));
    assert!(
        created.contains(&format!("ops ({})", short(&ops))),
        "the name first: {created}"
    );
    // A private child has no name: its tail alone.
    assert!(
        events
            .lines()
            .any(|l| l.contains("agent_created") && l.contains(&short(&child))),
        "{events}"
    );
    whole(&cli.ok(&["events", "--agent", "builder"]), "events --agent");

    let tree = cli.ok(&["tree"]);
    whole(&tree, "tree");
    for shown in [
        format!("agent \"ops\" {}", short(&ops)),
        format!("agent \"builder\" {}", short(&id_of("builder"))),
        format!("task \"lead the audit\" {}", short(&task_id)),
        format!("agent {}", short(&child)),
    ] {
        assert!(tree.contains(&shown), "no {shown:?} in\n{tree}");
    }

    let listed = cli.ok(&["task", "list", "ops"]);
    whole(&listed, "task list");
    let mut rows = listed.lines();
    assert!(
        rows.next().expect("a header").starts_with("LABEL "),
        "{listed}"
    );
    let row = rows.next().expect("ops's task");
    assert!(
        row.starts_with("lead the audit ")
            && row.contains(&short(&task_id))
            && row.contains(&short(&child)),
        "{listed}"
    );

    // The tail shown (and a start, in either case) names the task.
    for part in [
        short(&task_id),
        short(&task_id).to_lowercase(),
        task_id[..task_id.len() - 2].to_owned(),
    ] {
        let got = cli.json_one(&["task", "get", &part]);
        assert_eq!(text(&got, "task_id"), task_id, "`{part}` names the task");
    }
    let nothing = cli.run(&["task", "get", "ZZZZZZZZ"]);
    assert_eq!(nothing.status.code(), Some(4), "{}", nothing.stderr);

    // Scripts still get every id whole.
    let json_events = cli.json(&["events"]);
    assert!(json_events.iter().any(|e| e["agent_id"] == ops.as_str()));
    let json_tree = cli.json_one(&["tree"]);
    assert!(json_tree["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .any(|n| n["id"] == task_id.as_str()));
    let json_tasks = cli.json(&["task", "list", "ops"]);
    assert_eq!(json_tasks[0]["task_id"], task_id.as_str());
    assert_eq!(json_tasks[0]["child_agent_id"], child.as_str());
}
