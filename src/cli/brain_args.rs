//! Brain flags shared by `agent create`, `agent brain` and `serve`.

use clap::Args;
use holarchy_supervision::brain::{
    ANTHROPIC_BASE_URL, ANTHROPIC_KEY_ENV, DEFAULT_ANTHROPIC_TOKENS,
};

/// What decides an agent's turns, from the command line.
#[derive(Debug, Args, Clone, Default)]
pub struct BrainArgs {
    /// Run on a program: JSON in, decision out (see docs/brains.md).
    #[arg(long, value_name = "PROGRAM")]
    pub brain_command: Option<String>,
    /// An argument for the brain program (repeat for more).
    #[arg(long = "brain-arg", value_name = "ARG")]
    pub brain_args: Vec<String>,
    /// Seconds the brain program has per step.
    #[arg(long, default_value_t = 60)]
    pub brain_timeout: u64,
    /// Run on the scripted brain (the message carries the decision).
    #[arg(long, conflicts_with = "brain_command")]
    pub brain_scripted: bool,
    /// Run on an OpenAI-compatible server, e.g. https://api.openai.com/v1.
    #[arg(long, value_name = "URL", conflicts_with_all = ["brain_command", "brain_scripted"], requires = "brain_model")]
    pub brain_openai_url: Option<String>,
    /// The model to ask, with --brain-openai-url.
    #[arg(long, value_name = "MODEL")]
    pub brain_model: Option<String>,
    /// The daemon's environment variable that holds the API key.
    #[arg(long, value_name = "VAR", default_value = "OPENAI_API_KEY")]
    pub brain_key_env: String,
    /// Run on Anthropic's Messages API with this model, e.g. claude-sonnet-4-5.
    #[arg(long, value_name = "MODEL", conflicts_with_all = ["brain_command", "brain_scripted", "brain_openai_url"])]
    pub anthropic_model: Option<String>,
    /// Where the Messages API is (requests go to URL/v1/messages).
    #[arg(long, value_name = "URL", default_value = ANTHROPIC_BASE_URL, requires = "anthropic_model")]
    pub anthropic_base_url: String,
    /// The daemon's environment variable that holds the Anthropic API key.
    #[arg(long, value_name = "VAR", default_value = ANTHROPIC_KEY_ENV, requires = "anthropic_model")]
    pub anthropic_key_env: String,
    /// Most tokens of one answer (1 to 64000).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_ANTHROPIC_TOKENS, requires = "anthropic_model")]
    pub anthropic_max_tokens: u32,
    /// Sampling temperature, 0 to 1 (the model's default when absent).
    #[arg(long, value_name = "T", requires = "anthropic_model")]
    pub anthropic_temperature: Option<f32>,
    /// Most decisions (model requests) one turn may take, 1 to 64.
    #[arg(long, value_name = "N", requires = "anthropic_model")]
    pub anthropic_max_steps: Option<u32>,
}

impl BrainArgs {
    pub fn config(&self) -> Option<holarchy_supervision::BrainConfig> {
        if let Some(program) = &self.brain_command {
            return Some(holarchy_supervision::BrainConfig::Command {
                program: program.clone(),
                args: self.brain_args.clone(),
                env: Vec::new(),
                timeout_ms: self.brain_timeout.saturating_mul(1000),
            });
        }
        if let (Some(base_url), Some(model)) = (&self.brain_openai_url, &self.brain_model) {
            return Some(holarchy_supervision::BrainConfig::OpenAi {
                base_url: base_url.clone(),
                model: model.clone(),
                api_key_env: self.brain_key_env.clone(),
                temperature: None,
                max_steps: None,
            });
        }
        if let Some(model) = &self.anthropic_model {
            return Some(holarchy_supervision::BrainConfig::Anthropic {
                base_url: self.anthropic_base_url.clone(),
                model: model.clone(),
                api_key_env: self.anthropic_key_env.clone(),
                max_tokens: self.anthropic_max_tokens,
                max_steps: self.anthropic_max_steps,
                temperature: self.anthropic_temperature,
            });
        }
        self.brain_scripted
            .then_some(holarchy_supervision::BrainConfig::Scripted)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use holarchy_supervision::BrainConfig;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        brain: BrainArgs,
    }

    fn parse(args: &[&str]) -> Result<Option<BrainConfig>, clap::Error> {
        Cli::try_parse_from(std::iter::once("holarchy").chain(args.iter().copied()))
            .map(|cli| cli.brain.config())
    }

    #[test]
    fn anthropic_flags_make_an_anthropic_brain_with_defaults() {
        assert_eq!(
            parse(&["--anthropic-model", "claude-sonnet-4-5"]).expect("parses"),
            Some(BrainConfig::Anthropic {
                base_url: "https://api.anthropic.com".into(),
                model: "claude-sonnet-4-5".into(),
                api_key_env: "ANTHROPIC_API_KEY".into(),
                max_tokens: 8192,
                max_steps: None,
                temperature: None,
            })
        );
        assert_eq!(
            parse(&[
                "--anthropic-model",
                "m",
                "--anthropic-base-url",
                "http://127.0.0.1:8080",
                "--anthropic-key-env",
                "TEAM_KEY",
                "--anthropic-max-tokens",
                "1000",
                "--anthropic-temperature",
                "0.5",
                "--anthropic-max-steps",
                "3",
            ])
            .expect("parses"),
            Some(BrainConfig::Anthropic {
                base_url: "http://127.0.0.1:8080".into(),
                model: "m".into(),
                api_key_env: "TEAM_KEY".into(),
                max_tokens: 1000,
                max_steps: Some(3),
                temperature: Some(0.5),
            })
        );
    }

    #[test]
    fn anthropic_flags_need_the_model_and_exclude_other_brains() {
        assert!(parse(&["--anthropic-base-url", "http://x"]).is_err());
        assert!(parse(&["--anthropic-max-tokens", "5"]).is_err());
        assert!(parse(&["--anthropic-model", "m", "--brain-scripted"]).is_err());
        assert!(parse(&["--anthropic-model", "m", "--brain-command", "x"]).is_err());
        assert!(parse(&[
            "--anthropic-model",
            "m",
            "--brain-openai-url",
            "http://x",
            "--brain-model",
            "g"
        ])
        .is_err());
        // Nothing asked: no brain (the daemon's default stands).
        assert_eq!(parse(&[]).expect("parses"), None);
    }
}
