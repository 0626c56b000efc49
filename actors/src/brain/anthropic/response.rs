//! A Messages API answer, parsed, and the plan it makes: its `text`
//! blocks are the reply, its `tool_use` blocks the calls, and
//! `stop_reason` says whether it finished. An answer cut at `max_tokens`
//! keeps what it said, says it was cut, and never runs a tool call it was
//! still writing (its input may be incomplete).

use holarchy_supervision::TokenUsage;
use serde::Deserialize;
use serde_json::Value;

use crate::brain::model::decision;
use crate::brain::{ToolCall, TurnPlan};

/// The answer: what the model wrote, why it stopped, and what it cost.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Message {
    pub content: Vec<Block>,
    #[serde(default)]
    pub stop_reason: Option<String>,
    #[serde(default)]
    pub usage: Option<Usage>,
}

/// Token counts as the Messages API gives them: the prompt in three parts
/// (uncached, written to the cache, read from it) and the answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Usage {
    pub input_tokens: Option<u64>,
    pub cache_creation_input_tokens: Option<u64>,
    pub cache_read_input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
}

impl Usage {
    /// Counts a later report gives replace those it repeats (the stream's
    /// `message_delta` counts are cumulative).
    pub fn merge(&mut self, later: Usage) {
        let take = |mine: &mut Option<u64>, theirs: Option<u64>| {
            if theirs.is_some() {
                *mine = theirs;
            }
        };
        take(&mut self.input_tokens, later.input_tokens);
        take(
            &mut self.cache_creation_input_tokens,
            later.cache_creation_input_tokens,
        );
        take(
            &mut self.cache_read_input_tokens,
            later.cache_read_input_tokens,
        );
        take(&mut self.output_tokens, later.output_tokens);
    }

    /// As the runtime counts: every prompt token, the cached part of them,
    /// and the answer's.
    pub fn tokens(&self) -> TokenUsage {
        let read = self.cache_read_input_tokens.unwrap_or(0);
        TokenUsage {
            prompt_tokens: self
                .input_tokens
                .unwrap_or(0)
                .saturating_add(self.cache_creation_input_tokens.unwrap_or(0))
                .saturating_add(read),
            completion_tokens: self.output_tokens.unwrap_or(0),
            cached_tokens: read,
        }
    }
}

/// The reply a message's text blocks make: the non-blank ones, joined.
pub(super) fn reply_text<'a>(texts: impl Iterator<Item = &'a str>) -> Option<String> {
    let kept: Vec<&str> = texts.filter(|t| !t.trim().is_empty()).collect();
    (!kept.is_empty()).then(|| kept.join(TEXT_SEPARATOR))
}

/// Between two text blocks of one reply.
pub(super) const TEXT_SEPARATOR: &str = "\n\n";

/// One content block. Kinds this brain does not use (thinking, server
/// tools) are read and left aside.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    Text {
        text: String,
    },
    ToolUse {
        name: String,
        #[serde(default)]
        input: Value,
    },
    #[serde(other)]
    Other,
}

