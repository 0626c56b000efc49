//! End-to-end: agents on the Anthropic brain, through the real daemon,
//! against a stub Messages API server started here on 127.0.0.1. The stub
//! stands in for the external model only: it checks the key header, keeps
//! every request it was sent (headers, body, when), and answers what each
//! test's handler says.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{data_dir, eventually, send, Daemon};
use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::{json, Value};

/// The key the daemon holds, in a variable it treats as secret. Long
/// enough to be redacted wherever it would be stored.
const KEY: &str = "sk-ant-stub-0123456789abcdef";
const KEY_ENV: &str = "TEST_ANTHROPIC_KEY";

#[path = "anthropic/stub.rs"]
mod stub;
use stub::{error, reply, stub, tool_use, Answer, Asked, Handler};

async fn daemon(root: &tempfile::TempDir, extra: &[&str]) -> Daemon {
    let mut args = vec!["--model-retries", "2", "--model-retry-base-ms", "10"];
    args.extend_from_slice(extra);
    Daemon::start_with_env(&data_dir(root), &args, &[(KEY_ENV, KEY)]).await
}

fn brain(base_url: &str, max_steps: u32) -> pb::BrainConfig {
    pb::BrainConfig {
        kind: Some(pb::brain_config::Kind::Anthropic(pb::AnthropicBrain {
            base_url: base_url.into(),
            model: "claude-stub".into(),
            api_key_env: KEY_ENV.into(),
            max_tokens: Some(1024),
            temperature: Some(0.0),
            max_steps: Some(max_steps),
        })),
    }
}

async fn settled(c: &Clients, agent: &str, count: usize) -> Vec<pb::Message> {
    eventually("messages settled", || {
        let mut c = c.clone();
        let agent = agent.to_owned();
        async move {
            let all = common::messages(&mut c, &agent).await;
            (all.len() >= count
                && all.iter().all(|m| {
                    m.status != pb::MessageStatus::Queued as i32
                        && m.status != pb::MessageStatus::Handling as i32
                }))
            .then_some(all)
        }
    })
    .await
}

/// The text of the first user message: the turn's message with its
/// provenance.
fn message_text(request: &Value) -> String {
    request["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Every block of one type across a request's messages of one role.
fn blocks(request: &Value, role: &str, kind: &str) -> Vec<Value> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == role)
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == kind)
        .collect()
}

