//! The scripted brain: deterministic, for tests and for operators who
//! drive an agent by hand. The message carries the decision.

use serde::Deserialize;

use super::{Brain, BrainFuture, ToolCall, TurnInput, TurnPlan};

/// Follows the message when it is a script, acknowledges it otherwise.
///
/// A script is a JSON object with only the keys `reply` (string),
/// `tool_calls` (array of `{name, input}`), `done` (bool) and `decision`
/// (the turn's explicit decision, an object), all optional.
/// Anything else, including JSON of another shape, is plain text and gets
/// `ack: <text>`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScriptedBrain;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Script {
    reply: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ToolCall>,
    #[serde(default)]
    done: bool,
    #[serde(default)]
    decision: Option<serde_json::Value>,
}

impl ScriptedBrain {
    pub fn plan(body: &str) -> TurnPlan {
        match serde_json::from_str::<Script>(body) {
            Ok(script) => TurnPlan {
                reply: script.reply,
                tool_calls: script.tool_calls,
                done: script.done,
                decision: script.decision,
            },
            Err(_) => TurnPlan {
                reply: Some(format!("ack: {body}")),
                tool_calls: Vec::new(),
                done: false,
                decision: None,
            },
        }
    }
}

impl Brain for ScriptedBrain {
    fn name(&self) -> &'static str {
        "scripted"
    }

    /// The message is the whole script.
    fn reads_context(&self) -> bool {
        false
    }

    fn decide(&self, input: TurnInput) -> BrainFuture {
        // A script is one decision: its tool calls run once, then the turn
        // ends.
        let plan = if input.step == 1 {
            Self::plan(&input.message.text)
        } else {
            TurnPlan::default()
        };
        Box::pin(async move { Ok(plan) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_acknowledged() {
        let plan = ScriptedBrain::plan("hello there");
        assert_eq!(plan.reply.as_deref(), Some("ack: hello there"));
        assert!(plan.tool_calls.is_empty());
        assert!(!plan.done);
    }

    #[test]
    fn a_script_is_followed() {
        let plan = ScriptedBrain::plan(
            r#"{"reply":"on it","tool_calls":[{"name":"AgentGet","input":{}}],"done":true}"#,
        );
        assert_eq!(plan.reply.as_deref(), Some("on it"));
        assert_eq!(plan.tool_calls.len(), 1);
        assert_eq!(plan.tool_calls[0].name, "AgentGet");
        assert!(plan.done);
    }

    #[test]
    fn a_script_may_carry_the_turns_decision() {
        let plan = ScriptedBrain::plan(
            r#"{"reply":"later","decision":{"kind":"wait","reason":"a human is on it"}}"#,
        );
        assert_eq!(plan.reply.as_deref(), Some("later"));
        assert_eq!(
            plan.decision,
            Some(serde_json::json!({"kind": "wait", "reason": "a human is on it"}))
        );
    }

    #[test]
    fn json_of_another_shape_is_plain_text() {
        let plan = ScriptedBrain::plan(r#"{"task":"x"}"#);
        assert_eq!(plan.reply.as_deref(), Some(r#"ack: {"task":"x"}"#));
        let plan = ScriptedBrain::plan("[1,2]");
        assert_eq!(plan.reply.as_deref(), Some("ack: [1,2]"));
    }

    #[test]
    fn an_empty_script_does_nothing() {
        assert_eq!(ScriptedBrain::plan("{}"), TurnPlan::default());
    }
}
