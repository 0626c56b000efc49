//! Hostile agents: messages that amplify themselves, and messages that crash the daemon.

use std::time::Duration;

use holarchy::api::pb;
use serde_json::json;

use crate::common::{self, data_dir, eventually, send, Daemon};

/// Sleep calls, each naming the previous one's reason twice: filled in
/// whole, the last reason would be 100 * 2^40 bytes.
fn doubling_chain(calls: usize) -> String {
    let mut script = vec![json!({
        "name": "Sleep",
        "input": { "duration_ms": 3_600_000u64, "reason": "x".repeat(100) },
    })];
    for k in 1..calls {
        let previous = format!("{{{{results[{}].reason}}}}", k - 1);
        script.push(json!({
            "name": "Sleep",
            "input": { "duration_ms": 3_600_000u64, "reason": format!("{previous}{previous}") },
        }));
    }
    common::script(json!(script))
}

async fn status(c: &mut holarchy::client::Clients) -> pb::GetStatusResponse {
    c.runtime
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("status answers")
        .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_doubling_placeholder_chain_fails_with_a_tool_error_and_the_daemon_stays_up() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let id = common::create(&mut c, "amplifier", None).await;
    let message = doubling_chain(41);
    assert!(message.len() < 8 * 1024, "a small message");
    send(&mut c, &id, &message).await;
    common::handled(&c, &id, 1).await;

    let calls: Vec<serde_json::Value> = common::events(&mut c, 0)
        .await
        .into_iter()
        .filter(|e| e.kind == "tool_called" && e.agent_id == id && e.text == "Sleep")
        .map(|e| serde_json::from_str(&e.detail_json).expect("detail is JSON"))
        .collect();
    assert_eq!(calls.len(), 41, "every call is answered");
    // 100 * 2^k bytes passes the 64 KiB bound up to k = 9.
    let refused = calls
        .iter()
        .position(|d| d["is_error"] == true)
        .expect("a call is refused");
    assert_eq!(refused, 10);
    let output = calls[refused]["output"].as_str().expect("output");
    assert!(
        output.contains("limit") && output.contains("65536"),
        "{output}"
    );
    // What was recorded is the call as written, not as filled in.
    assert!(calls
        .iter()
        .all(|d| d["input"].as_str().is_some_and(|i| i.len() < 1024)));

    let status = status(&mut c).await;
    assert_eq!(status.pid, daemon.pid());
    assert!(
        status.rss_bytes < 512 * 1024 * 1024,
        "rss {} bytes",
        status.rss_bytes
    );
}

/// A turn that holds the daemon in a long `ExecCommand`, as a turn that
/// crashes it would.
fn blocking_turn() -> String {
    common::script(json!([{
        "name": "ExecCommand",
        "input": { "command": "sleep 600", "yield_ms": 600_000u64 },
    }]))
}

