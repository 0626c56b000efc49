//! The tour's approvals part: an instance that must ask before it runs a
//! command; the operator lists what waits, approves one call (it runs
//! once) and denies another (the agent reads why).

use std::path::Path;

use crate::cli::{handled, text, until, Holarchy};
use crate::common::{data_dir, Daemon};

/// A daemon with the instance `release`, whose commands wait for an
/// operator's approval; its data directory's root, the daemon, a client.
async fn release_instance() -> (tempfile::TempDir, Daemon, Holarchy) {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    let manifest = root.path().join("release.toml");
    std::fs::write(
        &manifest,
        "name = \"release\"\n[brain.scripted]\n[constraints]\nrequire_approval = [\"ExecCommand\"]\n",
    )
    .expect("manifest");
    cli.ok(&["instance", "apply", manifest.to_str().expect("utf-8")]);
    (root, daemon, cli)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_lists_approves_and_denies_parked_calls() {
    let (_root, _daemon, cli) = release_instance().await;
    let exec = |command: &str| {
        format!(
            r#"{{"tool_calls":[{{"name":"ExecCommand","input":{{"command":"{command}","yield_ms":5000}}}}]}}"#
        )
    };
    cli.ok(&["agent", "send", "release", &exec("echo tagged")]);
    cli.ok(&["agent", "send", "release", &exec("echo pushed")]);
    handled(&cli, "release", 2);

    let waiting = until("two approvals", || {
        let all = cli.json(&["approvals", "--agent", "release"]);
        (all.len() == 2).then_some(all)
    });
    assert!(waiting
        .iter()
        .all(|a| a["status"] == "pending" && a["tool"] == "ExecCommand"));
    let first = text(&waiting[0], "approval_id").to_owned();
    let second = text(&waiting[1], "approval_id").to_owned();

    let approved = cli.ok(&["approve", &first]);
    assert!(
        approved.starts_with(&format!("approved {first}: ExecCommand ran")),
        "{approved}"
    );
    assert!(approved.contains("tagged"), "{approved}");
    let denied = cli.ok(&["deny", &second, "--reason", "not today"]);
    assert!(denied.starts_with(&format!("denied {second}")), "{denied}");
    let again = cli.fails(&["approve", &first]);
    assert!(again.contains("already approved"), "{again}");

    let messages = handled(&cli, "release", 4);
    let told: Vec<&str> = messages.iter().skip(2).map(|m| text(m, "text")).collect();
    assert!(
        told.iter()
            .any(|t| t.contains(&first) && t.contains("tagged")),
        "{told:?}"
    );
    assert!(
        told.iter()
            .any(|t| t.contains(&second) && t.contains("not today")),
        "{told:?}"
    );
    assert!(cli.json(&["approvals"]).is_empty(), "nothing waits now");
    assert_eq!(cli.json(&["approvals", "--all"]).len(), 2);
}

/// A brain pads a call so its payload sits past the listing's column,
/// gives it a secret in `env`, then moves to another workspace before the
/// operator decides. The listing marks the cut and says where to read it
/// whole; `approvals show` prints it all, with the directory it runs in;
/// the approved call runs where it was parked; and once decided, the
/// `env` value is nowhere in the records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_padded_call_is_shown_whole_and_runs_where_it_was_parked() {
    let (root, _daemon, cli) = release_instance().await;
    let elsewhere = root.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("dir");
    let elsewhere = elsewhere.canonicalize().expect("canonical");
    let elsewhere_text = elsewhere.to_str().expect("utf-8");
    cli.ok(&[
        "workspace",
        "attach",
        "release",
        elsewhere_text,
        "--id",
        "elsewhere",
    ]);
    let home = cli.json_one(&["workspace", "list", "release"])["active_dir"]
        .as_str()
        .expect("home")
        .to_owned();

    let padded = format!("echo hello{}; echo PAYLOAD > p", " ".repeat(3000));
    let call = serde_json::json!({ "tool_calls": [{ "name": "ExecCommand", "input": {
        "command": padded, "yield_ms": 5000, "env": { "API_KEY": "hunter2-value" } } }] });
    cli.ok(&["agent", "send", "release", &call.to_string()]);
    handled(&cli, "release", 1);
    let moved = serde_json::json!({ "tool_calls": [{ "name": "UseWorkspace",
        "input": { "workspace_id": "elsewhere" } }] });
    cli.ok(&["agent", "send", "release", &moved.to_string()]);
    handled(&cli, "release", 2);
    let id = until("the parked call", || {
        cli.json(&["approvals", "--agent", "release"])
            .first()
            .map(|a| text(a, "approval_id").to_owned())
    });

    let listed = cli.ok(&["approvals"]);
    let row = listed
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(!row.contains("PAYLOAD"), "{row}");
    assert!(
        row.contains("[cut: ") && row.contains(&format!("holarchy approvals show {id}")),
        "the cut is not marked: {row}"
    );
    let shown = cli.ok(&["approvals", "show", &id]);
    assert!(shown.contains("echo PAYLOAD > p"), "{shown}");
    assert!(
        shown.contains("hunter2-value"),
        "the operator sees the env: {shown}"
    );
    assert!(
        shown.contains(&format!("runs in    {home} (workspace agent_home)")),
        "{shown}"
    );
    let whole = cli.json_one(&["approvals", "show", &id]);
    assert_eq!(whole["input"]["command"], padded.as_str());
    assert_eq!(whole["dir"], home.as_str());

    let approved = cli.ok(&["approve", &id]);
    assert!(approved.contains("ran"), "{approved}");
    assert!(
        Path::new(&home).join("p").exists(),
        "the call did not run where it was parked"
    );
    assert!(
        !elsewhere.join("p").exists(),
        "it ran where the agent moved"
    );

    let decided = cli.json_one(&["approvals", "show", &id]);
    assert_eq!(decided["input"]["env"]["API_KEY"], "<not stored>");
    let events = cli.ok(&["--json", "events"]);
    assert!(events.contains("API_KEY"), "the name is kept");
    assert!(
        !events.contains("hunter2-value") && !cli.ok(&["approvals", "--all"]).contains("hunter2"),
        "an env value was stored"
    );
}
