//! The manifest as written: serde shapes that refuse unknown keys, and
//! their resolution into an [`InstanceSpec`].

use std::collections::BTreeMap;

use holarchy_supervision::bounds::{check_context_tokens, check_name};
use holarchy_supervision::brain::{
    ANTHROPIC_BASE_URL, ANTHROPIC_KEY_ENV, DEFAULT_ANTHROPIC_TOKENS,
};
use holarchy_supervision::{BrainConfig, ToolLimits};
use serde::Deserialize;

use super::{
    check_words, env_name_ok, Ingress, InstanceSpec, ManifestError, Provider, COMMAND_TIMEOUT_MS,
    MAX_INGRESS, MAX_LIST, MAX_PAYLOAD_BYTES, MAX_REPLAY_WINDOW_S, MAX_SKILLS, MAX_TURNS_PER_HOUR,
};
use crate::role;
use crate::schedule::Schedule;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Manifest {
    name: String,
    role: Option<RoleSource>,
    brain: Option<Brain>,
    #[serde(default)]
    skills: Vec<String>,
    #[serde(default)]
    ingress: Vec<IngressEntry>,
    #[serde(default)]
    constraints: Constraints,
    context_tokens: Option<u64>,
    #[serde(default)]
    mcp_servers: Vec<String>,
    network: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleSource {
    prompt: Option<String>,
    prompt_file: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum Brain {
    Scripted {},
    Command {
        program: String,
        #[serde(default)]
        args: Vec<String>,
        #[serde(default)]
        env: BTreeMap<String, String>,
        timeout_ms: Option<u64>,
    },
    Openai {
        base_url: String,
        model: String,
        api_key_env: Option<String>,
        temperature: Option<f32>,
        max_steps: Option<u32>,
    },
    Anthropic {
        model: String,
        base_url: Option<String>,
        api_key_env: Option<String>,
        max_tokens: Option<u32>,
        temperature: Option<f32>,
        max_steps: Option<u32>,
    },
}

#[derive(Debug, Deserialize)]
#[serde(tag = "source", rename_all = "snake_case", deny_unknown_fields)]
enum IngressEntry {
    Webhook {
        provider: Provider,
        secret_env: String,
        #[serde(default)]
        events: Vec<String>,
        replay_window: Option<String>,
    },
    Schedule {
        cron: String,
        timezone: Option<String>,
        payload: Option<toml::Value>,
    },
    Trigger {},
    Publish {},
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Constraints {
    allow_tools: Option<Vec<String>>,
    #[serde(default)]
    deny_tools: Vec<String>,
    #[serde(default)]
    require_approval: Vec<String>,
    max_turns_per_hour: Option<u32>,
}

impl Manifest {
    pub(super) fn resolve(
        self,
        files: &BTreeMap<String, String>,
    ) -> Result<InstanceSpec, ManifestError> {
        check_name(&self.name).map_err(|err| ManifestError::Name(err.to_string()))?;
        let role = match self.role {
            None => None,
            Some(source) => Some(role::from_text(source.text(files)?)?),
        };
        let brain = self.brain.map(Brain::config).transpose()?;
        check_words("skills", &self.skills, MAX_SKILLS)?;
        if self.ingress.len() > MAX_INGRESS {
            return Err(ManifestError::TooMany {
                field: "ingress",
                limit: MAX_INGRESS,
            });
        }
        let mut ingress: Vec<Ingress> = Vec::with_capacity(self.ingress.len());
        for entry in self.ingress {
            let entry = entry.resolve()?;
            let repeated = ingress.iter().any(|seen| match (seen, &entry) {
                // One secret per provider: a second would make the URL
                // ambiguous.
                (Ingress::Webhook { provider: a, .. }, Ingress::Webhook { provider: b, .. }) => {
                    a == b
                }
                (Ingress::Trigger, Ingress::Trigger) | (Ingress::Publish, Ingress::Publish) => true,
                _ => false,
            });
            if repeated {
                return Err(ManifestError::SecondIngress(match &entry {
                    Ingress::Webhook { provider, .. } => format!("webhook {}", provider.name()),
                    other => other.source().to_owned(),
                }));
            }
            ingress.push(entry);
        }
        let context_tokens = self
            .context_tokens
            .map(check_context_tokens)
            .transpose()
            .map_err(|err| ManifestError::ContextTokens(err.to_string()))?;
        check_words("mcp_servers", &self.mcp_servers, MAX_LIST)?;
        Ok(InstanceSpec {
            name: self.name,
            role,
            brain,
            skills: self.skills,
            ingress,
            limits: self.constraints.resolve()?,
            context_tokens,
            mcp_servers: self.mcp_servers,
            network: holarchy_supervision::NetworkPolicy::parse(
                self.network.as_deref().unwrap_or_default(),
            )?,
        })
    }
}

impl RoleSource {
    fn text<'a>(&'a self, files: &'a BTreeMap<String, String>) -> Result<&'a str, ManifestError> {
        match (&self.prompt, &self.prompt_file) {
            (Some(text), None) => Ok(text),
            (None, Some(path)) => files
                .get(path)
                .map(String::as_str)
                .ok_or_else(|| ManifestError::MissingFile(path.clone())),
            _ => Err(ManifestError::RoleSource),
        }
    }
}

impl Brain {
    fn config(self) -> Result<BrainConfig, ManifestError> {
        let config = match self {
            Brain::Scripted {} => BrainConfig::Scripted,
            Brain::Command {
                program,
                args,
                env,
                timeout_ms,
            } => BrainConfig::Command {
                program,
                args,
                env: env.into_iter().collect(),
                timeout_ms: timeout_ms.unwrap_or(COMMAND_TIMEOUT_MS),
            },
            Brain::Openai {
                base_url,
                model,
                api_key_env,
                temperature,
                max_steps,
            } => BrainConfig::OpenAi {
                base_url,
                model,
                api_key_env: api_key_env.unwrap_or_else(|| "OPENAI_API_KEY".into()),
                temperature,
                max_steps,
            },
            Brain::Anthropic {
                model,
                base_url,
                api_key_env,
                max_tokens,
                temperature,
                max_steps,
            } => BrainConfig::Anthropic {
                base_url: base_url.unwrap_or_else(|| ANTHROPIC_BASE_URL.into()),
                model,
                api_key_env: api_key_env.unwrap_or_else(|| ANTHROPIC_KEY_ENV.into()),
                max_tokens: max_tokens.unwrap_or(DEFAULT_ANTHROPIC_TOKENS),
                max_steps,
                temperature,
            },
        };
        config
            .validate()
            .map_err(|err| ManifestError::Brain(err.to_string()))?;
        Ok(config)
    }
}

impl IngressEntry {
    fn resolve(self) -> Result<Ingress, ManifestError> {
        Ok(match self {
            IngressEntry::Webhook {
                provider,
                secret_env,
                events,
                replay_window,
            } => {
                if !env_name_ok(&secret_env) {
                    return Err(ManifestError::BadSecretEnv(
                        secret_env.chars().take(64).collect(),
                    ));
                }
                check_words("ingress.events", &events, MAX_LIST)?;
                let replay_window_s = match (provider, replay_window) {
                    (_, None) => None,
                    (Provider::Github, Some(text)) => Some(window_seconds(&text)?),
                    (Provider::Generic, Some(_)) => {
                        return Err(ManifestError::ReplayWindow(
                            "only for provider \"github\": a generic webhook's dedupe key is its signed body's already".into(),
                        ))
                    }
                };
                Ingress::Webhook {
                    provider,
                    secret_env,
                    events,
                    replay_window_s,
                }
            }
            IngressEntry::Schedule {
                cron,
                timezone,
                payload,
            } => {
                let payload = match payload {
                    None => "{}".to_owned(),
                    Some(value) => serde_json::to_string(&value)
                        .map_err(|err| ManifestError::Schedule(err.to_string()))?,
                };
                if payload.len() > MAX_PAYLOAD_BYTES {
                    return Err(ManifestError::PayloadTooLarge { len: payload.len() });
                }
                // Parsed now: a typo is refused at apply, not found later
                // by a schedule that never fires.
                Schedule::parse(&cron, timezone.as_deref())
                    .map_err(|err| ManifestError::Schedule(err.to_string()))?;
                Ingress::Schedule {
                    cron,
                    timezone,
                    payload,
                }
            }
            IngressEntry::Trigger {} => Ingress::Trigger,
            IngressEntry::Publish {} => Ingress::Publish,
        })
    }
}

/// `"0"`, or a whole number with a unit: `s`, `m`, `h` or `d`; at most
/// [`MAX_REPLAY_WINDOW_S`].
fn window_seconds(text: &str) -> Result<u64, ManifestError> {
    let bad = || {
        ManifestError::ReplayWindow(format!(
            "`{}` is not a duration like \"7d\", \"12h\", \"30m\" or \"0\" (off), at most 365d",
            text.chars().take(32).collect::<String>()
        ))
    };
    if text == "0" {
        return Ok(0);
    }
    let split = text.len().saturating_sub(1);
    let (digits, unit) = (text.get(..split).ok_or_else(bad)?, text.get(split..));
    let unit = match unit {
        Some("s") => 1,
        Some("m") => 60,
        Some("h") => 3600,
        Some("d") => 24 * 3600,
        _ => return Err(bad()),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .filter(|seconds| *seconds <= MAX_REPLAY_WINDOW_S)
        .ok_or_else(bad)
}

impl Constraints {
    fn resolve(self) -> Result<ToolLimits, ManifestError> {
        if let Some(allow) = &self.allow_tools {
            check_words("constraints.allow_tools", allow, MAX_LIST)?;
        }
        check_words("constraints.deny_tools", &self.deny_tools, MAX_LIST)?;
        check_words(
            "constraints.require_approval",
            &self.require_approval,
            MAX_LIST,
        )?;
        if self
            .max_turns_per_hour
            .is_some_and(|n| n == 0 || n > MAX_TURNS_PER_HOUR)
        {
            return Err(ManifestError::BadRate);
        }
        Ok(ToolLimits {
            allow: self.allow_tools,
            deny: self.deny_tools,
            require_approval: self.require_approval,
            max_turns_per_hour: self.max_turns_per_hour,
        })
    }
}
