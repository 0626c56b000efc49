//! The OpenAI-compatible brain: Chat Completions with function calling,
//! against any compatible server (hosted APIs, vLLM, Ollama, llama.cpp).
//! The tool catalog becomes functions (their JSON Schemas as parameters);
//! each earlier step of the turn goes back as the assistant's tool calls
//! and their results as tool messages; a reply with no tool calls ends the
//! turn. Network errors, 429 and 5xx are retried with exponential backoff
//! and jitter up to a limit; other errors fail the turn with the server's
//! message. The API key is read from the named environment variable at
//! call time and never recorded. An operator abort drops the turn, and with
//! it the request in flight.
//!
//! An agent that logs decisions (an instance's agent and its descendants)
//! is also offered [`RECORD_DECISION`], a function that is no tool: the brain takes
//! its call out of the plan as the turn's explicit decision, so it never
//! runs and the model sees no result for it.

use std::time::Duration;

use serde_json::{json, Value};

use super::{Brain, BrainError, BrainFuture, CompactFuture, ToolCall, TurnInput, TurnPlan};
use crate::context::compact::CompactRequest;
use crate::context::tokens::Tokenizer;

mod summary;

/// How failed requests are retried.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub max_retries: u32,
    pub base: Duration,
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            base: Duration::from_millis(500),
            cap: Duration::from_secs(8),
        }
    }
}

impl RetryPolicy {
    /// Jittered: between half and all of the exponential bound, so many
    /// agents retrying at once do not march in step.
    fn delay(&self, attempt: u32) -> Duration {
        let bound = self
            .base
            .saturating_mul(1u32 << attempt.min(16))
            .min(self.cap);
        let mut byte = [0u8; 2];
        let _ = getrandom::fill(&mut byte);
        let fraction = f64::from(u16::from_le_bytes(byte)) / f64::from(u16::MAX);
        bound.mul_f64(0.5 + fraction / 2.0)
    }
}

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

/// Bytes of an answer read at most, and of an error shown.
const MAX_ANSWER: usize = 4 * 1024 * 1024;
const SHOWN: usize = 2048;

fn failed(detail: String) -> BrainError {
    let detail: String = detail.chars().take(SHOWN).collect();
    BrainError {
        brain: "openai",
        detail: crate::secrets::redact_trigger_tokens(&detail),
    }
}

/// A tool-call id strict servers accept (nine letters and digits).
fn call_id(step: usize, call: usize) -> String {
    format!("c{:04}x{:03}", step % 10_000, call % 1_000)
}

