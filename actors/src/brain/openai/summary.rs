//! How the OpenAI brain compacts a long turn: one more chat completion
//! (the same retries as a decision) asking its model to summarise the
//! oldest steps, folding in the summary so far. A model that cannot
//! answer leaves the deterministic truncation in its place, so a turn is
//! never lost to its length.

use serde_json::{json, Value};

use super::{failed, OpenAiBrain};
use crate::brain::model;
use crate::brain::BrainError;
use crate::context::compact::{CompactRequest, Compaction};
use crate::context::tokens::Tokenizer;

pub(super) async fn compact(
    brain: OpenAiBrain,
    tokenizer: Tokenizer,
    request: CompactRequest,
) -> Compaction {
    let summary = ask(&brain, tokenizer, &request)
        .await
        .map_err(|err| model::shown(err, &brain.secrets));
    model::compaction(tokenizer, &request, summary)
}

async fn ask(
    brain: &OpenAiBrain,
    tokenizer: Tokenizer,
    request: &CompactRequest,
) -> Result<String, BrainError> {
    let key = brain.key()?;
    let mut body = json!({
        "model": brain.model,
        "messages": [
            { "role": "system", "content": model::SUMMARY_INSTRUCTIONS },
            { "role": "user", "content": model::summary_request(tokenizer, request) },
        ],
    });
    if let Some(temperature) = brain.temperature {
        body["temperature"] = json!(temperature);
    }
    let answer = brain.complete(&key, body, None, &request.usage).await?;
    answer
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| failed(format!("the summary answer has no content: {answer}")))
}
