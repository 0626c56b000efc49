//! Brain configurations: what decides an agent's turns. Stored with the
//! agent, inherited by the children it spawns, changed by operators. A
//! configuration names secrets (an environment variable) but never holds
//! them.

use serde::{Deserialize, Serialize};

/// Longest a command brain may take for one step: no more than a whole
/// turn may take (its deadline is 10 minutes).
pub const MAX_COMMAND_TIMEOUT_MS: u64 = 600_000;
/// Most decisions (brain calls) one turn may take.
pub const MAX_STEPS: u32 = 64;
/// Steps per turn when a configuration does not say.
pub const DEFAULT_STEPS: u32 = 8;
/// Most tokens one answer of an anthropic brain's model may be asked to
/// write: the largest output today's Claude models take without a beta.
pub const MAX_ANTHROPIC_TOKENS: u32 = 64_000;
/// An anthropic brain's answer bound when a configuration does not say.
pub const DEFAULT_ANTHROPIC_TOKENS: u32 = 8192;
/// Where Anthropic's Messages API lives.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com";
/// The variable an anthropic brain's key is read from when none is named.
pub const ANTHROPIC_KEY_ENV: &str = "ANTHROPIC_API_KEY";

/// What decides an agent's turns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub enum BrainConfig {
    /// Deterministic: the message carries the decision (tests, operators).
    #[default]
    Scripted,
    /// An external program per step: JSON on stdin, JSON on stdout.
    Command {
        program: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        timeout_ms: u64,
    },
    /// An OpenAI-compatible chat-completions endpoint with tool calling.
    OpenAi {
        base_url: String,
        model: String,
        /// The environment variable holding the API key, read at call time.
        api_key_env: String,
        temperature: Option<f32>,
        max_steps: Option<u32>,
    },
    /// Anthropic's Messages API with tool use. Last: configurations are
    /// stored with their variant's index, so a new one goes at the end.
    Anthropic {
        /// Requests go to `{base_url}/v1/messages`.
        base_url: String,
        model: String,
        /// The environment variable holding the API key, read at call time.
        api_key_env: String,
        /// Most tokens of one answer (the API requires a bound).
        max_tokens: u32,
        max_steps: Option<u32>,
        temperature: Option<f32>,
    },
}

/// Why a configuration was refused; shown to the operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrainConfigError {
    #[error("a command brain needs a program")]
    NoProgram,
    #[error("a command brain's timeout is 1 ms to 10 minutes")]
    BadTimeout,
    #[error("base_url must start with http:// or https://")]
    BadBaseUrl,
    #[error("a model brain (openai, anthropic) needs a model")]
    NoModel,
    #[error("api_key_env must name an environment variable (A-Z, 0-9, _), not hold a key")]
    BadKeyEnv,
    #[error("max_steps is 1 to {MAX_STEPS}")]
    BadSteps,
    #[error("temperature is 0 to 2")]
    BadTemperature,
    #[error("an anthropic brain's temperature is 0 to 1")]
    BadAnthropicTemperature,
    #[error("max_tokens is 1 to {MAX_ANTHROPIC_TOKENS}")]
    BadMaxTokens,
}

