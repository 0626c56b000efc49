//! The `holarchy` command line: `serve` runs the daemon; every other
//! command is a gRPC client of it. Data goes to stdout (human-readable, or
//! JSON with `--json`); diagnostics go to stderr.

mod access;
mod agents;
mod approvals;
mod bench;
mod brain_args;
mod connect;
mod connection_args;
mod context;
mod events;
mod examples;
mod export;
pub mod failure;
mod follow;
mod instances;
mod limit_args;
mod man;
mod memory;
mod message_text;
mod namespaces;
mod output;
mod progress;
mod replay;
mod resolve;
mod run_errors;
mod serve;
mod store;
mod tasks;
mod top;
mod tree;
mod tree_view;
mod work;
mod workspaces;

use agents::agent_command;
pub use agents::AgentCommand;
pub use brain_args::BrainArgs;
pub use connection_args::ConnectionArgs;
pub use instances::InstanceCommand;
pub use memory::MemoryCommand;
pub use output::escape;
pub use serve::{LogFormat, ServeArgs};
use tasks::task_command;
pub use work::WorkCommand;
pub use workspaces::WorkspaceCommand;

use std::path::PathBuf;
use std::sync::Arc;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use holarchy_actors::secrets::Secrets;

use crate::api::pb;
use crate::daemon::{self, GivenToken};
use examples::{
    AGENT_EXAMPLES, AUDIT_EXAMPLES, BENCH_EXAMPLES, EVENTS_EXAMPLES, INSTANCE_EXAMPLES,
    MEMORY_EXAMPLES, NAMESPACE_EXAMPLES, REPLAY_EXAMPLES, SERVE_EXAMPLES, STATUS_EXAMPLES,
    TASK_EXAMPLES, TOKEN_EXAMPLES, TOP_EXAMPLES, TREE_EXAMPLES, WORKSPACE_EXAMPLES,
};
use output::Output;
use resolve::resolve;

/// The heading of the flags every command takes, so each subcommand's
/// own flags are not lost among them.
const GLOBAL: &str = "Global options";

/// The global flags only clients read. `serve` accepts them, as every
/// command does, but they say nothing to the daemon, so its help leaves
/// them out. `--data-dir` and `--token` stay: the daemon reads both.
const CLIENT_ONLY: &[&str] = &["namespace", "socket", "addr", "ca", "client_cert", "json"];

