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
    #[error("an openai brain needs a model")]
    NoModel,
    #[error("api_key_env must name an environment variable (A-Z, 0-9, _), not hold a key")]
    BadKeyEnv,
    #[error("max_steps is 1 to {MAX_STEPS}")]
    BadSteps,
    #[error("temperature is 0 to 2")]
    BadTemperature,
}

impl BrainConfig {
    pub const fn kind(&self) -> &'static str {
        match self {
            BrainConfig::Scripted => "scripted",
            BrainConfig::Command { .. } => "command",
            BrainConfig::OpenAi { .. } => "openai",
        }
    }

    /// Decisions one turn may take.
    pub fn max_steps(&self) -> u32 {
        match self {
            // A script is one decision; its tool calls run once.
            BrainConfig::Scripted => 1,
            BrainConfig::Command { .. } => DEFAULT_STEPS,
            BrainConfig::OpenAi { max_steps, .. } => max_steps.unwrap_or(DEFAULT_STEPS),
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
                if temperature.is_some_and(|t| !(0.0..=2.0).contains(&t)) {
                    return Err(BrainConfigError::BadTemperature);
                }
                Ok(())
            }
        }
    }
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
}
