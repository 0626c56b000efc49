//! What agents write never drives the operator's terminal: a brain's
//! reply, a command line and its output, a note and the events that record
//! them all hold terminal control sequences (erase the line and forge
//! another, set the title, write the clipboard), and every human output of
//! the CLI shows them escaped, while `--json` keeps them exact.

use serde_json::json;

use crate::cli::{handled, Holarchy};
use crate::common::{data_dir, Daemon};

/// Erase the line and return to its start, then a forged line; set the
/// window title; write the clipboard (OSC 52); an 8-bit CSI.
const HOSTILE: &str = "ok\u{1b}[2K\rFORGED\u{1b}]0;owned\u{7}\u{1b}]52;c;ZXZpbA==\u{7}\u{9b}31m";

fn assert_inert(what: &str, shown: &str) {
    let raw: Vec<char> = shown
        .chars()
        .filter(|c| c.is_control() && *c != '\n' && *c != '\t')
        .collect();
    assert!(raw.is_empty(), "{what} printed {raw:?}: {shown:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_characters_from_agents_are_escaped_in_every_human_output() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    cli.ok(&["agent", "create", "ops"]);
    let turn = json!({
        "reply": HOSTILE,
        "tool_calls": [
            { "name": "ExecCommand", "input": {
                "command": "printf 'out\\033[2K\\rFORGED\\033]0;owned\\007\\n' # \u{1b}[2K",
                "yield_ms": 10000 } },
            { "name": "MemoryWrite", "input": { "text": format!("note {HOSTILE}") } },
            { "name": "update_work_item", "input": { "objective": HOSTILE } },
        ],
    });
    cli.ok(&["agent", "send", "ops", &turn.to_string()]);
    handled(&cli, "ops", 1);
    let task_id = cli.json(&["task", "list", "ops"])[0]["task_id"]
        .as_str()
        .expect("the command's task")
        .to_owned();

    for args in [
        vec!["agent", "messages", "ops"],
        vec!["agent", "get", "ops"],
        vec!["events"],
        vec!["task", "list", "ops"],
        vec!["task", "output", &task_id],
        vec!["tree"],
        vec!["work", "list", "ops"],
        vec!["memory", "list", "ops"],
    ] {
        let shown = cli.ok(&args);
        assert_inert(&args.join(" "), &shown);
    }
    let messages = cli.ok(&["agent", "messages", "ops"]);
    assert!(messages.contains("ok\\u001b[2K\\u000dFORGED"), "{messages}");
    let found = crate::cli::until("the note indexed", || {
        let shown = cli.ok(&["memory", "search", "ops", "note"]);
        shown.contains("note").then_some(shown)
    });
    assert_inert("memory search", &found);
    let output = cli.ok(&["task", "output", &task_id]);
    assert!(output.contains("out\\u001b[2K\\u000dFORGED"), "{output}");

    // Scripts get the text exactly as the agent wrote it.
    let exact = cli.json(&["agent", "messages", "ops"]);
    assert_eq!(exact[0]["reply"], HOSTILE);
}
