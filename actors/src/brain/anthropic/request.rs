//! A turn's step as a Messages API request: the system blocks, the tools
//! and the conversation so far. Caching follows the API's order (tools,
//! then system, then messages): the last tool and the last system block
//! carry `cache_control`, so the catalog is reused across turns and the
//! whole prefix across the steps of one turn (the agent's state and
//! context are built once a turn).

use serde_json::{json, Value};

use super::AnthropicBrain;
use crate::brain::model::{self, decision};
use crate::brain::{StepRecord, TurnInput};

/// What the user says when the conversation would otherwise end on the
/// assistant's side (a summary with no step after it): the API would take
/// a last assistant turn as the start of the answer, to be continued.
const CONTINUE: &str = "[runtime] Go on with the turn from your summary above.";

fn ephemeral() -> Value {
    json!({ "type": "ephemeral" })
}

fn text(text: impl Into<String>) -> Value {
    json!({ "type": "text", "text": text.into() })
}

/// The request for one step of a turn.
pub(super) fn body(brain: &AnthropicBrain, input: &TurnInput) -> Value {
    let mut body = json!({
        "model": brain.model,
        "max_tokens": brain.max_tokens,
        "system": system(input),
        "messages": messages(input),
    });
    let tools = tools(input);
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
    if let Some(temperature) = brain.temperature {
        body["temperature"] = json!(temperature);
    }
    body
}

/// The role (when there is one) and the runtime's text, as two blocks:
/// the role changes only with an apply, so it stays cached on its own
/// when the runtime's text differs.
fn system(input: &TurnInput) -> Vec<Value> {
    let system = model::System::of(input);
    let mut blocks: Vec<Value> = system.role.into_iter().map(text).collect();
    blocks.push(text(system.runtime));
    mark_last(&mut blocks);
    blocks
}

/// The catalog as tools, with `RecordDecision` where it is offered.
fn tools(input: &TurnInput) -> Vec<Value> {
    let mut tools: Vec<Value> = input
        .tools
        .iter()
        .map(|tool| {
            json!({
                "name": tool["name"],
                "description": tool["description"],
                "input_schema": input_schema(&tool["input_schema"]),
            })
        })
        .collect();
    if decision::offered(input) {
        tools.push(json!({
            "name": decision::RECORD_DECISION,
            "description": decision::DESCRIPTION,
            "input_schema": decision::schema(),
        }));
    }
    mark_last(&mut tools);
    tools
}

/// The API takes only object schemas: a tool without one takes an empty
/// object.
fn input_schema(schema: &Value) -> Value {
    if schema.get("type").and_then(Value::as_str) == Some("object") {
        schema.clone()
    } else {
        json!({ "type": "object", "properties": {} })
    }
}

fn mark_last(blocks: &mut [Value]) {
    if let Some(last) = blocks.last_mut() {
        last["cache_control"] = ephemeral();
    }
}

/// An id for the `call`th tool call of the `step`th step: matched by the
/// result that answers it, and of the characters the API accepts.
fn use_id(step: usize, call: usize) -> String {
    format!("toolu_s{step}_c{call}")
}

/// The message, then every earlier step of the turn: the assistant's text
/// and `tool_use` blocks, answered by the user's `tool_result` blocks.
/// A compaction's summary opens the assistant's side before the steps
/// that follow it.
fn messages(input: &TurnInput) -> Vec<Value> {
    let mut out = vec![json!({ "role": "user", "content": [text(model::user_text(input))] })];
    let mut assistant: Vec<Value> = Vec::new();
    if let Some(compacted) = &input.compacted {
        assistant.push(text(model::compacted_text(compacted)));
    }
    for (s, step) in input.steps.iter().enumerate() {
        // The API refuses empty text blocks.
        if let Some(reply) = step.reply.as_deref().filter(|r| !r.trim().is_empty()) {
            assistant.push(text(reply));
        }
        if step.tool_calls.is_empty() {
            continue;
        }
        for (i, call) in step.tool_calls.iter().enumerate() {
            assistant.push(json!({
                "type": "tool_use",
                "id": use_id(s, i),
                "name": call.name,
                "input": as_object(&call.input),
            }));
        }
        out.push(json!({ "role": "assistant", "content": std::mem::take(&mut assistant) }));
        out.push(json!({ "role": "user", "content": results(s, step) }));
    }
    if !assistant.is_empty() {
        out.push(json!({ "role": "assistant", "content": assistant }));
        out.push(json!({ "role": "user", "content": [text(CONTINUE)] }));
    }
    out
}

