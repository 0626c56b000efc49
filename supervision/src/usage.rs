//! Tokens a model brain spent: per turn (recorded as a `turn_usage` event
//! with the turn's end) and summed per agent. Counted the way both model
//! APIs can be read alike: `prompt_tokens` is every token of the prompts
//! sent, those read from a prompt cache included; `cached_tokens` is the
//! part of them read from the cache.

use serde::{Deserialize, Serialize};

/// Tokens of one or more model calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Of `prompt_tokens`, those read from the provider's prompt cache.
    pub cached_tokens: u64,
}

impl TokenUsage {
    /// Both together. Saturating: a server may report anything, and a
    /// total must never wrap or panic.
    pub fn add(&mut self, other: TokenUsage) {
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(other.cached_tokens);
    }
}

/// An agent's tokens over all its turns that reported any.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageTotals {
    pub tokens: TokenUsage,
    /// Turns that reported usage.
    pub turns: u64,
}

impl UsageTotals {
    /// Adds one turn's usage.
    pub fn add_turn(&mut self, turn: TokenUsage) {
        self.tokens.add(turn);
        self.turns = self.turns.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_add_up_and_never_wrap() {
        let mut totals = UsageTotals::default();
        let turn = TokenUsage {
            prompt_tokens: 100,
            completion_tokens: 20,
            cached_tokens: 60,
        };
        totals.add_turn(turn);
        totals.add_turn(turn);
        assert_eq!(
            totals,
            UsageTotals {
                tokens: TokenUsage {
                    prompt_tokens: 200,
                    completion_tokens: 40,
                    cached_tokens: 120
                },
                turns: 2
            }
        );
        totals.add_turn(TokenUsage {
            prompt_tokens: u64::MAX,
            ..TokenUsage::default()
        });
        assert_eq!(totals.tokens.prompt_tokens, u64::MAX);
    }
}