#[derive(Debug, Parser)]
#[command(
    name = "holarchy",
    version,
    about = "A durable runtime for long-lived agents"
)]
pub struct Cli {
    /// Data directory of the daemon (the socket lives there too).
    #[arg(long, global = true, env = "HOLARCHY_DATA_DIR", help_heading = GLOBAL)]
    pub data_dir: Option<PathBuf>,
    /// Talk to the daemon at this Unix socket instead of <data-dir>/holarchy.sock.
    #[arg(long, global = true, env = "HOLARCHY_SOCKET", help_heading = GLOBAL)]
    pub socket: Option<PathBuf>,
    /// Talk to the daemon over TCP at HOST:PORT (or http://HOST:PORT), as
    /// its `serve --listen` gives it; https://HOST:PORT when the daemon
    /// serves TLS (`serve --tls-cert`).
    #[arg(long, global = true, env = "HOLARCHY_ADDR", help_heading = GLOBAL)]
    pub addr: Option<String>,
    /// Trust only this CA (PEM) for an https:// --addr, instead of the
    /// system's roots: for a daemon whose certificate your own CA issued.
    #[arg(long, global = true, env = "HOLARCHY_CA", value_name = "FILE", help_heading = GLOBAL)]
    pub ca: Option<PathBuf>,
    /// A client certificate and key (one PEM file holding both) for a
    /// daemon that requires one (`serve --tls-client-ca`).
    #[arg(long, global = true, env = "HOLARCHY_CLIENT_CERT", value_name = "FILE", help_heading = GLOBAL)]
    pub client_cert: Option<PathBuf>,
    /// Bearer token for TCP. Without it, a client given --data-dir reads
    /// <data-dir>/token (the daemon writes it there). `serve` refuses one
    /// shorter than 16 bytes, and warns when it is given here: other
    /// processes can read the command line, so prefer HOLARCHY_TOKEN or the
    /// token file.
    #[arg(
        long,
        global = true,
        env = "HOLARCHY_TOKEN",
        hide_env_values = true,
        help_heading = GLOBAL
    )]
    pub token: Option<String>,
    /// Whether `token` came from `--token` rather than the environment.
    #[arg(skip)]
    pub token_on_command_line: bool,
    /// Act in this namespace: the daemon's own operators (its socket, its
    /// bootstrap token) may name any; a scoped token acts in its own.
    #[arg(long, global = true, env = "HOLARCHY_NAMESPACE", help_heading = GLOBAL)]
    pub namespace: Option<String>,
    /// Print JSON, one object per line, for scripts (errors too, on
    /// stderr).
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon in the foreground.
    #[command(after_help = SERVE_EXAMPLES)]
    Serve(Box<ServeArgs>),
    /// Create, list, inspect and message agents.
    #[command(subcommand, after_help = AGENT_EXAMPLES)]
    Agent(Box<AgentCommand>),
    /// Print the event log (cursor, time in UTC, agent's name and id's
    /// tail, kind, what); with
    /// --follow, keep printing new events. A failure is marked `!` with
    /// its reason.
    #[command(after_help = EVENTS_EXAMPLES)]
    Events {
        /// Start after this cursor (0: from the beginning).
        #[arg(long, default_value_t = 0)]
        after: u64,
        /// Keep printing new events as they come.
        #[arg(long, short)]
        follow: bool,
        /// Only this agent's events (id or name).
        #[arg(long)]
        agent: Option<String>,
    },
    /// The daemon's status.
    #[command(after_help = STATUS_EXAMPLES)]
    Status,
    /// A live view of the daemon: totals, turns/s, busiest agents, longest
    /// queues, running tasks and armed waits. Keys: q quit, s sort, tab
    /// table, / filter, up/down select, enter the selected agent's messages
    /// and events, t its subtree, p pause, r resume, a abort, esc back.
    #[command(after_help = TOP_EXAMPLES)]
    Top(top::TopArgs),
    /// An agent's tool catalog.
    Tools {
        /// The agent: its name or id.
        agent: String,
    },
    /// Load tools that drive a running daemon.
    #[command(subcommand, after_help = BENCH_EXAMPLES)]
    Bench(BenchCommand),
    /// The supervision tree, like pstree: agents, task handles (each
    /// private child drawn under the handle that holds it), and whether
    /// each actor is alive; private agents marked.
    #[command(after_help = TREE_EXAMPLES)]
    Tree(tree::TreeArgs),
    /// Task handles: how parents supervise their private children.
    #[command(subcommand, after_help = TASK_EXAMPLES)]
    Task(TaskCommand),
    /// Work items: what agents are trying to accomplish.
    #[command(subcommand)]
    Work(WorkCommand),
    /// Workspaces: the host directories an agent may work in.
    #[command(subcommand, after_help = WORKSPACE_EXAMPLES)]
    Workspace(WorkspaceCommand),
    /// Append the inbound events, decisions and tool calls after a cursor
    /// to events.ndjson, decisions.ndjson and actions.ndjson in DIR.
    Export(export::ExportArgs),
    /// Instances: agents composed from a role, ingress, skills and
    /// constraints, applied from a manifest.
    #[command(subcommand, after_help = INSTANCE_EXAMPLES)]
    Instance(InstanceCommand),
    /// Tool calls waiting for an operator's approval (an instance's
    /// `require_approval`).
    #[command(args_conflicts_with_subcommands = true)]
    Approvals {
        #[command(subcommand)]
        command: Option<ApprovalsCommand>,
        /// Only this agent's (id or name).
        #[arg(long)]
        agent: Option<String>,
        /// Decided ones too.
        #[arg(long)]
        all: bool,
    },
    /// Agents' durable memory: search and list an agent's notes.
    #[command(subcommand, after_help = MEMORY_EXAMPLES)]
    Memory(MemoryCommand),
    /// Replays: run an agent's recorded turns through a candidate brain,
    /// role prompt, skills folder or constraints, without side effects, and
    /// see where its decisions differ (docs/replay.md).
    #[command(subcommand, after_help = REPLAY_EXAMPLES)]
    Replay(Box<replay::ReplayCommand>),
    /// Run a call waiting for approval, once, as its agent.
    Approve {
        /// The approval's id (`approvals` lists them).
        approval_id: String,
    },
    /// Refuse a call waiting for approval; the agent reads the reason.
    Deny {
        /// The approval's id (`approvals` lists them).
        approval_id: String,
        /// Why: the agent reads it.
        #[arg(long)]
        reason: String,
    },
    /// Print a shell completion script (bash, zsh or fish).
    ///
    /// Install it where the shell looks: `holarchy completions bash >
    /// ~/.local/share/bash-completion/completions/holarchy`, `holarchy
    /// completions zsh > "${fpath[1]}/_holarchy"`, or `holarchy
    /// completions fish > ~/.config/fish/completions/holarchy.fish`.
    Completions {
        /// The shell that reads the script.
        shell: clap_complete::Shell,
    },
    /// Write the manual pages: holarchy(1) and one page per subcommand
    /// (holarchy-serve(1), holarchy-agent-create(1), ...).
    ///
    /// Install them where `man` looks: `holarchy man --out
    /// /usr/local/share/man/man1`.
    Man {
        /// The folder to write the pages to (made if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
    /// Work on a store itself, with its daemon stopped: copy the embedded
    /// store into PostgreSQL.
    #[command(subcommand)]
    Store(store::StoreCommand),
    /// Scoped tokens: make one with a role (viewer, operator, admin),
    /// list them, revoke one; and who this client is.
    #[command(subcommand, after_help = TOKEN_EXAMPLES)]
    Token(access::TokenCommand),
    /// The audit trail: who created, sent, paused, archived, approved,
    /// applied or deleted what, from where, and the outcome; newest last.
    #[command(after_help = AUDIT_EXAMPLES)]
    Audit(access::AuditArgs),
    /// Namespaces: what each holds (agents, commands running, turns held
    /// back) against its quota, and setting one.
    #[command(subcommand, after_help = NAMESPACE_EXAMPLES)]
    Namespace(namespaces::NamespaceCommand),
    /// Deliver an external trigger, as a machine would.
    Trigger {
        /// The trigger's token, as `CreateExternalTrigger` gave it to the
        /// agent.
        token: String,
        /// What to deliver: the agent gets it as a message.
        payload: String,
        /// Makes retries safe: the same key is delivered once.
        #[arg(long)]
        dedupe_key: Option<String>,
    },
}

