//! "Run an agent on your own program": `serve --brain-command` as the
//! default brain, `agent create --brain-command`, `agent brain` and
//! `tools`, with the example brains of `examples/brains/`.

use serde_json::Value;

use crate::cli::{handled, text, Holarchy};
use crate::common::{data_dir, Daemon};

fn example(name: &str) -> String {
    format!("{}/examples/brains/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_run_on_the_default_program_their_own_or_the_scripted_brain() {
    let root = tempfile::tempdir().expect("tempdir");
    let shell = example("echo.sh");
    let daemon = Daemon::start_with(&data_dir(&root), &["--brain-command", &shell]).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);

    // Created without a brain: the daemon's default program decides.
    cli.ok(&["agent", "create", "plain"]);
    let plain = cli.ok(&["agent", "get", "plain"]);
    assert!(
        plain
            .lines()
            .any(|l| l.starts_with("brain        command: ") && l.contains(&shell)),
        "{plain}"
    );
    let brain = &cli.json_one(&["agent", "get", "plain"])["brain"];
    assert_eq!(
        (brain["kind"].as_str(), brain["program"].as_str()),
        (Some("command"), Some(shell.as_str()))
    );
    cli.ok(&["agent", "send", "plain", "hi"]);
    let replies = handled(&cli, "plain", 1);
    assert!(
        text(&replies[0], "reply").starts_with("a shell brain read"),
        "{replies:?}"
    );

    // The tour's helper on the worked example: it runs a command through
    // ExecCommand, then replies with its output.
    let agent_py = example("agent.py");
    cli.ok(&[
        "agent",
        "create",
        "helper",
        "--brain-command",
        "python3",
        "--brain-arg",
        &agent_py,
    ]);
    let brain = &cli.json_one(&["agent", "get", "helper"])["brain"];
    assert_eq!(brain["program"], "python3");
    assert_eq!(brain["args"][0], agent_py.as_str());
    cli.ok(&["agent", "send", "helper", "run: uname -a"]);
    let ran = handled(&cli, "helper", 1);
    assert!(text(&ran[0], "reply").starts_with("ran: Linux"), "{ran:?}");
    let events = cli.json(&["events", "--agent", "helper"]);
    assert!(events
        .iter()
        .any(|e| e["kind"] == "tool_called" && e["detail"]["tool"] == "ExecCommand"));
    let helper = text(&ran[0], "agent_id");
    assert!(
        events.iter().all(|e| e["agent_id"] == helper),
        "--agent filters"
    );

    // Brains change from the next turn.
    let changed = cli.ok(&["agent", "brain", "helper", "--brain-scripted"]);
    assert!(
        changed.lines().any(|l| l == "brain        scripted"),
        "{changed}"
    );
    cli.ok(&["agent", "send", "helper", "run: true"]);
    let all = handled(&cli, "helper", 2);
    assert_eq!(all[1]["reply"], "ack: run: true");
    let unsaid = cli.fails(&["agent", "brain", "helper"]);
    assert!(unsaid.contains("say which brain"), "{unsaid}");

    // The catalog the program is given.
    let catalog = cli.ok(&["tools", "helper"]);
    let exec = catalog
        .lines()
        .find(|l| l.starts_with("ExecCommand "))
        .unwrap_or_else(|| panic!("no ExecCommand in\n{catalog}"));
    assert!(exec.contains("local_environment"), "{exec}");
    let tools = cli.json(&["tools", "helper"]);
    let names: Vec<&str> = tools.iter().map(|t| text(t, "name")).collect();
    for wanted in [
        "AgentGet",
        "SpawnAgent",
        "ExecCommand",
        "Sleep",
        "CreateExternalTrigger",
    ] {
        assert!(names.contains(&wanted), "{wanted} missing from {names:?}");
    }
    assert!(
        tools
            .iter()
            .all(|t| t["input_schema"]["type"] == "object" && t["family"].is_string()),
        "{tools:#?}"
    );
    assert!(
        catalog.starts_with("TOOL "),
        "a table with a header: {catalog}"
    );
    assert_eq!(
        catalog.lines().count(),
        tools.len() + 1,
        "a header and one line per tool: {:?}",
        tools.iter().map(|t: &Value| &t["name"]).collect::<Vec<_>>()
    );
}
