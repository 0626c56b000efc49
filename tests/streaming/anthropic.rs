//! The Anthropic brain, streaming Messages API answers.

use std::sync::Arc;

use holarchy::api::pb;
use serde_json::{json, Value};

use crate::stub::{self, Answer, Stream, Tokens};
use crate::{anthropic_agent, daemon, deltas_in, end_of, events_of, settled, usage, Replies};

/// Whether the conversation already holds a tool result (the second step).
fn answered_a_tool(request: &Value) -> bool {
    request["messages"].as_array().is_some_and(|m| {
        m.iter().any(|m| {
            m["content"]
                .as_array()
                .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"))
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_and_a_tool_call_stream_in_pieces_and_cache_reads_count_as_cached() {
    let stub = stub::start(Arc::new(|request: &Value, _| {
        let body = if answered_a_tool(request) {
            stub::anthropic(
                &["Fine ", "and ", "d\u{e4}ndy."],
                None,
                Tokens(1200, 20, 1100),
            )
        } else {
            stub::anthropic(
                &["Let me ", "look."],
                Some(("AgentGet", &["{", "}"])),
                Tokens(1000, 10, 900),
            )
        };
        Answer::Stream(Stream::of(body))
    }))
    .await;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(&root).await;
    let mut c = daemon.clients().await;
    let id = anthropic_agent(&mut c, "claude", &stub).await;
    let mut replies = Replies::open(&mut c, &id).await;
    let message_id = crate::common::send(&mut c, &id, "how are you").await;
    let events = replies.until_end(&message_id).await;

    let step = |n: u32| -> String {
        deltas_in(
            &events
                .iter()
                .filter(|e| e.step == n)
                .cloned()
                .collect::<Vec<_>>(),
        )
        .concat()
    };
    assert_eq!(step(1), "Let me look.");
    assert_eq!(step(2), "Fine and d\u{e4}ndy.");
    let end = end_of(&events);
    assert_eq!(end.reply.as_deref(), Some("Fine and d\u{e4}ndy."));
    let all = settled(&c, &id, 1).await;
    assert_eq!(all[0].reply, "Fine and d\u{e4}ndy.");
    crate::common::tool_output(&mut c, &id, "AgentGet").await;

    // Two answers: prompts in full (cache reads included), and the part
    // read from the cache.
    let totals = usage(&mut c, &id).await;
    assert_eq!(
        (
            totals.prompt_tokens,
            totals.completion_tokens,
            totals.cached_tokens,
            totals.turns
        ),
        (2200, 30, 2000, 1)
    );
    let requests = stub.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.body["stream"], true);
        assert_eq!(
            request.headers.get("x-api-key").map(String::as_str),
            Some(crate::ANTHROPIC_KEY)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_529_and_an_overloaded_error_mid_stream_are_asked_again() {
    // The second answer is overloaded after its first words: an `error`
    // event in place of the rest.
    let mut overloaded = stub::anthropic(&["Half ", "an ", "answer"], None, Tokens(5, 5, 0));
    let at = overloaded
        .find("event: message_delta")
        .expect("message_delta");
    overloaded.truncate(at);
    overloaded.push_str(&format!(
        "event: error\ndata: {}\n\n",
        json!({ "type": "error", "error": { "type": "overloaded_error", "message": "Overloaded" } })
    ));
    let whole = stub::anthropic(&["Answered ", "whole."], None, Tokens(40, 4, 0));
    let stub = stub::start(Arc::new(move |_: &Value, n| match n {
        0 => Answer::Status(
            529,
            json!({ "type": "error", "error": { "type": "overloaded_error", "message": "Overloaded" } }),
        ),
        1 => Answer::Stream(Stream::of(overloaded.clone())),
        _ => Answer::Stream(Stream::of(whole.clone())),
    }))
    .await;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(&root).await;
    let mut c = daemon.clients().await;
    let id = anthropic_agent(&mut c, "patient", &stub).await;
    let mut replies = Replies::open(&mut c, &id).await;
    let message_id = crate::common::send(&mut c, &id, "answer").await;
    let events = replies.until_end(&message_id).await;
    let discarded: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(pb::reply_event::Kind::Discarded(why)) => Some(why.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(discarded.len(), 1, "{events:?}");
    assert!(discarded[0].contains("Overloaded"), "{}", discarded[0]);
    let at = events
        .iter()
        .position(|e| matches!(e.kind, Some(pb::reply_event::Kind::Discarded(_))))
        .expect("discarded");
    assert_eq!(deltas_in(&events[..at]).concat(), "Half an answer");
    assert_eq!(deltas_in(&events[at..]).concat(), "Answered whole.");
    assert_eq!(settled(&c, &id, 1).await[0].reply, "Answered whole.");
    assert_eq!(stub.requests().len(), 3);
    // The key never reaches the log, even though the server was sent it.
    let log = events_of(&mut c, &id).await;
    assert!(log
        .iter()
        .all(|e| !e.detail_json.contains(crate::ANTHROPIC_KEY)));
}
