//! The promises of the operator and instance work, checked after every
//! restart: each acknowledged event reaches the desk once and no event
//! twice, the schedule fires once for each minute, an approved call ran
//! exactly once and a denied one never, a stopped command stays stopped,
//! and the tools instance is as its last acknowledged apply left it. At
//! the very end, no cleanup is left unfinished in the store.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::Value;

use crate::check::{all_messages, Checks};
use crate::fixtures::{Fixtures, TOOLS};
use crate::ledger::{Decided, Ledger};

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

const MINUTE_MS: u64 = 60_000;

/// How long after its minute a slot may take to be recorded (the
/// scheduler's tick, or the restart that finds it missed).
const SLOT_GRACE_MS: u64 = 20_000;

struct Taken {
    events: BTreeMap<String, String>,
    decided: BTreeMap<String, Decided>,
    asked: Vec<String>,
    stopped: Vec<String>,
    tools_digest: Option<String>,
    attached: Vec<(String, String)>,
    live: std::collections::BTreeSet<String>,
}

fn taken(ledger: &Mutex<Ledger>) -> Taken {
    let ledger = ledger.lock().unwrap_or_else(PoisonError::into_inner);
    Taken {
        events: ledger.events.clone(),
        decided: ledger.decided.clone(),
        asked: ledger.asked.iter().cloned().collect(),
        stopped: ledger.stopped.iter().cloned().collect(),
        tools_digest: ledger.tools_digest.clone(),
        attached: ledger.attached.clone(),
        live: ledger.live_ids().into_iter().collect(),
    }
}

/// Every check of this module, after the `kill`-th restart.
pub async fn after_restart(
    c: &mut Clients,
    ledger: &Mutex<Ledger>,
    fixtures: &Fixtures,
    kill: usize,
    checks: &mut Checks,
) {
    let taken = taken(ledger);
    events_once(c, &taken, fixtures, kill, checks).await;
    approvals_once(c, &taken, fixtures, kill, checks).await;
    stops_hold(c, &taken, kill, checks).await;
    tools_applied(c, &taken, kill, checks).await;
    attaches_hold(c, &taken, kill, checks).await;
}

/// Each acknowledged attach is still there (on agents surely live).
async fn attaches_hold(c: &mut Clients, taken: &Taken, kill: usize, checks: &mut Checks) {
    for (agent, id) in taken
        .attached
        .iter()
        .filter(|(a, _)| taken.live.contains(a))
    {
        checks.run += 1;
        let listed = c
            .workspaces
            .list_workspaces(pb::ListWorkspacesRequest {
                agent_id: agent.clone(),
                ..Default::default()
            })
            .await
            .map(|w| w.into_inner().workspaces);
        if !matches!(&listed, Ok(all) if all.iter().any(|w| w.workspace_id == *id)) {
            checks.fail(
                kill,
                format!("acknowledged workspace {id} of {agent}: {listed:?}"),
            );
        }
    }
}

/// The desk's events: each acknowledged one there once, none twice, and
/// one schedule firing for each minute since it was applied.
async fn events_once(
    c: &mut Clients,
    taken: &Taken,
    fixtures: &Fixtures,
    kill: usize,
    checks: &mut Checks,
) {
    let messages = match all_messages(c, &fixtures.desk).await {
        Ok(messages) => messages,
        Err(status) => return checks.fail(kill, format!("ListMessages of the desk: {status}")),
    };
    let mut by_id: BTreeMap<String, usize> = BTreeMap::new();
    let mut slots: BTreeMap<u64, usize> = BTreeMap::new();
    for message in messages.iter().filter(|m| m.provenance == "event") {
        let Ok(event) = serde_json::from_str::<Value>(&message.text) else {
            checks.fail(
                kill,
                format!("an event message is not JSON: {}", message.text),
            );
            continue;
        };
        let id = event["id"].as_str().unwrap_or_default().to_owned();
        *by_id.entry(id).or_default() += 1;
        if event["source"] == "schedule" {
            *slots
                .entry(event["at_ms"].as_u64().unwrap_or(0))
                .or_default() += 1;
        }
    }
    for (key, id) in &taken.events {
        checks.run += 1;
        let delivered = by_id.get(id).copied().unwrap_or(0);
        if delivered != 1 {
            checks.fail(
                kill,
                format!("acknowledged event {key} ({id}) reached the desk {delivered} times"),
            );
        }
    }
    for (id, times) in &by_id {
        if *times > 1 {
            checks.fail(kill, format!("event {id} reached the desk {times} times"));
        }
    }
    checks.run += 1;
    let first = fixtures.schedule_from_ms / MINUTE_MS + 1;
    let last = now_ms().saturating_sub(SLOT_GRACE_MS) / MINUTE_MS;
    for minute in first..=last {
        let slot = minute * MINUTE_MS;
        let fired = slots.get(&slot).copied().unwrap_or(0);
        if fired != 1 {
            checks.fail(
                kill,
                format!("the schedule fired {fired} times for slot {slot}"),
            );
        }
    }
    let expected = first * MINUTE_MS..=(last + 1) * MINUTE_MS;
    for slot in slots.keys().filter(|s| !expected.contains(s)) {
        checks.fail(
            kill,
            format!("the schedule fired for slot {slot}, which is not due"),
        );
    }
}

