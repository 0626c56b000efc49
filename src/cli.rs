//! The `holarchy` command line: `serve` runs the daemon; every other
//! command is a gRPC client of it. Data goes to stdout (human-readable, or
//! JSON with `--json`); diagnostics go to stderr.

mod approvals;
mod bench;
mod brain_args;
mod connection_args;
mod context;
mod export;
mod follow;
mod instances;
mod limit_args;
mod memory;
mod output;
mod tasks;
mod top;
mod tree_view;
mod work;
mod workspaces;

pub use brain_args::BrainArgs;
pub use connection_args::ConnectionArgs;
pub use instances::InstanceCommand;
pub use memory::MemoryCommand;
use tasks::task_command;
pub use work::WorkCommand;
pub use workspaces::WorkspaceCommand;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::parser::ValueSource;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use holarchy_actors::sandbox::TaskLimits;
use holarchy_actors::secrets::Secrets;
use holarchy_supervision::restart::RestartPolicy;
use tokio_stream::StreamExt;

use crate::api::pb;
use crate::client::{self, Clients, Target};
use crate::daemon::{self, GivenToken, ServeConfig, SOCKET_FILE};
use output::Output;

#[derive(Debug, Parser)]
#[command(
    name = "holarchy",
    version,
    about = "A durable runtime for long-lived agents"
)]
pub struct Cli {
    /// Data directory of the daemon (the socket lives there too).
    #[arg(long, global = true, env = "HOLARCHY_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Talk to the daemon at this Unix socket instead of <data-dir>/holarchy.sock.
    #[arg(long, global = true, env = "HOLARCHY_SOCKET")]
    pub socket: Option<PathBuf>,
    /// Talk to the daemon over TCP at this URL, e.g. http://127.0.0.1:7420.
    #[arg(long, global = true, env = "HOLARCHY_ADDR")]
    pub addr: Option<String>,
    /// Bearer token for TCP (see <data-dir>/token). `serve` refuses one
    /// shorter than 16 bytes, and warns when it is given here: other
    /// processes can read the command line, so prefer HOLARCHY_TOKEN or the
    /// token file.
    #[arg(long, global = true, env = "HOLARCHY_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Whether `token` came from `--token` rather than the environment.
    #[arg(skip)]
    pub token_on_command_line: bool,
    /// Print JSON, one object per line, for scripts.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon in the foreground.
    Serve(Box<ServeArgs>),
    /// Create, list, inspect and message agents.
    #[command(subcommand)]
    Agent(AgentCommand),
    /// Print the event log; with --follow, keep printing new events.
    Events {
        /// Start after this cursor (0: from the beginning).
        #[arg(long, default_value_t = 0)]
        after: u64,
        #[arg(long, short)]
        follow: bool,
        /// Only this agent's events (id or name).
        #[arg(long)]
        agent: Option<String>,
    },
    /// The daemon's status.
    Status,
    /// A live view of the daemon: totals, turns/s, busiest agents, longest
    /// queues, running tasks and armed waits. Keys: q quit, s sort, tab
    /// table, up/down select, enter the selected agent's subtree, esc back.
    Top(top::TopArgs),
    /// An agent's tool catalog.
    Tools { agent: String },
    /// Load tools that drive a running daemon.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// The supervision tree, like pstree: agents, task handles, and whether
    /// each actor is alive; private agents marked.
    Tree {
        /// Only this agent's subtree (id or name).
        agent: Option<String>,
        /// Only this many levels below the roots of the walk (0: the roots
        /// alone); the whole tree when not given.
        #[arg(long)]
        depth: Option<u32>,
    },
    /// Task handles: how parents supervise their private children.
    #[command(subcommand)]
    Task(TaskCommand),
    /// Work items: what agents are trying to accomplish.
    #[command(subcommand)]
    Work(WorkCommand),
    /// Workspaces: the host directories an agent may work in.
    #[command(subcommand)]
    Workspace(WorkspaceCommand),
    /// Append the inbound events, decisions and tool calls after a cursor
    /// to events.ndjson, decisions.ndjson and actions.ndjson in DIR.
    Export(export::ExportArgs),
    /// Instances: agents composed from a role, ingress, skills and
    /// constraints, applied from a manifest.
    #[command(subcommand)]
    Instance(InstanceCommand),
    /// Tool calls waiting for an operator's approval (an instance's
    /// `require_approval`).
    Approvals {
        /// Only this agent's (id or name).
        #[arg(long)]
        agent: Option<String>,
        /// Decided ones too.
        #[arg(long)]
        all: bool,
    },
    /// Agents' durable memory: search and list an agent's notes.
    #[command(subcommand)]
    Memory(MemoryCommand),
    /// Run a call waiting for approval, once, as its agent.
    Approve { approval_id: String },
    /// Refuse a call waiting for approval; the agent reads the reason.
    Deny {
        approval_id: String,
        #[arg(long)]
        reason: String,
    },
    /// Deliver an external trigger, as a machine would.
    Trigger {
        token: String,
        payload: String,
        /// Makes retries safe: the same key is delivered once.
        #[arg(long)]
        dedupe_key: Option<String>,
    },
}

