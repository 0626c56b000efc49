//! How a brain's context budget is counted: with the model's own BPE for
//! OpenAI models (o200k or cl100k, chosen by model name; the tables ship
//! inside the crate, so nothing is downloaded at run time), estimated at
//! four bytes a token for every other brain (Claude's tokenizer is not
//! published, so anthropic brains estimate too). Also the budgets themselves:
//! a default per brain kind, overridden by the daemon's `--context-tokens`.

use holarchy_supervision::bounds::{MAX_CONTEXT_TOKENS, MIN_CONTEXT_TOKENS};
use holarchy_supervision::BrainConfig;
use serde::Serialize;
use tiktoken_rs::tokenizer::{get_tokenizer, Tokenizer as Bpe};

/// Context budget of an OpenAI brain when the daemon does not set one:
/// well inside the smallest window of today's chat models (128k), leaving
/// room for the tool catalog and the answer.
pub const DEFAULT_OPENAI_TOKENS: usize = 32_000;
/// Context budget of an anthropic brain: the same share of today's Claude
/// windows (200k) as the OpenAI brain's of its models'.
pub const DEFAULT_ANTHROPIC_TOKENS: usize = 32_000;
/// Context budget of a command brain (estimated tokens: 64 KiB of JSON).
pub const DEFAULT_COMMAND_TOKENS: usize = 16_000;
/// The smallest and largest budget an agent or the daemon may set.
pub const MIN_TOKENS: usize = MIN_CONTEXT_TOKENS as usize;
pub const MAX_TOKENS: usize = MAX_CONTEXT_TOKENS as usize;

/// The budget of a brain: the agent's own, when set, else the daemon's,
/// when it sets one, else its kind's.
pub fn budget_for(config: &BrainConfig, agent: Option<u32>, daemon: Option<usize>) -> usize {
    let default = match config {
        BrainConfig::OpenAi { .. } => DEFAULT_OPENAI_TOKENS,
        BrainConfig::Anthropic { .. } => DEFAULT_ANTHROPIC_TOKENS,
        BrainConfig::Command { .. } | BrainConfig::Scripted => DEFAULT_COMMAND_TOKENS,
    };
    agent
        .map(|tokens| tokens as usize)
        .or(daemon)
        .unwrap_or(default)
        .clamp(MIN_TOKENS, MAX_TOKENS)
}

/// Counts tokens the way the brain's model would (or close to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tokenizer {
    O200k,
    Cl100k,
    /// Four bytes a token: what is left for models whose tokenizer we do
    /// not ship (local models behind an OpenAI-compatible server, Claude,
    /// command brains).
    Estimate,
}

impl Tokenizer {
    pub fn for_brain(config: &BrainConfig) -> Self {
        match config {
            BrainConfig::OpenAi { model, .. } => match get_tokenizer(model) {
                Some(Bpe::O200kBase | Bpe::O200kHarmony) => Tokenizer::O200k,
                // The older encodings belong to completion models; cl100k
                // is the closest of the chat era.
                Some(
                    Bpe::Cl100kBase | Bpe::P50kBase | Bpe::P50kEdit | Bpe::R50kBase | Bpe::Gpt2,
                ) => Tokenizer::Cl100k,
                None => Tokenizer::Estimate,
            },
            BrainConfig::Anthropic { .. } | BrainConfig::Command { .. } | BrainConfig::Scripted => {
                Tokenizer::Estimate
            }
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            Tokenizer::O200k => "o200k_base",
            Tokenizer::Cl100k => "cl100k_base",
            Tokenizer::Estimate => "estimate (4 bytes a token)",
        }
    }

    pub fn count(self, text: &str) -> usize {
        match self {
            Tokenizer::O200k => tiktoken_rs::o200k_base_singleton().count_ordinary(text),
            Tokenizer::Cl100k => tiktoken_rs::cl100k_base_singleton().count_ordinary(text),
            Tokenizer::Estimate => text.len().div_ceil(4),
        }
    }

    /// Tokens of a value as the brain receives it (compact JSON).
    pub fn count_json<T: Serialize + ?Sized>(self, value: &T) -> usize {
        serde_json::to_string(value).map_or(0, |text| self.count(&text))
    }

