//! `holarchy agent send --follow` against the real binary, and who may
//! watch replies at all.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use holarchy::api::pb;
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use tokio::process::Command;
use tokio::sync::Notify;

use crate::common::DEADLINE;
use crate::stub::{self, Answer, Stream, Tokens};
use crate::{daemon, end_of, openai_agent, piece_of, Replies};

/// `holarchy --data-dir DIR ARGS...`, with its stdout piped.
fn holarchy(data_dir: &std::path::Path, args: &[&str]) -> tokio::process::Child {
    Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .env_remove("HOLARCHY_DATA_DIR")
        .env_remove("HOLARCHY_SOCKET")
        .env_remove("HOLARCHY_ADDR")
        .env_remove("HOLARCHY_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the CLI starts")
}

/// Reads `child`'s stdout into `seen` until it holds `wanted`.
async fn read_until(stdout: &mut tokio::process::ChildStdout, seen: &mut String, wanted: &str) {
    let reading = async {
        let mut buf = [0u8; 256];
        while !seen.contains(wanted) {
            let n = stdout.read(&mut buf).await.expect("stdout");
            assert!(n > 0, "the CLI ended before printing {wanted:?}: {seen:?}");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    };
    tokio::time::timeout(DEADLINE, reading)
        .await
        .unwrap_or_else(|_| panic!("no {wanted:?} in time: {seen:?}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_follow_prints_the_reply_as_it_is_written() {
    let texts = ["Once ", "upon ", "a time, ", "streamed."];
    let body = stub::openai(&texts, None, Tokens(10, 4, 0));
    let gate = Arc::new(Notify::new());
    let at = piece_of(&body, "a time", 7) + 1;
    let stream_gate = gate.clone();
    let stub = stub::start(Arc::new(move |request: &Value, _| {
        let user = request["messages"]
            .as_array()
            .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default();
        let gated = user.ends_with("tell me a story");
        Answer::Stream(Stream {
            gate: gated.then(|| (at, stream_gate.clone())),
            ..Stream::of(body.clone())
        })
    }))
    .await;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(&root).await;
    let mut c = daemon.clients().await;
    openai_agent(&mut c, "teller", &stub).await;

    let mut child = holarchy(
        &daemon.data_dir,
        &["agent", "send", "teller", "tell me a story", "--follow"],
    );
    let mut stdout = child.stdout.take().expect("stdout");
    let mut seen = String::new();
    // The start of the reply is printed while the model is still writing.
    read_until(&mut stdout, &mut seen, "Once upon ").await;
    assert!(seen.starts_with("sent msg_"), "{seen:?}");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        child.try_wait().expect("status").is_none(),
        "the CLI waits for the turn"
    );
    gate.notify_one();
    read_until(&mut stdout, &mut seen, "streamed.\n").await;
    let status = tokio::time::timeout(DEADLINE, child.wait())
        .await
        .expect("the CLI ends with the turn")
        .expect("status");
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).await.expect("stdout");
    seen.push_str(&rest);
    assert!(status.success(), "{status}: {seen}");
    let (sent, reply) = seen.split_once('\n').expect("two lines");
    assert!(sent.starts_with("sent msg_"), "{sent}");
    assert_eq!(reply, "Once upon a time, streamed.\n");

    // With --json: the sent message, each delta, the end.
    let child = holarchy(
        &daemon.data_dir,
        &["--json", "agent", "send", "teller", "again", "--follow"],
    );
    let done = tokio::time::timeout(DEADLINE, child.wait_with_output())
        .await
        .expect("in time")
        .expect("output");
    assert!(done.status.success(), "{done:?}");
    let lines: Vec<Value> = String::from_utf8_lossy(&done.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    assert!(lines[0]["message_id"].is_string(), "{lines:?}");
    let deltas: String = lines
        .iter()
        .filter(|l| l["kind"] == "delta")
        .map(|l| l["text"].as_str().expect("text"))
        .collect();
    assert_eq!(deltas, texts.concat());
    let end = lines.last().expect("lines");
    assert_eq!(
        (&end["kind"], &end["outcome"], &end["reply"]),
        (&json!("end"), &json!("completed"), &json!(texts.concat()))
    );

    // What the two turns spent, as `agent get` shows it.
    let got = holarchy(&daemon.data_dir, &["agent", "get", "teller"]);
    let got = got.wait_with_output().await.expect("agent get");
    let text = String::from_utf8_lossy(&got.stdout);
    assert!(
        text.lines()
            .any(|l| l == "tokens       20 prompt (0 cached), 8 completion, over 2 turn(s)"),
        "{text}"
    );
    let got = holarchy(&daemon.data_dir, &["--json", "agent", "get", "teller"]);
    let got = got.wait_with_output().await.expect("agent get");
    let value: Value = serde_json::from_slice(&got.stdout).expect("JSON");
    assert_eq!(
        value["usage"],
        json!({ "prompt_tokens": 20, "completion_tokens": 8, "cached_tokens": 0, "turns": 2 })
    );

    // A brain that does not stream: the reply is printed when it is made.
    crate::common::create(&mut c, "plain", None).await;
    let child = holarchy(
        &daemon.data_dir,
        &["agent", "send", "plain", "hi", "--follow"],
    );
    let done = tokio::time::timeout(DEADLINE, child.wait_with_output())
        .await
        .expect("in time")
        .expect("output");
    assert!(done.status.success(), "{done:?}");
    let out = String::from_utf8_lossy(&done.stdout);
    assert!(out.ends_with("\nack: hi\n"), "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_public_agents_replies_may_be_watched() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(&root).await;
    let mut c = daemon.clients().await;
    let lead = crate::common::create(&mut c, "lead", None).await;
    // A scripted turn streams nothing, and its end still comes.
    let mut replies = Replies::open(&mut c, &lead).await;
    let spawn = crate::common::script(json!([{ "name": "SpawnAgent", "input": {
        "preset": "private_child", "initial_message": "{\"reply\":\"child here\"}" } }]));
    let message_id = crate::common::send(&mut c, &lead, &spawn).await;
    let events = replies.until_end(&message_id).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(end_of(&events).outcome, "completed");

    let child = crate::common::tool_output(&mut c, &lead, "SpawnAgent").await["agent_id"]
        .as_str()
        .expect("child id")
        .to_owned();
    let refused = c
        .agents
        .watch_replies(pb::WatchRepliesRequest { agent_id: child })
        .await
        .expect_err("a private agent");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    let unknown = c
        .agents
        .watch_replies(pb::WatchRepliesRequest {
            agent_id: "agt_01J00000000000000000000000".into(),
        })
        .await
        .expect_err("no such agent");
    assert_eq!(unknown.code(), tonic::Code::NotFound);
}