impl BrainConfig {
    pub const fn kind(&self) -> &'static str {
        match self {
            BrainConfig::Scripted => "scripted",
            BrainConfig::Command { .. } => "command",
            BrainConfig::OpenAi { .. } => "openai",
            BrainConfig::Anthropic { .. } => "anthropic",
        }
    }

    /// Decisions one turn may take.
    pub fn max_steps(&self) -> u32 {
        match self {
            // A script is one decision; its tool calls run once.
            BrainConfig::Scripted => 1,
            BrainConfig::Command { .. } => DEFAULT_STEPS,
            BrainConfig::OpenAi { max_steps, .. } | BrainConfig::Anthropic { max_steps, .. } => {
                max_steps.unwrap_or(DEFAULT_STEPS)
            }
        }
    }

    pub fn validate(&self) -> Result<(), BrainConfigError> {
        match self {
            BrainConfig::Scripted => Ok(()),
            BrainConfig::Command {
                program,
                timeout_ms,
                ..
            } => {
                if program.trim().is_empty() {
                    return Err(BrainConfigError::NoProgram);
                }
                if *timeout_ms == 0 || *timeout_ms > MAX_COMMAND_TIMEOUT_MS {
                    return Err(BrainConfigError::BadTimeout);
                }
                Ok(())
            }
            BrainConfig::OpenAi {
                base_url,
                model,
                api_key_env,
                temperature,
                max_steps,
            } => {
                check_endpoint(base_url, model, api_key_env, *max_steps)?;
                if temperature.is_some_and(|t| !(0.0..=2.0).contains(&t)) {
                    return Err(BrainConfigError::BadTemperature);
                }
                Ok(())
            }
            BrainConfig::Anthropic {
                base_url,
                model,
                api_key_env,
                max_tokens,
                max_steps,
                temperature,
            } => {
                check_endpoint(base_url, model, api_key_env, *max_steps)?;
                if *max_tokens == 0 || *max_tokens > MAX_ANTHROPIC_TOKENS {
                    return Err(BrainConfigError::BadMaxTokens);
                }
                // The Messages API's range, narrower than OpenAI's.
                if temperature.is_some_and(|t| !(0.0..=1.0).contains(&t)) {
                    return Err(BrainConfigError::BadAnthropicTemperature);
                }
                Ok(())
            }
        }
    }
}

