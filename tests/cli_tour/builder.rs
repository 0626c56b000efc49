//! The tour's second part, on agent `builder`: a command streamed with
//! `task output --follow`, a timer and a work item, pause, resume and
//! abort, `events --follow`, and a trigger delivered with `holarchy
//! trigger`.

use serde_json::{json, Value};

use crate::cli::{handled, last_word, text, until, Holarchy};
use crate::common::{self, data_dir, Daemon};

/// The tour's command: three lines, a second apart.
const COUNT_TO_THREE: &str = "for i in 1 2 3; do echo $i; sleep 1; done";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builder_streams_a_command_while_it_runs() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    cli.ok(&["agent", "create", "builder"]);

    let exec = common::script(json!([{ "name": "ExecCommand", "input": {
        "command": COUNT_TO_THREE, "yield_ms": 500 } }]));
    cli.ok(&["agent", "send", "builder", &exec]);
    let task = until("the command task", || {
        cli.json(&["task", "list", "builder"])
            .into_iter()
            .find(|t| t["task_kind"] == "command")
    });
    let task_id = text(&task, "task_id").to_owned();
    assert_eq!(task["command"], COUNT_TO_THREE);
    let listed = cli.ok(&["task", "list", "builder"]);
    assert!(
        listed
            .lines()
            .any(|l| l.contains(&task_id[task_id.len() - 6..]) && l.contains("command")),
        "{listed}"
    );

    // Streamed: the first line is out while the command still runs, the
    // rest follow, and the client ends with the command.
    let mut follow = cli.follow(&["task", "output", &task_id, "--follow"]);
    assert_eq!(follow.next_line(), "1");
    let running = cli.json_one(&["task", "get", &task_id]);
    assert_eq!(running["status"], "running", "streamed before the end");
    assert_eq!(follow.next_line(), "2");
    assert_eq!(follow.next_line(), "3");
    assert!(follow.wait_exit().success());

    let done = cli.json_one(&["task", "get", &task_id]);
    assert_eq!(done["status"], "completed");
    let chunks = cli.json(&["task", "output", &task_id, "--follow"]);
    let streamed: String = chunks.iter().map(|c| text(c, "data")).collect();
    assert_eq!(streamed, "1\n2\n3\n");
    assert!(chunks.iter().all(|c| c["stream"] == "stdout"));
    assert_eq!(cli.ok(&["task", "output", &task_id]).trim_end(), "1\n2\n3");
    let output = cli.json_one(&["task", "output", &task_id]);
    assert_eq!(output["output"], "1\n2\n3\n");
    assert_eq!(output["status"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builder_shows_its_work_item_and_timer_and_obeys_pause_resume_abort() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    let builder = last_word(&cli.ok(&["agent", "create", "builder"]));
    let mut watching = cli.follow(&["events", "--follow"]);

    let plan = common::script(json!([
        { "name": "update_work_item", "input": { "objective": "ship 1.0" } },
        { "name": "Sleep", "input": { "duration_ms": 60000, "reason": "release window" } }
    ]));
    cli.ok(&["agent", "send", "builder", &plan]);
    handled(&cli, "builder", 1);
    let detail = cli.ok(&["agent", "get", "builder"]);
    let working = detail
        .lines()
        .find(|l| l.starts_with("working on   ship 1.0 (wrk_"))
        .unwrap_or_else(|| panic!("no work item in\n{detail}"));
    let item = working
        .trim_end_matches(')')
        .rsplit('(')
        .next()
        .expect("id")
        .to_owned();
    assert!(
        detail
            .lines()
            .any(|l| l.starts_with("waiting on   timer") && l.ends_with("(release window)")),
        "{detail}"
    );
    let summary = cli.json_one(&["agent", "get", "builder"]);
    assert_eq!(summary["current_work_item"]["objective"], "ship 1.0");
    assert_eq!(summary["current_work_item"]["work_item_id"], item.as_str());
    assert!(summary["waiting_on"][0]
        .as_str()
        .expect("a wait")
        .contains("release window"));

    let work = cli.ok(&["work", "list", "builder"]);
    assert!(
        work.contains(&format!("{item}  [active] ship 1.0")),
        "{work}"
    );
    let items = cli.json(&["work", "list", "builder"]);
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["owner_agent_id"], builder.as_str());
    let one = cli.json_one(&["work", "get", &item]);
    assert_eq!(
        (one["objective"].as_str(), one["status"].as_str()),
        (Some("ship 1.0"), Some("active"))
    );
    assert!(cli
        .ok(&["work", "get", &item])
        .starts_with(&format!("{item}  [active] ship 1.0")));
    // The running `events --follow` saw both, by builder's name and the
    // tail of its id.
    let named = format!("builder ({})", &builder[builder.len() - 6..]);
    watching.line_where("the work item's event", |l| {
        l.contains(&named) && l.contains("work_item_updated")
    });
    watching.line_where("the timer's event", |l| {
        l.contains(&named) && l.contains("wait_updated")
    });

    // Paused, builder keeps its messages queued; resumed, it handles them.
    assert_eq!(
        cli.ok(&["agent", "pause", "builder"]).trim(),
        "paused: now paused"
    );
    watching.line_where("the pause", |l| {
        // The new state, then why: `paused (paused by an operator)`.
        l.contains("agent_state_changed") && l.contains("changed   paused (")
    });
    cli.ok(&["agent", "send", "builder", "while paused"]);
    let paused = cli.json_one(&["agent", "get", "builder"]);
    assert_eq!(
        (paused["state"].as_str(), paused["queue_length"].as_u64()),
        (Some("paused"), Some(1))
    );
    watching.line_where("the queued message", |l| l.contains("message_queued"));
    let resumed = cli.json_one(&["agent", "resume", "builder"]);
    assert_eq!(resumed["state"], "active");
    let all = handled(&cli, "builder", 2);
    assert_eq!(all[1]["reply"], "ack: while paused");
    // Its turn started only once it was active again.
    let story = watching.lines_until("the turn", |l| l.contains("run_started"));
    assert!(
        story
            .iter()
            .any(|l| l.contains("agent_state_changed") && l.contains("changed   active (")),
        "a turn started while paused: {story:#?}"
    );

    // Abort cuts the current turn (here: waiting on a long command) and
    // pauses the agent; with no turn running there is nothing to abort.
    let idle = cli.fails(&["agent", "abort", "builder"]);
    assert!(idle.contains("failed precondition"), "{idle}");
    let long = common::script(json!([{ "name": "ExecCommand", "input": {
        "command": "sleep 120", "yield_ms": 120000 } }]));
    cli.ok(&["agent", "send", "builder", &long]);
    let run = until("the long turn", || {
        let now = cli.json_one(&["agent", "get", "builder"]);
        let run = text(&now, "current_run_id");
        (!run.is_empty()).then(|| run.to_owned())
    });
    let aborted = cli.ok(&["agent", "abort", "builder"]);
    assert_eq!(aborted.trim(), format!("aborted {run}: now paused"));
    let after = cli.json_one(&["agent", "get", "builder"]);
    assert_eq!(after["state"], "paused");
    assert_ne!(after["current_run_id"], run.as_str());
    // Its command is a task of its own, stopped by hand.
    for task in cli.json(&["task", "list", "builder"]) {
        if task["status"] == "running" {
            let stopped = cli.json_one(&["task", "stop", text(&task, "task_id")]);
            assert_eq!(stopped["status"], "stopped");
        }
    }
    assert_eq!(
        cli.ok(&["agent", "resume", "builder"]).trim(),
        "resumed: now active"
    );
}

