//! End-to-end: `SendMessages`, operator ingress of many messages in one
//! call, through the real daemon. Each message gets its own answer, a bad
//! one refuses only itself, and every accepted message survives `kill -9`
//! the moment the call returns.

mod common;

use common::{create, data_dir, eventually, get_agent, handled, messages, script, Daemon};
use holarchy::api::pb;
use holarchy::client::Clients;
use tonic::Code;

fn message(agent_id: &str, text: &str, dedupe_key: &str) -> pb::SendMessageRequest {
    pb::SendMessageRequest {
        agent_id: agent_id.into(),
        text: text.into(),
        dedupe_key: dedupe_key.into(),
    }
}

async fn send_all(
    c: &mut Clients,
    batch: Vec<pb::SendMessageRequest>,
) -> Result<Vec<pb::SendMessageResult>, tonic::Status> {
    c.agents
        .send_messages(pb::SendMessagesRequest { messages: batch })
        .await
        .map(|r| r.into_inner().results)
}

fn sent(result: &pb::SendMessageResult) -> &pb::SendMessageResponse {
    match &result.result {
        Some(pb::send_message_result::Result::Sent(sent)) => sent,
        other => panic!("expected the message sent, got {other:?}"),
    }
}

fn refused(result: &pb::SendMessageResult) -> (Code, &str) {
    match &result.result {
        Some(pb::send_message_result::Result::Refused(r)) => (Code::from(r.code), &r.message),
        other => panic!("expected the message refused, got {other:?}"),
    }
}

/// A private child of `parent`, spawned by a scripted tool call.
async fn private_child(c: &mut Clients, parent: &str) -> String {
    let spawn = script(serde_json::json!([
        { "name": "SpawnAgent", "input": { "initial_message": "child work" } }
    ]));
    common::send(c, parent, &spawn).await;
    eventually("a private child", || {
        let mut c = c.clone();
        async move {
            let page = c
                .agents
                .list_agents(pb::ListAgentsRequest {
                    page_size: 100,
                    page_token: String::new(),
                    include_private: true,
                })
                .await
                .ok()?
                .into_inner();
            page.agents
                .into_iter()
                .find(|a| a.visibility == pb::Visibility::Private as i32)
                .map(|a| a.agent_id)
        }
    })
    .await
}

#[tokio::test]
async fn each_message_of_a_batch_gets_its_own_answer_in_order() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let a = create(&mut c, "alpha", None).await;
    let b = create(&mut c, "beta", None).await;
    let child = private_child(&mut c, &b).await;
    let unknown = "agt_01KAAAAAAAAAAAAAAAAAAAAAAA";

    let results = send_all(
        &mut c,
        vec![
            message(&a, "one", "k1"),
            message(&b, "two", ""),
            message(&a, "one again", "k1"),
            message(unknown, "lost", ""),
            message("not-an-id", "bad", ""),
            message(&child, "sneak", ""),
            message(&a, &"x".repeat(70 * 1024), ""),
            message(&a, "three", "k2"),
        ],
    )
    .await
    .expect("the batch is taken");
    assert_eq!(results.len(), 8, "one answer per message");

    let first = sent(&results[0]);
    assert!(!first.duplicate);
    assert!(!sent(&results[1]).duplicate);
    // The same key on the same agent is the first message, even within
    // one batch.
    let again = sent(&results[2]);
    assert!(again.duplicate);
    assert_eq!(again.message_id, first.message_id);
    assert_eq!(refused(&results[3]).0, Code::NotFound);
    assert_eq!(refused(&results[4]).0, Code::InvalidArgument);
    let (code, why) = refused(&results[5]);
    assert_eq!(code, Code::PermissionDenied, "{why}");
    assert!(why.contains("private"), "{why}");
    assert_eq!(refused(&results[6]).0, Code::InvalidArgument);
    assert!(!sent(&results[7]).duplicate);

    // What was accepted runs; what was refused left nothing behind.
    let on_a = handled(&c, &a, 2).await;
    let texts: Vec<_> = on_a.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts, ["one", "three"]);
    assert_eq!(on_a[0].reply, "ack: one");
    // Beta's first message spawned the child; the batch's is its second.
    let on_b = handled(&c, &b, 2).await;
    assert_eq!(on_b.len(), 2);
    assert_eq!(on_b[1].text, "two");
    let on_child = messages(&mut c, &child).await;
    assert!(on_child.iter().all(|m| m.text != "sneak"));
}

#[tokio::test]
async fn an_empty_or_oversized_batch_is_refused_whole() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let a = create(&mut c, "alpha", None).await;

    let empty = send_all(&mut c, Vec::new()).await.expect_err("refused");
    assert_eq!(empty.code(), Code::InvalidArgument);
    let batch = (0..1001)
        .map(|i| message(&a, &format!("m{i}"), ""))
        .collect();
    let big = send_all(&mut c, batch).await.expect_err("refused");
    assert_eq!(big.code(), Code::InvalidArgument);
    assert!(
        big.message().contains("1000") || big.message().contains("1,000"),
        "{}",
        big.message()
    );
    assert!(messages(&mut c, &a).await.is_empty(), "nothing was sent");
}

#[tokio::test]
async fn every_accepted_message_survives_kill_9_right_after_the_answer() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let mut agents = Vec::new();
    for i in 0..20 {
        agents.push(create(&mut c, &format!("agent-{i}"), None).await);
    }
    let batch = (0..400)
        .map(|i| message(&agents[i % agents.len()], &format!("event {i}"), ""))
        .collect();
    let results = send_all(&mut c, batch).await.expect("the batch is taken");
    let accepted: Vec<(String, String)> = results
        .iter()
        .enumerate()
        .map(|(i, r)| (agents[i % agents.len()].clone(), sent(r).message_id.clone()))
        .collect();
    daemon.kill9();

    let daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    for agent in &agents {
        let stored = messages(&mut c, agent).await;
        for (_, id) in accepted.iter().filter(|(a, _)| a == agent) {
            assert!(
                stored.iter().any(|m| &m.message_id == id),
                "acknowledged message {id} lost across kill -9"
            );
        }
    }
    // And each runs to its end after the restart, once.
    for agent in &agents {
        let done = handled(&c, agent, 20).await;
        assert_eq!(done.len(), 20);
    }
}

/// A thousand turns back to back on one agent, unpaced: each turn starts
/// from the previous one's end. Its tracing span once hung under the
/// previous one's, and dropping the chain overflowed the daemon's stack.
#[tokio::test]
async fn a_long_run_of_back_to_back_turns_leaves_the_daemon_standing() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with(&data_dir(&root), &["--max-turns-per-minute", "100000"]).await;
    let mut c = daemon.clients().await;
    let agent = create(&mut c, "flood", None).await;
    let batch = (0..1000)
        .map(|i| pb::SendMessageRequest {
            agent_id: agent.clone(),
            text: format!("m{i}"),
            dedupe_key: String::new(),
        })
        .collect();
    let results = send_all(&mut c, batch).await.expect("accepted");
    assert_eq!(results.len(), 1000);
    handled(&c, &agent, 1000).await;
    let summary = get_agent(&mut c, &agent).await;
    assert_eq!(summary.turns_completed, 1000);
}
