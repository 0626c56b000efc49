//! What the brains that call a hosted model share, whatever its API: the
//! text they tell it (the system prompt built from the role, the agent's
//! state and context; the message as the user's turn; a compaction's
//! summary read back), the [`decision::RECORD_DECISION`] function, how a
//! compaction's answer becomes a [`Compaction`], how a failure is shown
//! (secrets out, then cut), and the HTTP loop with its retries
//! ([`transport`]), streamed answers ([`stream`], events parsed by
//! [`sse`]). Each brain keeps only its wire format.

use serde_json::Value;
use tracing::warn;

use super::{BrainError, TurnInput};
use crate::context::compact::{bounded_summary, truncation, CompactRequest, Compaction};
use crate::context::tokens::Tokenizer;
use crate::secrets::Secrets;

pub mod decision;
pub(crate) mod sse;
pub(crate) mod stream;
pub mod transport;

/// Characters of a failure shown to operators (in the turn's events).
const SHOWN: usize = 2048;

/// The system prompt in its two parts: the instance's role (when the agent
/// runs one) and the runtime's own text with the agent's state and
/// context. The role comes first: it is the operator's, and says who the
/// agent is before the runtime says how it works.
#[derive(Debug)]
pub(crate) struct System {
    pub role: Option<String>,
    pub runtime: String,
}

impl System {
    pub(crate) fn of(input: &TurnInput) -> Self {
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
        Self {
            role: input.role.as_ref().map(|role| role.prompt.clone()),
            runtime,
        }
    }

    /// Both parts as one text, for APIs with a single system message.
    pub(crate) fn joined(self) -> String {
        match self.role {
            Some(role) => format!("{role}\n\n{}", self.runtime),
            None => self.runtime,
        }
    }
}

/// The turn's message as the user's words, prefixed with where it came
/// from.
pub(crate) fn user_text(input: &TurnInput) -> String {
    let from = input
        .message
        .from_agent_id
        .as_deref()
        .map(|a| format!(" from {a}"))
        .unwrap_or_default();
    format!(
        "[{}{from}] {}",
        input.message.provenance, input.message.text
    )
}

/// A compaction's summary as the model reads it back, in place of the
/// steps it stands for: as what it said before the steps that follow.
pub(crate) fn compacted_text(compacted: &Compaction) -> String {
    format!(
        "[{} earlier step(s) of this turn, compacted by {}] {}",
        compacted.steps, compacted.by, compacted.summary
    )
}

/// Whether the agent is a supervised child: one that answers without
/// calling a tool has done its work.
pub(crate) fn supervised(input: &TurnInput) -> bool {
    input
        .agent
        .get("supervisor_agent_id")
        .is_some_and(|s| !s.is_null())
}

/// What a model is told when asked to compact its own turn.
pub(crate) const SUMMARY_INSTRUCTIONS: &str =
    "You are compacting the earlier steps of your own turn, which no longer \
    fit your context. Write a short factual summary of them for yourself: what you set out to do, \
    which tools you called with which inputs, what they returned that still matters (ids, paths, \
    numbers, errors), and what is left to do. Fold in the earlier summary if there is one. \
    Plain text, no preamble.";

/// The steps to compact and the summary so far, as the user's words. The
/// steps go whole when they can; the request itself must fit the window
/// the budget stands for.
pub(crate) fn summary_request(tokenizer: Tokenizer, request: &CompactRequest) -> String {
    let steps = serde_json::to_string(&request.steps).unwrap_or_default();
    let steps = tokenizer.head(&steps, request.budget / 2);
    let earlier = request
        .earlier
        .as_ref()
        .map_or("none", |c| c.summary.as_str());
    format!("Earlier summary: {earlier}\n\nSteps to summarise (JSON): {steps}")
}

/// The compaction a model's summary makes, or, when the model could not
/// write one, the deterministic truncation: a turn is never lost to its
/// length.
pub(crate) fn compaction(
    tokenizer: Tokenizer,
    request: &CompactRequest,
    summary: Result<String, BrainError>,
) -> Compaction {
    let text = summary.and_then(|text| {
        let text = text.trim();
        if text.is_empty() {
            Err(BrainError {
                brain: "model",
                detail: "the summary answer has no text".into(),
            })
        } else {
            Ok(bounded_summary(tokenizer, text, request.max_tokens))
        }
    });
    match text {
        Ok(summary) => Compaction {
            compacted: true,
            steps: request.earlier.as_ref().map_or(0, |c| c.steps) + request.steps.len(),
            by: "model",
            summary,
        },
        Err(err) => {
            warn!(%err, "the model could not compact a turn's steps; truncating them");
            truncation(tokenizer, request)
        }
    }
}

/// A failure as operators see it: every secret the daemon knows (the
/// brain's key among them) taken out while it is whole, then cut to
/// [`SHOWN`] characters. A server may echo what it was sent.
pub(crate) fn shown(err: BrainError, secrets: &Secrets) -> BrainError {
    let mut detail = err.detail;
    secrets.redact(&mut detail);
    if detail.chars().count() > SHOWN {
        detail = detail.chars().take(SHOWN).collect();
    }
    BrainError {
        brain: err.brain,
        detail,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use holarchy_supervision::{AgentId, RunId};
    use serde_json::json;

    use super::*;
    use crate::brain::{MessageView, UsageMeter};

    /// A turn's input with the fields the model brains read.
    pub(crate) fn input(logs_decision: bool) -> TurnInput {
        TurnInput {
            agent_id: AgentId::generate(),
            run_id: RunId::generate(),
            agent: json!({ "name": "lead" }),
            role: None,
            message: MessageView {
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
            replies: None,
            usage: UsageMeter::default(),
        }
    }

    #[test]
    fn the_role_comes_before_the_runtime_text() {
        let mut turn = input(false);
        assert!(System::of(&turn).joined().starts_with("You are lead"));
        turn.role = Some(crate::compose::RoleView {
            version: "sha256:0".into(),
            prompt: "You sort issues.".into(),
        });
        let system = System::of(&turn);
        assert_eq!(system.role.as_deref(), Some("You sort issues."));
        assert!(system
            .joined()
            .starts_with("You sort issues.\n\nYou are lead"));
        turn.message.provenance = "parent".into();
        turn.message.from_agent_id = Some("agt_1".into());
        assert_eq!(user_text(&turn), "[parent from agt_1] hi");
    }

    #[test]
    fn failures_are_shown_without_secrets_and_cut() {
        let secrets = Secrets::default();
        secrets.add("sk-very-secret-key");
        // The key straddles the cut: redacted before it, never half shown.
        let detail = format!("{}sk-very-secret-key tail", "x".repeat(SHOWN - 5));
        let err = shown(
            BrainError {
                brain: "anthropic",
                detail,
            },
            &secrets,
        );
        assert_eq!(err.detail.chars().count(), SHOWN);
        assert!(!err.detail.contains("sk-very"), "{}", err.detail);
    }

    #[test]
    fn a_blank_summary_falls_back_to_the_truncation() {
        let request = CompactRequest {
            earlier: None,
            steps: Vec::new(),
            max_tokens: 100,
            budget: 1000,
            usage: Default::default(),
        };
        let by_model = compaction(Tokenizer::Estimate, &request, Ok(" summary ".into()));
        assert_eq!(
            (by_model.by, by_model.summary.as_str()),
            ("model", "summary")
        );
        let blank = compaction(Tokenizer::Estimate, &request, Ok("  ".into()));
        assert_eq!(blank.by, "truncation");
    }
}