    /// The longest start of `text` (on a character boundary) of at most
    /// `tokens` tokens.
    pub fn head(self, text: &str, tokens: usize) -> &str {
        if self.count(text) <= tokens {
            return text;
        }
        // Binary search over byte lengths: a prefix never has more tokens
        // than a longer one, for BPE as for the estimate.
        let (mut fits, mut over) = (0usize, text.len());
        while over - fits > 1 {
            let mid = floor_boundary(text, fits + (over - fits) / 2);
            if mid <= fits {
                break;
            }
            if self.count(&text[..mid]) <= tokens {
                fits = mid;
            } else {
                over = mid;
            }
        }
        &text[..floor_boundary(text, fits)]
    }
}

fn floor_boundary(text: &str, at: usize) -> usize {
    holarchy_supervision::bounds::head(text, at).len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn openai(model: &str) -> BrainConfig {
        BrainConfig::OpenAi {
            base_url: "http://x".into(),
            model: model.into(),
            api_key_env: "K".into(),
            temperature: None,
            max_steps: None,
        }
    }

    #[test]
    fn the_tokenizer_follows_the_model() {
        assert_eq!(
            Tokenizer::for_brain(&openai("gpt-4o-mini")),
            Tokenizer::O200k
        );
        assert_eq!(Tokenizer::for_brain(&openai("gpt-4")), Tokenizer::Cl100k);
        assert_eq!(
            Tokenizer::for_brain(&openai("llama3.1")),
            Tokenizer::Estimate
        );
        assert_eq!(
            Tokenizer::for_brain(&BrainConfig::Scripted),
            Tokenizer::Estimate
        );
        // Even a Claude model named like an OpenAI one is estimated.
        assert_eq!(
            Tokenizer::for_brain(&anthropic("gpt-4o")),
            Tokenizer::Estimate
        );
    }

    fn anthropic(model: &str) -> BrainConfig {
        BrainConfig::Anthropic {
            base_url: "https://x".into(),
            model: model.into(),
            api_key_env: "K".into(),
            max_tokens: 1024,
            max_steps: None,
            temperature: None,
        }
    }

    #[test]
    fn real_bpe_counts_differ_from_the_estimate() {
        // Offline: the tables are embedded; a download would fail here.
        let text = "hello world, hello world, hello world";
        assert_eq!(Tokenizer::O200k.count("hello world"), 2);
        assert_eq!(Tokenizer::Cl100k.count("hello world"), 2);
        assert_eq!(Tokenizer::Estimate.count(text), text.len().div_ceil(4));
    }

    #[test]
    fn head_is_the_longest_prefix_within_the_tokens() {
        let text = "ünïcödé ".repeat(200);
        for tokenizer in [Tokenizer::O200k, Tokenizer::Estimate] {
            for tokens in [0, 1, 7, 100] {
                let head = tokenizer.head(&text, tokens);
                assert!(tokenizer.count(head) <= tokens, "{tokenizer:?} {tokens}");
                assert!(text.starts_with(head));
                if tokens > 0 {
                    assert!(!head.is_empty(), "{tokenizer:?} {tokens}: nothing kept");
                }
            }
        }
        assert_eq!(Tokenizer::Estimate.head("short", 10), "short");
    }

    #[test]
    fn budgets_default_per_kind_and_stay_in_range() {
        assert_eq!(
            budget_for(&openai("gpt-4o"), None, None),
            DEFAULT_OPENAI_TOKENS
        );
        assert_eq!(
            budget_for(&BrainConfig::Scripted, None, None),
            DEFAULT_COMMAND_TOKENS
        );
        assert_eq!(
            budget_for(&anthropic("claude-sonnet-4-5"), None, None),
            DEFAULT_ANTHROPIC_TOKENS
        );
        assert_eq!(
            budget_for(&anthropic("claude-sonnet-4-5"), None, Some(4000)),
            4000
        );
        assert_eq!(budget_for(&openai("gpt-4o"), None, Some(4000)), 4000);
        assert_eq!(budget_for(&openai("gpt-4o"), None, Some(1)), MIN_TOKENS);
        // The agent's own budget comes before the daemon's.
        assert_eq!(budget_for(&openai("gpt-4o"), Some(9000), Some(4000)), 9000);
    }
}
