//! `RecordDecision`: the function through which a composed agent's model
//! gives its turn's decision. A function rather than a JSON block in the
//! reply: the server holds the model to its schema, the reply stays the
//! text people read, and a model that never calls it changes nothing. It
//! is no tool: the brain takes its call out of the plan as the turn's
//! explicit decision, so it never runs and the model sees no result for
//! it. Each API wraps [`DESCRIPTION`] and [`schema`] in its own shape.

use serde_json::{json, Value};

use crate::brain::{ToolCall, TurnInput};

pub const RECORD_DECISION: &str = "RecordDecision";

/// The decision kinds offered: the vocabulary of
/// `holarchy_composition::decision`.
pub(crate) const DECISION_KINDS: [&str; 6] = [
    "no_op",
    "invoke_skill",
    "comment",
    "escalate",
    "wait",
    "tool_calls",
];

pub(crate) const DESCRIPTION: &str =
    "Record this turn's decision in the audit log: what you decided and why. \
    It runs nothing and returns nothing; call it with your reply or your other tool calls. \
    The last one of a turn counts.";

/// The JSON Schema of the function's input.
pub(crate) fn schema() -> Value {
    json!({
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
    })
}

/// Whether the model is offered the function: only where the turn logs a
/// decision, and never over a catalog tool of that name.
pub(crate) fn offered(input: &TurnInput) -> bool {
    input.logs_decision
        && !input
            .tools
            .iter()
            .any(|tool| tool["name"] == RECORD_DECISION)
}

/// Takes the function's calls out of `calls`; the last one's input is the
/// decision. An input that is not an object stays what it is: the turn's
/// end refuses it and notes why, as for any malformed decision.
pub(crate) fn take(calls: &mut Vec<ToolCall>) -> Option<Value> {
    let mut decision = None;
    calls.retain_mut(|call| {
        let recorded = call.name == RECORD_DECISION;
        if recorded {
            decision = Some(std::mem::take(&mut call.input));
        }
        !recorded
    });
    decision
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brain::model::tests::input;

    #[test]
    fn only_agents_that_log_decisions_are_offered_the_function() {
        assert!(!offered(&input(false)));
        assert!(offered(&input(true)));
        // A catalog tool of that name would be shadowed: not offered then.
        let mut shadowed = input(true);
        shadowed.tools.push(json!({ "name": RECORD_DECISION }));
        assert!(!offered(&shadowed));
    }

    #[test]
    fn the_last_call_is_the_decision_and_none_stays_a_call() {
        let call = |name: &str, input: Value| ToolCall {
            name: name.into(),
            input,
        };
        let mut calls = vec![
            call(
                RECORD_DECISION,
                json!({ "kind": "wait", "reason": "first" }),
            ),
            call("AgentGet", json!({})),
            call(
                RECORD_DECISION,
                json!({ "kind": "escalate", "reason": "last" }),
            ),
        ];
        assert_eq!(
            take(&mut calls),
            Some(json!({ "kind": "escalate", "reason": "last" }))
        );
        assert_eq!(calls, vec![call("AgentGet", json!({}))]);
        assert_eq!(take(&mut calls), None);
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
}
