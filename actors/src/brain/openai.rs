//! The OpenAI-compatible brain: Chat Completions with function calling,
//! against any compatible server (hosted APIs, vLLM, Ollama, llama.cpp).
//! The tool catalog becomes functions (their JSON Schemas as parameters);
//! each earlier step of the turn goes back as the assistant's tool calls
//! and their results as tool messages; a reply with no tool calls ends the
//! turn. Answers are streamed ([`stream`]): text goes to the agent's
//! watchers as it comes, and the usage the last chunk carries is the
//! turn's. Network errors, 429, 5xx and streams that break off are retried
//! with exponential backoff and jitter up to a limit
//! ([`super::model::transport`], shared with the Anthropic brain); other
//! errors fail the turn with the server's message.
//! The API key is read from the named environment variable at call time
//! and never recorded. An operator abort drops the turn, and with it the
//! request in flight.
//!
//! An agent that logs decisions (an instance's agent and its descendants)
//! is also offered [`RECORD_DECISION`], a function that is no tool: the brain takes
//! its call out of the plan as the turn's explicit decision, so it never
//! runs and the model sees no result for it.

use serde_json::{json, Value};

use super::model::{self, decision};
use super::{
    Brain, BrainError, BrainFuture, CompactFuture, ToolCall, TurnInput, TurnPlan, UsageMeter,
};
use crate::context::compact::CompactRequest;
use crate::context::tokens::Tokenizer;

pub use super::model::decision::RECORD_DECISION;
pub use super::model::transport::RetryPolicy;

mod stream;
mod summary;

#[derive(Debug, Clone)]
pub struct OpenAiBrain {
    pub client: reqwest::Client,
    pub base_url: String,
    pub model: String,
    pub api_key_env: String,
    pub temperature: Option<f32>,
    pub retry: RetryPolicy,
    /// Where the key is looked up by name (taken from the environment at
    /// start, so no child of the daemon inherits it).
    pub secrets: std::sync::Arc<crate::secrets::Secrets>,
}

/// A failure of this brain, whole: [`model::shown`] cuts it (secrets out
/// first) where it leaves the brain.
fn failed(detail: String) -> BrainError {
    BrainError {
        brain: "openai",
        detail,
    }
}

/// A tool-call id strict servers accept (nine letters and digits).
fn call_id(step: usize, call: usize) -> String {
    format!("c{:04}x{:03}", step % 10_000, call % 1_000)
}

/// The conversation so far: the context, the message, and every earlier
/// step of the turn with its tool results.
fn messages(input: &TurnInput) -> Vec<Value> {
    let system = model::System::of(input).joined();
    let mut out = vec![
        json!({ "role": "system", "content": system }),
        json!({ "role": "user", "content": model::user_text(input) }),
    ];
    // Steps compacted away: the model reads its own summary of them, as
    // what it said before the steps that follow.
    if let Some(compacted) = &input.compacted {
        out.push(json!({ "role": "assistant", "content": model::compacted_text(compacted) }));
    }
    for (s, step) in input.steps.iter().enumerate() {
        let calls: Vec<Value> = step
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, call)| {
                json!({
                    "id": call_id(s, i),
                    "type": "function",
                    "function": { "name": call.name, "arguments": call.input.to_string() },
                })
            })
            .collect();
        out.push(json!({ "role": "assistant", "content": step.reply, "tool_calls": calls }));
        for (i, result) in step.results.iter().enumerate() {
            out.push(json!({
                "role": "tool",
                "tool_call_id": call_id(s, i),
                "content": result.output.to_string(),
            }));
        }
    }
    out
}

fn record_decision() -> Value {
    json!({
        "type": "function",
        "function": {
            "name": RECORD_DECISION,
            "description": decision::DESCRIPTION,
            "parameters": decision::schema(),
        },
    })
}

fn functions(input: &TurnInput) -> Vec<Value> {
    let mut functions: Vec<Value> = input
        .tools
        .iter()
        .map(|tool| {
            json!({
                "type": "function",
                "function": {
                    "name": tool["name"],
                    "description": tool["description"],
                    "parameters": tool["input_schema"],
                },
            })
        })
        .collect();
    if decision::offered(input) {
        functions.push(record_decision());
    }
    functions
}

