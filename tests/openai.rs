//! End-to-end: agents on the OpenAI-compatible brain, through the real
//! daemon, against a stub chat-completions server started here on
//! 127.0.0.1. The stub stands in for the external model only.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::http::{listen, Reply};
use common::{data_dir, eventually, send, Daemon};
use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::{json, Value};

/// What the stub answers: a status, a JSON body, and a delay before it.
struct Answer {
    status: u16,
    body: Value,
    delay: Duration,
}

fn reply(text: &str) -> Answer {
    Answer {
        status: 200,
        body: json!({ "choices": [{ "message": { "role": "assistant", "content": text } }] }),
        delay: Duration::ZERO,
    }
}

fn call(name: &str, arguments: Value) -> Answer {
    Answer {
        status: 200,
        body: json!({ "choices": [{ "message": { "role": "assistant", "content": null, "tool_calls": [
            { "id": "c1", "type": "function", "function": { "name": name, "arguments": arguments.to_string() } }
        ] } }] }),
        delay: Duration::ZERO,
    }
}

type Handler = Arc<dyn Fn(&Value, usize) -> Answer + Send + Sync>;

/// A running stub: its base URL, and every authorised request it was
/// sent (bodies, in order), for the test body to check: a check inside
/// the stub's own tasks could not fail the test.
struct Stub {
    base: String,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl Stub {
    fn requests(&self) -> Vec<Value> {
        self.requests.lock().expect("requests").clone()
    }
}

/// A minimal HTTP/1.1 chat-completions server.
async fn stub(handler: Handler) -> Stub {
    let calls = Arc::new(AtomicUsize::new(0));
    let requests: Arc<Mutex<Vec<Value>>> = Arc::default();
    let recorded = requests.clone();
    let addr = listen(move |request| {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let answer = if request.has("authorization", "bearer test-key") {
            recorded.lock().expect("requests").push(body.clone());
            handler(&body, calls.fetch_add(1, Ordering::SeqCst))
        } else {
            Answer {
                status: 401,
                body: json!({ "error": { "message": "bad key" } }),
                delay: Duration::ZERO,
            }
        };
        async move {
            tokio::time::sleep(answer.delay).await;
            Reply {
                status: answer.status,
                headers: Vec::new(),
                body: answer.body.to_string(),
            }
        }
    })
    .await;
    Stub {
        base: format!("http://{addr}/v1"),
        requests,
    }
}

async fn daemon(root: &tempfile::TempDir) -> Daemon {
    Daemon::start_with_env(
        &data_dir(root),
        &["--model-retries", "2", "--model-retry-base-ms", "10"],
        &[("TEST_MODEL_KEY", "test-key")],
    )
    .await
}

async fn agent_on(c: &mut Clients, name: &str, base_url: &str) -> String {
    let brain = pb::BrainConfig {
        kind: Some(pb::brain_config::Kind::Openai(pb::OpenAiBrain {
            base_url: base_url.into(),
            model: "stub-model".into(),
            api_key_env: "TEST_MODEL_KEY".into(),
            temperature: Some(0.0),
            max_steps: Some(4),
        })),
    };
    common::create_on(c, name, brain).await
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

fn last_user_text(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_replies_and_a_tool_call_spawns_a_child_whose_result_it_reads() {
    let handler: Handler = Arc::new(|request: &Value, _| {
        let user = last_user_text(request);
        let has_tool_result = request["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        if user.contains("hello") {
            reply("hello from the model")
        } else if user.contains("count the widgets") {
            reply("7 widgets")
        } else if user.contains("[child_result") {
            reply(&format!(
                "noted: {}",
                user.rsplit("] ").next().unwrap_or_default()
            ))
        } else if has_tool_result {
            reply("spawned a counter")
        } else {
            call(
                "SpawnAgent",
                json!({ "preset": "private_child", "initial_message": "count the widgets" }),
            )
        }
    });
    let stub = stub(handler).await;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(&root).await;
    let mut c = daemon.clients().await;
    let id = agent_on(&mut c, "modelled", &stub.base).await;

    send(&mut c, &id, "hello").await;
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
    assert_eq!(all[0].reply, "hello from the model");
    assert_eq!(all[1].reply, "spawned a counter");
    let result = all
        .iter()
        .find(|m| m.provenance == "child_result")
        .expect("result");
    assert_eq!(
        (result.text.as_str(), result.reply.as_str()),
        ("7 widgets", "noted: 7 widgets")
    );
    // The catalog goes with every request, the parent's and the child's.
    let requests = stub.requests();
    assert!(requests.len() >= 4, "{} requests", requests.len());
    for request in &requests {
        let tools = request["tools"].as_array().map_or(0, Vec::len);
        assert!(tools > 0, "a request without the tool catalog: {request}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_retried_and_a_500_that_persists_fails_the_turn() {
    let handler: Handler = Arc::new(|request: &Value, n| {
        let user = last_user_text(request);
        if user.contains("always broken") {
            Answer {
                status: 500,
                body: json!({ "error": { "message": "model on fire" } }),
                delay: Duration::ZERO,
            }
        } else if n == 0 {
            Answer {
                status: 429,
                body: json!({ "error": { "message": "slow down" } }),
                delay: Duration::ZERO,
            }
        } else {
            reply("after a pause")
        }
    });
    let stub = stub(handler).await;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(&root).await;
    let mut c = daemon.clients().await;
    let id = agent_on(&mut c, "patient", &stub.base).await;
    send(&mut c, &id, "first").await;
    let all = settled(&c, &id, 1).await;
    assert_eq!(all[0].reply, "after a pause");

    send(&mut c, &id, "always broken").await;
    let all = settled(&c, &id, 2).await;
    assert_eq!(all[1].status, pb::MessageStatus::Failed as i32);
    let events = common::events(&mut c, 0).await;
    let finished = events
        .iter()
        .find(|e| e.kind == "run_finished" && e.message_id == all[1].message_id)
        .expect("run finished");
    assert!(
        finished.detail_json.contains("model on fire")
            && finished.detail_json.contains("gave up after 2 retries"),
        "{}",
        finished.detail_json
    );
    assert!(
        !finished.detail_json.contains("test-key"),
        "the key is never recorded"
    );
    // The agent carries on.
    send(&mut c, &id, "third").await;
    assert_eq!(settled(&c, &id, 3).await[2].reply, "after a pause");
    // The 429 was asked again; the 500 once and twice more (--model-retries 2).
    let asked = |text: &str| {
        stub.requests()
            .iter()
            .filter(|r| last_user_text(r).ends_with(text))
            .count()
    };
    assert_eq!(asked("first"), 2);
    assert_eq!(asked("always broken"), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_cancels_a_slow_model_request() {
    let handler: Handler = Arc::new(|_: &Value, _| Answer {
        delay: Duration::from_secs(60),
        ..reply("too late")
    });
    let stub = stub(handler).await;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(&root).await;
    let mut c = daemon.clients().await;
    let id = agent_on(&mut c, "slowpoke", &stub.base).await;
    send(&mut c, &id, "think hard").await;
    let run = eventually("the request in flight", || {
        let mut c = c.clone();
        let id = id.clone();
        async move {
            let agent = c
                .agents
                .get_agent(pb::GetAgentRequest {
                    agent: Some(pb::get_agent_request::Agent::AgentId(id)),
                })
                .await
                .ok()?
                .into_inner()
                .agent?;
            (!agent.current_run_id.is_empty()).then_some(agent.current_run_id)
        }
    })
    .await;
    let aborted = c
        .agents
        .abort_run(pb::AbortRunRequest {
            agent_id: id.clone(),
            run_id: run.clone(),
        })
        .await
        .expect("aborted")
        .into_inner();
    assert_eq!(
        (aborted.state, aborted.aborted_run_id.as_str()),
        (pb::LifecycleState::Paused as i32, run.as_str())
    );
    let all = settled(&c, &id, 1).await;
    assert_eq!(all[0].status, pb::MessageStatus::Aborted as i32);
}

/// A turn that outgrows its budget: the model is asked once for a summary
/// of the oldest steps, and reads it back in place of them; the summary
/// becomes the agent's running summary. Counted with the model's own
/// tokenizer (gpt-4o: o200k).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_turn_is_compacted_by_the_models_own_summary() {
    let stub = stub(Arc::new(|body: &Value, _| {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let system = messages[0]["content"].as_str().unwrap_or_default();
        if system.starts_with("You are compacting") {
            return reply("SUMMARY-FROM-MODEL: read the agent several times");
        }
        let compacted = messages.iter().any(|m| {
            m["role"] == "assistant"
                && m["content"]
                    .as_str()
                    .is_some_and(|c| c.contains("compacted by model"))
        });
        if compacted {
            reply("done after compaction")
        } else {
            call("AgentGet", json!({}))
        }
    }))
    .await;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with_env(
        &data_dir(&root),
        &["--context-tokens", "1000", "--model-retries", "2"],
        &[("TEST_MODEL_KEY", "test-key")],
    )
    .await;
    let mut c = daemon.clients().await;
    let brain = pb::BrainConfig {
        kind: Some(pb::brain_config::Kind::Openai(pb::OpenAiBrain {
            base_url: stub.base.clone(),
            model: "gpt-4o".into(),
            api_key_env: "TEST_MODEL_KEY".into(),
            temperature: None,
            max_steps: Some(16),
        })),
    };
    let id = common::create_on(&mut c, "compactor", brain).await;
    send(&mut c, &id, "read yourself until it no longer fits").await;
    let all = settled(&c, &id, 1).await;
    assert_eq!(all[0].reply, "done after compaction");
    let requests = stub.requests();
    let summaries = requests
        .iter()
        .filter(|r| {
            r["messages"][0]["content"]
                .as_str()
                .is_some_and(|s| s.starts_with("You are compacting"))
        })
        .count();
    assert_eq!(summaries, 1, "one summary request");
    let context = c
        .agents
        .get_agent_context(pb::GetAgentContextRequest {
            agent_id: id.clone(),
        })
        .await
        .expect("context")
        .into_inner();
    assert_eq!(context.tokenizer, "o200k_base");
    assert_eq!(context.compactions, 1);
    assert!(
        context.context_json.contains("SUMMARY-FROM-MODEL"),
        "{}",
        context.context_json
    );
}
