//! How the OpenAI brain compacts a long turn: one more chat completion
//! (the same retries as a decision) asking its model to summarise the
//! oldest steps, folding in the summary so far. A model that cannot
//! answer leaves the deterministic truncation in its place, so a turn is
//! never lost to its length.

use serde_json::{json, Value};
use tracing::warn;

use super::{failed, OpenAiBrain};
use crate::brain::BrainError;
use crate::context::compact::{bounded_summary, truncation, CompactRequest, Compaction};
use crate::context::tokens::Tokenizer;

const INSTRUCTIONS: &str =
    "You are compacting the earlier steps of your own turn, which no longer \
    fit your context. Write a short factual summary of them for yourself: what you set out to do, \
    which tools you called with which inputs, what they returned that still matters (ids, paths, \
    numbers, errors), and what is left to do. Fold in the earlier summary if there is one. \
    Plain text, no preamble.";

pub(super) async fn compact(
    brain: OpenAiBrain,
    tokenizer: Tokenizer,
    request: CompactRequest,
) -> Compaction {
    match ask(&brain, tokenizer, &request).await {
        Ok(summary) => Compaction {
            compacted: true,
            steps: request.earlier.as_ref().map_or(0, |c| c.steps) + request.steps.len(),
            by: "model",
            summary,
        },
        Err(err) => {
            warn!(%err, "the model could not compact a turn's steps; truncating them");
            truncation(tokenizer, &request)
        }
    }
}

async fn ask(
    brain: &OpenAiBrain,
    tokenizer: Tokenizer,
    request: &CompactRequest,
) -> Result<String, BrainError> {
    let key = brain.key()?;
    let steps = serde_json::to_string(&request.steps).unwrap_or_default();
    // The steps go whole when they can; the request itself must fit the
    // window the budget stands for.
    let steps = tokenizer.head(&steps, request.budget / 2);
    let earlier = request
        .earlier
        .as_ref()
        .map_or("none", |c| c.summary.as_str());
    let mut body = json!({
        "model": brain.model,
        "messages": [
            { "role": "system", "content": INSTRUCTIONS },
            { "role": "user", "content": format!("Earlier summary: {earlier}\n\nSteps to summarise (JSON): {steps}") },
        ],
    });
    if let Some(temperature) = brain.temperature {
        body["temperature"] = json!(temperature);
    }
    let answer = brain.complete(&key, &body).await?;
    let text = answer
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .ok_or_else(|| failed(format!("the summary answer has no content: {answer}")))?;
    Ok(bounded_summary(tokenizer, text, request.max_tokens))
}

/// The summary as the model reads it back, in place of the steps.
pub(super) fn as_message(compacted: &Compaction) -> String {
    format!(
        "[{} earlier step(s) of this turn, compacted by {}] {}",
        compacted.steps, compacted.by, compacted.summary
    )
}
