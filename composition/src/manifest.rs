//! Instance manifests: the TOML file an operator applies, parsed, bounded
//! and validated into an [`InstanceSpec`], the form the store keeps.
//!
//! ```toml
//! name = "maintainer"
//! skills = ["triage"]
//! context_tokens = 64000     # optional: the agent's own context budget
//! mcp_servers = ["github"]   # optional: MCP servers of `serve --mcp-config`
//! network = "none"           # optional: `full` (default), `none`, or "443,8080"
//!
//! [role]
//! prompt_file = "roles/maintainer.md"   # or: prompt = "..."
//!
//! [brain.command]                       # or [brain.openai], [brain.anthropic], [brain.scripted]
//! program = "examples/brains/triage.py"
//!
//! [[ingress]]
//! source = "webhook"
//! provider = "github"
//! secret_env = "GH_WEBHOOK_SECRET"
//! events = ["issues", "pull_request"]
//! replay_window = "7d"                  # optional, github only: the default; "0" turns it off
//!
//! [constraints]
//! deny_tools = ["DetachWorkspace"]
//! require_approval = ["ExecCommand"]
//! max_turns_per_hour = 60
//! ```
//!
//! A manifest names files (`prompt_file`) relative to itself; the client
//! that reads it sends their text along (`files`), so the daemon never
//! opens a path a caller chose.

use std::collections::{BTreeMap, BTreeSet};

use holarchy_supervision::{BrainConfig, Role, ToolLimits};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::role::RoleError;

/// Largest manifest, in bytes.
pub const MAX_MANIFEST_BYTES: usize = 64 * 1024;
pub const MAX_SKILLS: usize = 32;
pub const MAX_INGRESS: usize = 16;
/// Longest list of tools or webhook events.
pub const MAX_LIST: usize = 64;
/// Longest skill name, tool name, event name or environment variable name.
pub const MAX_WORD: usize = 64;
/// Largest schedule payload, as JSON text.
pub const MAX_PAYLOAD_BYTES: usize = 16 * 1024;
/// Most turns an hour an instance may allow itself: one a second.
pub const MAX_TURNS_PER_HOUR: u32 = 3600;
/// How long a command brain's step may take when the manifest does not
/// say: the same as `--brain-timeout`'s default.
const COMMAND_TIMEOUT_MS: u64 = 60_000;
/// How long a GitHub webhook remembers a body it took when its manifest
/// gives no `replay_window`: a week, past GitHub's own three days of
/// redeliveries.
pub const DEFAULT_REPLAY_WINDOW_S: u64 = 7 * 24 * 3600;
/// The longest `replay_window`: a year.
pub const MAX_REPLAY_WINDOW_S: u64 = 365 * 24 * 3600;

/// An instance as the store keeps it: everything resolved, nothing that
/// needs the manifest's folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceSpec {
    /// Also its public agent's name.
    pub name: String,
    pub role: Option<Role>,
    /// `None`: the daemon's default brain.
    pub brain: Option<BrainConfig>,
    pub skills: Vec<String>,
    pub ingress: Vec<Ingress>,
    pub limits: ToolLimits,
    /// The agent's own context budget; `None`: the daemon's.
    pub context_tokens: Option<u32>,
    /// Names of the daemon's MCP servers its agent may call.
    pub mcp_servers: Vec<String>,
    /// What network its agent's commands may reach.
    pub network: holarchy_supervision::NetworkPolicy,
}

/// Where an instance's events come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Ingress {
    /// `POST /ingress/<provider>/<instance>`, signed with the secret held by
    /// the daemon's environment variable `secret_env`. No `events`: all.
    Webhook {
        provider: Provider,
        secret_env: String,
        events: Vec<String>,
        /// Seconds a body taken is remembered, so the same signed body
        /// sent again under a new `X-GitHub-Delivery` is a replay (see
        /// [`InstanceSpec::replay_window_s`]). `None`: the manifest gave
        /// none, so [`DEFAULT_REPLAY_WINDOW_S`]; `Some(0)`: off. GitHub
        /// only: a generic webhook's dedupe key is signed content already.
        replay_window_s: Option<u64>,
    },
    /// A cron schedule (5 fields), in `timezone` (UTC when `None`); each
    /// firing carries `payload` (JSON text).
    Schedule {
        cron: String,
        timezone: Option<String>,
        payload: String,
    },
    /// The agent may arm external triggers.
    Trigger,
    /// Programs may publish events to it over gRPC (`PublishEvent`).
    Publish,
}