/// How many times the parked call that appends to `file` ran.
fn runs(fixtures: &Fixtures, file: &str) -> usize {
    let path = fixtures.workspaces.join(&fixtures.guard).join(file);
    std::fs::read_to_string(path).map_or(0, |text| text.lines().count())
}

/// An approved call ran once, a denied one never, and none twice.
async fn approvals_once(
    c: &mut Clients,
    taken: &Taken,
    fixtures: &Fixtures,
    kill: usize,
    checks: &mut Checks,
) {
    for file in &taken.asked {
        checks.run += 1;
        let ran = runs(fixtures, file);
        if ran > 1 {
            checks.fail(kill, format!("the call writing {file} ran {ran} times"));
        }
    }
    for (id, decided) in &taken.decided {
        checks.run += 1;
        let ran = runs(fixtures, &decided.file);
        if decided.approved > 0 && ran != 1 {
            checks.fail(kill, format!("approved call {id} ran {ran} times"));
        }
        if decided.denied > 0 && ran != 0 {
            checks.fail(kill, format!("denied call {id} ran {ran} times"));
        }
        let want = match (decided.approved, decided.denied) {
            (0, 0) => continue,
            (_, 0) => "approved",
            _ => "denied",
        };
        let got = c
            .approvals
            .get_approval(pb::GetApprovalRequest {
                approval_id: id.clone(),
            })
            .await
            .map(|a| a.into_inner().status);
        if !matches!(&got, Ok(status) if status == want) {
            checks.fail(kill, format!("approval {id}: {got:?}, acknowledged {want}"));
        }
    }
}

/// A command whose stop was acknowledged is not running again.
async fn stops_hold(c: &mut Clients, taken: &Taken, kill: usize, checks: &mut Checks) {
    for task in &taken.stopped {
        checks.run += 1;
        let got = c
            .tasks
            .get_task(pb::GetTaskRequest {
                task_id: task.clone(),
            })
            .await
            .map(|t| t.into_inner().status);
        if !matches!(&got, Ok(status) if status != "running") {
            checks.fail(kill, format!("stopped task {task}: {got:?}"));
        }
    }
}

/// The tools instance is the version last acknowledged.
async fn tools_applied(c: &mut Clients, taken: &Taken, kill: usize, checks: &mut Checks) {
    let Some(want) = &taken.tools_digest else {
        return;
    };
    checks.run += 1;
    let got = c
        .instances
        .get_instance(pb::GetInstanceRequest { name: TOOLS.into() })
        .await
        .map(|i| i.into_inner().digest);
    if !matches!(&got, Ok(digest) if digest == want) {
        checks.fail(
            kill,
            format!("the tools instance is {got:?}, acknowledged {want}"),
        );
    }
}

/// Once the daemon has stopped for good: every cleanup it began (an
/// archive's, a stopped task's) has finished, none is left in the store.
pub async fn cleanups_finished(data_dir: &Path, kill: usize, checks: &mut Checks) {
    use holarchy::store::sled_store::StoreConfig;
    use holarchy::store::SledStore;
    use holarchy_actors::Reads as _;
    checks.run += 1;
    let store = match SledStore::open(&data_dir.join("db"), &StoreConfig::default()) {
        Ok(store) => store,
        Err(err) => return checks.fail(kill, format!("the store does not open: {err}")),
    };
    match store.recovery_input() {
        Ok(input) if input.intents.is_empty() => {}
        Ok(input) => checks.fail(
            kill,
            format!(
                "{} cleanups left unfinished: {:?}",
                input.intents.len(),
                input.intents
            ),
        ),
        Err(err) => checks.fail(kill, format!("the store is unreadable: {err}")),
    }
    store.close().await;
}