/// The decision in an answer. With `decisions` (the model was offered
/// `RecordDecision`), its last call is the plan's explicit decision
/// instead of a tool call.
pub(super) fn plan(message: Message, supervised: bool, decisions: bool) -> TurnPlan {
    let stop = message.stop_reason.as_deref();
    let cut = stop == Some("max_tokens");
    let cut_in_call = cut && matches!(message.content.last(), Some(Block::ToolUse { .. }));
    let mut texts: Vec<String> = Vec::new();
    let mut tool_calls: Vec<ToolCall> = Vec::new();
    for block in message.content {
        match block {
            Block::Text { text } => texts.push(text),
            Block::ToolUse { name, input } => tool_calls.push(ToolCall { name, input }),
            Block::Other => {}
        }
    }
    let mut texts: Vec<String> = reply_text(texts.iter().map(String::as_str))
        .into_iter()
        .collect();
    if cut_in_call {
        tool_calls.pop();
        texts.push(
            "[the answer reached max_tokens while writing a tool call, which did not run]".into(),
        );
    } else if cut {
        texts.push("[the answer was cut: it reached max_tokens]".into());
    }
    if stop == Some("refusal") && texts.is_empty() {
        texts.push("[the model declined to answer]".into());
    }
    let reply = (!texts.is_empty()).then(|| texts.join(TEXT_SEPARATOR));
    let decision = if decisions {
        decision::take(&mut tool_calls)
    } else {
        None
    };
    // A supervised child is done when it answers without calling a tool,
    // unless the answer was cut short of what it meant to say.
    let done = supervised && tool_calls.is_empty() && !cut;
    TurnPlan {
        reply,
        tool_calls,
        done,
        decision,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(answer: Value) -> Message {
        serde_json::from_value(answer).expect("a message")
    }

    #[test]
    fn text_is_the_reply_and_tool_use_the_calls() {
        let message = parse(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [
                { "type": "thinking", "thinking": "hmm", "signature": "s" },
                { "type": "text", "text": "Let me look." },
                { "type": "tool_use", "id": "toolu_1", "name": "ExecCommand", "input": { "command": "ls" } },
                { "type": "text", "text": "" },
            ],
            "stop_reason": "tool_use",
            "usage": { "input_tokens": 10, "output_tokens": 5 },
        }));
        let plan = plan(message, true, false);
        assert_eq!(plan.reply.as_deref(), Some("Let me look."));
        assert_eq!(
            plan.tool_calls,
            vec![ToolCall {
                name: "ExecCommand".into(),
                input: json!({ "command": "ls" })
            }]
        );
        assert!(!plan.done, "tool calls first");
        let last = parse(json!({
            "content": [{ "type": "text", "text": "first" }, { "type": "text", "text": "second" }],
            "stop_reason": "end_turn",
        }));
        let last = super::plan(last, true, false);
        assert_eq!(last.reply.as_deref(), Some("first\n\nsecond"));
        assert!(last.done, "a supervised child that answers is done");
        // Not supervised: never done, whatever it says.
        let plain = parse(json!({ "content": [], "stop_reason": "end_turn" }));
        let plain = super::plan(plain, false, false);
        assert_eq!((plain.reply, plain.done), (None, false));
    }

    #[test]
    fn a_record_decision_call_is_the_decision_not_a_tool_call() {
        let answer = json!({ "content": [
            { "type": "text", "text": "labelled" },
            { "type": "tool_use", "id": "a", "name": decision::RECORD_DECISION, "input": { "kind": "wait", "reason": "first" } },
            { "type": "tool_use", "id": "b", "name": "AgentGet", "input": {} },
            { "type": "tool_use", "id": "c", "name": decision::RECORD_DECISION, "input": { "kind": "escalate", "reason": "last" } },
        ], "stop_reason": "tool_use" });
        let both = plan(parse(answer.clone()), true, true);
        let names: Vec<&str> = both.tool_calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["AgentGet"]);
        assert_eq!(
            both.decision,
            Some(json!({ "kind": "escalate", "reason": "last" }))
        );
        assert!(!both.done, "a real tool call is still pending");
        // Not offered: the call is a tool call like any other.
        let plain = plan(parse(answer), true, false);
        assert_eq!(plain.tool_calls.len(), 3);
        assert_eq!(plain.decision, None);
        // Only the decision: the model has finished.
        let only = json!({ "content": [
            { "type": "tool_use", "id": "a", "name": decision::RECORD_DECISION, "input": { "kind": "no_op", "reason": "nothing to do" } },
        ], "stop_reason": "tool_use" });
        let recorded = plan(parse(only), true, true);
        assert!(recorded.tool_calls.is_empty());
        assert!(recorded.done);
    }

    #[test]
    fn an_answer_cut_at_max_tokens_says_so_and_drops_a_call_it_was_writing() {
        let in_call = parse(json!({ "content": [
            { "type": "tool_use", "id": "a", "name": "AgentGet", "input": {} },
            { "type": "tool_use", "id": "b", "name": "ExecCommand", "input": { "command": "rm -rf /tm" } },
        ], "stop_reason": "max_tokens" }));
        let plan = super::plan(in_call, true, false);
        let names: Vec<&str> = plan.tool_calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["AgentGet"], "the call being written does not run");
        assert!(plan.reply.is_some_and(|r| r.contains("max_tokens")));
        let in_text = parse(
            json!({ "content": [{ "type": "text", "text": "The answer is" }],
                                    "stop_reason": "max_tokens" }),
        );
        let plan = super::plan(in_text, true, false);
        assert!(plan
            .reply
            .is_some_and(|r| r.starts_with("The answer is\n\n[the answer was cut")));
        assert!(!plan.done, "a cut answer is not a finished child");
    }

    #[test]
    fn a_refusal_without_text_still_says_something() {
        let refusal = parse(json!({ "content": [], "stop_reason": "refusal" }));
        assert_eq!(
            plan(refusal, false, false).reply.as_deref(),
            Some("[the model declined to answer]")
        );
    }

    #[test]
    fn what_is_not_a_message_does_not_parse() {
        for answer in [
            json!({ "type": "error", "error": { "type": "api_error", "message": "x" } }),
            json!({ "content": "just a string" }),
            json!({ "content": [{ "type": "tool_use", "input": {} }] }),
        ] {
            assert!(
                serde_json::from_value::<Message>(answer.clone()).is_err(),
                "{answer}"
            );
        }
    }
}
