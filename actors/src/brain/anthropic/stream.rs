//! A Messages API answer as it streams (`stream: true`): `message_start`
//! (with the prompt's usage), then per content block a
//! `content_block_start`, its `content_block_delta`s (`text_delta`, or
//! `input_json_delta` pieces of a tool call's input) and a
//! `content_block_stop`; a `message_delta` with the `stop_reason` and the
//! usage so far; `message_stop` ends it. `ping`s keep it open; an `error`
//! event (overloaded) is asked again, like a 529. Assembled into the
//! [`Message`] a request that did not stream answers, so one reading of it
//! ([`super::response::plan`]) serves both.
//!
//! Text goes to the step's watchers as it comes, as the reply will hold
//! it: a block that stays blank is left out of the reply, so a block's
//! text is held until it has more than white space, and a second block
//! that does is preceded by the separator the reply joins blocks with.

use std::collections::BTreeMap;

use serde_json::Value;

use super::response::{reply_text, Block, Message, Usage, TEXT_SEPARATOR};
use crate::brain::model::sse::SseEvent;
use crate::brain::model::stream::{Assembler, Fault, Flow};
use crate::brain::model::transport::Unreadable;
use crate::replies::ReplySink;

/// One content block as its pieces arrive.
#[derive(Debug)]
enum Partial {
    Text {
        text: String,
        /// Passed on to watchers: it holds more than white space.
        shown: bool,
    },
    ToolUse {
        name: String,
        /// The input given with the block's start (`{}` when it streams).
        input: Value,
        /// The input's JSON text, in pieces.
        json: String,
    },
    Other,
}

/// An answer being read.
#[derive(Debug, Default)]
pub(super) struct Answer {
    sink: Option<ReplySink>,
    blocks: BTreeMap<u64, Partial>,
    stop_reason: Option<String>,
    usage: Option<Usage>,
    /// A text block was passed on: a later one is preceded by the
    /// separator.
    shown_text: bool,
    /// A whole answer, from a server that did not stream.
    whole: Option<Message>,
}

impl Answer {
    pub(super) fn new(sink: Option<ReplySink>) -> Self {
        Self {
            sink,
            ..Self::default()
        }
    }

    /// The answer as a request that did not stream gets it.
    pub(super) fn finish(mut self) -> Message {
        if let Some(sink) = self.sink.as_mut() {
            sink.flush();
        }
        if let Some(whole) = self.whole {
            return whole;
        }
        let content = self
            .blocks
            .into_values()
            .map(|block| match block {
                Partial::Text { text, .. } => Block::Text { text },
                Partial::ToolUse { name, input, json } => {
                    let input = if json.trim().is_empty() {
                        input
                    } else {
                        // Input that is not JSON reaches the tool as it is,
                        // and it answers with an error the model can read.
                        serde_json::from_str(&json).unwrap_or(Value::String(json))
                    };
                    Block::ToolUse { name, input }
                }
                Partial::Other => Block::Other,
            })
            .collect();
        Message {
            content,
            stop_reason: self.stop_reason,
            usage: self.usage,
        }
    }

    fn show(&mut self, text: &str) {
        if let Some(sink) = self.sink.as_mut() {
            sink.delta(text);
        }
    }

    fn start_block(&mut self, index: u64, block: &Value) {
        let partial = match block.get("type").and_then(Value::as_str) {
            Some("text") => Partial::Text {
                text: String::new(),
                shown: false,
            },
            Some("tool_use") => Partial::ToolUse {
                name: block
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                input: block.get("input").cloned().unwrap_or(Value::Null),
                json: String::new(),
            },
            _ => Partial::Other,
        };
        self.blocks.insert(index, partial);
        // A text block may start with some of its text.
        if let Some(text) = block.get("text").and_then(Value::as_str) {
            self.text_delta(index, text);
        }
    }

