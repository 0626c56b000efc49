//! Creating the load: public agents in durable `CreateAgents` batches (or
//! single `CreateAgent` calls for batches of one) from concurrent callers,
//! each optionally told to spawn a fan of private children, with a
//! progress bar on stderr.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::task::JoinSet;

use crate::api::pb;
use crate::cli::progress::Progress;
use crate::client::Clients;

/// What one creation step asks for.
pub struct Load<'a> {
    /// Names are `bench-{run}-{i}`, unique to this run.
    pub run: &'a str,
    pub concurrency: usize,
    pub batch: usize,
    /// Private children each new agent spawns (0 for none).
    pub fanout: usize,
}

/// A first message whose scripted turn spawns `fanout` idle private
/// children.
fn spawn_script(fanout: usize) -> String {
    let calls: Vec<_> = (0..fanout)
        .map(|i| {
            serde_json::json!({
                "name": "SpawnAgent",
                "input": { "preset": "private_child", "initial_message": format!("child {i}") },
            })
        })
        .collect();
    serde_json::json!({ "tool_calls": calls }).to_string()
}

/// The scripted brain: a benchmark never calls a model, whatever the
/// daemon's default brain is.
fn scripted() -> Option<pb::BrainConfig> {
    Some(pb::BrainConfig {
        kind: Some(pb::brain_config::Kind::Scripted(pb::ScriptedBrain {})),
    })
}

/// Creates agents `range` (by index), returning their ids in no set order.
pub async fn create(
    clients: &Clients,
    load: &Load<'_>,
    range: std::ops::Range<usize>,
    progress: &Progress,
    done_before: usize,
) -> anyhow::Result<Vec<String>> {
    let batches: Vec<(usize, usize)> = range
        .clone()
        .step_by(load.batch)
        .map(|start| (start, (start + load.batch).min(range.end)))
        .collect();
    let first_message = (load.fanout > 0).then(|| spawn_script(load.fanout));
    let done = Arc::new(AtomicUsize::new(done_before));
    let mut workers = JoinSet::new();
    for worker in 0..load.concurrency {
        let mut c = clients.clone();
        let mine: Vec<(usize, usize)> = batches
            .iter()
            .copied()
            .skip(worker)
            .step_by(load.concurrency)
            .collect();
        let done = done.clone();
        let run = load.run.to_owned();
        let first_message = first_message.clone();
        workers.spawn(async move {
            let mut ids = Vec::new();
            for (start, end) in mine {
                let mut agents: Vec<_> = (start..end)
                    .map(|i| pb::CreateAgentRequest {
                        name: format!("bench-{run}-{i}"),
                        initial_message: first_message.clone(),
                        brain: scripted(),
                        context_tokens: None,
                        mcp_servers: Vec::new(),
                        network: String::new(),
                        labels: Default::default(),
                    })
                    .collect();
                // A batch of one is what a client creating agents one at a
                // time sends: a single `CreateAgent`.
                let made = if agents.len() == 1 {
                    let agent = agents.remove(0);
                    vec![c.agents.create_agent(agent).await?.into_inner().agent_id]
                } else {
                    c.agents
                        .create_agents(pb::CreateAgentsRequest { agents })
                        .await?
                        .into_inner()
                        .agent_ids
                };
                done.fetch_add(made.len(), Ordering::Relaxed);
                ids.extend(made);
            }
            anyhow::Ok(ids)
        });
    }
    gather(workers, &done, progress).await
}

/// Collects what `workers` return while showing the progress they count in
/// `done`, and stops them all at the first failure: at a million agents a
/// failed call should end the run now, not when every other caller is done.
/// The bar is redrawn on a timer: a message per call would wake this task's
/// thread once per call, CPU the daemon under test would lose to the
/// client on a small machine.
async fn gather<T: Send + 'static>(
    mut workers: JoinSet<anyhow::Result<Vec<T>>>,
    done: &AtomicUsize,
    progress: &Progress,
) -> anyhow::Result<Vec<T>> {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut out = Vec::new();
    loop {
        tokio::select! {
            _ = tick.tick() => progress.show(done.load(Ordering::Relaxed)),
            joined = workers.join_next() => match joined {
                None => break,
                Some(Ok(Ok(part))) => out.extend(part),
                Some(Ok(Err(err))) => {
                    workers.abort_all();
                    return Err(err);
                }
                Some(Err(join)) => {
                    workers.abort_all();
                    return Err(join).context("a load worker failed");
                }
            },
        }
    }
    progress.show(done.load(Ordering::Relaxed));
    Ok(out)
}

/// Waits until the daemon runs `private` private agents and no turn, with a
/// progress bar: the children are spawned by the agents' own turns, after
/// their creation was acknowledged.
pub async fn await_children(
    clients: &mut Clients,
    already: usize,
    private: usize,
    quiet: bool,
) -> anyhow::Result<()> {
    // Counted from `already`, the private agents the daemon had before.
    let progress = Progress::new("private children", private, quiet);
    let mut last_change = Instant::now();
    let mut seen = (0, 0);
    loop {
        let status = clients
            .runtime
            .get_status(pb::GetStatusRequest {})
            .await?
            .into_inner();
        let now = (status.private_agents as usize).saturating_sub(already);
        progress.show(now);
        if now >= private && status.busy_runs == 0 {
            progress.finish();
            return Ok(());
        }
        if (now, status.busy_runs) != seen {
            seen = (now, status.busy_runs);
            last_change = Instant::now();
        }
        anyhow::ensure!(
            last_change.elapsed() < Duration::from_secs(60),
            "no progress for 60 s: {now} of {private} private agents, {} turns running",
            status.busy_runs
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Callers archiving at once: archives share flushes, so more callers mean
/// fewer flushes per archive.
const ARCHIVE_CALLERS: usize = 64;

/// Archives `ids`, each through its own durable ArchiveAgent call.
pub async fn archive(clients: &Clients, ids: &[String], quiet: bool) -> anyhow::Result<()> {
    let progress = Progress::new("archiving", ids.len(), quiet);
    let done = Arc::new(AtomicUsize::new(0));
    let mut workers = JoinSet::new();
    for worker in 0..ARCHIVE_CALLERS {
        let mut c = clients.clone();
        let mine: Vec<String> = ids
            .iter()
            .skip(worker)
            .step_by(ARCHIVE_CALLERS)
            .cloned()
            .collect();
        let done = done.clone();
        workers.spawn(async move {
            for agent_id in mine {
                c.agents
                    .archive_agent(pb::ArchiveAgentRequest { agent_id })
                    .await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(Vec::<()>::new())
        });
    }
    gather(workers, &done, &progress).await?;
    progress.finish();
    Ok(())
}
