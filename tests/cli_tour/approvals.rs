//! The tour's approvals part: an instance that must ask before it runs a
//! command; the operator lists what waits, approves one call (it runs
//! once) and denies another (the agent reads why).

use crate::cli::{handled, text, until, Holarchy};
use crate::common::{data_dir, Daemon};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_lists_approves_and_denies_parked_calls() {
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
