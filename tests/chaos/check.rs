//! The promises checked after every restart, against the ledger: nothing
//! acknowledged is lost, a dedupe key names one message, archives and
//! pauses that were acknowledged hold, no agent is stuck, and the live
//! actor tree equals the stored one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use holarchy::api::pb;
use holarchy::client::Clients;
use tonic::Code;

use crate::ledger::{Ledger, Tracked};

/// How long every queued message of an unpaused agent may take to be
/// handled after a restart (the promise is a turn within 5 s;
/// this also covers the turns themselves, a command's up to 2 s).
const DRAINED: Duration = Duration::from_secs(20);

#[derive(Debug, Default)]
pub struct Checks {
    /// Individual promises checked (one per agent, message, key, tree).
    pub run: u64,
    pub violations: Vec<String>,
    /// The longest wait, over all restarts, until no message was queued.
    pub longest_drain: Duration,
    /// Notes of the ledger already found: each restart searches for the
    /// ones acknowledged since, so the checks do not grow with the run.
    pub notes_found: usize,
    /// Check every agent, not the touched ones and a sample (the last
    /// checks of a run).
    pub full: bool,
}

/// One agent in this many is checked after a restart beyond those the
/// last life touched, a different share each time: a long run's checks
/// stay about as long as its first ones, and every agent is still looked
/// at every few restarts (and all at the end).
const SAMPLE: u64 = 8;

/// The agents to check after the `kill`-th restart, with what the ledger
/// knows of them.
fn watched(ledger: &Mutex<Ledger>, kill: usize, full: bool) -> BTreeMap<String, Tracked> {
    let ledger = ledger.lock().unwrap_or_else(PoisonError::into_inner);
    ledger
        .agents
        .iter()
        .filter(|(id, _)| {
            full || ledger.touched.contains(*id) || fnv(id) % SAMPLE == kill as u64 % SAMPLE
        })
        .map(|(id, t)| (id.clone(), t.clone()))
        .collect()
}

fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Checks {
    pub(crate) fn fail(&mut self, kill: usize, what: String) {
        self.violations.push(format!("after kill {kill}: {what}"));
    }
}

fn snapshot(ledger: &Mutex<Ledger>) -> BTreeMap<String, Tracked> {
    ledger
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .agents
        .clone()
}

pub(crate) async fn all_messages(
    c: &mut Clients,
    agent: &str,
) -> Result<Vec<pb::Message>, tonic::Status> {
    let mut out = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = c
            .agents
            .list_messages(pb::ListMessagesRequest {
                agent_id: agent.to_owned(),
                page_size: 0,
                page_token,
            })
            .await?
            .into_inner();
        out.extend(page.messages);
        if page.next_page_token.is_empty() {
            return Ok(out);
        }
        page_token = page.next_page_token;
    }
}

/// Every check, after the `kill`-th restart. The load is stopped.
pub async fn after_restart(
    c: &mut Clients,
    ledger: &Mutex<Ledger>,
    kill: usize,
    checks: &mut Checks,
    daemon_pid: u32,
) {
    agents_hold(c, ledger, kill, checks).await;
    messages_kept(c, ledger, kill, checks).await;
    none_stuck(c, ledger, kill, checks).await;
    tree_matches(c, kill, checks).await;
    notes_found(c, ledger, kill, checks).await;
    no_orphans(kill, checks, daemon_pid).await;
    ledger
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .touched
        .clear();
}

/// How long the restarted daemon may take to end the commands its dead
/// predecessor left running, were any left.
const REAPED: Duration = Duration::from_secs(5);