impl Command {
    /// Whether this command drives a daemon with load (the benchmarks).
    pub fn generates_load(&self) -> bool {
        matches!(self, Command::Bench(_))
    }
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Create idle agents and measure memory, creation rate and latencies.
    Idle(bench::IdleArgs),
    /// Send messages to scripted agents and measure turns per second,
    /// latency and the daemon's cost per turn.
    Turns(bench::TurnsArgs),
}

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Tasks an agent owns.
    List { agent: String },
    /// One task.
    Get { task_id: String },
    /// Its result, or its progress while it runs.
    Output {
        task_id: String,
        /// Byte offset into a command's output.
        #[arg(long, default_value_t = 0)]
        offset: u64,
        /// Keep printing a running command's output until it ends.
        #[arg(long, short)]
        follow: bool,
    },
    /// Follow-up input to the supervised child.
    Input { task_id: String, text: String },
    /// Stop it: for a child agent, the child and its whole subtree.
    Stop { task_id: String },
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Also serve gRPC on TCP at this address (requires the bearer token).
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Seconds each shutdown step may take.
    #[arg(long, default_value_t = 10)]
    pub shutdown_timeout: u64,
    /// Messages an agent may hold waiting before ingress is refused.
    #[arg(long, default_value_t = 1024)]
    pub max_queue: usize,
    /// Restarts a supervisor grants a failing child within the period
    /// before it gives up (OTP's intensity).
    #[arg(long, default_value_t = 3)]
    pub restart_max: u32,
    /// The restart period, in seconds.
    #[arg(long, default_value_t = 5)]
    pub restart_period: u64,
    /// Root partitions: supervisor actors the public agents are spread
    /// over (default: one per core; at least 1, at most 1024).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub partitions: Option<u16>,
    /// A folder of skills (one subfolder with a SKILL.md each); repeat for
    /// more. Where two hold a skill of the same name, the first wins.
    #[arg(long = "skills-dir", value_name = "DIR")]
    pub skills_dirs: Vec<PathBuf>,
    /// Bytes of output each command task keeps (oldest dropped first).
    #[arg(long, default_value_t = 1024 * 1024)]
    pub output_capacity: u64,
    /// MiB of sled's page cache (it holds hot records in memory; its real
    /// footprint is about three times this).
    #[arg(long, default_value_t = crate::store::sled_store::DEFAULT_CACHE_MIB)]
    pub store_cache_mib: u64,
    /// The brain of agents created without one.
    #[command(flatten)]
    pub default_brain: BrainArgs,
    /// Every brain's context budget in tokens (500 to 2,000,000); by
    /// default 32,000 for openai and anthropic brains and 16,000 for others.
    #[arg(long, value_parser = clap::value_parser!(u64).range(500..=2_000_000))]
    pub context_tokens: Option<u64>,
    /// Send spans (gRPC calls, turns, brain steps, tool calls) to this
    /// OpenTelemetry collector over OTLP/HTTP, e.g. http://127.0.0.1:4318
    /// (its /v1/traces is added to a URL without a path). Off by default.
    #[arg(long)]
    pub otlp_endpoint: Option<String>,
    /// Count nothing for `GET /metrics` (which then answers 404): no turn,
    /// tool-call or gRPC counters on the hot paths.
    #[arg(long)]
    pub no_metrics: bool,
    /// Retries of a model request (openai, anthropic) on network errors,
    /// 429 and 5xx.
    #[arg(long, default_value_t = 4)]
    pub model_retries: u32,
    /// The first retry's delay, in milliseconds; it doubles each time.
    #[arg(long, default_value_t = 500)]
    pub model_retry_base_ms: u64,
    /// Refuse to start unless the kernel can confine agents' programs
    /// fully (Landlock ABI 6 or later).
    #[arg(long)]
    pub require_sandbox: bool,
    /// Processes one command (or brain step) may run at once, beyond what
    /// the daemon's user runs (RLIMIT_NPROC; not applied to root).
    #[arg(long, default_value_t = TaskLimits::default().max_processes)]
    pub task_max_processes: u64,
    /// Files each process of a command may hold open (RLIMIT_NOFILE).
    #[arg(long, default_value_t = TaskLimits::default().max_open_files)]
    pub task_max_open_files: u64,
    /// Bytes a second of a command's output the daemon takes; past it the
    /// command waits on its full pipe.
    #[arg(long, default_value_t = TaskLimits::default().output_bytes_per_sec)]
    pub task_output_rate: u64,
    /// Seconds a command may run before it is killed; 0 for no bound.
    #[arg(long, default_value_t = 3600)]
    pub task_wall_time: u64,
    /// A path no agent may attach or use as a workspace, nor any path
    /// inside it or above it (repeatable; the data directory always is).
    /// Name the daemon's configuration and secrets here.
    #[arg(long = "protect", value_name = "PATH")]
    pub protected: Vec<PathBuf>,
    /// Let agents attach workspaces only beneath these directories
    /// (repeatable; none given: anywhere not protected).
    #[arg(long = "workspace-allow", value_name = "DIR")]
    pub workspace_allow: Vec<PathBuf>,
    /// Serve webhooks over HTTP at this address:
    /// `POST /ingress/<provider>/<instance>` (off unless given).
    #[arg(long, value_name = "ADDR")]
    pub http_listen: Option<SocketAddr>,
    /// The web console on the HTTP listener takes the daemon's token for
    /// reads too: without it, no one who can reach the listener (a
    /// webhook sender, say) sees even the tree's names and states.
    #[arg(long)]
    pub console_private: bool,
    /// MCP servers agents may be allowed (`agent create --mcp-server`): a
    /// JSON file with an `mcpServers` map (see docs/mcp.md). Checked at
    /// start; the servers themselves start on first use.
    #[arg(long, value_name = "FILE")]
    pub mcp_config: Option<PathBuf>,
    /// Largest webhook body, in bytes; a larger one is answered 413.
    #[arg(long, default_value_t = crate::ingress::DEFAULT_MAX_BODY)]
    pub max_webhook_bytes: usize,
    /// Caps and timeouts on connections.
    #[command(flatten)]
    pub connections: ConnectionArgs,
    /// Bounds on what agents can make the daemon do.
    #[command(flatten)]
    pub limits: limit_args::LimitArgs,
}
#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Create a public named agent.
    Create {
        name: String,
        /// A first message for it.
        #[arg(long, short)]
        message: Option<String>,
        /// Its brain's context budget in tokens (500 to 2,000,000); its
        /// children inherit it. Default: the daemon's or the brain's.
        #[arg(long)]
        context_tokens: Option<u32>,
        /// An MCP server (named in the daemon's `--mcp-config`) whose tools
        /// it may call, as `mcp__<server>__<tool>`; repeatable. Its
        /// children inherit the list.
        #[arg(long = "mcp-server", value_name = "NAME")]
        mcp_servers: Vec<String>,
        #[command(flatten)]
        brain: BrainArgs,
    },
    /// Change what decides an agent's turns (from its next turn).
    Brain {
        agent: String,
        #[command(flatten)]
        brain: BrainArgs,
    },
    /// List agents in creation order.
    List {
        #[arg(long)]
        include_private: bool,
        #[arg(long, default_value_t = 100)]
        page_size: u32,
        /// Follow page tokens to the end.
        #[arg(long)]
        all: bool,
    },
    /// Show one agent (id or name).
    Get {
        agent: String,
    },
    /// Send an operator message (public agents only).
    Send {
        agent: String,
        text: String,
        /// Makes retries safe: the same key sends the message once.
        #[arg(long)]
        dedupe_key: Option<String>,
        /// Print the reply as the model writes it, until the turn ends.
        #[arg(long)]
        follow: bool,
    },
    /// An agent's messages and replies, oldest first.
    Messages {
        agent: String,
    },
    /// What the agent's brain would see now beside the next message: its
    /// context within its budget, and the running summary.
    Context {
        agent: String,
    },
    /// Archive a public agent and clean up its whole private subtree.
    Archive {
        agent: String,
    },
    /// Cancel the agent's current turn and pause it.
    Abort {
        agent: String,
        /// Only if this is still the current run.
        #[arg(long)]
        run: Option<String>,
    },
    /// Stop starting turns (messages still queue), across restarts.
    Pause {
        agent: String,
    },
    Resume {
        agent: String,
    },
}