impl Ingress {
    /// A schedule's stable name: 12 hex digits of the SHA-256 of its cron,
    /// timezone and payload. Its progress and its events' dedupe keys use
    /// it, so reordering a manifest moves nothing, and a changed schedule
    /// is a new one. `None` for other sources.
    pub fn schedule_id(&self) -> Option<String> {
        let Ingress::Schedule {
            cron,
            timezone,
            payload,
        } = self
        else {
            return None;
        };
        let mut hash = Sha256::new();
        for part in [cron.as_str(), timezone.as_deref().unwrap_or(""), payload] {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
        Some(hex::encode(hash.finalize()).chars().take(12).collect())
    }

    pub fn source(&self) -> &'static str {
        match self {
            Ingress::Webhook { .. } => "webhook",
            Ingress::Schedule { .. } => "schedule",
            Ingress::Trigger => "trigger",
            Ingress::Publish => "publish",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    /// Signed with `X-Hub-Signature-256`, keyed by `X-GitHub-Delivery`.
    Github,
    /// Signed with `X-Holarchy-Signature-256` in the same form.
    Generic,
}

impl Provider {
    pub fn name(self) -> &'static str {
        match self {
            Provider::Github => "github",
            Provider::Generic => "generic",
        }
    }

    pub fn parse(name: &str) -> Option<Provider> {
        match name {
            "github" => Some(Provider::Github),
            "generic" => Some(Provider::Generic),
            _ => None,
        }
    }
}

impl InstanceSpec {
    /// The digest of the whole spec: equal digests, nothing to change.
    pub fn digest(&self) -> String {
        // Field order is fixed and every map is sorted, so the JSON of a
        // spec is canonical. Fields added since the first release are left
        // out while unset, so a spec applied before they existed keeps its
        // digest and applying its manifest again stays a no-op.
        let view = DigestView {
            name: &self.name,
            role: &self.role,
            brain: &self.brain,
            skills: &self.skills,
            ingress: self.ingress.iter().map(IngressView::of).collect(),
            limits: &self.limits,
            context_tokens: self.context_tokens,
            mcp_servers: &self.mcp_servers,
            network: (!self.network.is_full()).then(|| self.network.to_string()),
        };
        let json = serde_json::to_vec(&view).unwrap_or_default();
        hex::encode(Sha256::digest(&json))
    }

    pub fn webhook(&self, provider: Provider) -> Option<(&str, &[String])> {
        self.ingress.iter().find_map(|ingress| match ingress {
            Ingress::Webhook {
                provider: p,
                secret_env,
                events,
                ..
            } if *p == provider => Some((secret_env.as_str(), events.as_slice())),
            _ => None,
        })
    }

    /// How long, in seconds, this instance's webhook of `provider`
    /// remembers the bodies it took: a body (the bytes its signature
    /// covers) taken again within it is a replay, whatever its delivery
    /// header says. `None`: no such webhook, a generic one (its dedupe key
    /// is made of signed content already), or the window is off.
    pub fn replay_window_s(&self, provider: Provider) -> Option<u64> {
        self.ingress.iter().find_map(|ingress| match ingress {
            Ingress::Webhook {
                provider: Provider::Github,
                replay_window_s,
                ..
            } if provider == Provider::Github => {
                Some(replay_window_s.unwrap_or(DEFAULT_REPLAY_WINDOW_S)).filter(|s| *s > 0)
            }
            _ => None,
        })
    }

    pub fn has(&self, source: &str) -> bool {
        self.ingress.iter().any(|i| i.source() == source)
    }
}

/// What a spec's digest covers, in the order the first release wrote it.
#[derive(Serialize)]
struct DigestView<'a> {
    name: &'a str,
    role: &'a Option<Role>,
    brain: &'a Option<BrainConfig>,
    skills: &'a [String],
    ingress: Vec<IngressView<'a>>,
    limits: &'a ToolLimits,
    #[serde(skip_serializing_if = "Option::is_none")]
    context_tokens: Option<u32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    mcp_servers: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    network: Option<String>,
}

/// An ingress as the digest covers it: as the first release wrote it
/// (variant and field names, order), with the fields added since left out
/// while unset.
#[derive(Serialize)]
enum IngressView<'a> {
    Webhook {
        provider: Provider,
        secret_env: &'a str,
        events: &'a [String],
        #[serde(skip_serializing_if = "Option::is_none")]
        replay_window_s: Option<u64>,
    },
    Schedule {
        cron: &'a str,
        timezone: &'a Option<String>,
        payload: &'a str,
    },
    Trigger,
    Publish,
}

impl<'a> IngressView<'a> {
    fn of(ingress: &'a Ingress) -> Self {
        match ingress {
            Ingress::Webhook {
                provider,
                secret_env,
                events,
                replay_window_s,
            } => IngressView::Webhook {
                provider: *provider,
                secret_env,
                events,
                replay_window_s: *replay_window_s,
            },
            Ingress::Schedule {
                cron,
                timezone,
                payload,
            } => IngressView::Schedule {
                cron,
                timezone,
                payload,
            },
            Ingress::Trigger => IngressView::Trigger,
            Ingress::Publish => IngressView::Publish,
        }
    }
}

