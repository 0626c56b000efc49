//! `serve --otlp-endpoint`: spans reach a collector over OTLP/HTTP, and a
//! W3C `traceparent` on `SendMessage` makes the turn it causes (with its
//! brain step and tool call) part of the caller's trace. The collector is
//! a loopback HTTP server written here that decodes what it is sent.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use crate::common::{create, data_dir, eventually, handled, script, Daemon};
use holarchy::api::pb;

type Spans = Arc<Mutex<Vec<Span>>>;

/// Takes OTLP/HTTP exports (protobuf) on a loopback port until dropped.
async fn collector() -> (String, Spans) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = listener.local_addr().expect("addr").to_string();
    let spans: Spans = Arc::default();
    let kept = spans.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut stream = BufReader::new(stream);
                // Requests follow one another on a kept-alive connection.
                loop {
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        if stream.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        let line = line.trim_end();
                        if line.is_empty() {
                            break;
                        }
                        if let Some((name, value)) = line.split_once(':') {
                            if name.eq_ignore_ascii_case("content-length") {
                                length = value.trim().parse().unwrap_or(0);
                            }
                        }
                    }
                    let mut body = vec![0; length];
                    if stream.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    if let Ok(export) = ExportTraceServiceRequest::decode(body.as_slice()) {
                        let mut kept = kept.lock().expect("lock");
                        for resource in export.resource_spans {
                            for scope in resource.scope_spans {
                                kept.extend(scope.spans);
                            }
                        }
                    }
                    let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                    if stream.get_mut().write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, spans)
}

fn attribute(span: &Span, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| match &v.value {
            Some(Any::StringValue(s)) => Some(s.clone()),
            Some(Any::IntValue(i)) => Some(i.to_string()),
            _ => None,
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traceparent_on_send_message_is_the_parent_of_the_turn_it_causes() {
    let (addr, spans) = collector().await;
    let root = tempfile::tempdir().expect("tempdir");
    let endpoint = format!("http://{addr}");
    let daemon = Daemon::start_with(&data_dir(&root), &["--otlp-endpoint", &endpoint]).await;
    let mut c = daemon.clients().await;
    let agent = create(&mut c, "traced", None).await;

    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let calls = serde_json::json!([{ "name": "AgentGet", "input": {} }]);
    let mut request = tonic::Request::new(pb::SendMessageRequest {
        agent_id: agent.clone(),
        text: script(calls),
        dedupe_key: String::new(),
    });
    request.metadata_mut().insert(
        "traceparent",
        format!("00-{trace_id}-{caller_span}-01")
            .parse()
            .expect("metadata"),
    );
    c.agents.send_message(request).await.expect("sent");
    handled(&c, &agent, 1).await;

    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let traced = eventually("the turn's spans exported", || {
        let spans = spans.clone();
        async move {
            let spans = spans.lock().expect("lock");
            let traced: Vec<Span> = spans
                .iter()
                .filter(|s| hex(&s.trace_id) == trace_id)
                .cloned()
                .collect();
            let named = |name: &str| traced.iter().any(|s| s.name == name);
            let all = ["grpc", "turn", "brain_step", "tool_call", "store_commit"];
            all.iter().all(|name| named(name)).then_some(traced)
        }
    })
    .await;
    let find = |name: &str| traced.iter().find(|s| s.name == name).expect(name);
    let call = find("grpc");
    assert_eq!(
        hex(&call.parent_span_id),
        caller_span,
        "the caller's span is the call's parent"
    );
    assert_eq!(
        attribute(call, "rpc").as_deref(),
        Some("/holarchy.v1.AgentService/SendMessage")
    );
    let turn = find("turn");
    // The call's span, or its handler's span under it, is the turn's parent.
    let mut parent = turn.parent_span_id.clone();
    while parent != call.span_id {
        let up = traced
            .iter()
            .find(|s| s.span_id == parent)
            .unwrap_or_else(|| panic!("the turn descends from the call: {traced:#?}"));
        parent = up.parent_span_id.clone();
    }
    assert_eq!(attribute(turn, "agent_id").as_deref(), Some(agent.as_str()));
    assert!(attribute(turn, "run_id").is_some_and(|r| r.starts_with("run_")));
    let tool = find("tool_call");
    assert_eq!(attribute(tool, "tool").as_deref(), Some("AgentGet"));
    let step = find("brain_step");
    assert_eq!(tool.parent_span_id, turn.span_id);
    assert_eq!(step.parent_span_id, turn.span_id);
    // The turn's writes: commits under the turn, with what they carried.
    let commits: Vec<&Span> = traced
        .iter()
        .filter(|s| s.name == "store_commit" && s.parent_span_id == turn.span_id)
        .collect();
    assert!(!commits.is_empty(), "no commit under the turn: {traced:#?}");
    assert!(commits
        .iter()
        .any(|s| attribute(s, "writes").is_some_and(|w| w != "0")));
    // Flushes serve many callers: spans of their own, in no caller's trace.
    let flushes = eventually("a flush's span exported", || {
        let spans = spans.clone();
        async move {
            let spans = spans.lock().expect("lock");
            let flushes: Vec<Span> = spans
                .iter()
                .filter(|s| s.name == "store_flush")
                .cloned()
                .collect();
            (!flushes.is_empty()).then_some(flushes)
        }
    })
    .await;
    assert!(flushes.iter().all(|s| s.parent_span_id.is_empty()));
    assert!(flushes.iter().any(|s| attribute(s, "waiters").is_some()));
    drop(daemon);
}