/// A `tool_use` input must be an object; anything else the model is
/// shown wrapped, as it was.
fn as_object(input: &Value) -> Value {
    match input {
        Value::Object(_) => input.clone(),
        Value::Null => json!({}),
        other => json!({ "input": other }),
    }
}

/// One `tool_result` for every call of the step, as the API requires. The
/// runtime answers a step that asked for too many calls with one refusal
/// for all of them: each call gets it.
fn results(s: usize, step: &StepRecord) -> Vec<Value> {
    let shared = (step.results.len() == 1).then(|| &step.results[0]);
    step.tool_calls
        .iter()
        .enumerate()
        .map(|(i, _)| {
            let (content, is_error) = match step.results.get(i).or(shared) {
                Some(result) => (result.output.to_string(), result.is_error),
                None => ("no result was recorded for this call".to_owned(), true),
            };
            json!({
                "type": "tool_result",
                "tool_use_id": use_id(s, i),
                "content": content,
                "is_error": is_error,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brain::model::tests::input;
    use crate::brain::{ResultView, ToolCall};
    use crate::context::compact::Compaction;

    fn brain() -> AnthropicBrain {
        AnthropicBrain {
            client: reqwest::Client::new(),
            base_url: "http://127.0.0.1:9".into(),
            model: "claude-test".into(),
            api_key_env: "K".into(),
            max_tokens: 2048,
            temperature: Some(0.5),
            retry: crate::brain::model::transport::RetryPolicy::default(),
            secrets: std::sync::Arc::default(),
        }
    }

    fn step(reply: Option<&str>, calls: &[(&str, Value)], results: &[(Value, bool)]) -> StepRecord {
        StepRecord {
            reply: reply.map(str::to_owned),
            tool_calls: calls
                .iter()
                .map(|(name, input)| ToolCall {
                    name: (*name).into(),
                    input: input.clone(),
                })
                .collect(),
            results: results
                .iter()
                .map(|(output, is_error)| ResultView {
                    tool: "t".into(),
                    input: Value::Null,
                    output: output.clone(),
                    is_error: *is_error,
                })
                .collect(),
        }
    }

    #[test]
    fn the_first_step_sends_the_model_the_system_the_tools_and_the_message() {
        let mut turn = input(false);
        turn.role = Some(crate::compose::RoleView {
            version: "sha256:0".into(),
            prompt: "You sort issues.".into(),
        });
        let body = body(&brain(), &turn);
        assert_eq!(body["model"], "claude-test");
        assert_eq!(body["max_tokens"], 2048);
        assert_eq!(body["temperature"], 0.5);
        let system = body["system"].as_array().expect("system blocks");
        assert_eq!(system.len(), 2);
        assert_eq!(system[0]["text"], "You sort issues.");
        assert!(system[0].get("cache_control").is_none());
        assert!(system[1]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("You are lead")));
        assert_eq!(system[1]["cache_control"], json!({ "type": "ephemeral" }));
        // The catalog's empty schema becomes an object schema.
        assert_eq!(
            body["tools"],
            json!([{ "name": "AgentGet", "description": "d",
                     "input_schema": { "type": "object", "properties": {} },
                     "cache_control": { "type": "ephemeral" } }])
        );
        assert_eq!(
            body["messages"],
            json!([{ "role": "user", "content": [{ "type": "text", "text": "[operator] hi" }] }])
        );
    }

    #[test]
    fn record_decision_is_a_tool_only_where_decisions_are_logged() {
        let names = |turn: &TurnInput| -> Vec<String> {
            tools(turn)
                .iter()
                .map(|t| t["name"].as_str().expect("name").to_owned())
                .collect()
        };
        assert_eq!(names(&input(false)), ["AgentGet"]);
        let logged = tools(&input(true));
        assert_eq!(logged[1]["name"], decision::RECORD_DECISION);
        assert_eq!(logged[1]["input_schema"], decision::schema());
        // The cache mark moves to the last tool.
        assert!(logged[0].get("cache_control").is_none());
        assert_eq!(logged[1]["cache_control"], ephemeral());
        // No catalog: no tools at all (the API refuses none of it, but an
        // empty list says nothing).
        let mut bare = input(false);
        bare.tools.clear();
        assert!(body(&brain(), &bare).get("tools").is_none());
    }

    #[test]
    fn earlier_steps_are_tool_use_answered_by_tool_result() {
        let mut turn = input(false);
        turn.steps = vec![
            step(
                Some("looking"),
                &[("AgentGet", json!({})), ("Sleep", json!("not an object"))],
                &[
                    (json!({ "name": "lead" }), false),
                    (json!({ "error": "no" }), true),
                ],
            ),
            step(None, &[("TaskList", Value::Null)], &[(json!([]), false)]),
        ];
        let messages = messages(&turn);
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().expect("role"))
            .collect();
        assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
        assert_eq!(
            messages[1]["content"],
            json!([
                { "type": "text", "text": "looking" },
                { "type": "tool_use", "id": "toolu_s0_c0", "name": "AgentGet", "input": {} },
                { "type": "tool_use", "id": "toolu_s0_c1", "name": "Sleep", "input": { "input": "not an object" } },
            ])
        );
        assert_eq!(
            messages[2]["content"],
            json!([
                { "type": "tool_result", "tool_use_id": "toolu_s0_c0", "content": "{\"name\":\"lead\"}", "is_error": false },
                { "type": "tool_result", "tool_use_id": "toolu_s0_c1", "content": "{\"error\":\"no\"}", "is_error": true },
            ])
        );
        // No reply: no empty text block.
        assert_eq!(
            messages[3]["content"],
            json!([{ "type": "tool_use", "id": "toolu_s1_c0", "name": "TaskList", "input": {} }])
        );
        assert_eq!(messages[4]["content"][0]["tool_use_id"], "toolu_s1_c0");
    }

    #[test]
    fn a_refusal_of_the_whole_step_answers_every_call() {
        let mut turn = input(false);
        let calls: Vec<(&str, Value)> = (0..3).map(|_| ("AgentGet", json!({}))).collect();
        turn.steps = vec![step(
            None,
            &calls,
            &[(json!({ "error": "too many" }), true)],
        )];
        let results = &messages(&turn)[2]["content"];
        let ids: Vec<&str> = results
            .as_array()
            .expect("results")
            .iter()
            .map(|r| {
                assert_eq!(r["content"], "{\"error\":\"too many\"}");
                assert_eq!(r["is_error"], true);
                r["tool_use_id"].as_str().expect("id")
            })
            .collect();
        assert_eq!(ids, ["toolu_s0_c0", "toolu_s0_c1", "toolu_s0_c2"]);
    }

    #[test]
    fn a_summary_opens_the_assistants_side_and_never_ends_the_conversation() {
        let compacted = Compaction {
            compacted: true,
            steps: 3,
            by: "model",
            summary: "read the agent".into(),
        };
        let mut turn = input(false);
        turn.compacted = Some(compacted.clone());
        turn.steps = vec![step(
            None,
            &[("AgentGet", json!({}))],
            &[(json!({}), false)],
        )];
        let messages = messages(&turn);
        assert_eq!(messages.len(), 3);
        assert_eq!(
            messages[1]["content"][0]["text"],
            model::compacted_text(&compacted)
        );
        assert_eq!(messages[1]["content"][1]["type"], "tool_use");
        // Every step compacted away: the user still has the last word.
        turn.steps.clear();
        let messages = super::messages(&turn);
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().expect("role"))
            .collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(messages[2]["content"][0]["text"], CONTINUE);
    }
}