/// The conversation so far: the context, the message, and every earlier
/// step of the turn with its tool results.
fn messages(input: &TurnInput) -> Vec<Value> {
    let name = input
        .agent
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("an agent");
    let runtime = format!(
        "You are {name}, a long-lived agent in the holarchy runtime. Use the tools to act; \
         reply in plain text when you are finished. Your state: {}. Context: {}.",
        input.agent, input.context
    );
    // The role comes first: it is the operator's, and says who the agent
    // is before the runtime says how it works.
    let system = match &input.role {
        Some(role) => format!("{}\n\n{runtime}", role.prompt),
        None => runtime,
    };
    let from = input
        .message
        .from_agent_id
        .as_deref()
        .map(|a| format!(" from {a}"))
        .unwrap_or_default();
    let mut out = vec![
        json!({ "role": "system", "content": system }),
        json!({ "role": "user", "content": format!("[{}{from}] {}", input.message.provenance, input.message.text) }),
    ];
    // Steps compacted away: the model reads its own summary of them, as
    // what it said before the steps that follow.
    if let Some(compacted) = &input.compacted {
        out.push(json!({ "role": "assistant", "content": summary::as_message(compacted) }));
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

/// The function through which a composed agent's model gives its turn's
/// decision. A function rather than a JSON block in the reply: the server
/// holds the model to its schema, the reply stays the text people read,
/// and a model that never calls it changes nothing.
pub const RECORD_DECISION: &str = "RecordDecision";

/// The decision kinds [`RECORD_DECISION`] offers: the vocabulary of
/// `holarchy_composition::decision`.
const DECISION_KINDS: [&str; 6] = [
    "no_op",
    "invoke_skill",
    "comment",
    "escalate",
    "wait",
    "tool_calls",
];

fn record_decision() -> Value {
    json!({
        "type": "function",
        "function": {
            "name": RECORD_DECISION,
            "description": "Record this turn's decision in the audit log: what you decided and why. \
                It runs nothing and returns nothing; call it with your reply or your other tool calls. \
                The last one of a turn counts.",
            "parameters": {
                "type": "object",
                "properties": {
                    "kind": { "type": "string", "enum": DECISION_KINDS },
                    "reason": { "type": "string", "description": "Why, in a sentence." },
                    "target": { "type": "string", "description": "What it is about (an issue, a skill); the skill's name for invoke_skill." },
                    "idempotency_key": { "type": "string", "description": "The same key for the same decision taken again." },
                    "requires_approval": { "type": "boolean", "description": "Whether an operator should approve it." },
                },
                "required": ["kind", "reason"],
                "additionalProperties": false,
            },
        },
    })
}

/// Whether the model is offered [`RECORD_DECISION`]: only where the turn
/// logs a decision, and never over a catalog tool of that name.
fn offers_decision(input: &TurnInput) -> bool {
    input.logs_decision
        && !input
            .tools
            .iter()
            .any(|tool| tool["name"] == RECORD_DECISION)
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
    if offers_decision(input) {
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
    let mut decision = None;
    if decisions {
        // Arguments that are not JSON stay a string: the turn's end
        // refuses it and notes why, as for any malformed decision.
        tool_calls.retain_mut(|call| {
            let recorded = call.name == RECORD_DECISION;
            if recorded {
                decision = Some(std::mem::take(&mut call.input));
            }
            !recorded
        });
    }
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

    async fn run(self, input: TurnInput) -> Result<TurnPlan, BrainError> {
        let key = self.key()?;
        let mut body = json!({
            "model": self.model,
            "messages": messages(&input),
            "tools": functions(&input),
        });
        let decisions = offers_decision(&input);
        if let Some(temperature) = self.temperature {
            body["temperature"] = json!(temperature);
        }
        let supervised = input
            .agent
            .get("supervisor_agent_id")
            .is_some_and(|s| !s.is_null());
        let answer = self.complete(&key, &body).await?;
        plan(&answer, supervised, decisions)
    }

    /// One chat completion: its answer as JSON, after the retries
    /// transient failures get.
    async fn complete(&self, key: &str, body: &Value) -> Result<Value, BrainError> {
        let url = format!("{}/chat/completions", self.base_url.trim_end_matches('/'));
        let mut attempt = 0;
        loop {
            let sent = self
                .client
                .post(&url)
                .bearer_auth(key)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.to_string())
                .send()
                .await;
            let (retryable, wait) = match sent {
                Ok(response) if response.status().is_success() => {
                    if response
                        .content_length()
                        .is_some_and(|n| n > MAX_ANSWER as u64)
                    {
                        return Err(failed("the answer is too large".into()));
                    }
                    match response.bytes().await {
                        Ok(bytes) if bytes.len() <= MAX_ANSWER => {
                            return serde_json::from_slice(&bytes)
                                .map_err(|e| failed(format!("the answer is not JSON: {e}")));
                        }
                        Ok(_) => return Err(failed("the answer is too large".into())),
                        // The body broke off: worth another try.
                        Err(err) => (format!("reading the answer failed: {err}"), None),
                    }
                }
                Ok(response) => {
                    let status = response.status();
                    let retry_after = response
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(|secs| Duration::from_secs(secs).min(self.retry.cap));
                    let text = response.text().await.unwrap_or_default();
                    let message = serde_json::from_str::<Value>(&text)
                        .ok()
                        .and_then(|v| {
                            v.pointer("/error/message")
                                .and_then(Value::as_str)
                                .map(str::to_owned)
                        })
                        .unwrap_or(text);
                    let detail = format!("the server answered {status}: {message}");
                    if status.as_u16() == 429 || status.is_server_error() {
                        (detail, retry_after)
                    } else {
                        return Err(failed(detail));
                    }
                }
                // Connecting, timing out, a broken connection: transient.
                Err(err) if err.is_connect() || err.is_timeout() || err.is_request() => {
                    (format!("request failed: {err}"), None)
                }
                Err(err) => return Err(failed(format!("request failed: {err}"))),
            };
            if attempt >= self.retry.max_retries {
                return Err(failed(format!(
                    "{retryable} (gave up after {} retries)",
                    self.retry.max_retries
                )));
            }
            tokio::time::sleep(wait.unwrap_or_else(|| self.retry.delay(attempt))).await;
            attempt += 1;
        }
    }
}

impl Brain for OpenAiBrain {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn decide(&self, input: TurnInput) -> BrainFuture {
        Box::pin(self.clone().run(input))
    }

    fn compact(&self, tokenizer: Tokenizer, request: CompactRequest) -> CompactFuture {
        Box::pin(summary::compact(self.clone(), tokenizer, request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn input(logs_decision: bool) -> TurnInput {
        use holarchy_supervision::{AgentId, RunId};
        TurnInput {
            agent_id: AgentId::generate(),
            run_id: RunId::generate(),
            agent: json!({ "name": "lead" }),
            role: None,
            message: super::super::MessageView {
                message_id: "m".into(),
                provenance: "operator".into(),
                from_agent_id: None,
                text: "hi".into(),
            },
            tools: vec![json!({ "name": "AgentGet", "description": "d", "input_schema": {} })],
            context: Value::Null,
            step: 1,
            max_steps: 4,
            previous_results: Vec::new(),
            steps: Vec::new(),
            compacted: None,
            logs_decision,
        }
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
        // A catalog tool of that name would be shadowed: not offered then.
        let mut shadowed = input(true);
        shadowed.tools.push(json!({ "name": RECORD_DECISION }));
        assert!(!offers_decision(&shadowed));
    }

    #[test]
    fn every_offered_kind_is_one_the_log_accepts() {
        for kind in DECISION_KINDS {
            let json = json!({ "kind": kind, "reason": "r", "target": "t" }).to_string();
            let decision = holarchy_composition::decision::Decision::parse_explicit("run", &json)
                .unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert_eq!(decision.kind.as_str(), kind);
        }
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let retry = RetryPolicy {
            max_retries: 5,
            base: Duration::from_millis(100),
            cap: Duration::from_millis(400),
        };
        let ms = |d: Duration| d.as_millis();
        // Many samples per attempt, so the jitter shows its whole range: a
        // constant delay, or one that never reaches its bound, fails here.
        let samples =
            |attempt: u32| -> Vec<u128> { (0..300).map(|_| ms(retry.delay(attempt))).collect() };
        // The bound doubles from the base until the cap, then stays.
        let bounds = [100, 200, 400, 400, 400];
        let mut previous: Option<(u128, u128)> = None;
        for (attempt, bound) in (0u32..).zip(bounds) {
            let got = samples(attempt);
            let min = got.iter().min().expect("samples");
            let max = got.iter().max().expect("samples");
            assert!(
                *min >= bound / 2 && *max <= bound,
                "attempt {attempt}: delays {min}..={max} ms outside [{}, {bound}]",
                bound / 2
            );
            assert!(
                *max >= bound * 9 / 10,
                "attempt {attempt}: delays never come near the bound {bound} ms (max {max})"
            );
            assert!(min < max, "attempt {attempt}: no jitter");
            // Below the cap, every delay of a retry is at least every
            // delay of the one before: the ranges [b/2, b] and [b, 2b] meet.
            if let Some((before_bound, before_max)) = previous {
                if bound > before_bound {
                    assert!(
                        *min >= before_max,
                        "attempt {attempt}: {min} ms < {before_max} ms the attempt before"
                    );
                }
            }
            previous = Some((bound, *max));
        }
        // Far past the cap it stays there, without overflowing.
        for attempt in [10, 31, 64, u32::MAX] {
            let got = samples(attempt);
            assert!(
                got.iter().all(|d| (200..=400).contains(d)),
                "attempt {attempt}: {got:?}"
            );
            assert!(
                got.iter().any(|d| *d >= 360),
                "attempt {attempt}: never at the cap"
            );
        }
    }
}
