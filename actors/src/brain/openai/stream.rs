//! A chat completion as it streams (`stream: true` with
//! `stream_options.include_usage`): `data:` chunks each carrying a
//! `delta` of the first choice (text, or pieces of tool calls keyed by
//! `index`: the first with the call's id and name, later ones more of its
//! arguments), a `finish_reason`, a last chunk with the `usage`, then
//! `data: [DONE]`. Assembled into the shape of a completion that did not
//! stream, so one reading of it ([`super::plan`]) serves both; text goes
//! to the step's watchers as it comes.
//!
//! Servers that leave out `[DONE]` end their answer with the stream once
//! a `finish_reason` came; an error reported mid-stream is asked again,
//! like a 5xx.

use std::collections::BTreeMap;

use holarchy_supervision::TokenUsage;
use serde_json::{json, Value};

use crate::brain::model::sse::SseEvent;
use crate::brain::model::stream::{Assembler, Fault, Flow};
use crate::brain::model::transport::Unreadable;
use crate::replies::ReplySink;

/// One tool call as its pieces arrive.
#[derive(Debug, Default)]
struct Call {
    id: String,
    name: String,
    arguments: String,
}

/// A completion being read.
#[derive(Debug, Default)]
pub(super) struct Completion {
    sink: Option<ReplySink>,
    content: String,
    /// By the `index` the server gives each call, in order.
    calls: BTreeMap<u64, Call>,
    finish_reason: Option<String>,
    usage: Option<TokenUsage>,
    /// A whole answer, from a server that did not stream.
    whole: Option<Value>,
}

impl Completion {
    pub(super) fn new(sink: Option<ReplySink>) -> Self {
        Self {
            sink,
            ..Self::default()
        }
    }

    /// The answer as a completion that did not stream would be, and the
    /// tokens it cost (when the server said).
    pub(super) fn finish(mut self) -> (Value, Option<TokenUsage>) {
        if let Some(sink) = self.sink.as_mut() {
            sink.flush();
        }
        if let Some(whole) = self.whole {
            return (whole, self.usage);
        }
        let calls: Vec<Value> = self
            .calls
            .into_values()
            .map(|call| {
                let arguments = if call.arguments.trim().is_empty() {
                    "{}".to_owned()
                } else {
                    call.arguments
                };
                json!({
                    "id": call.id,
                    "type": "function",
                    "function": { "name": call.name, "arguments": arguments },
                })
            })
            .collect();
        let mut message = json!({
            "role": "assistant",
            "content": (!self.content.is_empty()).then_some(self.content),
        });
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
        }
        let answer = json!({ "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": self.finish_reason,
        }] });
        (answer, self.usage)
    }

    fn delta(&mut self, delta: &Value) {
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.content.push_str(text);
            if let Some(sink) = self.sink.as_mut() {
                sink.delta(text);
            }
        }
        let pieces = delta.get("tool_calls").and_then(Value::as_array);
        for piece in pieces.into_iter().flatten() {
            let id = piece.get("id").and_then(Value::as_str).unwrap_or_default();
            // Servers that number no call: a new id starts a new one.
            let index = piece
                .get("index")
                .and_then(Value::as_u64)
                .unwrap_or_else(|| match self.calls.last_key_value() {
                    Some((last, call)) if id.is_empty() || call.id == id => *last,
                    Some((last, _)) => last + 1,
                    None => 0,
                });
            let call = self.calls.entry(index).or_default();
            if call.id.is_empty() {
                id.clone_into(&mut call.id);
            }
            let function = piece.get("function");
            if let Some(name) = function.and_then(|f| f.get("name")).and_then(Value::as_str) {
                // A name comes whole, once; some servers repeat it.
                if call.name.is_empty() {
                    name.clone_into(&mut call.name);
                }
            }
            if let Some(arguments) = function
                .and_then(|f| f.get("arguments"))
                .and_then(Value::as_str)
            {
                call.arguments.push_str(arguments);
            }
        }
    }
}

/// Token counts as chat completions give them.
pub(super) fn usage(value: &Value) -> Option<TokenUsage> {
    let count = |pointer: &str| value.pointer(pointer).and_then(Value::as_u64);
    let prompt = count("/prompt_tokens");
    let completion = count("/completion_tokens");
    if prompt.is_none() && completion.is_none() {
        return None;
    }
    Some(TokenUsage {
        prompt_tokens: prompt.unwrap_or(0),
        completion_tokens: completion.unwrap_or(0),
        cached_tokens: count("/prompt_tokens_details/cached_tokens").unwrap_or(0),
    })
}

