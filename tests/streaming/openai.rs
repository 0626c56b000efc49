//! The OpenAI-compatible brain, streaming chat completions.

use std::sync::Arc;

use holarchy::api::pb;
use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::stub::{self, Answer, Stream, Tokens};
use crate::{
    daemon, deltas_in, end_of, events_of, openai_agent, piece_of, settled, usage, Replies,
};

const TEXTS: [&str; 5] = [
    "Hel",
    "lo, w",
    "\u{f6}",
    "rld \u{2014} st",
    "reamed \u{2713}",
];

fn has_tool_result(request: &Value) -> bool {
    request["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deltas_reach_watchers_before_the_turn_ends_and_make_its_reply() {
    let body = stub::openai(&TEXTS, None, Tokens(100, 20, 40));
    // The stream waits, its first three deltas written, for the test.
    let gate = Arc::new(Notify::new());
    let at = piece_of(&body, "rld", 7) + 1;
    let stream_gate = gate.clone();
    let stub = stub::start(Arc::new(move |_: &Value, _| {
        Answer::Stream(Stream {
            gate: Some((at, stream_gate.clone())),
            ..Stream::of(body.clone())
        })
    }))
    .await;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(&root).await;
    let mut c = daemon.clients().await;
    let id = openai_agent(&mut c, "streamer", &stub).await;
    let mut replies = Replies::open(&mut c, &id).await;
    let message_id = crate::common::send(&mut c, &id, "stream please").await;

    let early = replies.deltas(3).await;
    assert_eq!(deltas_in(&early).concat(), "Hello, w\u{f6}");
    assert!(early
        .iter()
        .all(|e| e.message_id == message_id && e.step == 1));
    // The turn is still going: nothing of its end is in the log yet.
    let log = events_of(&mut c, &id).await;
    assert!(
        !log.iter()
            .any(|e| e.kind == "run_finished" || e.kind == "replied"),
        "{log:?}"
    );
    gate.notify_one();

    let rest = replies.until_end(&message_id).await;
    let streamed = [deltas_in(&early), deltas_in(&rest)].concat().concat();
    assert_eq!(streamed, TEXTS.concat());
    let end = end_of(&rest);
    assert_eq!(
        (end.outcome.as_str(), end.reply.as_deref()),
        ("completed", Some(streamed.as_str()))
    );
    // The end comes once it is durable: the message already says so.
    let stored = crate::common::messages(&mut c, &id).await;
    assert_eq!(stored[0].status, pb::MessageStatus::Handled as i32);
    assert_eq!(stored[0].reply, streamed);

    // The log holds the reply and the turn's usage, in the commit of its
    // end (adjacent cursors), and no delta.
    let log = events_of(&mut c, &id).await;
    let kinds: Vec<&str> = log.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "agent_created",
            "operator_action",
            "message_queued",
            "operator_action",
            "run_started",
            "step_decided",
            "replied",
            "turn_usage",
            "run_finished"
        ]
    );
    let used: Value = serde_json::from_str(&log[7].detail_json).expect("JSON");
    assert_eq!(
        (
            &used["prompt_tokens"],
            &used["completion_tokens"],
            &used["cached_tokens"]
        ),
        (&json!(100), &json!(20), &json!(40))
    );
    assert_eq!(log[8].cursor, log[7].cursor + 1);

    let request = &stub.requests()[0];
    assert_eq!(request.body["stream"], true);
    assert_eq!(request.body["stream_options"]["include_usage"], true);
    assert_eq!(
        request.headers.get("accept").map(String::as_str),
        Some("text/event-stream")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_streamed_in_pieces_runs_and_usage_adds_up_over_two_turns() {
    let stub = stub::start(Arc::new(|request: &Value, _| {
        let body = if has_tool_result(request) {
            stub::openai(&["All ", "good."], None, Tokens(70, 7, 30))
        } else {
            stub::openai(
                &["Checking."],
                Some(("AgentGet", &["{", "}"])),
                Tokens(50, 5, 0),
            )
        };
        Answer::Stream(Stream::of(body))
    }))
    .await;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(&root).await;
    let mut c = daemon.clients().await;
    let id = openai_agent(&mut c, "checker", &stub).await;
    let scripted = crate::common::create(&mut c, "plain", None).await;
    let mut replies = Replies::open(&mut c, &id).await;

    let first = crate::common::send(&mut c, &id, "check yourself").await;
    let events = replies.until_end(&first).await;
    // Both steps streamed, each its own.
    let by_step = |step: u32| -> String {
        events
            .iter()
            .filter(|e| e.step == step)
            .filter_map(|e| match &e.kind {
                Some(pb::reply_event::Kind::Delta(text)) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        (by_step(1).as_str(), by_step(2).as_str()),
        ("Checking.", "All good.")
    );
    assert_eq!(end_of(&events).reply.as_deref(), Some("All good."));
    let (failed, output) = crate::common::tool_call(&mut c, &id, "AgentGet").await;
    assert!(!failed, "{output}");
    assert!(output.to_string().contains("\"checker\""), "{output}");

    let second = crate::common::send(&mut c, &id, "and again").await;
    replies.until_end(&second).await;
    let all = settled(&c, &id, 2).await;
    assert!(all.iter().all(|m| m.reply == "All good."), "{all:?}");
    // Two requests a turn, two turns.
    assert_eq!(stub.requests().len(), 4);
    let totals = usage(&mut c, &id).await;
    assert_eq!(
        (
            totals.prompt_tokens,
            totals.completion_tokens,
            totals.cached_tokens,
            totals.turns
        ),
        (240, 24, 60, 2)
    );
    let turns: Vec<pb::Event> = events_of(&mut c, &id)
        .await
        .into_iter()
        .filter(|e| e.kind == "turn_usage")
        .collect();
    assert_eq!(turns.len(), 2);
    assert!(
        turns[0].text.starts_with("120 prompt (30 cached)"),
        "{}",
        turns[0].text
    );

    // A brain that reports no usage records none.
    crate::common::send(&mut c, &scripted, "hi").await;
    crate::common::handled(&c, &scripted, 1).await;
    assert_eq!(usage(&mut c, &scripted).await, pb::AgentUsage::default());
    assert!(!events_of(&mut c, &scripted)
        .await
        .iter()
        .any(|e| e.kind == "turn_usage"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_then_a_stream_cut_halfway_are_asked_again_and_only_the_whole_answer_is_kept() {
    let cut = stub::openai(
        &["This ", "answer ", "breaks ", "off ", "here"],
        None,
        Tokens(9, 9, 0),
    );
    let cut_at = piece_of(&cut, "off", 7);
    let whole = stub::openai(&["The ", "whole ", "answer."], None, Tokens(30, 3, 0));
    let stub = stub::start(Arc::new(move |_: &Value, n| match n {
        0 => Answer::Status(429, json!({ "error": { "message": "slow down" } })),
        1 => Answer::Stream(Stream {
            cut_after: Some(cut_at),
            ..Stream::of(cut.clone())
        }),
        _ => Answer::Stream(Stream::of(whole.clone())),
    }))
    .await;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(&root).await;
    let mut c = daemon.clients().await;
    let id = openai_agent(&mut c, "resilient", &stub).await;
    let mut replies = Replies::open(&mut c, &id).await;
    let message_id = crate::common::send(&mut c, &id, "say it whole").await;
    let events = replies.until_end(&message_id).await;

    // Deltas of the broken stream, the marker that voids them, then the
    // whole answer's.
    let discarded = events
        .iter()
        .position(|e| matches!(e.kind, Some(pb::reply_event::Kind::Discarded(_))))
        .expect("the partial reply is discarded");
    assert_eq!(
        deltas_in(&events[..discarded]).concat(),
        "This answer breaks "
    );
    let after = deltas_in(&events[discarded..]).concat();
    assert_eq!(after, "The whole answer.");
    assert_eq!(end_of(&events).reply.as_deref(), Some(after.as_str()));
    let all = settled(&c, &id, 1).await;
    assert_eq!(all[0].reply, "The whole answer.");
    assert_eq!(stub.requests().len(), 3, "the 429, the cut, the whole");
    let log = events_of(&mut c, &id).await;
    let replied: Vec<&str> = log
        .iter()
        .filter(|e| e.kind == "replied" || e.kind == "step_decided")
        .map(|e| e.text.as_str())
        .collect();
    assert_eq!(replied, ["The whole answer.", "The whole answer."]);
    // Only the answer that was read whole reported usage.
    assert_eq!(usage(&mut c, &id).await.prompt_tokens, 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_every_time_fails_the_turn_and_records_no_reply() {
    let body = stub::openai(&["Never ", "finished ", "at all"], None, Tokens(1, 1, 0));
    let cut_at = piece_of(&body, "finished", 7) + 1;
    let stub = stub::start(Arc::new(move |_: &Value, _| {
        Answer::Stream(Stream {
            cut_after: Some(cut_at),
            ..Stream::of(body.clone())
        })
    }))
    .await;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(&root).await;
    let mut c = daemon.clients().await;
    let id = openai_agent(&mut c, "unlucky", &stub).await;
    let mut replies = Replies::open(&mut c, &id).await;
    let message_id = crate::common::send(&mut c, &id, "try").await;
    let events = replies.until_end(&message_id).await;
    let discards = events
        .iter()
        .filter(|e| matches!(e.kind, Some(pb::reply_event::Kind::Discarded(_))))
        .count();
    assert_eq!(discards, 3, "each of the three attempts is voided");
    assert!(
        matches!(
            events.last().and_then(|e| e.kind.as_ref()),
            Some(pb::reply_event::Kind::End(_))
        ),
        "nothing after the last discard but the end"
    );
    let end = end_of(&events);
    assert_eq!(
        (end.outcome.as_str(), end.reply.as_deref()),
        ("failed", None)
    );
    assert!(
        end.detail.contains("broke off") && end.detail.contains("gave up after 2 retries"),
        "{}",
        end.detail
    );
    let all = settled(&c, &id, 1).await;
    assert_eq!(all[0].status, pb::MessageStatus::Failed as i32);
    assert_eq!(all[0].reply, "");
    let log = events_of(&mut c, &id).await;
    assert!(
        !log.iter()
            .any(|e| matches!(e.kind.as_str(), "replied" | "step_decided" | "turn_usage")),
        "{log:?}"
    );
    assert_eq!(usage(&mut c, &id).await.turns, 0);
    assert_eq!(stub.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_turn_records_what_its_finished_steps_spent_and_watchers_see_its_end() {
    // The first step calls a tool; the second streams a little and then
    // hangs until the operator aborts the turn.
    let hang = stub::openai(
        &["Thinking ", "about it ", "forever"],
        None,
        Tokens(5, 5, 0),
    );
    let at = piece_of(&hang, "forever", 7);
    let never = Arc::new(Notify::new());
    let stub = stub::start(Arc::new(move |request: &Value, _| {
        if has_tool_result(request) {
            Answer::Stream(Stream {
                gate: Some((at, never.clone())),
                ..Stream::of(hang.clone())
            })
        } else {
            Answer::Stream(Stream::of(stub::openai(
                &[],
                Some(("AgentGet", &["{}"])),
                Tokens(80, 8, 16),
            )))
        }
    }))
    .await;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(&root).await;
    let mut c = daemon.clients().await;
    let id = openai_agent(&mut c, "ponderer", &stub).await;
    let mut replies = Replies::open(&mut c, &id).await;
    let message_id = crate::common::send(&mut c, &id, "think").await;
    let early = replies.deltas(2).await;
    assert!(early.iter().all(|e| e.step == 2), "{early:?}");
    let aborted = c
        .agents
        .abort_run(pb::AbortRunRequest {
            agent_id: id.clone(),
            run_id: early[0].run_id.clone(),
        })
        .await
        .expect("aborted")
        .into_inner();
    assert_eq!(aborted.aborted_run_id, early[0].run_id);
    let rest = replies.until_end(&message_id).await;
    let end = end_of(&rest);
    assert_eq!(
        (end.outcome.as_str(), end.reply.as_deref()),
        ("aborted", None)
    );
    let totals = usage(&mut c, &id).await;
    assert_eq!(
        (totals.prompt_tokens, totals.cached_tokens, totals.turns),
        (80, 16, 1)
    );
    let log = events_of(&mut c, &id).await;
    // The abort's own `operator_action` follows; the turn's end is before.
    let tail: Vec<&str> = log
        .iter()
        .rev()
        .filter(|e| e.kind != "operator_action")
        .take(3)
        .map(|e| e.kind.as_str())
        .collect();
    assert!(
        tail.contains(&"turn_usage") && tail.contains(&"run_finished"),
        "{tail:?}"
    );
}