/// The decision in a chat-completions answer. With `decisions` (the model
/// was offered [`RECORD_DECISION`]), its last call becomes the plan's
/// explicit decision instead of a tool call.
fn plan(answer: &Value, supervised: bool, decisions: bool) -> Result<TurnPlan, BrainError> {
    let message = answer
        .pointer("/choices/0/message")
        .ok_or_else(|| failed(format!("the answer has no choices[0].message: {answer}")))?;
    let reply = message
        .get("content")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .map(str::to_owned);
    let mut tool_calls: Vec<ToolCall> = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .map(|call| {
                    let name = call
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let raw = call
                        .pointer("/function/arguments")
                        .and_then(Value::as_str)
                        .unwrap_or("{}");
                    // Arguments that are not JSON reach the tool as they are,
                    // and it answers with an error the model can read.
                    let input =
                        serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()));
                    ToolCall {
                        name: name.to_owned(),
                        input,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let decision = if decisions {
        decision::take(&mut tool_calls)
    } else {
        None
    };
    // A supervised child is done when it answers without calling a tool.
    let done = supervised && tool_calls.is_empty();
    Ok(TurnPlan {
        reply,
        tool_calls,
        done,
        decision,
    })
}

impl OpenAiBrain {
    fn key(&self) -> Result<String, BrainError> {
        self.secrets.var(&self.api_key_env).ok_or_else(|| {
            failed(format!(
                "the environment variable {} is not set",
                self.api_key_env
            ))
        })
    }

    async fn run(self, mut input: TurnInput) -> Result<TurnPlan, BrainError> {
        let key = self.key()?;
        let mut body = json!({
            "model": self.model,
            "messages": messages(&input),
            "tools": functions(&input),
        });
        let decisions = decision::offered(&input);
        if let Some(temperature) = self.temperature {
            body["temperature"] = json!(temperature);
        }
        let sink = input.replies.take();
        let answer = self.complete(&key, body, sink, &input.usage).await?;
        plan(&answer, model::supervised(&input), decisions)
    }

    /// One chat completion, streamed: its answer as JSON (in the shape of
    /// one that was not), after the retries transient failures get. Its
    /// text goes to `sink` as it comes; its usage is added to `usage`.
    async fn complete(
        &self,
        key: &str,
        mut body: Value,
        sink: Option<crate::replies::ReplySink>,
        usage: &UsageMeter,
    ) -> Result<Value, BrainError> {
        let url = format!("{}/chat/completions", self.base_url.trim_end_matches('/'));
        body["stream"] = json!(true);
        body["stream_options"] = json!({ "include_usage": true });
        let body = body.to_string();
        let mut completion = stream::Completion::new(sink);
        model::stream::post(
            self.retry,
            || {
                self.client
                    .post(&url)
                    .bearer_auth(key)
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .header(reqwest::header::ACCEPT, "text/event-stream")
                    .body(body.clone())
            },
            &mut completion,
        )
        .await
        .map_err(|err| failed(err.to_string()))?;
        let (answer, used) = completion.finish();
        if let Some(used) = used {
            usage.add(used);
        }
        Ok(answer)
    }
}

impl Brain for OpenAiBrain {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn decide(&self, input: TurnInput) -> BrainFuture {
        let brain = self.clone();
        Box::pin(async move {
            let secrets = brain.secrets.clone();
            brain
                .run(input)
                .await
                .map_err(|err| model::shown(err, &secrets))
        })
    }

    fn compact(&self, tokenizer: Tokenizer, request: CompactRequest) -> CompactFuture {
        Box::pin(summary::compact(self.clone(), tokenizer, request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brain::model::tests::input;

    #[test]
    fn a_tool_call_answer_becomes_a_plan() {
        let answer = json!({ "choices": [{ "message": { "content": null, "tool_calls": [
            { "id": "a", "type": "function", "function": { "name": "Sleep", "arguments": "{\"duration_ms\":5}" } },
            { "id": "b", "type": "function", "function": { "name": "Sleep", "arguments": "not json" } }
        ] } }] });
        let plan = plan(&answer, true, false).expect("plan");
        assert_eq!(plan.reply, None);
        assert_eq!(plan.tool_calls[0].input, json!({ "duration_ms": 5 }));
        assert_eq!(plan.tool_calls[1].input, json!("not json"));
        assert!(!plan.done, "tool calls first");
    }

    #[test]
    fn a_record_decision_call_is_the_decision_not_a_tool_call() {
        let answer = json!({ "choices": [{ "message": { "content": "labelled", "tool_calls": [
            { "id": "a", "type": "function", "function": { "name": RECORD_DECISION, "arguments": "{\"kind\":\"wait\",\"reason\":\"first\"}" } },
            { "id": "b", "type": "function", "function": { "name": "AgentGet", "arguments": "{}" } },
            { "id": "c", "type": "function", "function": { "name": RECORD_DECISION, "arguments": "{\"kind\":\"escalate\",\"reason\":\"last\"}" } }
        ] } }] });
        let both = plan(&answer, true, true).expect("plan");
        let names: Vec<&str> = both.tool_calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["AgentGet"]);
        assert_eq!(
            both.decision,
            Some(json!({ "kind": "escalate", "reason": "last" })),
            "the last call of the answer wins"
        );
        assert!(!both.done, "a real tool call is still pending");
        // A model that only records its decision has finished.
        let only = json!({ "choices": [{ "message": { "content": null, "tool_calls": [
            { "id": "a", "type": "function", "function": { "name": RECORD_DECISION, "arguments": "not json" } }
        ] } }] });
        let recorded = plan(&only, true, true).expect("plan");
        assert!(recorded.tool_calls.is_empty());
        assert_eq!(recorded.decision, Some(json!("not json")));
        assert!(recorded.done);
        // Not offered: the call is a tool call like any other (the tool
        // catalog answers that it has no such tool).
        let plain = plan(&only, false, false).expect("plan");
        assert_eq!(plain.tool_calls.len(), 1);
        assert_eq!(plain.decision, None);
    }

    #[test]
    fn only_agents_that_log_decisions_are_offered_the_function() {
        let names = |input: &TurnInput| -> Vec<String> {
            functions(input)
                .iter()
                .map(|f| f["function"]["name"].as_str().expect("name").to_owned())
                .collect()
        };
        assert_eq!(names(&input(false)), ["AgentGet"]);
        assert_eq!(names(&input(true)), ["AgentGet", RECORD_DECISION]);
    }
}
