//! The Anthropic brain: the Messages API (`POST {base_url}/v1/messages`)
//! with tool use. The system prompt is the one every model brain builds
//! (role, then the agent's state and context); the tool catalog becomes
//! `tools` (name, description, input_schema); each earlier step of the
//! turn goes back as the assistant's `tool_use` blocks and the user's
//! `tool_result` blocks answering them. The stable prefix (tools, system)
//! is marked for prompt caching. An answer's `text` blocks are the reply,
//! its `tool_use` blocks the calls; one without calls ends the turn.
//!
//! Answers are streamed ([`stream`]): text goes to the agent's watchers as
//! it comes, and the usage the stream reports is the turn's. Retries,
//! backoff and body bounds are the OpenAI brain's
//! ([`super::model::transport`]); a stream that breaks off is asked again
//! from the start. The key is read from the named variable at call time,
//! sent as `x-api-key` and never recorded. An operator abort drops the
//! turn and the request in flight with it.

use reqwest::header::{HeaderValue, ACCEPT, CONTENT_TYPE};

use super::model::{self, decision, transport};
use super::{Brain, BrainError, BrainFuture, CompactFuture, TurnInput, TurnPlan, UsageMeter};
use crate::context::compact::CompactRequest;
use crate::context::tokens::Tokenizer;
use crate::replies::ReplySink;

mod request;
mod response;
mod stream;
mod summary;

pub use response::{Block, Message, Usage};

/// The API version this brain speaks (the request and answer shapes).
pub const API_VERSION: &str = "2023-06-01";

#[derive(Debug, Clone)]
pub struct AnthropicBrain {
    pub client: reqwest::Client,
    /// Requests go to `{base_url}/v1/messages` (a base already ending in
    /// `/v1` is taken as it is).
    pub base_url: String,
    pub model: String,
    pub api_key_env: String,
    /// Most tokens of one answer.
    pub max_tokens: u32,
    pub temperature: Option<f32>,
    pub retry: transport::RetryPolicy,
    /// Where the key is looked up by name (taken from the environment at
    /// start, so no child of the daemon inherits it).
    pub secrets: std::sync::Arc<crate::secrets::Secrets>,
}

/// A failure of this brain, whole: [`model::shown`] cuts it (secrets out
/// first) where it leaves the brain.
fn failed(detail: String) -> BrainError {
    BrainError {
        brain: "anthropic",
        detail,
    }
}

impl AnthropicBrain {
    fn url(&self) -> String {
        let base = self.base_url.trim_end_matches('/');
        if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        }
    }

    /// The key as a header value, marked sensitive so no debug output of
    /// the request shows it.
    fn key(&self) -> Result<HeaderValue, BrainError> {
        let key = self.secrets.var(&self.api_key_env).ok_or_else(|| {
            failed(format!(
                "the environment variable {} is not set",
                self.api_key_env
            ))
        })?;
        let mut value = HeaderValue::from_str(key.trim()).map_err(|_| {
            failed(format!(
                "the environment variable {} does not hold a usable key",
                self.api_key_env
            ))
        })?;
        value.set_sensitive(true);
        Ok(value)
    }

    async fn run(self, mut input: TurnInput) -> Result<TurnPlan, BrainError> {
        let key = self.key()?;
        let body = request::body(&self, &input);
        let sink = input.replies.take();
        let message = self.send(&key, body, sink, &input.usage).await?;
        Ok(response::plan(
            message,
            model::supervised(&input),
            decision::offered(&input),
        ))
    }

    /// One Messages API request, streamed, after the retries transient
    /// failures get: the answer assembled. Its text goes to `sink` as it
    /// comes; its usage is added to `usage`.
    pub async fn send(
        &self,
        key: &HeaderValue,
        mut body: serde_json::Value,
        sink: Option<ReplySink>,
        usage: &UsageMeter,
    ) -> Result<Message, BrainError> {
        let url = self.url();
        body["stream"] = serde_json::Value::Bool(true);
        let body = body.to_string();
        let mut answer = stream::Answer::new(sink);
        model::stream::post(
            self.retry,
            || {
                self.client
                    .post(&url)
                    .header("x-api-key", key.clone())
                    .header("anthropic-version", API_VERSION)
                    .header(CONTENT_TYPE, "application/json")
                    .header(ACCEPT, "text/event-stream")
                    .body(body.clone())
            },
            &mut answer,
        )
        .await
        .map_err(|err| failed(err.to_string()))?;
        let message = answer.finish();
        if let Some(used) = message.usage {
            usage.add(used.tokens());
        }
        Ok(message)
    }
}

impl Brain for AnthropicBrain {
    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn decide(&self, input: TurnInput) -> BrainFuture {
        let brain = self.clone();
        Box::pin(async move {
            let secrets = brain.secrets.clone();
            brain
                .run(input)
                .await
                .map_err(|err| model::shown(err, &secrets))
        })
    }

    fn compact(&self, tokenizer: Tokenizer, request: CompactRequest) -> CompactFuture {
        Box::pin(summary::compact(self.clone(), tokenizer, request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brain(base_url: &str) -> AnthropicBrain {
        AnthropicBrain {
            client: reqwest::Client::new(),
            base_url: base_url.into(),
            model: "claude-test".into(),
            api_key_env: "HOLARCHY_TEST_ANTHROPIC_UNSET_KEY".into(),
            max_tokens: 1024,
            temperature: None,
            retry: transport::RetryPolicy::default(),
            secrets: std::sync::Arc::default(),
        }
    }

    #[test]
    fn the_endpoint_is_under_v1_whether_or_not_the_base_says_so() {
        for base in [
            "https://api.anthropic.com",
            "https://api.anthropic.com/",
            "https://api.anthropic.com/v1",
        ] {
            assert_eq!(
                brain(base).url(),
                "https://api.anthropic.com/v1/messages",
                "{base}"
            );
        }
        assert_eq!(
            brain("http://127.0.0.1:9/proxy").url(),
            "http://127.0.0.1:9/proxy/v1/messages"
        );
    }

    #[tokio::test]
    async fn a_missing_key_fails_the_turn_naming_the_variable() {
        let err = brain("http://127.0.0.1:9")
            .decide(model::tests::input(false))
            .await
            .expect_err("no key");
        assert_eq!(err.brain, "anthropic");
        assert!(
            err.detail.contains("HOLARCHY_TEST_ANTHROPIC_UNSET_KEY"),
            "{}",
            err.detail
        );
    }
}
