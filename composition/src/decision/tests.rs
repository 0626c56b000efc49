use super::*;
use proptest::prelude::*;

fn call<'a>(name: &'a str, input: &'a serde_json::Value) -> ToolCall<'a> {
    ToolCall {
        name,
        input: Some(input),
    }
}

/// An empty input, as most calls here take.
fn empty() -> serde_json::Value {
    serde_json::json!({})
}

#[test]
fn kinds_have_the_seed_names() {
    let kinds = [
        (DecisionKind::NoOp, "no_op"),
        (DecisionKind::InvokeSkill, "invoke_skill"),
        (DecisionKind::Comment, "comment"),
        (DecisionKind::Escalate, "escalate"),
        (DecisionKind::Wait, "wait"),
        (DecisionKind::ToolCalls, "tool_calls"),
    ];
    for (kind, name) in kinds {
        assert_eq!(kind.as_str(), name);
        assert_eq!(
            serde_json::to_string(&kind).expect("serialises"),
            format!("\"{name}\"")
        );
    }
}

#[test]
fn nothing_is_a_no_op() {
    for reply in [None, Some(""), Some("  \n")] {
        let decision = Decision::derive("r1", reply, &[]);
        assert_eq!(decision.kind, DecisionKind::NoOp);
        assert_eq!(decision.target, None);
        assert_eq!(decision.idempotency_key, "run:r1");
        assert!(!decision.explicit && !decision.requires_approval);
    }
}

#[test]
fn a_reply_alone_is_a_comment() {
    let decision = Decision::derive("r1", Some("Looks good."), &[]);
    assert_eq!(decision.kind, DecisionKind::Comment);
    assert_eq!(decision.target, None);
}

#[test]
fn load_skill_is_invoke_skill_whatever_else_ran() {
    let (empty, named) = (empty(), serde_json::json!({ "name": "triage" }));
    let tools = [
        call("ExecCommand", &empty),
        call("Sleep", &empty),
        call("LoadSkill", &named),
    ];
    let decision = Decision::derive("r1", Some("ok"), &tools);
    assert_eq!(decision.kind, DecisionKind::InvokeSkill);
    assert_eq!(decision.target.as_deref(), Some("triage"));
    // A cut input is no JSON: the skill is not named.
    let cut = ToolCall {
        name: "LoadSkill",
        input: None,
    };
    let unnamed = Decision::derive("r1", None, &[cut]);
    assert_eq!(unnamed.kind, DecisionKind::InvokeSkill);
    assert_eq!(unnamed.target, None);
}

#[test]
fn waiting_tools_are_wait() {
    let (empty, sleep) = (empty(), serde_json::json!({ "ms": 5 }));
    let tools = [call("ExecCommand", &empty), call("Sleep", &sleep)];
    let decision = Decision::derive("r1", None, &tools);
    assert_eq!(decision.kind, DecisionKind::Wait);
    assert_eq!(decision.target.as_deref(), Some("Sleep"));
    assert!(is_waiting_tool("WaitForTask"));
    assert!(!is_waiting_tool("CreateExternalTrigger"));
}

#[test]
fn other_tools_are_tool_calls_on_the_first() {
    let empty = empty();
    let tools = [call("ApplyPatch", &empty), call("ExecCommand", &empty)];
    let decision = Decision::derive("r1", Some("done"), &tools);
    assert_eq!(decision.kind, DecisionKind::ToolCalls);
    assert_eq!(decision.target.as_deref(), Some("ApplyPatch"));
}

#[test]
fn derived_values_are_bounded() {
    let long = "é".repeat(300);
    let empty = empty();
    let decision = Decision::derive(&long, None, &[call(&long, &empty)]);
    assert!(decision
        .target
        .as_ref()
        .is_some_and(|t| t.len() <= MAX_TARGET_BYTES));
    assert!(decision.idempotency_key.len() <= MAX_KEY_BYTES);
    assert!(decision.idempotency_key.starts_with("run:é"));
}

#[test]
fn explicit_decision_with_defaults() {
    let decision = Decision::parse_explicit(
        "r9",
        r#"{"kind":"escalate","reason":"needs a human","target":"issue#12"}"#,
    )
    .expect("valid");
    assert_eq!(
        decision,
        Decision {
            kind: DecisionKind::Escalate,
            reason: "needs a human".into(),
            target: Some("issue#12".into()),
            idempotency_key: "run:r9".into(),
            requires_approval: false,
            explicit: true,
        }
    );
    let keyed = Decision::parse_explicit(
        "r9",
        r#"{"kind":"comment","reason":"r","idempotency_key":"k","requires_approval":true}"#,
    )
    .expect("valid");
    assert_eq!(keyed.idempotency_key, "k");
    assert!(keyed.requires_approval);
}

