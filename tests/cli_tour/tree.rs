//! `holarchy tree` as people read it: each private child drawn under the
//! task handle that holds it, two levels deep; plain indentation in a pipe
//! and box drawing on a terminal; every agent counted once; at most
//! `--limit` lines, then how many more; the JSON unchanged but for the
//! handle's child.

use serde_json::{json, Value};

use crate::cli::{text, until, Holarchy};
use crate::common::{self, data_dir, Daemon};
use crate::ops::spawn_delegator;

/// The last six characters of an id: every tail the tree draws ends so.
fn short(id: &str) -> &str {
    &id[id.len() - 6..]
}

/// The one line of `drawn` that shows `id`.
fn line_of<'a>(drawn: &'a str, id: &str) -> &'a str {
    let mut lines = drawn.lines().filter(|l| l.contains(short(id)));
    let line = lines
        .next()
        .unwrap_or_else(|| panic!("no {id} in\n{drawn}"));
    assert!(lines.next().is_none(), "{id} drawn twice in\n{drawn}");
    line
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tree_draws_each_private_child_under_the_handle_that_holds_it() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    cli.ok(&["agent", "create", "ops"]);
    // ops holds a delegator through a handle; the delegator, told through
    // that handle, holds a child of its own.
    let audit = spawn_delegator(&cli, "lead the audit");
    let (child, task) = (text(&audit, "child_agent_id"), text(&audit, "task_id"));
    let spawn = common::script(json!([{ "name": "SpawnAgent", "input": {
        "preset": "private_child", "initial_message": "check the logs" } }]));
    cli.ok(&["task", "input", task, &spawn]);
    let grandchild = until("the delegator's own child", || {
        cli.json(&["agent", "list", "--include-private"])
            .into_iter()
            .find(|a| a["supervisor_agent_id"] == child)
            .map(|a| text(&a, "agent_id").to_owned())
    });
    let shape = cli.json_one(&["tree"]);
    let nodes = shape["nodes"].as_array().expect("nodes");
    let node = |id: &str| -> &Value {
        nodes
            .iter()
            .find(|n| n["id"] == id)
            .unwrap_or_else(|| panic!("no node {id} in {shape}"))
    };
    // The JSON keeps the walk's shape: a child hangs under its supervisor,
    // beside its handle, which now names it.
    let inner_task = nodes
        .iter()
        .find(|n| n["child_agent_id"] == grandchild.as_str())
        .map(|n| text(n, "id"))
        .unwrap_or_else(|| panic!("no handle of {grandchild} in {shape}"));
    assert_eq!(node(task)["child_agent_id"], child);
    assert_eq!(
        (&node(child)["depth"], &node(task)["depth"]),
        (&json!(1), &json!(1))
    );
    assert_eq!(node(&grandchild)["parent_id"], child);
    assert_eq!(node(inner_task)["parent_id"], child);

    // In a pipe: plain indentation, two spaces a level, nothing else.
    let piped = cli.ok(&["tree"]);
    let expected = [
        (task, "  task "),
        (child, "    agent "),
        (inner_task, "      task "),
        (grandchild.as_str(), "        agent "),
    ];
    for (id, start) in expected {
        assert!(line_of(&piped, id).starts_with(start), "{id}:\n{piped}");
    }
    assert!(
        !piped.contains(['├', '└', '│', '|', '`']),
        "no branches drawn in a pipe:\n{piped}"
    );
    let order: Vec<&str> = piped.lines().take(5).collect();
    assert!(order[0].starts_with("agent \"ops\" "), "{piped}");
    for (line, (id, _)) in order[1..].iter().zip(expected) {
        assert!(line.contains(short(id)), "drawn in walk order:\n{piped}");
    }
    assert!(piped.contains("\n3 agents, 2 tasks, "), "{piped}");

    // On a terminal: box drawing, each handle the last under its agent.
    let Some(boxed) = cli.on_terminal(&["tree"]) else {
        return;
    };
    let expected = [
        (task, "└── task "),
        (child, "    └── agent "),
        (inner_task, "        └── task "),
        (grandchild.as_str(), "            └── agent "),
    ];
    for (id, start) in expected {
        assert!(line_of(&boxed, id).starts_with(start), "{id}:\n{boxed}");
    }
    assert!(boxed.contains("\n3 agents, 2 tasks, "), "{boxed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tree_draws_at_most_its_limit_and_says_how_many_more() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    for name in ["a", "b", "c", "d", "e"] {
        cli.ok(&["agent", "create", name]);
    }
    let drawn = |tree: &str| tree.lines().filter(|l| l.starts_with("agent ")).count();
    let cut = cli.ok(&["tree", "--limit", "3"]);
    let lines: Vec<&str> = cut.lines().collect();
    assert_eq!(drawn(&cut), 3, "{cut}");
    assert_eq!(lines[3], "... 2 more (--limit 0 draws them all)", "{cut}");
    assert!(lines[4].starts_with("5 agents, 0 tasks"), "{cut}");
    for all in [cli.ok(&["tree", "--limit", "0"]), cli.ok(&["tree"])] {
        assert_eq!(drawn(&all), 5, "{all}");
        assert!(!all.contains(" more "), "{all}");
    }
    // Scripts get every node whatever the limit.
    let shape = cli.json_one(&["tree", "--limit", "1"]);
    assert_eq!(shape["nodes"].as_array().map(Vec::len), Some(5));
    assert_eq!(shape["agents"], 5);
}