    fn text_delta(&mut self, index: u64, piece: &str) {
        let Some(Partial::Text { text, shown }) = self.blocks.get_mut(&index) else {
            return;
        };
        text.push_str(piece);
        if *shown {
            self.show(piece);
            return;
        }
        if text.trim().is_empty() {
            return;
        }
        // The block's first text that counts: with what it held back, after
        // the separator if an earlier block was shown.
        *shown = true;
        let held = text.clone();
        if std::mem::replace(&mut self.shown_text, true) {
            self.show(TEXT_SEPARATOR);
        }
        self.show(&held);
    }

    fn delta(&mut self, index: u64, delta: &Value) {
        match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => {
                if let Some(text) = delta.get("text").and_then(Value::as_str) {
                    self.text_delta(index, text);
                }
            }
            Some("input_json_delta") => {
                let piece = delta.get("partial_json").and_then(Value::as_str);
                if let (Some(Partial::ToolUse { json, .. }), Some(piece)) =
                    (self.blocks.get_mut(&index), piece)
                {
                    json.push_str(piece);
                }
            }
            // Thinking, signatures, citations: not part of the reply.
            _ => {}
        }
    }

    fn merge_usage(&mut self, usage: Option<&Value>) {
        let Some(later) = usage.and_then(|u| serde_json::from_value::<Usage>(u.clone()).ok())
        else {
            return;
        };
        self.usage.get_or_insert_with(Usage::default).merge(later);
    }
}