impl Command {
    /// Whether this command is the daemon; every other one is a client.
    pub fn is_daemon(&self) -> bool {
        matches!(self, Command::Serve(_))
    }
}

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// One approval, whole: where its call runs and its entire input,
    /// escaped (the listing shows only the input's start).
    Show {
        /// The approval's id (`approvals` lists them).
        approval_id: String,
    },
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
    List {
        /// The agent: its name or id.
        agent: String,
    },
    /// One task.
    Get {
        /// The task: its id, or any part of it only one task's has (the
        /// tail `task list AGENT` shows).
        task_id: String,
    },
    /// Its result, or its progress while it runs.
    Output {
        /// The task: its id, or any part of it only one task's has (the
        /// tail `task list AGENT` shows).
        task_id: String,
        /// Byte offset into a command's output.
        #[arg(long, default_value_t = 0)]
        offset: u64,
        /// Keep printing a running command's output until it ends.
        #[arg(long, short)]
        follow: bool,
        /// Print the output's bytes as the command wrote them, terminal
        /// control sequences included (colours, but also whatever a
        /// hostile program writes): only for output you trust. By default
        /// control characters are shown escaped (`\u001b`).
        #[arg(long)]
        raw: bool,
    },
    /// Follow-up input to the supervised child.
    Input {
        /// The task: its id, or any part of it only one task's has (the
        /// tail `task list AGENT` shows).
        task_id: String,
        /// The input; `-` reads it from standard input, `@FILE` from a
        /// file (`@@...` sends a leading `@`).
        text: String,
    },
    /// Stop it: for a child agent, the child and its whole subtree.
    Stop {
        /// The task: its id, or any part of it only one task's has (the
        /// tail `task list AGENT` shows).
        task_id: String,
    },
}

impl Cli {
    /// Parses the process's arguments as `Cli::parse` does, and notes
    /// whether the token was typed on the command line (where other
    /// processes can read it) or came from the environment.
    ///
    /// `serve --config FILE` adds the file's values for what the command
    /// line and the environment leave unset; a file that is refused ends
    /// the process with exit code 2, as a bad flag does.
    pub fn parse_args() -> Self {
        let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
        let command = Self::command();
        let parser = Self::shown_command();
        let mut matches = parser.clone().get_matches_from(&argv);
        let layered = match serve::config_file::layer(&command, &matches, &argv) {
            Ok(layered) => layered,
            Err(err) => {
                eprintln!("holarchy: {err}");
                std::process::exit(2);
            }
        };
        if let Some(layered) = &layered {
            matches = parser
                .clone()
                .try_get_matches_from(&layered.argv)
                .unwrap_or_else(|err| {
                    eprintln!(
                        "holarchy: a value in the config file {} is refused:",
                        layered.path.display()
                    );
                    err.exit()
                });
        }
        let mut cli = Self::from_arg_matches(&matches).unwrap_or_else(|err| err.exit());
        cli.token_on_command_line = matches.value_source("token") == Some(ValueSource::CommandLine);
        let data_dir = cli.data_dir();
        if let Command::Serve(args) = &mut cli.command {
            if args.print_config {
                args.effective_config = Some(serve::config_file::render(
                    &command,
                    &matches,
                    layered.as_ref(),
                    &data_dir,
                ));
            }
        }
        cli
    }

