//! Failures a person sees without `--json`: a turn that fails for a
//! missing key and a call to a tool that does not exist show their
//! reasons in `agent messages`, `agent get` ("last error") and `events`
//! (marked `!`); the daemon logs a warning for the failed turn; and
//! `agent create` and `instance apply` warn at once that the key is not
//! set.

use crate::cli::{handled, until, Holarchy};
use crate::common::{data_dir, Daemon};

/// Set nowhere: the daemon's environment is the test's, minus this.
const UNSET_KEY: &str = "HOLARCHY_TEST_FIRST_HOUR_UNSET_KEY";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_turn_and_a_tool_error_show_their_reasons_in_human_output() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);

    // The key's variable is not set: said at creation, on stderr.
    let created = cli.run(&[
        "agent",
        "create",
        "keyless",
        "--brain-openai-url",
        "http://127.0.0.1:9/v1",
        "--brain-model",
        "m",
        "--brain-key-env",
        UNSET_KEY,
    ]);
    assert!(created.status.success(), "{}", created.stderr);
    assert!(
        created.stdout.starts_with("created keyless"),
        "{}",
        created.stdout
    );
    assert!(
        created.stderr.contains("warning") && created.stderr.contains(UNSET_KEY),
        "warned about the key: {}",
        created.stderr
    );

    cli.ok(&["agent", "send", "keyless", "hello"]);
    until("the keyless turn to fail", || {
        let messages = cli.json(&["agent", "messages", "keyless"]);
        messages
            .iter()
            .any(|m| m["status"] == "failed")
            .then_some(())
    });
    let messages = cli.ok(&["agent", "messages", "keyless"]);
    assert!(
        messages.contains("[failed]") && messages.contains("! run failed:"),
        "{messages}"
    );
    assert!(messages.contains(UNSET_KEY), "the reason: {messages}");
    let got = cli.ok(&["agent", "get", "keyless"]);
    let last = got
        .lines()
        .find(|l| l.starts_with("last error"))
        .unwrap_or_else(|| panic!("no last error in\n{got}"));
    assert!(last.contains(UNSET_KEY), "{last}");
    let events = cli.ok(&["events", "--agent", "keyless"]);
    let failed = events
        .lines()
        .find(|l| l.contains("run_finished"))
        .unwrap_or_else(|| panic!("no run_finished in\n{events}"));
    assert!(
        failed.contains("! run failed:") && failed.contains(UNSET_KEY),
        "{failed}"
    );
    until("the daemon to log the failed turn", || {
        let log = daemon.log();
        log.lines()
            .any(|l| l.contains("WARN") && l.contains("turn failed") && l.contains(UNSET_KEY))
            .then_some(())
    });

    // A scripted agent calls a tool it does not have.
    cli.ok(&["agent", "create", "caller"]);
    let call = r#"{"reply":"trying","tool_calls":[{"name":"NoSuchTool","input":{}}]}"#;
    cli.ok(&["agent", "send", "caller", call]);
    handled(&cli, "caller", 1);
    let messages = cli.ok(&["agent", "messages", "caller"]);
    assert!(
        messages.contains("! tool NoSuchTool refused:"),
        "{messages}"
    );
    let events = cli.ok(&["events", "--agent", "caller"]);
    assert!(
        events
            .lines()
            .any(|l| l.contains("tool_called") && l.contains("! tool NoSuchTool refused:")),
        "{events}"
    );
    let got = cli.ok(&["agent", "get", "caller"]);
    assert!(got.contains("last error   ! tool NoSuchTool"), "{got}");
    // Scripts read the same from JSON; no "last error" is made up there.
    let json = cli.json_one(&["agent", "get", "caller"]);
    assert!(json.get("last_error").is_none(), "{json}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_apply_warns_when_its_brains_key_is_not_set_in_the_daemon() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    let manifest = root.path().join("keyless.toml");
    std::fs::write(
        &manifest,
        format!(
            "name = \"keyless\"\n\n[brain.openai]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\napi_key_env = \"{UNSET_KEY}\"\n"
        ),
    )
    .expect("manifest");
    let file = manifest.to_str().expect("utf-8 path");

    let applied = cli.run(&["instance", "apply", file]);
    assert!(applied.status.success(), "{}", applied.stderr);
    assert!(
        applied.stdout.starts_with("created keyless"),
        "{}",
        applied.stdout
    );
    assert!(
        applied.stderr.contains("warning") && applied.stderr.contains(UNSET_KEY),
        "{}",
        applied.stderr
    );
    // Under --json the warning is JSON too, and stdout stays the result.
    let again = cli.run(&["--json", "instance", "apply", file]);
    let warning: serde_json::Value =
        serde_json::from_str(again.stderr.trim()).expect("a JSON warning");
    assert!(
        warning["warning"]
            .as_str()
            .is_some_and(|w| w.contains(UNSET_KEY)),
        "{warning}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_show_when_each_happened() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    cli.ok(&["agent", "create", "timed"]);
    let event = cli.json(&["events"]).remove(0);
    let at_ms = event["at_ms"].as_i64().expect("at_ms");
    let at = chrono::DateTime::from_timestamp_millis(at_ms).expect("a time");
    let shown = at.format("%m-%d %H:%M:%SZ").to_string();
    let human = cli.ok(&["events"]);
    let first = human.lines().next().expect("an event");
    assert!(first.contains(&shown), "{shown} in {first}");
}