#[test]
fn explicit_refusals() {
    let refuse = |json: &str| Decision::parse_explicit("r", json).expect_err(json);
    assert!(
        matches!(refuse(r#"{"kind":"merge","reason":"r"}"#), DecisionError::Invalid(m) if m.contains("merge"))
    );
    assert!(
        matches!(refuse(r#"{"kind":"no_op","reason":"r","priority":1}"#), DecisionError::Invalid(m) if m.contains("priority"))
    );
    assert!(matches!(
        refuse(r#"{"kind":"no_op"}"#),
        DecisionError::Invalid(_)
    ));
    assert!(matches!(refuse("[]"), DecisionError::Invalid(_)));
    assert_eq!(
        refuse(r#"{"kind":"no_op","reason":" "}"#),
        DecisionError::Empty("reason")
    );
    assert_eq!(
        refuse(r#"{"kind":"invoke_skill","reason":"r"}"#),
        DecisionError::Empty("target (the skill to invoke)")
    );
    assert_eq!(
        refuse(r#"{"kind":"no_op","reason":"r","idempotency_key":""}"#),
        DecisionError::Empty("idempotency_key")
    );
    let long_reason = format!(
        r#"{{"kind":"no_op","reason":"{}"}}"#,
        "x".repeat(MAX_REASON_BYTES + 1)
    );
    assert!(matches!(
        refuse(&long_reason),
        DecisionError::TooLong {
            field: "reason",
            ..
        }
    ));
    let long_target = format!(
        r#"{{"kind":"wait","reason":"r","target":"{}"}}"#,
        "t".repeat(257)
    );
    assert!(matches!(
        refuse(&long_target),
        DecisionError::TooLong {
            field: "target",
            ..
        }
    ));
    let long_key = format!(
        r#"{{"kind":"wait","reason":"r","idempotency_key":"{}"}}"#,
        "k".repeat(257)
    );
    assert!(matches!(
        refuse(&long_key),
        DecisionError::TooLong {
            field: "idempotency_key",
            ..
        }
    ));
    let huge = format!(
        r#"{{"kind":"wait","reason":"{}"}}"#,
        " ".repeat(MAX_DECISION_JSON_BYTES)
    );
    assert!(matches!(refuse(&huge), DecisionError::TooLarge { .. }));
}

#[test]
fn decisions_round_trip_through_bincode() {
    let config = bincode::config::standard();
    let named = serde_json::json!({ "name": "triage" });
    let decisions = [
        Decision::derive("r", None, &[]),
        Decision::derive("r", None, &[call("LoadSkill", &named)]),
        Decision::parse_explicit(
            "r",
            r#"{"kind":"escalate","reason":"why","requires_approval":true}"#,
        )
        .expect("valid"),
    ];
    for decision in decisions {
        let bytes = bincode::serde::encode_to_vec(&decision, config).expect("encodes");
        let (back, _): (Decision, usize) =
            bincode::serde::decode_from_slice(&bytes, config).expect("decodes");
        assert_eq!(back, decision);
    }
}

proptest! {
    #[test]
    fn parse_explicit_never_panics_and_bounds_what_it_accepts(
        json in prop_oneof![
            ".{0,200}",
            "\\{\"kind\":\"(no_op|wait|comment|escalate|invoke_skill|tool_calls|merge)\",\"reason\":\".{0,20}\"(,\"target\":\".{0,300}\")?\\}",
        ],
    ) {
        if let Ok(decision) = Decision::parse_explicit("run", &json) {
            prop_assert!(decision.explicit);
            prop_assert!(!decision.reason.trim().is_empty() && decision.reason.len() <= MAX_REASON_BYTES);
            prop_assert!(decision.target.as_ref().is_none_or(|t| t.len() <= MAX_TARGET_BYTES));
            prop_assert!(!decision.idempotency_key.is_empty() && decision.idempotency_key.len() <= MAX_KEY_BYTES);
        }
    }

    #[test]
    fn derive_never_panics(run in ".{0,300}", reply in proptest::option::of(".{0,20}"), names in proptest::collection::vec(prop_oneof!["LoadSkill", "Sleep", ".{0,300}"], 0..4), input in ".{0,40}") {
        let input: Option<serde_json::Value> = serde_json::from_str(&input).ok();
        let tools: Vec<ToolCall<'_>> = names
            .iter()
            .map(|name| ToolCall { name, input: input.as_ref() })
            .collect();
        let decision = Decision::derive(&run, reply.as_deref(), &tools);
        prop_assert!(!decision.explicit);
        prop_assert!(decision.idempotency_key.len() <= MAX_KEY_BYTES);
        prop_assert_eq!(decision.kind == DecisionKind::NoOp, tools.is_empty() && reply.as_deref().is_none_or(|r| r.trim().is_empty()));
    }
}

#[test]
fn only_a_true_requires_approval_asks_an_operator_whatever_else_the_decision_holds() {
    use serde_json::json;
    assert!(asks_approval(
        &json!({"kind": "comment", "reason": "r", "requires_approval": true})
    ));
    // Refused as a decision (no reason, an unknown field), it still holds
    // the calls it asked to hold.
    assert!(asks_approval(
        &json!({"kind": "nonsense", "extra": 1, "requires_approval": true})
    ));
    assert!(!asks_approval(&json!({"kind": "comment", "reason": "r"})));
    assert!(!asks_approval(
        &json!({"kind": "comment", "requires_approval": false})
    ));
    assert!(!asks_approval(&json!({"requires_approval": "yes"})));
    assert!(!asks_approval(&json!("requires_approval")));
}
