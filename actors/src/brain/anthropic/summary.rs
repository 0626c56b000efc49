//! How the Anthropic brain compacts a long turn: one more Messages API
//! request (the same retries as a decision) asking its model to summarise
//! the oldest steps, folding in the summary so far. A model that cannot
//! answer leaves the deterministic truncation in its place.

use serde_json::json;

use super::{failed, AnthropicBrain, Block};
use crate::brain::model;
use crate::brain::BrainError;
use crate::context::compact::{CompactRequest, Compaction, MAX_SUMMARY_CHARS};
use crate::context::tokens::Tokenizer;

pub(super) async fn compact(
    brain: AnthropicBrain,
    tokenizer: Tokenizer,
    request: CompactRequest,
) -> Compaction {
    let summary = ask(&brain, tokenizer, &request)
        .await
        .map_err(|err| model::shown(err, &brain.secrets));
    model::compaction(tokenizer, &request, summary)
}

/// Tokens the summary's answer may take: room for the longest summary
/// kept, whatever the tokenizer, and no more than the brain's bound.
fn answer_tokens(brain: &AnthropicBrain) -> u32 {
    let kept = u32::try_from(MAX_SUMMARY_CHARS).unwrap_or(u32::MAX);
    brain.max_tokens.min(kept)
}

fn body(
    brain: &AnthropicBrain,
    tokenizer: Tokenizer,
    request: &CompactRequest,
) -> serde_json::Value {
    let mut body = json!({
        "model": brain.model,
        "max_tokens": answer_tokens(brain),
        "system": model::SUMMARY_INSTRUCTIONS,
        "messages": [{ "role": "user", "content": model::summary_request(tokenizer, request) }],
    });
    if let Some(temperature) = brain.temperature {
        body["temperature"] = json!(temperature);
    }
    body
}

async fn ask(
    brain: &AnthropicBrain,
    tokenizer: Tokenizer,
    request: &CompactRequest,
) -> Result<String, BrainError> {
    let key = brain.key()?;
    let message = brain
        .send(&key, body(brain, tokenizer, request), None, &request.usage)
        .await?;
    let text: Vec<String> = message
        .content
        .into_iter()
        .filter_map(|block| match block {
            Block::Text { text } => Some(text),
            _ => None,
        })
        .collect();
    if text.is_empty() {
        return Err(failed("the summary answer has no text".into()));
    }
    Ok(text.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_request_asks_for_a_bounded_answer() {
        let brain = AnthropicBrain {
            client: reqwest::Client::new(),
            base_url: "http://127.0.0.1:9".into(),
            model: "claude-test".into(),
            api_key_env: "K".into(),
            max_tokens: 64_000,
            temperature: None,
            retry: model::transport::RetryPolicy::default(),
            secrets: std::sync::Arc::default(),
        };
        let request = CompactRequest {
            earlier: None,
            steps: Vec::new(),
            max_tokens: 500,
            budget: 4000,
            usage: Default::default(),
        };
        let body = body(&brain, Tokenizer::Estimate, &request);
        assert_eq!(body["max_tokens"], MAX_SUMMARY_CHARS);
        assert_eq!(body["system"], model::SUMMARY_INSTRUCTIONS);
        assert!(body["messages"][0]["content"]
            .as_str()
            .is_some_and(|c| c.starts_with("Earlier summary: none")));
        assert!(body.get("tools").is_none());
    }
}