impl Assembler for Completion {
    fn event(&mut self, event: SseEvent) -> Result<Flow, Fault> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(Flow::Done);
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| Fault::Fail(format!("a streamed chunk is not JSON: {e}")))?;
        if let Some(error) = chunk.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_owned);
            return Err(Fault::Retry(format!(
                "the server reported an error mid-stream: {message}"
            )));
        }
        if let Some(used) = chunk.get("usage").and_then(usage) {
            self.usage = Some(used);
        }
        let choices = chunk.get("choices").and_then(Value::as_array);
        // Only the first choice is asked for (and read).
        let first = choices.into_iter().flatten().find(|choice| {
            choice
                .get("index")
                .and_then(Value::as_u64)
                .is_none_or(|i| i == 0)
        });
        if let Some(choice) = first {
            if let Some(delta) = choice.get("delta") {
                self.delta(delta);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(reason.to_owned());
            }
        }
        Ok(Flow::More)
    }

    fn ended(&mut self) -> bool {
        self.finish_reason.is_some()
    }

    fn abandon(&mut self, why: &str) {
        let sink = self.sink.take();
        *self = Self::new(sink);
        if let Some(sink) = self.sink.as_mut() {
            sink.discard(why);
        }
    }

    fn whole(&mut self, body: &[u8]) -> Result<(), Unreadable> {
        let answer: Value = serde_json::from_slice(body).map_err(|source| Unreadable {
            expected: "JSON",
            source,
        })?;
        self.usage = answer.get("usage").and_then(usage);
        let text = answer
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str);
        if let (Some(sink), Some(text)) = (self.sink.as_mut(), text) {
            sink.delta(text);
        }
        self.whole = Some(answer);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(value: Value) -> SseEvent {
        SseEvent {
            event: "message".into(),
            data: value.to_string(),
        }
    }

    fn feed(completion: &mut Completion, chunks: Vec<Value>) {
        for chunk in chunks {
            assert_eq!(completion.event(data(chunk)), Ok(Flow::More));
        }
    }

    #[test]
    fn text_and_tool_call_pieces_become_one_completion_with_its_usage() {
        let mut completion = Completion::new(None);
        feed(
            &mut completion,
            vec![
                json!({ "choices": [{ "index": 0, "delta": { "role": "assistant", "content": "" } }] }),
                json!({ "choices": [{ "index": 0, "delta": { "content": "Let me " } }] }),
                json!({ "choices": [{ "index": 0, "delta": { "content": "look." } }] }),
                json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [
                    { "index": 0, "id": "call_a", "type": "function", "function": { "name": "Sleep", "arguments": "" } }
                ] } }] }),
                json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [
                    { "index": 0, "function": { "arguments": "{\"duration" } }
                ] } }] }),
                json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [
                    { "index": 0, "function": { "arguments": "_ms\":5}" } },
                    { "index": 1, "id": "call_b", "function": { "name": "AgentGet" } }
                ] } }] }),
                json!({ "choices": [{ "index": 0, "delta": {}, "finish_reason": "tool_calls" }], "usage": null }),
                json!({ "choices": [], "usage": { "prompt_tokens": 120, "completion_tokens": 30,
                    "prompt_tokens_details": { "cached_tokens": 64 } } }),
            ],
        );
        assert_eq!(
            completion.event(SseEvent {
                event: "message".into(),
                data: "[DONE]".into()
            }),
            Ok(Flow::Done)
        );
        let (answer, used) = completion.finish();
        assert_eq!(
            used,
            Some(TokenUsage {
                prompt_tokens: 120,
                completion_tokens: 30,
                cached_tokens: 64
            })
        );
        let plan = super::super::plan(&answer, true, false).expect("plan");
        assert_eq!(plan.reply.as_deref(), Some("Let me look."));
        let calls: Vec<(&str, &Value)> = plan
            .tool_calls
            .iter()
            .map(|c| (c.name.as_str(), &c.input))
            .collect();
        assert_eq!(
            calls,
            [
                ("Sleep", &json!({ "duration_ms": 5 })),
                ("AgentGet", &json!({}))
            ]
        );
    }

    #[test]
    fn calls_without_an_index_are_told_apart_by_their_ids() {
        let mut completion = Completion::new(None);
        feed(
            &mut completion,
            vec![
                json!({ "choices": [{ "delta": { "tool_calls": [
                    { "id": "a", "function": { "name": "Sleep", "arguments": "{\"duration_ms\":" } }
                ] } }] }),
                json!({ "choices": [{ "delta": { "tool_calls": [
                    { "function": { "arguments": "1}" } }
                ] } }] }),
                json!({ "choices": [{ "delta": { "tool_calls": [
                    { "id": "b", "function": { "name": "AgentGet", "arguments": "{}" } }
                ] } }], "finish_reason": null }),
                json!({ "choices": [{ "delta": {}, "finish_reason": "tool_calls" }] }),
            ],
        );
        // No [DONE]: the stream's end, after a finish_reason, ends it.
        assert!(completion.ended());
        let (answer, used) = completion.finish();
        assert_eq!(used, None);
        let plan = super::super::plan(&answer, false, false).expect("plan");
        assert_eq!(plan.tool_calls.len(), 2);
        assert_eq!(plan.tool_calls[0].input, json!({ "duration_ms": 1 }));
    }

    #[test]
    fn an_error_mid_stream_is_asked_again_and_garbage_fails() {
        let mut completion = Completion::new(None);
        assert!(matches!(
            completion.event(data(json!({ "error": { "message": "server had an error" } }))),
            Err(Fault::Retry(why)) if why.contains("server had an error")
        ));
        assert!(matches!(
            completion.event(SseEvent {
                event: "message".into(),
                data: "{not json".into()
            }),
            Err(Fault::Fail(_))
        ));
        assert!(!completion.ended(), "no finish_reason: not whole");
    }

    #[test]
    fn a_whole_answer_is_taken_as_it_is() {
        let mut completion = Completion::new(None);
        let body = json!({ "choices": [{ "message": { "content": "hi" } }],
            "usage": { "prompt_tokens": 5, "completion_tokens": 1 } });
        completion.whole(body.to_string().as_bytes()).expect("JSON");
        let (answer, used) = completion.finish();
        assert_eq!(answer, body);
        assert_eq!(used.map(|u| u.prompt_tokens), Some(5));
        assert!(Completion::new(None).whole(b"<html>").is_err());
    }
}
