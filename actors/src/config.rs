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
    /// How many recorded turn inputs (for replays) each agent keeps; 0
    /// records none (`serve --replay-keep-turns`).
    pub turn_inputs_kept: usize,
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
            turn_inputs_kept: crate::store::turn_input::DEFAULT_KEPT,
        }
    }
}

impl RuntimeConfig {
    /// The configuration with its paths as the runtime compares them: the
    /// roots made (if need be) and canonical, the protected and allowed
    /// paths canonical, and no read-only system path that holds a
    /// protected one (a data directory under /opt, say, would let every
    /// program read it). The daemon's program is protected from writes
    /// only: it is no secret, and dropping the directory holding it
    /// (/usr/bin) would take the shell away. Reads the disk; done once, at
    /// the runtime's start.
    pub fn settled(mut self) -> Self {
        for root in [
            &mut self.workspace_root,
            &mut self.worktree_root,
            &mut self.sandbox.tmp_root,
        ] {
            let canonical =
                std::fs::create_dir_all(&*root).and_then(|()| std::fs::canonicalize(&*root));
            if let Ok(canonical) = canonical {
                *root = canonical;
            }
        }
        let sandbox = &mut self.sandbox;
        for path in sandbox
            .protected
            .iter_mut()
            .chain(&mut sandbox.allowed_roots)
        {
            if let Ok(canonical) = std::fs::canonicalize(&*path) {
                *path = canonical;
            }
        }
        let program = std::env::current_exe()
            .ok()
            .and_then(|exe| std::fs::canonicalize(exe).ok());
        let protected: Vec<_> = self
            .sandbox
            .protected
            .iter()
            .filter(|p| Some(*p) != program.as_ref())
            .cloned()
            .collect();
        self.sandbox.read_only.retain(|path| {
            let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
            let holds = protected.iter().any(|p| p.starts_with(&canonical));
            if holds {
                tracing::warn!(path = %path.display(), "not readable by agents' programs: it holds the daemon's data");
            }
            !holds
        });
        self
    }
}