    /// The command line as parsed and as its help shows it: `serve`'s help
    /// without the client-only global flags ([`CLIENT_ONLY`]), which it
    /// still accepts.
    pub fn shown_command() -> clap::Command {
        let mut command = Self::command();
        // Global flags reach the subcommands when the command is built;
        // only then can `serve`'s copies be hidden.
        command.build();
        command.mut_subcommands(|sub| {
            if sub.get_name() != "serve" {
                return sub;
            }
            // `mut_args` keeps each argument in its place: the built
            // command finds them by position.
            sub.mut_args(|arg| {
                if CLIENT_ONLY.contains(&arg.get_id().as_str()) {
                    arg.hide(true)
                } else {
                    arg
                }
            })
        })
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
}

/// Runs the parsed command line.
pub async fn run(cli: Cli, secrets: Arc<Secrets>) -> anyhow::Result<()> {
    let out = Output { json: cli.json };
    match &cli.command {
        Command::Serve(args) => {
            serve::serve(args, cli.data_dir(), cli.given_token(), secrets).await
        }
        Command::Store(command) => store::store_command(command, secrets, &out).await,
        Command::Agent(command) => {
            let clients = cli.connect().await?;
            agent_command(clients, command, &out).await
        }
        Command::Events {
            after,
            follow,
            agent,
        } => {
            let clients = cli.connect().await?;
            events::events(clients, *after, *follow, agent.as_deref(), &out).await
        }
        Command::Tree(args) => {
            let clients = cli.connect().await?;
            tree::tree(clients, args, &out).await
        }
        Command::Work(command) => {
            let clients = cli.connect().await?;
            work::work_command(clients, command, &out).await
        }
        Command::Trigger {
            token,
            payload,
            dedupe_key,
        } => {
            let mut clients = cli.connect().await?;
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
            let clients = cli.connect().await?;
            task_command(clients, command, &out).await
        }
        Command::Workspace(command) => {
            let clients = cli.connect().await?;
            workspaces::workspace_command(clients, command, &out).await
        }
        Command::Export(args) => {
            let clients = cli.connect().await?;
            export::export(clients, args, &out).await
        }
        Command::Instance(command) => {
            let clients = cli.connect().await?;
            instances::instance_command(clients, command, &out).await
        }
        Command::Approvals {
            command: Some(ApprovalsCommand::Show { approval_id }),
            ..
        } => {
            let clients = cli.connect().await?;
            approvals::show(clients, approval_id, &out).await
        }
        Command::Approvals {
            command: None,
            agent,
            all,
        } => {
            let clients = cli.connect().await?;
            approvals::list(clients, agent.as_deref(), *all, &out).await
        }
        Command::Replay(command) => {
            let clients = cli.connect().await?;
            replay::replay_command(clients, command, &out).await
        }
        Command::Memory(command) => {
            let clients = cli.connect().await?;
            memory::memory_command(clients, command, &out).await
        }
        Command::Token(command) => {
            let clients = cli.connect().await?;
            access::token_command(clients, command, &out).await
        }
        Command::Audit(args) => {
            let clients = cli.connect().await?;
            access::audit(clients, args, &out).await
        }
        Command::Namespace(command) => {
            let clients = cli.connect().await?;
            namespaces::namespace_command(clients, command, &out).await
        }
        Command::Approve { approval_id } => {
            let clients = cli.connect().await?;
            approvals::approve(clients, approval_id, &out).await
        }
        Command::Deny {
            approval_id,
            reason,
        } => {
            let clients = cli.connect().await?;
            approvals::deny(clients, approval_id, reason, &out).await
        }
        Command::Bench(BenchCommand::Idle(args)) => bench::idle(&cli, args).await,
        Command::Bench(BenchCommand::Turns(args)) => bench::turns(&cli, args).await,
        Command::Tools { agent } => {
            let mut clients = cli.connect().await?;
            let agent_id = resolve(&mut clients, agent).await?;
            let tools = clients
                .agents
                .list_tools(pb::ListToolsRequest { agent_id })
                .await?
                .into_inner();
            out.tools(&tools.tools);
            for note in &tools.unavailable {
                out.tools_unavailable(note);
            }
            Ok(())
        }
        Command::Top(args) => {
            let clients = cli.connect().await?;
            top::run(clients, cli.target()?, args, cli.json).await
        }
        Command::Completions { shell } => {
            clap_complete::generate(
                *shell,
                &mut Cli::command(),
                "holarchy",
                &mut std::io::stdout(),
            );
            Ok(())
        }
        Command::Man { out } => man::write_pages(out),
        Command::Status => {
            let mut clients = cli.connect().await?;
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
