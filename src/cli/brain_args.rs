//! Brain flags shared by `agent create`, `agent brain` and `serve`.

use clap::Args;

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
        self.brain_scripted
            .then_some(holarchy_supervision::BrainConfig::Scripted)
    }
}
