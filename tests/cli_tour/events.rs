//! Events published to instances, as the README shows them:
//! `instance apply` from a manifest file, `instance publish` once, again
//! with the same dedupe key, and to an instance that takes no published
//! events; `events` shows each event received once.

use serde_json::Value;

use crate::cli::{handled, text, Holarchy};
use crate::common::{data_dir, Daemon};

const RELEASES: &str = r#"
name = "releases"

[[ingress]]
source = "publish"
"#;

const QUIET: &str = r#"
name = "quiet"

[[ingress]]
source = "trigger"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_publish_delivers_an_event_once_and_only_where_it_is_taken() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    let releases = root.path().join("releases.toml");
    std::fs::write(&releases, RELEASES).expect("manifest written");
    let quiet = root.path().join("quiet.toml");
    std::fs::write(&quiet, QUIET).expect("manifest written");
    let applied = cli.ok(&["instance", "apply", releases.to_str().expect("utf-8")]);
    assert!(applied.starts_with("created releases"), "{applied}");
    cli.ok(&["instance", "apply", quiet.to_str().expect("utf-8")]);

    let publish = [
        "instance",
        "publish",
        "releases",
        "--type",
        "release.cut",
        "--dedupe-key",
        "v1.2.0",
        "--subject",
        "v1.2.0",
        "--payload",
        r#"{"tag":"v1.2.0"}"#,
    ];
    let first = cli.json_one(&publish);
    assert_eq!(first["duplicate"], false, "{first}");
    let event_id = text(&first, "event_id").to_owned();
    assert!(event_id.starts_with("evt_"), "{event_id}");

    // A retry is the same event, answered with its id, not a second turn.
    let again = cli.ok(&publish);
    assert_eq!(again.trim(), format!("{event_id} (duplicate)"));

    let messages = handled(&cli, "releases", 1);
    assert_eq!(messages.len(), 1, "{messages:?}");
    let message = &messages[0];
    assert_eq!(message["provenance"], "event", "{message}");
    let body: Value = serde_json::from_str(text(message, "text")).expect("the event's JSON");
    assert_eq!(body["id"], event_id.as_str());
    assert_eq!(body["type"], "release.cut");
    assert_eq!(body["dedupe_key"], "publish:releases:v1.2.0");
    assert_eq!(body["payload"]["tag"], "v1.2.0");
    // The scripted brain acknowledges what it is given: one turn ran.
    assert_eq!(
        text(message, "reply"),
        format!("ack: {}", text(message, "text"))
    );

    let refused = cli.fails(&[
        "instance",
        "publish",
        "quiet",
        "--type",
        "release.cut",
        "--dedupe-key",
        "v1.2.0",
    ]);
    assert!(
        refused.contains("failedprecondition") || refused.contains("failed precondition"),
        "{refused}"
    );
    assert!(refused.contains("takes no publish events"), "{refused}");
    let unknown = cli.fails(&[
        "instance",
        "publish",
        "nobody",
        "--type",
        "x",
        "--dedupe-key",
        "k",
    ]);
    assert!(unknown.contains("no instance named `nobody`"), "{unknown}");
    let bad = cli.fails(&[
        "instance",
        "publish",
        "releases",
        "--type",
        "x",
        "--dedupe-key",
        "k",
        "--payload",
        "not json",
    ]);
    assert!(bad.contains("not valid json"), "{bad}");
    assert_eq!(cli.json(&["agent", "messages", "quiet"]).len(), 0);

    let received: Vec<Value> = cli
        .json(&["events"])
        .into_iter()
        .filter(|e| e["kind"] == "event_received")
        .collect();
    assert_eq!(received.len(), 1, "{received:?}");
    let detail = &received[0]["detail"];
    assert_eq!(detail["event_id"], event_id.as_str());
    assert_eq!(detail["instance"], "releases");
    assert_eq!(detail["source"], "publish");
    assert_eq!(detail["type"], "release.cut");
    let human = cli.ok(&["events"]);
    assert!(
        human
            .lines()
            .any(|l| l.contains("event_received") && l.contains("release.cut v1.2.0")),
        "{human}"
    );
}
