//! The tour's memory part: an agent keeps notes through its tools; the
//! operator searches them and the messages the agent handled (ranked,
//! matches in bold) and lists them.

use crate::cli::{handled, text, until, Holarchy};
use crate::common::{data_dir, Daemon};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_searches_and_lists_what_an_agent_wrote() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    cli.ok(&["agent", "create", "ops"]);
    cli.ok(&[
        "agent",
        "send",
        "ops",
        r#"{"tool_calls":[{"name":"MemoryWrite","input":{"key":"deploy","text":"deploys go out on tuesdays"}},{"name":"MemoryWrite","input":{"text":"the cache warms up after a deploy"}}]}"#,
    ]);
    handled(&cli, "ops", 1);

    let hits = until("two notes", || {
        let hits = cli.json(&[
            "memory",
            "search",
            "ops",
            "deploy tuesdays",
            "--kind",
            "note",
        ]);
        (hits.len() == 2).then_some(hits)
    });
    // Both words match the first note: it ranks first.
    assert_eq!(text(&hits[0], "key"), "deploy");
    assert!(hits[0]["score"].as_f64() > hits[1]["score"].as_f64());
    assert!(
        text(&hits[0], "snippet").contains("**tuesdays**"),
        "{hits:?}"
    );
    // The message that asked for the notes is the agent's memory too.
    let message = until("the handled message", || {
        let hits = cli.json(&["memory", "search", "ops", "tuesdays", "--kind", "message"]);
        (hits.len() == 1).then_some(hits)
    });
    assert_eq!(text(&message[0], "kind"), "message");
    assert!(
        text(&message[0], "text").contains("MemoryWrite"),
        "{message:?}"
    );
    let table = cli.ok(&["memory", "search", "ops", "tuesdays"]);
    assert!(table.starts_with("ID"), "{table}");
    assert!(table.contains(" note "), "{table}");
    // People see the snippet without the markdown JSON keeps.
    assert!(table.contains("go out on tuesdays"), "{table}");
    assert!(!table.contains("**"), "{table}");

    let listed = cli.json(&["memory", "list", "ops"]);
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(text(&listed[0], "text"), "deploys go out on tuesdays");
    let table = cli.ok(&["memory", "list", "ops"]);
    assert!(table.starts_with("NOTE"), "{table}");
    assert!(table.contains("the cache warms up"), "{table}");

    let refused = cli.fails(&["memory", "search", "ops", "deploy", "--limit", "0"]);
    assert!(refused.contains("limit"), "{refused}");
}