impl Cli {
    /// Parses the process's arguments as `Cli::parse` does, and notes
    /// whether the token was typed on the command line (where other
    /// processes can read it) or came from the environment.
    pub fn parse_args() -> Self {
        let matches = Self::command().get_matches();
        let mut cli = Self::from_arg_matches(&matches).unwrap_or_else(|err| err.exit());
        cli.token_on_command_line = matches.value_source("token") == Some(ValueSource::CommandLine);
        cli
    }

    /// The token as given, by where it came from.
    fn given_token(&self) -> GivenToken {
        match (&self.token, self.token_on_command_line) {
            (Some(token), true) => GivenToken {
                command_line: Some(token.clone()),
                environment: None,
            },
            (token, _) => GivenToken {
                command_line: None,
                environment: token.clone(),
            },
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.data_dir
            .clone()
            .unwrap_or_else(daemon::default_data_dir)
    }

    fn target(&self) -> Target {
        if let Some(url) = &self.addr {
            return Target::Tcp {
                url: url.clone(),
                token: self.token.clone(),
            };
        }
        Target::Unix(
            self.socket
                .clone()
                .unwrap_or_else(|| self.data_dir().join(SOCKET_FILE)),
        )
    }
}

/// Runs the parsed command line.
pub async fn run(cli: Cli, secrets: Arc<Secrets>) -> anyhow::Result<()> {
    let out = Output { json: cli.json };
    match &cli.command {
        Command::Serve(args) => {
            let mut config = ServeConfig::new(cli.data_dir());
            config.listen = args.listen;
            config.token = cli.given_token();
            config.connections = args.connections.limits()?;
            config.shutdown_timeout = Duration::from_secs(args.shutdown_timeout);
            config.runtime.max_queue_len = args.max_queue;
            config.runtime.output_capacity = args.output_capacity;
            config.runtime.limits = args.limits.limits();
            config.store.cache_capacity = args.store_cache_mib.saturating_mul(1024 * 1024);
            config.runtime.context_tokens =
                args.context_tokens.and_then(|n| usize::try_from(n).ok());
            config.runtime.trace_causes = args.otlp_endpoint.is_some();
            config.runtime.metrics = !args.no_metrics;
            config.runtime.model_retry.max_retries = args.model_retries;
            config.runtime.model_retry.base = Duration::from_millis(args.model_retry_base_ms);
            config.runtime.secrets = secrets;
            config.require_sandbox = args.require_sandbox;
            config
                .runtime
                .sandbox
                .protected
                .extend(args.protected.iter().cloned());
            config.runtime.sandbox.allowed_roots = args.workspace_allow.clone();
            config.runtime.sandbox.limits = TaskLimits {
                max_processes: args.task_max_processes,
                max_open_files: args.task_max_open_files,
                output_bytes_per_sec: args.task_output_rate,
                wall_time: (args.task_wall_time > 0)
                    .then(|| Duration::from_secs(args.task_wall_time)),
            };
            if let Some(brain) = args.default_brain.config() {
                brain.validate()?;
                config.runtime.default_brain = brain;
            }
            if let Some(partitions) = args.partitions {
                config.runtime.partitions = usize::from(partitions);
            }
            config.runtime.skill_roots = args.skills_dirs.clone();
            if let Some(path) = &args.mcp_config {
                let mcp = holarchy_actors::mcp::McpConfig::load(path)?;
                config.runtime.mcp = Arc::new(mcp);
            }
            config.http = args.http_listen.map(|addr| crate::ingress::HttpConfig {
                console_private: args.console_private,
                ..crate::ingress::HttpConfig::new(addr, args.max_webhook_bytes)
            });
            config.runtime.restart_policy = RestartPolicy {
                max_restarts: args.restart_max,
                period_ms: args.restart_period.saturating_mul(1000),
            };
            daemon::run(config, shutdown_signal()).await
        }
        Command::Agent(command) => {
            let clients = client::connect(&cli.target()).await?;
            agent_command(clients, command, &out).await
        }
        Command::Events {
            after,
            follow,
            agent,
        } => {
            let mut clients = client::connect(&cli.target()).await?;
            let agent_id = match agent {
                Some(agent) => resolve(&mut clients, agent).await?,
                None => String::new(),
            };
            let mut stream = clients
                .agents
                .watch_events(pb::WatchEventsRequest {
                    after_cursor: *after,
                    follow: *follow,
                    agent_id,
                })
                .await?
                .into_inner();
            while let Some(event) = stream.next().await {
                out.event(&event?);
            }
            Ok(())
        }
        Command::Tree { agent, depth } => {
            let mut clients = client::connect(&cli.target()).await?;
            let agent_id = match agent {
                Some(agent) => resolve(&mut clients, agent).await?,
                None => String::new(),
            };
            // Pages are joined into one tree; the counts of the last page
            // are the whole tree's.
            let mut tree = pb::GetTreeResponse::default();
            loop {
                let page = clients
                    .supervision
                    .get_tree(pb::GetTreeRequest {
                        agent_id: agent_id.clone(),
                        page_token: std::mem::take(&mut tree.next_page_token),
                        max_nodes: 0,
                        max_depth: *depth,
                    })
                    .await?
                    .into_inner();
                tree.nodes.extend(page.nodes);
                tree.mismatches.extend(page.mismatches);
                (tree.agents, tree.tasks, tree.waits) = (page.agents, page.tasks, page.waits);
                tree.partitions = page.partitions;
                tree.next_page_token = page.next_page_token;
                if tree.next_page_token.is_empty() {
                    break;
                }
            }
            out.tree(&tree);
            Ok(())
        }
        Command::Work(command) => {
            let clients = client::connect(&cli.target()).await?;
            work::work_command(clients, command, &out).await
        }
        Command::Trigger {
            token,
            payload,
            dedupe_key,
        } => {
            let mut clients = client::connect(&cli.target()).await?;
            let request = pb::DeliverTriggerRequest {
                token: token.clone(),
                payload: payload.clone(),
                dedupe_key: dedupe_key.clone().unwrap_or_default(),
            };
            let done = clients
                .triggers
                .deliver_trigger(request)
                .await?
                .into_inner();
            out.sent(&pb::SendMessageResponse {
                message_id: done.message_id,
                duplicate: done.duplicate,
            });
            Ok(())
        }
        Command::Task(command) => {
            let clients = client::connect(&cli.target()).await?;
            task_command(clients, command, &out).await
        }
        Command::Workspace(command) => {
            let clients = client::connect(&cli.target()).await?;
            workspaces::workspace_command(clients, command, &out).await
        }
        Command::Export(args) => {
            let clients = client::connect(&cli.target()).await?;
            export::export(clients, args, &out).await
        }
        Command::Instance(command) => {
            let clients = client::connect(&cli.target()).await?;
            instances::instance_command(clients, command, &out).await
        }
        Command::Approvals { agent, all } => {
            let clients = client::connect(&cli.target()).await?;
            approvals::list(clients, agent.as_deref(), *all, &out).await
        }
        Command::Memory(command) => {
            let clients = client::connect(&cli.target()).await?;
            memory::memory_command(clients, command, &out).await
        }
        Command::Approve { approval_id } => {
            let clients = client::connect(&cli.target()).await?;
            approvals::approve(clients, approval_id, &out).await
        }
        Command::Deny {
            approval_id,
            reason,
        } => {
            let clients = client::connect(&cli.target()).await?;
            approvals::deny(clients, approval_id, reason, &out).await
        }
        Command::Bench(BenchCommand::Idle(args)) => bench::idle(&cli, args).await,
        Command::Bench(BenchCommand::Turns(args)) => bench::turns(&cli, args).await,
        Command::Tools { agent } => {
            let mut clients = client::connect(&cli.target()).await?;
            let agent_id = resolve(&mut clients, agent).await?;
            let tools = clients
                .agents
                .list_tools(pb::ListToolsRequest { agent_id })
                .await?
                .into_inner();
            for tool in &tools.tools {
                out.tool(tool);
            }
            for note in &tools.unavailable {
                out.tools_unavailable(note);
            }
            Ok(())
        }
        Command::Top(args) => {
            let clients = client::connect(&cli.target()).await?;
            top::run(clients, args, cli.json).await
        }
        Command::Status => {
            let mut clients = client::connect(&cli.target()).await?;
            let status = clients
                .runtime
                .get_status(pb::GetStatusRequest {})
                .await?
                .into_inner();
            out.status(&status);
            Ok(())
        }
    }
}

/// Turns a name or id into an id (ids pass through unchecked; the daemon
/// validates them).
async fn resolve(clients: &mut Clients, agent: &str) -> anyhow::Result<String> {
    if agent.starts_with("agt_") {
        return Ok(agent.to_owned());
    }
    let found = clients
        .agents
        .get_agent(pb::GetAgentRequest {
            agent: Some(pb::get_agent_request::Agent::Name(agent.to_owned())),
        })
        .await
        .with_context(|| format!("cannot find agent `{agent}`"))?
        .into_inner();
    Ok(found.agent.map(|a| a.agent_id).unwrap_or_default())
}

async fn agent_command(
    mut clients: Clients,
    command: &AgentCommand,
    out: &Output,
) -> anyhow::Result<()> {
    match command {
        AgentCommand::Brain { agent, brain } => {
            let agent_id = resolve(&mut clients, agent).await?;
            let config = brain.config().context(
                "say which brain: --brain-command PROGRAM, --brain-scripted, \
                     --brain-openai-url URL --brain-model MODEL, or --anthropic-model MODEL",
            )?;
            let request = pb::UpdateAgentBrainRequest {
                agent_id,
                brain: Some(crate::api::convert::brain(&config)),
            };
            let updated = clients
                .agents
                .update_agent_brain(request)
                .await?
                .into_inner();
            if let Some(summary) = updated.agent {
                out.agent_detail(&summary, None);
            }
        }
        AgentCommand::Create {
            name,
            message,
            context_tokens,
            mcp_servers,
            brain,
        } => {
            let created = clients
                .agents
                .create_agent(pb::CreateAgentRequest {
                    brain: brain.config().map(|c| crate::api::convert::brain(&c)),
                    name: name.clone(),
                    initial_message: message.clone(),
                    context_tokens: *context_tokens,
                    mcp_servers: mcp_servers.clone(),
                })
                .await?
                .into_inner();
            out.created(name, &created.agent_id);
        }
        AgentCommand::List {
            include_private,
            page_size,
            all,
        } => {
            let mut page_token = String::new();
            out.agent_table_header();
            loop {
                let page = clients
                    .agents
                    .list_agents(pb::ListAgentsRequest {
                        page_size: *page_size,
                        page_token: page_token.clone(),
                        include_private: *include_private,
                    })
                    .await?
                    .into_inner();
                for agent in &page.agents {
                    out.agent_row(agent);
                }
                if !*all || page.next_page_token.is_empty() {
                    if !page.next_page_token.is_empty() {
                        eprintln!(
                            "more agents: use --all, or page token {}",
                            page.next_page_token
                        );
                    }
                    break;
                }
                page_token = page.next_page_token;
            }
        }
        AgentCommand::Get { agent } => {
            let request = if agent.starts_with("agt_") {
                pb::get_agent_request::Agent::AgentId(agent.clone())
            } else {
                pb::get_agent_request::Agent::Name(agent.clone())
            };
            let found = clients
                .agents
                .get_agent(pb::GetAgentRequest {
                    agent: Some(request),
                })
                .await?
                .into_inner();
            if let Some(summary) = found.agent {
                out.agent_detail(&summary, found.usage.as_ref());
            }
        }
        AgentCommand::Send {
            agent,
            text,
            dedupe_key,
            follow,
        } => {
            let agent_id = resolve(&mut clients, agent).await?;
            let request = pb::SendMessageRequest {
                agent_id: agent_id.clone(),
                text: text.clone(),
                dedupe_key: dedupe_key.clone().unwrap_or_default(),
            };
            if *follow {
                return follow::send(clients, agent_id, request, out).await;
            }
            let sent = clients.agents.send_message(request).await?.into_inner();
            out.sent(&sent);
        }
        AgentCommand::Archive { agent } => {
            let agent_id = resolve(&mut clients, agent).await?;
            let done = clients
                .agents
                .archive_agent(pb::ArchiveAgentRequest {
                    agent_id: agent_id.clone(),
                })
                .await?
                .into_inner();
            out.archived(&agent_id, &done);
        }
        AgentCommand::Abort { agent, run } => {
            let agent_id = resolve(&mut clients, agent).await?;
            let request = pb::AbortRunRequest {
                agent_id,
                run_id: run.clone().unwrap_or_default(),
            };
            let done = clients.agents.abort_run(request).await?.into_inner();
            out.control("aborted", &done);
        }
        AgentCommand::Pause { agent } => {
            let agent_id = resolve(&mut clients, agent).await?;
            let done = clients
                .agents
                .pause_agent(pb::PauseAgentRequest { agent_id })
                .await?
                .into_inner();
            out.control("paused", &done);
        }
        AgentCommand::Resume { agent } => {
            let agent_id = resolve(&mut clients, agent).await?;
            let done = clients
                .agents
                .resume_agent(pb::ResumeAgentRequest { agent_id })
                .await?
                .into_inner();
            out.control("resumed", &done);
        }
        AgentCommand::Context { agent } => {
            let agent_id = resolve(&mut clients, agent).await?;
            return context::print(clients, agent_id, out).await;
        }
        AgentCommand::Messages { agent } => {
            let agent_id = resolve(&mut clients, agent).await?;
            let mut page_token = String::new();
            loop {
                let page = clients
                    .agents
                    .list_messages(pb::ListMessagesRequest {
                        agent_id: agent_id.clone(),
                        page_size: 1000,
                        page_token,
                    })
                    .await?
                    .into_inner();
                for message in &page.messages {
                    out.message(message);
                }
                if page.next_page_token.is_empty() {
                    break;
                }
                page_token = page.next_page_token;
            }
        }
    }
    Ok(())
}

/// Resolves on the first Ctrl-C or SIGTERM; a second Ctrl-C exits at once.
/// One SIGINT listener serves both, so a second Ctrl-C that comes before
/// the exit watch is first polled is kept, not lost.
///
/// The listeners are installed when this is called, not when the future is
/// first polled: the daemon polls it only once it serves, and a SIGTERM
/// sent as soon as it answered would otherwise find the default action and
/// kill it without a shutdown.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let listen = |kind: SignalKind, name: &str| match signal(kind) {
        Ok(stream) => Some(stream),
        Err(err) => {
            tracing::warn!(error = %err, "cannot listen for {name}");
            None
        }
    };
    let mut interrupt = listen(SignalKind::interrupt(), "SIGINT");
    let mut term = listen(SignalKind::terminate(), "SIGTERM");
    async move {
        tokio::select! {
            () = received(interrupt.as_mut()) => {}
            () = received(term.as_mut()) => {}
        }
        tokio::spawn(async move {
            received(interrupt.as_mut()).await;
            eprintln!("second interrupt: exiting now");
            std::process::exit(130);
        });
    }
}

/// The next signal on `stream`; never, without one.
async fn received(stream: Option<&mut tokio::signal::unix::Signal>) {
    match stream {
        Some(stream) => {
            stream.recv().await;
        }
        None => std::future::pending().await,
    }
}
