//! What the replay tests share: the test brain, a replay started and
//! waited for, and a snapshot of everything an agent has (its records,
//! the event log, its memory, its workspace's files), to find a replay's
//! side effects.

use std::collections::BTreeMap;
use std::path::PathBuf;

use holarchy::api::pb;
use holarchy::client::Clients;

use crate::common::{self, eventually_within};

pub fn brain_py(args: &[&str]) -> pb::BrainConfig {
    let script = format!("{}/tests/replay/brain.py", env!("CARGO_MANIFEST_DIR"));
    let mut all = vec![script.as_str()];
    all.extend_from_slice(args);
    common::command_brain("python3", &all)
}

/// Starts a replay of `agent`'s turns through `candidate`.
pub async fn start(
    c: &mut Clients,
    agent: &str,
    candidate: pb::ReplayCandidate,
    concurrency: u32,
) -> pb::Replay {
    c.replays
        .start_replay(pb::StartReplayRequest {
            agent_id: agent.into(),
            max_turns: 1000,
            candidate: Some(candidate),
            budget: Some(pb::ReplayBudget {
                concurrency,
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("replay started")
        .into_inner()
}

/// The id of the agent named `name`.
pub async fn agent_named(c: &mut Clients, name: &str) -> String {
    c.agents
        .get_agent(pb::GetAgentRequest {
            agent: Some(pb::get_agent_request::Agent::Name(name.into())),
        })
        .await
        .expect("agent")
        .into_inner()
        .agent
        .expect("summary")
        .agent_id
}

pub async fn get(c: &mut Clients, id: &str) -> pb::Replay {
    page(c, id, false).await.replay.expect("replay")
}

pub async fn page(c: &mut Clients, id: &str, differences_only: bool) -> pb::GetReplayResponse {
    c.replays
        .get_replay(pb::GetReplayRequest {
            replay_id: id.into(),
            page_size: 1000,
            differences_only,
            ..Default::default()
        })
        .await
        .expect("replay read")
        .into_inner()
}

/// Waits for the replay to stop running.
pub async fn ended(c: &Clients, id: &str) -> pb::Replay {
    eventually_within(
        "the replay ended",
        std::time::Duration::from_secs(240),
        || {
            let mut c = c.clone();
            let id = id.to_owned();
            async move {
                let replay = get(&mut c, &id).await;
                (replay.status != "running").then_some(replay)
            }
        },
    )
    .await
}

/// Everything of `agent` a replay must not change.
#[derive(Debug, PartialEq)]
pub struct Snapshot {
    agent: String,
    messages: Vec<String>,
    events: Vec<String>,
    notes: Vec<String>,
    files: BTreeMap<PathBuf, Vec<u8>>,
}

impl Snapshot {
    pub fn notes_len(&self) -> usize {
        self.notes.len()
    }
}

pub async fn snapshot(c: &mut Clients, agent: &str) -> Snapshot {
    let summary = common::get_agent(c, agent).await;
    let messages = common::messages(c, agent)
        .await
        .iter()
        .map(|m| format!("{m:?}"))
        .collect();
    let events = common::events(c, 0)
        .await
        .iter()
        .map(|e| format!("{e:?}"))
        .collect();
    let notes = c
        .memory
        .list_memory(pb::ListMemoryRequest {
            agent_id: agent.into(),
            page_size: 1000,
            page_token: String::new(),
        })
        .await
        .expect("notes")
        .into_inner()
        .notes
        .iter()
        .map(|n| format!("{n:?}"))
        .collect();
    let workspaces = c
        .workspaces
        .list_workspaces(pb::ListWorkspacesRequest {
            agent_id: agent.into(),
            page_token: String::new(),
        })
        .await
        .expect("workspaces")
        .into_inner();
    let mut files = BTreeMap::new();
    for workspace in &workspaces.workspaces {
        for path in common::installed::snapshot(std::path::Path::new(&workspace.root)).keys() {
            files.insert(path.clone(), std::fs::read(path).unwrap_or_default());
        }
    }
    Snapshot {
        agent: format!("{summary:?}"),
        messages,
        events,
        notes,
        files,
    }
}