/// Why a manifest was refused; shown to the operator as it is.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ManifestError {
    #[error("the manifest is {len} bytes; the limit is {MAX_MANIFEST_BYTES}")]
    TooLarge { len: usize },
    #[error("the manifest is not valid: {0}")]
    Syntax(String),
    #[error("name: {0}")]
    Name(String),
    #[error("network: {0}")]
    Network(#[from] holarchy_supervision::network::NetworkPolicyError),
    #[error("role: give one of `prompt` and `prompt_file`")]
    RoleSource,
    #[error("role: prompt_file `{0}` was not sent with the manifest")]
    MissingFile(String),
    #[error("role: {0}")]
    Role(#[from] RoleError),
    #[error("brain: {0}")]
    Brain(String),
    #[error("{field}: at most {limit} entries")]
    TooMany { field: &'static str, limit: usize },
    #[error("{field}: `{value}` is not a valid name (1-{MAX_WORD} bytes of a-z, A-Z, 0-9, '-', '_', '.')")]
    BadWord { field: &'static str, value: String },
    #[error("{field}: `{value}` is listed twice")]
    Duplicate { field: &'static str, value: String },
    #[error("ingress: secret_env `{0}` must name an environment variable (A-Z, 0-9, _)")]
    BadSecretEnv(String),
    #[error("ingress: a second `{0}` entry")]
    SecondIngress(String),
    #[error(
        "ingress: the schedule's payload is {len} bytes of JSON; the limit is {MAX_PAYLOAD_BYTES}"
    )]
    PayloadTooLarge { len: usize },
    #[error("ingress: {0}")]
    Schedule(String),
    #[error("ingress: replay_window: {0}")]
    ReplayWindow(String),
    #[error("constraints: max_turns_per_hour is 1 to {MAX_TURNS_PER_HOUR}")]
    BadRate,
    #[error("skills: no skill `{0}` in the daemon's skill folders")]
    UnknownSkill(String),
    #[error("constraints: no tool `{0}` in the catalog")]
    UnknownTool(String),
    #[error("context_tokens: {0}")]
    ContextTokens(String),
    #[error(
        "mcp_servers: no MCP server `{0}` in the daemon's MCP configuration (serve --mcp-config)"
    )]
    UnknownMcpServer(String),
}

/// Parses `text` (a TOML manifest); `files` holds the text of the files it
/// names, keyed by the path as written.
pub fn parse(text: &str, files: &BTreeMap<String, String>) -> Result<InstanceSpec, ManifestError> {
    if text.len() > MAX_MANIFEST_BYTES {
        return Err(ManifestError::TooLarge { len: text.len() });
    }
    let raw: raw::Manifest =
        toml::from_str(text).map_err(|err| ManifestError::Syntax(err.to_string()))?;
    raw.resolve(files)
}

/// What the daemon has, for [`check_references`].
pub struct Known<'a> {
    pub skill: &'a dyn Fn(&str) -> bool,
    pub mcp_server: &'a dyn Fn(&str) -> bool,
    pub tools: &'a [&'a str],
}

impl std::fmt::Debug for Known<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Known")
            .field("tools", &self.tools)
            .finish_non_exhaustive()
    }
}

/// Checks the names a spec refers to against what the daemon has.
pub fn check_references(spec: &InstanceSpec, known: &Known<'_>) -> Result<(), ManifestError> {
    if let Some(unknown) = spec.skills.iter().find(|s| !(known.skill)(s)) {
        return Err(ManifestError::UnknownSkill(unknown.clone()));
    }
    if let Some(unknown) = spec.mcp_servers.iter().find(|s| !(known.mcp_server)(s)) {
        return Err(ManifestError::UnknownMcpServer(unknown.clone()));
    }
    let limits = &spec.limits;
    let tools = limits
        .allow
        .iter()
        .flatten()
        .chain(&limits.deny)
        .chain(&limits.require_approval);
    for tool in tools {
        if !known.tools.contains(&tool.as_str()) {
            return Err(ManifestError::UnknownTool(tool.clone()));
        }
    }
    Ok(())
}

fn check_words(field: &'static str, words: &[String], limit: usize) -> Result<(), ManifestError> {
    if words.len() > limit {
        return Err(ManifestError::TooMany { field, limit });
    }
    let mut seen = BTreeSet::new();
    for word in words {
        if !word_ok(word) {
            return Err(ManifestError::BadWord {
                field,
                value: word.chars().take(MAX_WORD).collect(),
            });
        }
        if !seen.insert(word) {
            return Err(ManifestError::Duplicate {
                field,
                value: word.clone(),
            });
        }
    }
    Ok(())
}

/// A skill, tool or event name: 1 to [`MAX_WORD`] bytes of letters, digits,
/// `-`, `_` and `.` (so never a path).
pub fn word_ok(word: &str) -> bool {
    !word.is_empty()
        && word.len() <= MAX_WORD
        && !word.starts_with('.')
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn env_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_WORD
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

mod raw;

#[cfg(test)]
mod tests;