impl Assembler for Answer {
    fn event(&mut self, event: SseEvent) -> Result<Flow, Fault> {
        let data: Value = serde_json::from_str(&event.data)
            .map_err(|e| Fault::Fail(format!("a streamed event is not JSON: {e}")))?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event.event.as_str());
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind {
            "message_start" => {
                self.merge_usage(data.pointer("/message/usage"));
            }
            "content_block_start" => {
                if let Some(block) = data.get("content_block") {
                    self.start_block(index, block);
                }
            }
            "content_block_delta" => {
                if let Some(delta) = data.get("delta") {
                    self.delta(index, delta);
                }
            }
            "message_delta" => {
                if let Some(reason) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_owned());
                }
                self.merge_usage(data.get("usage"));
            }
            "message_stop" => return Ok(Flow::Done),
            "error" => {
                let message = data
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("no message");
                return Err(Fault::Retry(format!(
                    "the server reported an error mid-stream: {message}"
                )));
            }
            // `ping`, `content_block_stop`, and kinds added later.
            _ => {}
        }
        Ok(Flow::More)
    }

    fn abandon(&mut self, why: &str) {
        let sink = self.sink.take();
        *self = Self::new(sink);
        if let Some(sink) = self.sink.as_mut() {
            sink.discard(why);
        }
    }

    fn whole(&mut self, body: &[u8]) -> Result<(), Unreadable> {
        let message: Message = serde_json::from_slice(body).map_err(|source| Unreadable {
            expected: "a Messages API message",
            source,
        })?;
        let texts = message.content.iter().filter_map(|block| match block {
            Block::Text { text } => Some(text.as_str()),
            _ => None,
        });
        if let Some(reply) = reply_text(texts) {
            self.show(&reply);
        }
        self.usage = message.usage;
        self.whole = Some(message);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use holarchy_supervision::{AgentId, MessageId, RunId, TokenUsage};
    use serde_json::json;

    use super::*;
    use crate::replies::{Replies, ReplyKind};
    use crate::secrets::Secrets;

    fn event(kind: &str, data: Value) -> SseEvent {
        SseEvent {
            event: kind.into(),
            data: data.to_string(),
        }
    }

    /// A stream: two text blocks (one blank), a tool call in pieces.
    fn stream() -> Vec<SseEvent> {
        vec![
            event(
                "message_start",
                json!({ "type": "message_start", "message": { "id": "msg_1", "content": [],
                "usage": { "input_tokens": 12, "cache_creation_input_tokens": 100,
                           "cache_read_input_tokens": 900, "output_tokens": 1 } } }),
            ),
            event(
                "content_block_start",
                json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "text", "text": "" } }),
            ),
            event(
                "content_block_delta",
                json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "text_delta", "text": "Let me " } }),
            ),
            event("ping", json!({ "type": "ping" })),
            event(
                "content_block_delta",
                json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "text_delta", "text": "look." } }),
            ),
            event(
                "content_block_stop",
                json!({ "type": "content_block_stop", "index": 0 }),
            ),
            event(
                "content_block_start",
                json!({ "type": "content_block_start", "index": 1, "content_block": { "type": "text", "text": "" } }),
            ),
            event(
                "content_block_delta",
                json!({ "type": "content_block_delta", "index": 1, "delta": { "type": "text_delta", "text": "\n" } }),
            ),
            event(
                "content_block_delta",
                json!({ "type": "content_block_delta", "index": 1, "delta": { "type": "text_delta", "text": "Then more." } }),
            ),
            event(
                "content_block_start",
                json!({ "type": "content_block_start", "index": 2, "content_block": { "type": "text", "text": "" } }),
            ),
            event(
                "content_block_delta",
                json!({ "type": "content_block_delta", "index": 2, "delta": { "type": "text_delta", "text": "  " } }),
            ),
            event(
                "content_block_start",
                json!({ "type": "content_block_start", "index": 3, "content_block": { "type": "tool_use", "id": "toolu_1", "name": "ExecCommand", "input": {} } }),
            ),
            event(
                "content_block_delta",
                json!({ "type": "content_block_delta", "index": 3, "delta": { "type": "input_json_delta", "partial_json": "{\"comm" } }),
            ),
            event(
                "content_block_delta",
                json!({ "type": "content_block_delta", "index": 3, "delta": { "type": "input_json_delta", "partial_json": "and\": \"ls\"}" } }),
            ),
            event(
                "message_delta",
                json!({ "type": "message_delta", "delta": { "stop_reason": "tool_use", "stop_sequence": null },
                "usage": { "output_tokens": 42 } }),
            ),
        ]
    }

    #[test]
    fn a_stream_becomes_the_message_and_its_text_reaches_watchers_as_the_reply_holds_it() {
        let hub = Arc::new(Replies::default());
        let agent = AgentId::generate();
        let mut watcher = hub.watch(agent);
        let sink = ReplySink::new(
            hub.clone(),
            Arc::new(Secrets::default()),
            agent,
            RunId::generate(),
            MessageId::generate(),
            1,
        );
        let mut answer = Answer::new(Some(sink));
        for event in stream() {
            assert_eq!(answer.event(event), Ok(Flow::More));
        }
        assert_eq!(
            answer.event(event("message_stop", json!({ "type": "message_stop" }))),
            Ok(Flow::Done)
        );
        let message = answer.finish();
        assert_eq!(
            message.usage.map(|u| u.tokens()),
            Some(TokenUsage {
                prompt_tokens: 1012,
                completion_tokens: 42,
                cached_tokens: 900
            })
        );
        let plan = super::super::response::plan(message, false, false);
        assert_eq!(plan.reply.as_deref(), Some("Let me look.\n\n\nThen more."));
        assert_eq!(plan.tool_calls[0].input, json!({ "command": "ls" }));
        let mut streamed = String::new();
        while let Ok(event) = watcher.try_recv() {
            if let ReplyKind::Delta(text) = event.kind {
                streamed.push_str(&text);
            }
        }
        assert_eq!(Some(streamed.as_str()), plan.reply.as_deref());
    }

    #[test]
    fn an_error_event_is_asked_again_and_an_abandoned_answer_starts_over() {
        let mut answer = Answer::new(None);
        for event in stream().into_iter().take(4) {
            answer.event(event).expect("read");
        }
        let overloaded = event(
            "error",
            json!({ "type": "error", "error": { "type": "overloaded_error", "message": "Overloaded" } }),
        );
        assert!(matches!(
            answer.event(overloaded),
            Err(Fault::Retry(why)) if why.ends_with("Overloaded")
        ));
        answer.abandon("overloaded");
        assert!(answer.blocks.is_empty() && answer.usage.is_none());
        assert!(!answer.ended(), "only message_stop ends an answer");
    }
}