/// The key is nowhere the daemon keeps or shows: events, messages,
/// replies, its log.
async fn key_never_shown(c: &mut Clients, daemon: &Daemon, agents: &[&str]) {
    for event in common::events(c, 0).await {
        assert!(
            !event.detail_json.contains(KEY),
            "the key in an event: {}",
            event.detail_json
        );
    }
    for agent in agents {
        for m in common::messages(c, agent).await {
            assert!(
                !m.text.contains(KEY) && !m.reply.contains(KEY),
                "the key in a message"
            );
        }
    }
    assert!(!daemon.log().contains(KEY), "the key in the daemon's log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_use_runs_and_its_result_goes_back_for_the_final_text() {
    let handler: Handler = Arc::new(|request: &Value, _| {
        let text = message_text(request);
        let results = blocks(request, "user", "tool_result");
        if text.contains("count the widgets") {
            reply("7 widgets")
        } else if text.contains("[child_result") {
            reply(&format!(
                "noted: {}",
                text.rsplit("] ").next().unwrap_or_default()
            ))
        } else if !results.is_empty() {
            reply("spawned a counter")
        } else {
            tool_use(
                "SpawnAgent",
                json!({ "preset": "private_child", "initial_message": "count the widgets" }),
            )
        }
    });
    let stub = stub(handler).await;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(&root, &[]).await;
    let mut c = daemon.clients().await;
    let id = common::create_on(&mut c, "claude", brain(&stub.base, 4)).await;

    send(&mut c, &id, "delegate the counting").await;
    let all = eventually("the child's result read", || {
        let mut c = c.clone();
        let id = id.clone();
        async move {
            let all = common::messages(&mut c, &id).await;
            all.iter()
                .any(|m| {
                    m.provenance == "child_result" && m.status == pb::MessageStatus::Handled as i32
                })
                .then_some(all)
        }
    })
    .await;
    // The turn's reply is its last text; the child, answering without a
    // tool call, was done and handed its answer to its parent.
    assert_eq!(all[0].reply, "spawned a counter");
    let result = all
        .iter()
        .find(|m| m.provenance == "child_result")
        .expect("result");
    assert_eq!(
        (result.text.as_str(), result.reply.as_str()),
        ("7 widgets", "noted: 7 widgets")
    );

    let requests = stub.requests();
    assert!(requests.len() >= 4, "{} requests", requests.len());
    for request in &requests {
        assert_eq!(
            request.headers.get("anthropic-version").map(String::as_str),
            Some("2023-06-01")
        );
        assert_eq!(
            request.headers.get("content-type").map(String::as_str),
            Some("application/json")
        );
        assert!(
            !request.headers.contains_key("authorization"),
            "the key goes as x-api-key only"
        );
        let body = &request.body;
        assert_eq!(body["model"], "claude-stub");
        assert_eq!(body["max_tokens"], 1024);
        // The stable prefix is marked for caching: the last tool and the
        // last system block.
        let tools = body["tools"].as_array().expect("tools");
        assert!(!tools.is_empty());
        assert!(tools.iter().all(|t| t["input_schema"]["type"] == "object"));
        assert_eq!(
            tools.last().expect("a tool")["cache_control"],
            json!({ "type": "ephemeral" })
        );
        let system = body["system"].as_array().expect("system blocks");
        assert_eq!(
            system.last().expect("a block")["cache_control"],
            json!({ "type": "ephemeral" })
        );
        assert!(system
            .last()
            .and_then(|b| b["text"].as_str())
            .is_some_and(|t| t.contains("holarchy runtime")));
    }
    // The step after the tool call: the call as the assistant's tool_use,
    // answered by a tool_result with its id, the child's handle in it.
    let second = requests
        .iter()
        .map(|r| &r.body)
        .find(|b| !blocks(b, "user", "tool_result").is_empty())
        .expect("a request with a tool result");
    let uses = blocks(second, "assistant", "tool_use");
    let results = blocks(second, "user", "tool_result");
    assert_eq!((uses.len(), results.len()), (1, 1));
    assert_eq!(uses[0]["name"], "SpawnAgent");
    assert_eq!(uses[0]["input"]["initial_message"], "count the widgets");
    assert_eq!(results[0]["tool_use_id"], uses[0]["id"]);
    assert_eq!(results[0]["is_error"], false);
    assert!(
        results[0]["content"]
            .as_str()
            .is_some_and(|c| c.contains("task_id")),
        "{}",
        results[0]
    );
    let said = blocks(second, "assistant", "text");
    assert_eq!(said[0]["text"], "On it.");
    key_never_shown(&mut c, &daemon, &[&id]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_and_overloads_are_retried_and_a_persistent_500_fails_the_turn() {
    let counts = Asked(Mutex::default());
    let handler: Handler = Arc::new(move |request: &Value, _| {
        let text = message_text(request);
        if text.contains("always broken") {
            return error(500, "api_error", "model on fire");
        }
        let asked = counts.with_count(&text);
        if text.contains("first") && asked == 0 {
            let mut limited = error(429, "rate_limit_error", "slow down");
            limited.headers.push(("retry-after", "1".into()));
            return limited;
        }
        if text.contains("busy") && asked == 0 {
            return error(529, "overloaded_error", "Overloaded");
        }
        if text.contains("busy") && asked == 1 {
            return error(500, "api_error", "hiccup");
        }
        reply("after a pause")
    });
    let stub = stub(handler).await;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(&root, &[]).await;
    let mut c = daemon.clients().await;
    let id = common::create_on(&mut c, "patient", brain(&stub.base, 4)).await;

    send(&mut c, &id, "first").await;
    assert_eq!(settled(&c, &id, 1).await[0].reply, "after a pause");
    send(&mut c, &id, "busy").await;
    assert_eq!(settled(&c, &id, 2).await[1].reply, "after a pause");
    send(&mut c, &id, "always broken").await;
    let all = settled(&c, &id, 3).await;
    assert_eq!(all[2].status, pb::MessageStatus::Failed as i32);
    let events = common::events(&mut c, 0).await;
    let finished = events
        .iter()
        .find(|e| e.kind == "run_finished" && e.message_id == all[2].message_id)
        .expect("run finished");
    assert!(
        finished.detail_json.contains("model on fire")
            && finished.detail_json.contains("gave up after 2 retries"),
        "{}",
        finished.detail_json
    );
    // The agent carries on.
    send(&mut c, &id, "fourth").await;
    assert_eq!(settled(&c, &id, 4).await[3].reply, "after a pause");

    let asked = |text: &str| -> Vec<Instant> {
        stub.requests()
            .iter()
            .filter(|r| message_text(&r.body).ends_with(text))
            .map(|r| r.at)
            .collect()
    };
    // The 429 was asked again once, after the second its Retry-After
    // named (the backoff alone would have waited some 10 ms).
    let first = asked("first");
    assert_eq!(first.len(), 2);
    assert!(
        first[1] - first[0] >= Duration::from_millis(900),
        "retried after {:?}",
        first[1] - first[0]
    );
    // 529 (overloaded), then 500, then the answer.
    assert_eq!(asked("busy").len(), 3);
    // Once and twice more (--model-retries 2).
    assert_eq!(asked("always broken").len(), 3);
    key_never_shown(&mut c, &daemon, &[&id]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_answer_or_a_refused_request_fails_only_that_turn_and_shows_no_key() {
    let handler: Handler = Arc::new(|request: &Value, _| {
        let text = message_text(request);
        if text.contains("garbage") {
            Answer {
                raw: Some("this is not json {"),
                ..Answer::json(200, Value::Null)
            }
        } else if text.contains("wrong shape") {
            Answer::json(200, json!({ "id": "msg_1", "choices": [] }))
        } else if text.contains("bad request") {
            // A server that echoes the key back in its error.
            error(
                400,
                "invalid_request_error",
                &format!("max_tokens too large for key {KEY}"),
            )
        } else {
            reply("fine")
        }
    });
    let stub = stub(handler).await;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(&root, &[]).await;
    let mut c = daemon.clients().await;
    let id = common::create_on(&mut c, "sturdy", brain(&stub.base, 4)).await;
    for text in ["garbage", "wrong shape", "bad request", "after all that"] {
        send(&mut c, &id, text).await;
    }
    let all = settled(&c, &id, 4).await;
    let failed = pb::MessageStatus::Failed as i32;
    assert_eq!(
        all.iter().map(|m| m.status).collect::<Vec<_>>(),
        [failed, failed, failed, pb::MessageStatus::Handled as i32]
    );
    assert_eq!(all[3].reply, "fine");
    let events = common::events(&mut c, 0).await;
    let detail = |m: &pb::Message| -> String {
        events
            .iter()
            .find(|e| e.kind == "run_finished" && e.message_id == m.message_id)
            .map(|e| e.detail_json.clone())
            .expect("run finished")
    };
    assert!(
        detail(&all[0]).contains("not a Messages API message"),
        "{}",
        detail(&all[0])
    );
    assert!(
        detail(&all[1]).contains("not a Messages API message"),
        "{}",
        detail(&all[1])
    );
    let refused = detail(&all[2]);
    assert!(
        refused.contains("400") && refused.contains("max_tokens too large for key"),
        "{refused}"
    );
    // A 400 is not retried.
    let asked = stub
        .bodies()
        .iter()
        .filter(|b| message_text(b).ends_with("bad request"))
        .count();
    assert_eq!(asked, 1);
    key_never_shown(&mut c, &daemon, &[&id]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_is_not_set_fails_the_turn_naming_the_variable() {
    let stub = stub(Arc::new(|_: &Value, _| reply("never"))).await;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(&root, &[]).await;
    let mut c = daemon.clients().await;
    let brain = pb::BrainConfig {
        kind: Some(pb::brain_config::Kind::Anthropic(pb::AnthropicBrain {
            base_url: stub.base.clone(),
            model: "claude-stub".into(),
            api_key_env: "NOT_SET_ANTHROPIC_KEY".into(),
            max_tokens: None,
            temperature: None,
            max_steps: None,
        })),
    };
    let id = common::create_on(&mut c, "keyless", brain).await;
    // Defaults filled in, and shown back.
    let agent = common::get_agent(&mut c, &id).await;
    match agent.brain.and_then(|b| b.kind) {
        Some(pb::brain_config::Kind::Anthropic(a)) => {
            assert_eq!(a.max_tokens, Some(8192));
            assert_eq!(a.api_key_env, "NOT_SET_ANTHROPIC_KEY");
        }
        other => panic!("not an anthropic brain: {other:?}"),
    }
    send(&mut c, &id, "hello").await;
    let all = settled(&c, &id, 1).await;
    assert_eq!(all[0].status, pb::MessageStatus::Failed as i32);
    let events = common::events(&mut c, 0).await;
    let finished = events
        .iter()
        .find(|e| e.kind == "run_finished" && e.message_id == all[0].message_id)
        .expect("run finished");
    assert!(
        finished.detail_json.contains("NOT_SET_ANTHROPIC_KEY"),
        "{}",
        finished.detail_json
    );
    assert!(stub.requests().is_empty(), "nothing sent without a key");
    // Out of bounds: refused before it is stored.
    let refused = c
        .agents
        .update_agent_brain(pb::UpdateAgentBrainRequest {
            agent_id: id.clone(),
            brain: Some(pb::BrainConfig {
                kind: Some(pb::brain_config::Kind::Anthropic(pb::AnthropicBrain {
                    model: "claude-stub".into(),
                    max_tokens: Some(1_000_000),
                    ..pb::AnthropicBrain::default()
                })),
            }),
        })
        .await
        .expect_err("max_tokens over its bound");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    assert!(refused.message().contains("max_tokens"), "{refused:?}");
}

/// `holarchy <args>` against the daemon on `data_dir`; its stdout.
fn cli(data_dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .env_remove("HOLARCHY_ADDR")
        .env_remove("HOLARCHY_TOKEN")
        .output()
        .expect("the holarchy binary runs");
    assert!(
        out.status.success(),
        "holarchy {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_puts_an_agent_on_the_anthropic_brain() {
    let stub = stub(Arc::new(|request: &Value, _| {
        reply(&format!("claude read: {}", message_text(request)))
    }))
    .await;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(&root, &[]).await;
    let dir = data_dir(&root);
    cli(
        &dir,
        &[
            "agent",
            "create",
            "cli-claude",
            "--anthropic-model",
            "claude-stub",
            "--anthropic-base-url",
            &stub.base,
            "--anthropic-key-env",
            KEY_ENV,
            "--anthropic-max-tokens",
            "512",
        ],
    );
    let shown: Value =
        serde_json::from_str(cli(&dir, &["--json", "agent", "get", "cli-claude"]).trim())
            .expect("agent get prints JSON");
    assert_eq!(
        shown["brain"],
        json!({ "kind": "anthropic", "base_url": stub.base, "model": "claude-stub",
                "api_key_env": KEY_ENV, "max_tokens": 512 })
    );
    cli(&dir, &["agent", "send", "cli-claude", "hello"]);
    let mut c = daemon.clients().await;
    let id = shown["agent_id"].as_str().expect("agent id").to_owned();
    let all = settled(&c, &id, 1).await;
    assert_eq!(all[0].reply, "claude read: [operator] hello");
    assert_eq!(stub.bodies()[0]["max_tokens"], 512);
    key_never_shown(&mut c, &daemon, &[&id]).await;
}

/// A turn that outgrows its budget: the model is asked once for a summary
/// of the oldest steps, and reads it back in place of them; the summary
/// becomes the agent's running summary. Claude's tokens are estimated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_turn_is_compacted_by_the_models_own_summary() {
    let stub = stub(Arc::new(|body: &Value, _| {
        if body["system"]
            .as_str()
            .is_some_and(|s| s.starts_with("You are compacting"))
        {
            return reply("SUMMARY-FROM-MODEL: read the agent several times");
        }
        let compacted = blocks(body, "assistant", "text").iter().any(|b| {
            b["text"]
                .as_str()
                .is_some_and(|t| t.contains("compacted by model"))
        });
        if compacted {
            reply("done after compaction")
        } else {
            tool_use("AgentGet", json!({}))
        }
    }))
    .await;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(&root, &["--context-tokens", "2000"]).await;
    let mut c = daemon.clients().await;
    let id = common::create_on(&mut c, "compactor", brain(&stub.base, 16)).await;
    send(&mut c, &id, "read yourself until it no longer fits").await;
    let all = settled(&c, &id, 1).await;
    assert_eq!(all[0].reply, "done after compaction");
    let summaries: Vec<Value> = stub
        .bodies()
        .into_iter()
        .filter(|b| {
            b["system"]
                .as_str()
                .is_some_and(|s| s.starts_with("You are compacting"))
        })
        .collect();
    assert_eq!(summaries.len(), 1, "one summary request");
    assert!(summaries[0]["messages"][0]["content"]
        .as_str()
        .is_some_and(|c| c.contains("AgentGet")));
    let context = c
        .agents
        .get_agent_context(pb::GetAgentContextRequest {
            agent_id: id.clone(),
        })
        .await
        .expect("context")
        .into_inner();
    assert_eq!(context.tokenizer, "estimate (4 bytes a token)");
    assert_eq!(context.compactions, 1);
    assert!(
        context.context_json.contains("SUMMARY-FROM-MODEL"),
        "{}",
        context.context_json
    );
}