/// Waits until the message's `attempts`-th turn is inside its command.
async fn turn_running(
    c: &holarchy::client::Clients,
    agent_id: &str,
    message_id: &str,
    attempts: u32,
) {
    eventually("the blocking turn in its command", || {
        let mut c = c.clone();
        let (agent_id, message_id) = (agent_id.to_owned(), message_id.to_owned());
        async move {
            let messages = common::messages(&mut c, &agent_id).await;
            let message = messages.iter().find(|m| m.message_id == message_id)?;
            let handling = message.status == pb::MessageStatus::Handling as i32
                && message.attempts == attempts;
            let tasks = c
                .tasks
                .list_tasks(pb::ListTasksRequest {
                    agent_id,
                    ..Default::default()
                })
                .await
                .ok()?
                .into_inner()
                .tasks;
            let running = tasks
                .iter()
                .any(|t| t.task_kind == "command" && t.status == "running");
            (handling && running).then_some(())
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_crashes_the_daemon_three_times_is_set_aside() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let id = common::create(&mut c, "poisoned", None).await;
    let poison = send(&mut c, &id, &blocking_turn()).await;
    let next = send(&mut c, &id, "after the poison").await;

    for attempt in 1..=3 {
        turn_running(&c, &id, &poison, attempt).await;
        daemon.kill9();
        daemon = Daemon::start(&dir).await;
        c = daemon.clients().await;
    }

    let messages = eventually("the next message handled", || {
        let mut c = c.clone();
        let id = id.clone();
        let next = next.clone();
        async move {
            let messages = common::messages(&mut c, &id).await;
            messages
                .iter()
                .any(|m| m.message_id == next && m.status == pb::MessageStatus::Handled as i32)
                .then_some(messages)
        }
    })
    .await;
    let set_aside = messages
        .iter()
        .find(|m| m.message_id == poison)
        .expect("poison listed");
    assert_eq!(set_aside.status, pb::MessageStatus::Failed as i32);
    assert_eq!(set_aside.attempts, 3);
    let handled = messages
        .iter()
        .find(|m| m.message_id == next)
        .expect("next listed");
    assert_eq!(handled.reply, "ack: after the poison");

    let finished: Vec<serde_json::Value> = common::events(&mut c, 0)
        .await
        .into_iter()
        .filter(|e| e.kind == "run_finished" && e.message_id == poison)
        .map(|e| serde_json::from_str(&e.detail_json).expect("detail is JSON"))
        .collect();
    let outcomes: Vec<&str> = finished
        .iter()
        .map(|d| d["outcome"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        outcomes,
        ["interrupted", "interrupted", "failed"],
        "{finished:?}"
    );
    assert!(finished[2]["detail"]
        .as_str()
        .is_some_and(|d| d.starts_with("crashed_daemon")));
    let agent = common::get_agent(&mut c, &id).await;
    assert_eq!(agent.state, pb::LifecycleState::Active as i32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_restarts_mid_turn_do_not_count_as_crashes() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let id = common::create(&mut c, "long-turn", None).await;
    // No turn ends until the test lets its command go (a file in the
    // agent's home), so every stop lands mid-turn; an hour at most.
    let long_turn = common::script(json!([{
        "name": "ExecCommand",
        "input": {
            "command": "i=0; while [ ! -e release ] && [ $i -lt 72000 ]; do sleep 0.05; i=$((i+1)); done",
            "yield_ms": 60_000u64,
        },
    }]));
    let message = send(&mut c, &id, &long_turn).await;

    // One more than --max-message-attempts would have set it aside.
    for _ in 0..4 {
        // Given back at every stop, so each new turn is its first attempt.
        turn_running(&c, &id, &message, 1).await;
        let status = daemon.terminate(Duration::from_secs(30)).await;
        assert!(status.success(), "{status:?}");
        daemon = Daemon::start(&dir).await;
        c = daemon.clients().await;
    }
    turn_running(&c, &id, &message, 1).await;
    let home = dir.join("workspaces").join(&id);
    std::fs::write(home.join("release"), "").expect("release the command");

    let handled = eventually("the long turn handled", || {
        let mut c = c.clone();
        let (id, message) = (id.clone(), message.clone());
        async move {
            common::messages(&mut c, &id)
                .await
                .into_iter()
                .find(|m| m.message_id == message && m.status == pb::MessageStatus::Handled as i32)
        }
    })
    .await;
    assert_eq!(handled.attempts, 1, "no stop counted");

    let outcomes: Vec<(String, String)> = common::events(&mut c, 0)
        .await
        .into_iter()
        .filter(|e| e.kind == "run_finished" && e.message_id == message)
        .map(|e| {
            let d: serde_json::Value = serde_json::from_str(&e.detail_json).expect("JSON");
            (
                d["outcome"].as_str().unwrap_or_default().to_owned(),
                d["detail"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(outcomes.len(), 5, "{outcomes:?}");
    for (outcome, detail) in &outcomes[..4] {
        assert_eq!(outcome, "interrupted");
        assert!(detail.starts_with("stopped_gracefully"), "{detail}");
    }
    assert_eq!(outcomes[4].0, "completed", "{outcomes:?}");
}
