//! What a confined stdio server may touch, seen from inside it: the test
//! server reads and writes files when told to (its `read` and `write`
//! tools), under a configuration that grants one directory in
//! `read_only`, one in `read_write`, and a third not at all.

use std::path::Path;

use serde_json::{json, Value};

use crate::common::{data_dir, Daemon};
use crate::{call, create_with, text, SERVE_STDIO};

/// The error of a call the server refused, which must have failed.
fn refusal(failed: bool, out: &Value) -> String {
    assert!(failed, "the call succeeded: {out}");
    assert_eq!(out["kind"], "failed", "{out}");
    out["error"].as_str().unwrap_or_default().to_owned()
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// A `read_only` directory: its files are read, and neither written nor
/// added to (Landlock says no, as the server's own call reports). The
/// same server writes in its `read_write` directory, and cannot even read
/// a directory beside them that it was not given.
pub async fn a_read_only_path_is_readable_and_not_writable_by_its_server() {
    let root = tempfile::tempdir().expect("tempdir");
    let [shared, scratch, other] = ["shared", "scratch", "other"].map(|d| root.path().join(d));
    for dir in [&shared, &scratch, &other] {
        std::fs::create_dir_all(dir).expect("a directory");
    }
    let notes = shared.join("notes.txt");
    std::fs::write(&notes, "from the operator").expect("a shared file");
    let secret = other.join("secret.txt");
    std::fs::write(&secret, "not granted").expect("a file not granted");

    let me = std::env::current_exe().expect("this binary");
    let config = json!({ "mcpServers": { "files": {
        "command": me,
        "args": [SERVE_STDIO],
        "read_only": [shared],
        "read_write": [scratch],
    }}});
    let config_path = root.path().join("mcp.json");
    std::fs::write(&config_path, config.to_string()).expect("config written");
    let daemon = Daemon::start_with(&data_dir(&root), &["--mcp-config", path(&config_path)]).await;
    let mut c = daemon.clients().await;
    let reader = create_with(&mut c, "reader", &["files"])
        .await
        .expect("created");

    let read = |p: &Path| json!({ "path": path(p) });
    let write = |p: &Path| json!({ "path": path(p), "text": "from the server" });

    let (failed, out) = call(&mut c, &reader, "mcp__files__read", read(&notes)).await;
    assert_eq!(text(failed, &out), "from the operator");

    // Neither a file there changed nor a new one made.
    for target in [notes.clone(), shared.join("new.txt")] {
        let (failed, out) = call(&mut c, &reader, "mcp__files__write", write(&target)).await;
        let error = refusal(failed, &out);
        assert!(error.contains("Permission denied"), "{error}");
    }
    assert_eq!(
        std::fs::read_to_string(&notes).expect("still there"),
        "from the operator"
    );
    assert!(!shared.join("new.txt").exists(), "nothing added");

    // Its read_write directory is its to write; what it was not given is
    // not even readable.
    let made = scratch.join("out.txt");
    let (failed, out) = call(&mut c, &reader, "mcp__files__write", write(&made)).await;
    assert_eq!(text(failed, &out), "written");
    assert_eq!(
        std::fs::read_to_string(&made).expect("written"),
        "from the server"
    );
    let (failed, out) = call(&mut c, &reader, "mcp__files__read", read(&secret)).await;
    let error = refusal(failed, &out);
    assert!(error.contains("Permission denied"), "{error}");
}
