//! The tunables of a runtime, as `holarchy serve` sets them.

use std::sync::Arc;
use std::time::Duration;

use holarchy_supervision::restart::RestartPolicy;

use crate::{brain, limits, sandbox, secrets};

/// Tunables of a runtime.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Messages an agent may hold waiting; past it, ingress is refused
    /// (ractor mailboxes are unbounded, so the bound lives here).
    pub max_queue_len: usize,
    /// How often a failing agent is restarted before it is marked failed.
    pub restart_policy: RestartPolicy,
    /// How long a caller waits for an actor to answer.
    pub call_timeout: Duration,
    /// How long one turn (brain call and tool calls) may run before it is
    /// recorded as failed and the agent moves on.
    pub turn_timeout: Duration,
    /// Bytes of output a command task keeps (a ring: the oldest go first).
    pub output_capacity: u64,
    /// Where agents' home workspaces live: `<root>/<agent id>`.
    pub workspace_root: std::path::PathBuf,
    /// Where git worktrees of `worktree`-mode children are made:
    /// `<root>/<task id>`.
    pub worktree_root: std::path::PathBuf,
    /// Between SIGTERM and SIGKILL when a command task is stopped.
    pub stop_grace: Duration,
    /// The brain of agents created without one.
    pub default_brain: holarchy_supervision::BrainConfig,
    /// How model requests (OpenAI-compatible, Anthropic) are retried.
    pub model_retry: brain::model::transport::RetryPolicy,
    /// How agents' programs are confined and bounded.
    pub sandbox: sandbox::SandboxConfig,
    /// The daemon's secrets: handed to brains by name, redacted from
    /// everything stored.
    pub secrets: Arc<secrets::Secrets>,
    /// Bounds on what agents can make the daemon do.
    pub limits: limits::Limits,
    /// Supervisor actors public agents are spread over (at least one).
    pub partitions: usize,
    /// Folders whose subfolders are skills (`SKILL.md` each).
    pub skill_roots: Vec<std::path::PathBuf>,
    /// Every brain's context budget in tokens (`serve --context-tokens`);
    /// `None`: each brain kind's default (see `context::tokens`).
    pub context_tokens: Option<usize>,
    /// Spans are exported (`serve --otlp-endpoint`): an operator's message
    /// carries its call's span to the turn it causes, as the turn's parent.
    pub trace_causes: bool,
    /// Count turns, tool calls and queues for `GET /metrics`; off with
    /// `serve --no-metrics`.
    pub metrics: bool,
    /// The MCP servers agents may be allowed (`serve --mcp-config`).
    pub mcp: Arc<crate::mcp::McpConfig>,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            max_queue_len: 1024,
            restart_policy: RestartPolicy::default(),
            call_timeout: Duration::from_secs(10),
            turn_timeout: Duration::from_secs(600),
            output_capacity: 1024 * 1024,
            workspace_root: std::env::temp_dir().join("holarchy-workspaces"),
            worktree_root: std::env::temp_dir().join("holarchy-worktrees"),
            stop_grace: Duration::from_secs(2),
            default_brain: holarchy_supervision::BrainConfig::Scripted,
            model_retry: brain::model::transport::RetryPolicy::default(),
            sandbox: sandbox::SandboxConfig::default(),
            secrets: Arc::default(),
            limits: limits::Limits::default(),
            partitions: std::thread::available_parallelism().map_or(1, usize::from),
            skill_roots: Vec::new(),
            context_tokens: None,
            trace_causes: false,
            metrics: true,
            mcp: Arc::default(),
        }
    }
}