/// No command or MCP server of a dead daemon outlives it: every long
/// command the load started, and every server, runs under the daemon now
/// serving (a turn the kill cut short
/// runs again after the restart, and starts its command again).
async fn no_orphans(kill: usize, checks: &mut Checks, daemon_pid: u32) {
    checks.run += 1;
    let started = Instant::now();
    loop {
        let markers = [
            crate::load::long_marker(),
            crate::load::read_marker(),
            crate::fixtures::mcp_marker(),
        ];
        let orphans: Vec<String> = markers
            .iter()
            .flat_map(|marker| crate::common::processes_with(marker))
            .filter(|line| {
                let pid = line.split(':').next().and_then(|p| p.parse().ok());
                !pid.is_some_and(|pid| descends_from(pid, daemon_pid))
            })
            .collect();
        if orphans.is_empty() {
            return;
        }
        if started.elapsed() > REAPED {
            checks.fail(kill, format!("commands outlived their daemon: {orphans:?}"));
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether `ancestor` is among `pid`'s ancestors (or gone meanwhile, which
/// counts as no orphan).
fn descends_from(mut pid: u32, ancestor: u32) -> bool {
    for _ in 0..64 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return true;
        };
        // The command name may hold spaces; the parent follows its ')'.
        let parent = stat
            .rfind(')')
            .and_then(|end| stat.get(end + 2..))
            .and_then(|rest| rest.split_whitespace().nth(1))
            .and_then(|ppid| ppid.parse::<u32>().ok());
        match parent {
            Some(parent) if parent == ancestor => return true,
            Some(parent) if parent > 1 => pid = parent,
            _ => return false,
        }
    }
    false
}

/// How long a note may take to be indexed after a restart: the index
/// catches up from the store beside the serving daemon.
const INDEXED: Duration = Duration::from_secs(20);

/// Each note acknowledged since the last restart's checks is found by a
/// search for its word (notes of agents archived since are not searched).
async fn notes_found(c: &mut Clients, ledger: &Mutex<Ledger>, kill: usize, checks: &mut Checks) {
    let (notes, agents) = {
        let ledger = ledger.lock().unwrap_or_else(PoisonError::into_inner);
        (
            ledger.notes[checks.notes_found..].to_vec(),
            ledger.agents.clone(),
        )
    };
    checks.notes_found += notes.len();
    let started = Instant::now();
    for note in notes {
        if !agents.get(&note.agent).is_some_and(Tracked::live) {
            continue;
        }
        checks.run += 1;
        loop {
            let found = c
                .memory
                .search_memory(pb::SearchMemoryRequest {
                    agent_id: note.agent.clone(),
                    query: note.word.clone(),
                    limit: 5,
                    kinds: vec!["note".into()],
                })
                .await
                .map(|r| {
                    r.into_inner()
                        .hits
                        .iter()
                        .any(|h| h.note.as_ref().is_some_and(|n| n.note_id == note.note_id))
                });
            match found {
                Ok(true) => break,
                Ok(false) if started.elapsed() < INDEXED => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                other => {
                    checks.fail(
                        kill,
                        format!(
                            "acknowledged note {} of {} not found by its word: {other:?}",
                            note.note_id, note.agent
                        ),
                    );
                    break;
                }
            }
        }
    }
}

/// Each acknowledged agent exists, in the state its acknowledged archive
/// or pause left it; an uncertain one is settled from what is there.
async fn agents_hold(c: &mut Clients, ledger: &Mutex<Ledger>, kill: usize, checks: &mut Checks) {
    for (id, tracked) in watched(ledger, kill, checks.full) {
        checks.run += 1;
        let got = c
            .agents
            .get_agent(pb::GetAgentRequest {
                agent: Some(pb::get_agent_request::Agent::AgentId(id.clone())),
            })
            .await;
        let state = match got {
            Ok(found) => found.into_inner().agent.map_or(0, |a| a.state),
            Err(status) if status.code() == Code::NotFound => {
                checks.fail(
                    kill,
                    format!("acknowledged agent {} ({id}) is gone", tracked.name),
                );
                continue;
            }
            Err(status) => {
                checks.fail(kill, format!("GetAgent {id}: {status}"));
                continue;
            }
        };
        let archived = state == pb::LifecycleState::Archived as i32;
        let paused = state == pb::LifecycleState::Paused as i32;
        if state == pb::LifecycleState::Failed as i32 {
            checks.fail(kill, format!("agent {} ({id}) failed", tracked.name));
        }
        match tracked.archived {
            Some(want) if want != archived => checks.fail(
                kill,
                format!(
                    "agent {} ({id}): archived {archived}, acknowledged {want}",
                    tracked.name
                ),
            ),
            _ => {}
        }
        if !archived {
            match tracked.paused {
                Some(want) if want != paused => checks.fail(
                    kill,
                    format!(
                        "agent {} ({id}): paused {paused}, acknowledged {want}",
                        tracked.name
                    ),
                ),
                _ => {}
            }
        }
        let mut ledger = ledger.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = ledger.agents.get_mut(&id) {
            entry.archived = Some(archived);
            entry.paused = Some(paused);
        }
    }
}

/// Every acknowledged message of a live agent is there, and each dedupe
/// key names exactly one message.
async fn messages_kept(c: &mut Clients, ledger: &Mutex<Ledger>, kill: usize, checks: &mut Checks) {
    let keys: Vec<((String, String), String)> = ledger
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .dedupe
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut by_agent: BTreeMap<String, Vec<pb::Message>> = BTreeMap::new();
    for (id, tracked) in watched(ledger, kill, checks.full)
        .into_iter()
        .filter(|(_, t)| t.live())
    {
        let messages = match all_messages(c, &id).await {
            Ok(messages) => messages,
            Err(status) => {
                checks.fail(kill, format!("ListMessages {id}: {status}"));
                continue;
            }
        };
        let ids: BTreeSet<&str> = messages.iter().map(|m| m.message_id.as_str()).collect();
        // A timer fires at most once: never more wake-ups than handled
        // turns that armed one (see `timers_fired` for at least once).
        checks.run += 1;
        let (armed, fired) = timers(&messages);
        if fired > armed {
            let attempts: Vec<u32> = messages
                .iter()
                .filter(|m| m.text.contains("\"Sleep\""))
                .map(|m| m.attempts)
                .collect();
            checks.fail(
                kill,
                format!("{id}: {fired} timers fired for {armed} armed (attempts {attempts:?})"),
            );
        }
        for acked in &tracked.messages {
            checks.run += 1;
            if !ids.contains(acked.as_str()) {
                checks.fail(
                    kill,
                    format!("acknowledged message {acked} of {id} is lost"),
                );
            }
        }
        by_agent.insert(id, messages);
    }
    for ((agent, key), id) in keys {
        let Some(messages) = by_agent.get(&agent) else {
            continue;
        };
        checks.run += 1;
        let named: Vec<&str> = messages
            .iter()
            .filter(|m| names_key(&m.dedupe_key, &key))
            .map(|m| m.message_id.as_str())
            .collect();
        if named != [id.as_str()] {
            checks.fail(
                kill,
                format!("dedupe key {key} of {agent} names {named:?}, acknowledged {id}"),
            );
        }
    }
}

/// Whether a message's stored dedupe key is `key`: as given, or as a
/// trigger delivery's (`trigger:<wait id>:<key>`, so keys of different
/// triggers never meet).
fn names_key(stored: &str, key: &str) -> bool {
    stored == key
        || stored
            .strip_prefix("trigger:")
            .and_then(|rest| rest.split_once(':'))
            .is_some_and(|(_, given)| given == key)
}

/// Turns handled that armed a timer (the load's `Sleep`), and wake-ups
/// from timers, among `messages`.
fn timers(messages: &[pb::Message]) -> (usize, usize) {
    let armed = messages
        .iter()
        .filter(|m| m.status == pb::MessageStatus::Handled as i32 && m.text.contains("\"Sleep\""))
        .count();
    let fired = messages.iter().filter(|m| m.provenance == "timer").count();
    (armed, fired)
}

/// At the end, every timer armed has fired, once: a wake-up lost across a
/// restart would leave an agent asleep for good. Polled while the last
/// ones come due (the load's are under a second).
pub async fn timers_fired(
    c: &mut Clients,
    ledger: &Mutex<Ledger>,
    kill: usize,
    checks: &mut Checks,
) {
    let started = Instant::now();
    for (id, tracked) in snapshot(ledger) {
        if !tracked.live() || tracked.paused != Some(false) {
            continue;
        }
        checks.run += 1;
        loop {
            let counted = all_messages(c, &id).await.map(|m| timers(&m));
            match counted {
                Ok((armed, fired)) if armed == fired => break,
                Ok(_) if started.elapsed() < DRAINED => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                other => {
                    checks.fail(kill, format!("{id}: timers armed and fired {other:?}"));
                    break;
                }
            }
        }
    }
}

/// Every unpaused live agent handles what it was sent: none is left with
/// queued work after a restart.
async fn none_stuck(c: &mut Clients, ledger: &Mutex<Ledger>, kill: usize, checks: &mut Checks) {
    let started = Instant::now();
    let watched: Vec<String> = watched(ledger, kill, checks.full)
        .into_iter()
        .filter(|(_, t)| t.live() && t.paused == Some(false))
        .map(|(id, _)| id)
        .collect();
    let mut waiting = watched;
    while !waiting.is_empty() {
        let mut still = Vec::new();
        for id in waiting {
            // The summary's queue and run, not a listing of every message:
            // one read an agent, whatever its history.
            let got = c
                .agents
                .get_agent(pb::GetAgentRequest {
                    agent: Some(pb::get_agent_request::Agent::AgentId(id.clone())),
                })
                .await;
            match got.map(|r| r.into_inner().agent) {
                Ok(Some(a)) if a.queue_length > 0 || !a.current_run_id.is_empty() => still.push(id),
                Ok(_) => {}
                Err(status) => checks.fail(kill, format!("GetAgent {id}: {status}")),
            }
        }
        waiting = still;
        if started.elapsed() > DRAINED {
            checks.fail(
                kill,
                format!(
                    "agents still have queued messages {DRAINED:?} after the restart: {waiting:?}"
                ),
            );
            break;
        }
        if !waiting.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    checks.run += 1;
    checks.longest_drain = checks.longest_drain.max(started.elapsed());
}

/// The live actor tree equals the stored one (children restarted, none
/// stray), once the restarted actors are up.
async fn tree_matches(c: &mut Clients, kill: usize, checks: &mut Checks) {
    checks.run += 1;
    let started = Instant::now();
    loop {
        let mismatches = match whole_tree(c).await {
            Ok(mismatches) => mismatches,
            Err(status) => vec![format!("GetTree: {status}")],
        };
        if mismatches.is_empty() {
            return;
        }
        if started.elapsed() > Duration::from_secs(10) {
            checks.fail(
                kill,
                format!("the live tree differs from the store: {mismatches:?}"),
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn whole_tree(c: &mut Clients) -> Result<Vec<String>, tonic::Status> {
    let mut mismatches = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = c
            .supervision
            .get_tree(pb::GetTreeRequest {
                page_token,
                ..Default::default()
            })
            .await?
            .into_inner();
        mismatches.extend(page.mismatches);
        if page.next_page_token.is_empty() {
            return Ok(mismatches);
        }
        page_token = page.next_page_token;
    }
}