/// What every brain that calls a model's HTTP API must hold: an http(s)
/// endpoint, a model, the name (never the value) of the variable with
/// its key, and a step limit in range.
fn check_endpoint(
    base_url: &str,
    model: &str,
    api_key_env: &str,
    max_steps: Option<u32>,
) -> Result<(), BrainConfigError> {
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(BrainConfigError::BadBaseUrl);
    }
    if model.trim().is_empty() {
        return Err(BrainConfigError::NoModel);
    }
    let env_ok = !api_key_env.is_empty()
        && api_key_env.len() <= 128
        && api_key_env
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        && !api_key_env.as_bytes()[0].is_ascii_digit();
    if !env_ok {
        return Err(BrainConfigError::BadKeyEnv);
    }
    if max_steps.is_some_and(|s| s == 0 || s > MAX_STEPS) {
        return Err(BrainConfigError::BadSteps);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_are_checked() {
        assert_eq!(BrainConfig::Scripted.validate(), Ok(()));
        let command = |program: &str, timeout_ms| BrainConfig::Command {
            program: program.into(),
            args: vec![],
            env: vec![],
            timeout_ms,
        };
        assert_eq!(command("./brain.py", 30_000).validate(), Ok(()));
        assert_eq!(
            command(" ", 30_000).validate(),
            Err(BrainConfigError::NoProgram)
        );
        assert_eq!(
            command("x", 0).validate(),
            Err(BrainConfigError::BadTimeout)
        );
        let openai = |url: &str, key: &str| BrainConfig::OpenAi {
            base_url: url.into(),
            model: "m".into(),
            api_key_env: key.into(),
            temperature: None,
            max_steps: None,
        };
        assert_eq!(
            openai("http://127.0.0.1:8080/v1", "OPENAI_API_KEY").validate(),
            Ok(())
        );
        assert_eq!(
            openai("ftp://x", "K").validate(),
            Err(BrainConfigError::BadBaseUrl)
        );
        assert_eq!(
            openai("https://x", "sk-live-123").validate(),
            Err(BrainConfigError::BadKeyEnv)
        );
        assert_eq!(BrainConfig::Scripted.max_steps(), 1);
    }

    fn anthropic(url: &str, key: &str, max_tokens: u32) -> BrainConfig {
        BrainConfig::Anthropic {
            base_url: url.into(),
            model: "claude-x".into(),
            api_key_env: key.into(),
            max_tokens,
            max_steps: None,
            temperature: None,
        }
    }

    #[test]
    fn anthropic_configurations_are_checked() {
        let good = anthropic(ANTHROPIC_BASE_URL, "ANTHROPIC_API_KEY", 8192);
        assert_eq!(good.validate(), Ok(()));
        assert_eq!(good.kind(), "anthropic");
        assert_eq!(good.max_steps(), DEFAULT_STEPS);
        assert_eq!(
            anthropic("api.anthropic.com", "K", 1).validate(),
            Err(BrainConfigError::BadBaseUrl)
        );
        assert_eq!(
            anthropic("https://x", "sk-ant-123", 1).validate(),
            Err(BrainConfigError::BadKeyEnv)
        );
        assert_eq!(
            anthropic("https://x", "K", 0).validate(),
            Err(BrainConfigError::BadMaxTokens)
        );
        assert_eq!(
            anthropic("https://x", "K", MAX_ANTHROPIC_TOKENS + 1).validate(),
            Err(BrainConfigError::BadMaxTokens)
        );
        assert_eq!(
            anthropic("https://x", "K", MAX_ANTHROPIC_TOKENS).validate(),
            Ok(())
        );
        let mut blank = anthropic("https://x", "K", 1);
        if let BrainConfig::Anthropic { model, .. } = &mut blank {
            *model = " ".into();
        }
        assert_eq!(blank.validate(), Err(BrainConfigError::NoModel));
        let mut steps = anthropic("https://x", "K", 1);
        if let BrainConfig::Anthropic { max_steps, .. } = &mut steps {
            *max_steps = Some(MAX_STEPS + 1);
        }
        assert_eq!(steps.validate(), Err(BrainConfigError::BadSteps));
        // Anthropic's temperature range is 0 to 1; OpenAI's 1.5 is not.
        let mut hot = anthropic("https://x", "K", 1);
        if let BrainConfig::Anthropic { temperature, .. } = &mut hot {
            *temperature = Some(1.5);
        }
        assert_eq!(
            hot.validate(),
            Err(BrainConfigError::BadAnthropicTemperature)
        );
    }

    /// Agents' records hold their brain configuration encoded with
    /// bincode, where a variant is its index: the ones stored before the
    /// anthropic brain existed must decode as they were written.
    #[test]
    fn stored_configurations_keep_their_encoding() {
        let config = bincode::config::standard();
        let openai = BrainConfig::OpenAi {
            base_url: "http://x".into(),
            model: "m".into(),
            api_key_env: "K".into(),
            temperature: None,
            max_steps: Some(3),
        };
        // As written by a daemon without the anthropic variant: index 2,
        // then the fields in order (length-prefixed strings, options).
        let mut written = vec![2u8, 8];
        written.extend_from_slice(b"http://x");
        written.extend_from_slice(&[1, b'm', 1, b'K', 0, 1, 3]);
        assert_eq!(
            bincode::serde::encode_to_vec(&openai, config).expect("encodes"),
            written
        );
        let (decoded, _): (BrainConfig, usize) =
            bincode::serde::decode_from_slice(&written, config).expect("decodes");
        assert_eq!(decoded, openai);
        for (old, index) in [
            (BrainConfig::Scripted, 0u8),
            (
                BrainConfig::Command {
                    program: "p".into(),
                    args: vec![],
                    env: vec![],
                    timeout_ms: 1,
                },
                1,
            ),
        ] {
            let bytes = bincode::serde::encode_to_vec(&old, config).expect("encodes");
            assert_eq!(bytes[0], index, "{old:?}");
        }
        let new = anthropic(ANTHROPIC_BASE_URL, "ANTHROPIC_API_KEY", 8192);
        let bytes = bincode::serde::encode_to_vec(&new, config).expect("encodes");
        assert_eq!(bytes[0], 3, "the new variant comes last");
        let (decoded, _): (BrainConfig, usize) =
            bincode::serde::decode_from_slice(&bytes, config).expect("decodes");
        assert_eq!(decoded, new);
    }
}
