//! `holarchy agent ...`: the agent subcommands and what each asks the
//! daemon.

use anyhow::Context as _;
use clap::Subcommand;

mod archive;
mod list;

use super::output::{Kin, Output};
use super::run_errors::RunErrors;
use super::{context, follow, message_text, resolve, BrainArgs};
use crate::api::pb;
use crate::client::Clients;

/// `key=value`, checked as the daemon checks a label.
pub(crate) fn label(text: &str) -> Result<(String, String), String> {
    holarchy_supervision::labels::parse(text).map_err(|err| err.to_string())
}

#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Create a public named agent.
    Create {
        /// Its name: unique among all agents, archived ones too.
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
        /// What network its commands may reach: `full` (the default),
        /// `none` (only their own loopback), or TCP ports such as
        /// `443,8080`. Its children inherit it.
        #[arg(long, value_name = "POLICY")]
        network: Option<String>,
        /// A label, `key=value` (`team=infra`); repeatable, at most 16.
        /// `agent list --label` and `agent archive --label` pick by them.
        #[arg(long = "label", value_name = "KEY=VALUE", value_parser = label)]
        labels: Vec<(String, String)>,
        #[command(flatten)]
        brain: BrainArgs,
    },
    /// Change what decides an agent's turns (from its next turn).
    Brain {
        /// The agent: its name or id.
        agent: String,
        #[command(flatten)]
        brain: BrainArgs,
    },
    /// List agents in creation order: live ones, or with --all archived
    /// ones too.
    List(list::ListArgs),
    /// Show one agent (id or name).
    Get {
        /// The agent: its name or id.
        agent: String,
    },
    /// Send an operator message (public agents only).
    Send {
        /// The agent: its name or id.
        agent: String,
        /// The message; `-` reads it from standard input, `@FILE` from a
        /// file (`@@...` sends a leading `@`). A message that starts like
        /// JSON but does not parse is sent with a warning.
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
        /// The agent: its name or id.
        agent: String,
    },
    /// What the agent's brain would see now beside the next message: its
    /// context within its budget, and the running summary.
    Context {
        /// The agent: its name or id.
        agent: String,
    },
    /// Archive public agents and clean up each one's whole private
    /// subtree: the ones named, or every live one --name or --instance
    /// picks.
    Archive(archive::ArchiveArgs),
    /// Purge an archived agent and its private descendants, as `docker
    /// rm` removes a stopped container: their records go and the name is
    /// free again; their history stays in the event log.
    Delete {
        /// The agent: its name or id.
        agent: String,
    },
    /// Cancel the agent's current turn and pause it.
    Abort {
        /// The agent: its name or id.
        agent: String,
        /// Only if this is still the current run.
        #[arg(long)]
        run: Option<String>,
    },
    /// Stop starting turns (messages still queue), across restarts.
    Pause {
        /// The agent: its name or id.
        agent: String,
    },
    /// Start turns again after `pause`.
    Resume {
        /// The agent: its name or id.
        agent: String,
    },
}

pub(super) async fn agent_command(
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
                let kin = kin(&mut clients, &summary, out).await;
                out.agent_detail(&summary, None, None, &kin);
            }
        }
        AgentCommand::Create {
            name,
            message,
            context_tokens,
            mcp_servers,
            network,
            labels,
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
                    network: network.clone().unwrap_or_default(),
                    labels: labels.iter().cloned().collect(),
                })
                .await?
                .into_inner();
            out.created(name, &created.agent_id);
            created.warnings.iter().for_each(|w| out.warn(w));
        }
        AgentCommand::List(args) => return list::list(clients, args, out).await,
        AgentCommand::Get { agent } => {
            let request =
                pb::get_agent_request::Agent::AgentId(resolve(&mut clients, agent).await?);
            let found = clients
                .agents
                .get_agent(pb::GetAgentRequest {
                    agent: Some(request),
                })
                .await?
                .into_inner();
            if let Some(summary) = found.agent {
                // People see the last error here; scripts read events.
                let last_error = if out.json {
                    None
                } else {
                    RunErrors::recent(&mut clients, &summary.agent_id)
                        .await?
                        .last()
                };
                let kin = kin(&mut clients, &summary, out).await;
                out.agent_detail(&summary, found.usage.as_ref(), last_error.as_deref(), &kin);
            }
        }
        AgentCommand::Send {
            agent,
            text,
            dedupe_key,
            follow,
        } => {
            let text = message_text::read(text)?;
            message_text::warn_if_broken_json(&text, out);
            let agent_id = resolve(&mut clients, agent).await?;
            let request = pb::SendMessageRequest {
                agent_id: agent_id.clone(),
                text,
                dedupe_key: dedupe_key.clone().unwrap_or_default(),
            };
            if *follow {
                return follow::send(clients, agent_id, request, out).await;
            }
            let sent = clients.agents.send_message(request).await?.into_inner();
            out.sent(&sent);
        }
        AgentCommand::Archive(args) => return archive::archive(clients, args, out).await,
        AgentCommand::Delete { agent } => {
            let agent_id = resolve(&mut clients, agent).await?;
            let done = clients
                .agents
                .delete_agent(pb::DeleteAgentRequest {
                    agent_id: agent_id.clone(),
                })
                .await?
                .into_inner();
            out.deleted(&agent_id, done.agents);
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
            let errors = if out.json {
                RunErrors::default()
            } else {
                RunErrors::collect(&mut clients, &agent_id, 0).await?
            };
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
                    out.message(message, errors.of_run(&message.run_id));
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

/// The names of `a`'s creator and supervisor, for people (`--json` keeps
/// ids only). A name that cannot be read (an agent deleted since) is left
/// out: the id is shown whole instead.
async fn kin(clients: &mut Clients, a: &pb::AgentSummary, out: &Output) -> Kin {
    if out.json {
        return Kin::default();
    }
    let mut name_of = async |id: &str| -> Option<String> {
        if id.is_empty() {
            return None;
        }
        let found = clients
            .agents
            .get_agent(pb::GetAgentRequest {
                agent: Some(pb::get_agent_request::Agent::AgentId(id.to_owned())),
            })
            .await
            .ok()?;
        found.into_inner().agent.map(|a| a.name)
    };
    let lineage = name_of(&a.lineage_parent_agent_id).await;
    let supervisor = if a.supervisor_agent_id == a.lineage_parent_agent_id {
        lineage.clone()
    } else {
        name_of(&a.supervisor_agent_id).await
    };
    Kin {
        lineage,
        supervisor,
    }
}
