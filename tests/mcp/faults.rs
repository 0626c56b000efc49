//! Stdio MCP servers that fail on purpose: the test server's `crash` tool,
//! called again and again (a server that dies at every call), and server
//! `mute`, a shell loop that reads its stdin and never answers, not even
//! the handshake. Each call costs a tool error within the server's
//! timeouts; every process is reaped; the daemon serves on.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{self, create, eventually, handled, processes_with, send};
use crate::{call, create_with, text, zombies_of, SERVE_STDIO};

/// The name a `mute` server runs under (its `$0`) in `dir`: its command
/// line, and its unit's, carry it, and no other test's server.
pub fn mute_marker(dir: &Path) -> String {
    format!("{}/mute-mcp-server", dir.display())
}

/// Server `mute` in the daemon's configuration: reads lines for ever,
/// answers none, within a 1 s start and call timeout.
pub fn mute_entry(dir: &Path) -> Value {
    json!({
        "command": "/bin/sh",
        "args": ["-c", "while read -r line; do :; done", mute_marker(dir)],
        "timeout_ms": 1000,
        "start_timeout_ms": 1000,
    })
}

fn error_of(failed: bool, out: &Value) -> String {
    assert!(failed, "the call succeeded: {out}");
    assert_eq!(out["kind"], "failed", "{out}");
    out["error"].as_str().unwrap_or_default().to_owned()
}

/// A server that crashes at every call, and one that never answers its
/// handshake: each call is a tool error that says why, within the
/// server's timeouts and restart backoff (so a crash loop starts no more
/// processes than calls, and soon fewer); no server process or zombie is
/// left; another agent is served meanwhile and the daemon stops cleanly.
pub async fn servers_that_crash_at_every_call_or_never_answer_cost_only_tool_errors() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut daemon = crate::start(&root, None).await;
    let mut c = daemon.clients().await;
    let ops = create_with(&mut c, "ops", &["tools", "mute"])
        .await
        .expect("created");
    let data = daemon.data_dir.to_str().expect("UTF-8").to_owned();
    let servers = |marker: &str| -> Vec<String> {
        processes_with(marker)
            .into_iter()
            .filter(|p| p.contains(&data))
            .collect()
    };

    // Crashing at every call: the first two restart at once, the third
    // finds the server waiting out its backoff.
    let mut errors = Vec::new();
    for _ in 0..3 {
        let (failed, out) = call(&mut c, &ops, "mcp__tools__crash", json!({})).await;
        errors.push(error_of(failed, &out));
    }
    for error in &errors[..2] {
        assert!(error.contains("stopped during the call"), "{error}");
    }
    assert!(
        errors[2].contains("is down") && errors[2].contains("the next start is allowed in"),
        "{}",
        errors[2]
    );
    eventually("the crashed servers reaped", || async {
        (servers(SERVE_STDIO).is_empty() && zombies_of(daemon.pid()).is_empty()).then_some(())
    })
    .await;
    // Once the backoff has passed the server starts again and answers.
    let out = eventually("the server back", || {
        let mut c = c.clone();
        let ops = ops.clone();
        async move {
            let (failed, out) =
                call(&mut c, &ops, "mcp__tools__echo", json!({"text": "back"})).await;
            (!failed).then_some(out)
        }
    })
    .await;
    assert_eq!(text(false, &out), "back");

    // Never answering: each start is given up after 1 s and its process
    // ended; the second start is not delayed, the third waits its backoff.
    let mute = mute_marker(root.path());
    for n in 0..2 {
        let started = Instant::now();
        let (failed, out) = call(&mut c, &ops, "mcp__mute__anything", json!({})).await;
        let error = error_of(failed, &out);
        assert!(
            error.contains("could not start")
                && error.contains("did not answer the handshake and list its tools within 1000 ms"),
            "start {n}: {error}"
        );
        let took = started.elapsed();
        assert!(took < Duration::from_secs(10), "start {n} took {took:?}");
        eventually("the mute server ended", || async {
            processes_with(&mute).is_empty().then_some(())
        })
        .await;
    }
    // Called again at once, it waits out its backoff (or, on a slow
    // machine that let the backoff pass, fails its start again).
    let (failed, out) = call(&mut c, &ops, "mcp__mute__anything", json!({})).await;
    let error = error_of(failed, &out);
    assert!(
        error.contains("is down") || error.contains("could not start"),
        "{error}"
    );

    // The daemon serves others and stops cleanly, leaving no server.
    let other = create(&mut c, "bystander", None).await;
    send(&mut c, &other, "still there?").await;
    handled(&c, &other, 1).await;
    common::status(&mut c).await;
    let status = daemon.terminate(Duration::from_secs(20)).await;
    assert!(status.success(), "{status}");
    eventually("no server left", || async {
        (servers(SERVE_STDIO).is_empty() && processes_with(&mute).is_empty()).then_some(())
    })
    .await;
}
