//! `holarchy events`: the event log, followed or not. For people each
//! line names its agent first, then the tail of its id that tells it
//! apart (the tail any command takes, as in the tables); `--json` keeps
//! every id whole and adds nothing.

use std::collections::HashMap;

use tokio_stream::StreamExt;

use super::output::{table, Output};
use super::resolve;
use crate::api::pb;
use crate::client::Clients;

/// Agents asked for at the start, by one `ListAgents` call: their names
/// and ids seed the names known and the tail's length.
const SEED: u32 = 1000;
/// Names kept at most; past it the cache starts again, so a log of a
/// million agents costs a lookup per agent seen, never a million names
/// held.
const KEPT: usize = 10_000;

/// Prints the events after `after` (only `agent`'s, when given), and with
/// `follow` the new ones as they come.
pub(super) async fn events(
    mut clients: Clients,
    after: u64,
    follow: bool,
    agent: Option<&str>,
    out: &Output,
) -> anyhow::Result<()> {
    let agent_id = match agent {
        Some(agent) => resolve(&mut clients, agent).await?,
        None => String::new(),
    };
    let mut names = if out.json {
        None
    } else {
        Some(Names::seed(&mut clients).await?)
    };
    let mut stream = clients
        .agents
        .watch_events(pb::WatchEventsRequest {
            after_cursor: after,
            follow,
            agent_id,
        })
        .await?
        .into_inner();
    while let Some(event) = stream.next().await {
        let event = event?;
        match names.as_mut() {
            Some(names) => {
                let who = names.who(&mut clients, &event.agent_id).await?;
                out.event(&event, &who);
            }
            None => out.event(&event, ""),
        }
    }
    Ok(())
}

/// Agents' names by id, as far as they were looked up, and how much of an
/// id's tail tells the agents apart.
struct Names {
    by_id: HashMap<String, String>,
    tail: usize,
}

impl Names {
    /// The first page of agents (private ones too): a small daemon's every
    /// name in one call; the tail that tells them apart.
    async fn seed(clients: &mut Clients) -> anyhow::Result<Self> {
        let page = clients
            .agents
            .list_agents(pb::ListAgentsRequest {
                page_size: SEED,
                page_token: String::new(),
                include_private: true,
            })
            .await?
            .into_inner();
        let tail = table::tail_len(page.agents.iter().map(|a| a.agent_id.as_str()));
        let by_id = page
            .agents
            .into_iter()
            .map(|a| (a.agent_id, a.name))
            .collect();
        Ok(Self {
            by_id,
            tail: tail.max(table::MIN_TAIL),
        })
    }

    /// The agent of an event as people read it: `name (tail)`, the tail
    /// alone for an agent with no name (a private child, or one deleted
    /// since), `-` for an event of no agent.
    async fn who(&mut self, clients: &mut Clients, agent_id: &str) -> anyhow::Result<String> {
        if agent_id.is_empty() {
            return Ok("-".to_owned());
        }
        let name = match self.by_id.get(agent_id) {
            Some(name) => name.clone(),
            None => {
                let name = name_of(clients, agent_id).await?;
                if self.by_id.len() >= KEPT {
                    self.by_id.clear();
                }
                self.by_id.insert(agent_id.to_owned(), name.clone());
                name
            }
        };
        let tail = table::tail(agent_id, self.tail);
        Ok(match name.as_str() {
            "" => tail.to_owned(),
            name => format!("{} ({tail})", super::escape::one_line(name)),
        })
    }
}

/// An agent's name, asked of the daemon; empty for one it no longer has.
async fn name_of(clients: &mut Clients, agent_id: &str) -> anyhow::Result<String> {
    let found = clients
        .agents
        .get_agent(pb::GetAgentRequest {
            agent: Some(pb::get_agent_request::Agent::AgentId(agent_id.to_owned())),
        })
        .await;
    match found {
        Ok(found) => Ok(found.into_inner().agent.map(|a| a.name).unwrap_or_default()),
        Err(status) if status.code() == tonic::Code::NotFound => Ok(String::new()),
        Err(status) => Err(status.into()),
    }
}
