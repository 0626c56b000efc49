//! The tour's replay part: an operator replays an agent's recorded turns
//! through a candidate role and brain from the command line, reads the
//! summary and the differing turns as diffs (and as JSON), and drops the
//! replay; a bad candidate is refused with what to do next.

use crate::cli::{handled, text, Holarchy};
use crate::common::{data_dir, Daemon};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_replays_an_agents_turns_through_a_candidate() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    let brain = format!("{}/examples/brains/agent.py", env!("CARGO_MANIFEST_DIR"));
    cli.ok(&["agent", "create", "ops", "--brain-command", &brain]);
    for text in ["hello", "run: echo hi", "bye"] {
        cli.ok(&["agent", "send", "ops", text]);
    }
    handled(&cli, "ops", 3);

    // Against itself: every turn the same, said for people.
    let same = cli.ok(&["replay", "start", "ops", "--turns", "10", "--wait"]);
    assert!(same.contains("3 of 3 replayed: 3 same"), "{same}");
    assert!(same.contains("the agent's own"), "{same}");

    // Through the echo brain of the examples: the plain turns keep their
    // tools (none) with other text; the command's turn has other tools.
    let echo = format!("{}/examples/brains/echo.sh", env!("CARGO_MANIFEST_DIR"));
    let other = cli.json_one(&[
        "replay",
        "start",
        "ops",
        "--brain-command",
        &echo,
        "--label",
        "echo",
        "--wait",
    ]);
    assert_eq!(text(&other, "status"), "completed", "{other}");
    assert_eq!(other["same_tools_different_text"], 2, "{other}");
    assert_eq!(other["different_tools"], 1, "{other}");
    let id = text(&other, "replay_id").to_owned();
    let shown = cli.ok(&["replay", "show", &id]);
    assert!(shown.contains("- step 1: calls ExecCommand"), "{shown}");
    assert!(
        shown.contains("+ step 1: says a shell brain read"),
        "{shown}"
    );
    let turns = cli.json(&["replay", "show", &id, "--all"]);
    // The summary, then one object per turn.
    assert_eq!(turns.len(), 4, "{turns:?}");
    assert_eq!(text(&turns[1], "class"), "same_tools_different_text");

    let listed = cli.ok(&["replay", "list"]);
    assert!(listed.starts_with("ID"), "{listed}");
    assert!(listed.contains("echo: brain command"), "{listed}");
    let refused = cli.fails(&["replay", "cancel", &id]);
    assert!(refused.contains("not running"), "{refused}");
    cli.ok(&["replay", "delete", &id]);
    assert_eq!(cli.json(&["replay", "list"]).len(), 1);

    // A role this brain does not read changes none of its turns.
    let role = root.path().join("role.md");
    std::fs::write(&role, "Answer in one word.").expect("role written");
    let role = role.to_str().expect("a UTF-8 path");
    let roled = cli.ok(&["replay", "start", "ops", "--role-file", role, "--wait"]);
    assert!(roled.contains("3 of 3 replayed: 3 same"), "{roled}");
    assert!(roled.contains("role of 19 bytes"), "{roled}");

    let missing = cli.fails(&["replay", "start", "ops", "--role-file", "no-such-role.md"]);
    assert!(missing.contains("cannot read the role file"), "{missing}");
}