/// `holarchy trigger TOKEN PAYLOAD --dedupe-key KEY` wakes the agent that
/// made the trigger, once per key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_from_the_cli_wakes_its_agent_once_per_key() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    let builder = last_word(&cli.ok(&["agent", "create", "builder"]));
    // The token is given to the agent once; it hands it to its webhook
    // setup (a file in its home) the way a real brain would.
    let make = common::script(json!([
        { "name": "CreateExternalTrigger", "input": { "reason": "ci webhook" } },
        { "name": "ExecCommand", "input": {
            "command": "printf %s \"$TOKEN\" > webhook-token",
            "env": { "TOKEN": "{{results[0].token}}" } } }
    ]));
    cli.ok(&["agent", "send", "builder", &make]);
    handled(&cli, "builder", 1);
    let token_file = daemon
        .data_dir
        .join("workspaces")
        .join(&builder)
        .join("webhook-token");
    let token = std::fs::read_to_string(&token_file).expect("the token handed over");

    let mut watching = cli.follow(&["--json", "events", "--follow", "--agent", "builder"]);
    let first = cli.ok(&["trigger", &token, "build green", "--dedupe-key", "build-42"]);
    assert!(first.starts_with("sent msg_"), "{first}");
    let retry = cli.json_one(&["trigger", &token, "build green", "--dedupe-key", "build-42"]);
    assert_eq!(retry["duplicate"], true);
    assert_eq!(text(&retry, "message_id"), last_word(&first));
    let all = handled(&cli, "builder", 2);
    let woken: Vec<&Value> = all
        .iter()
        .filter(|m| m["provenance"] == "trigger")
        .collect();
    assert_eq!(woken.len(), 1, "{all:#?}");
    assert_eq!(woken[0]["text"], "build green");
    let queued = watching.line_where("the trigger's message", |l| {
        let event: Value = serde_json::from_str(l).expect("a JSON event");
        event["kind"] == "message_queued" && event["detail"]["provenance"] == "trigger"
    });
    assert!(queued.contains(&builder), "{queued}");

    let wrong = cli.fails(&["trigger", "htr_not_a_token", "x"]);
    assert!(wrong.contains("permission denied"), "{wrong}");
}
