//! Recovery at start: the store is brought to a consistent tree (cut
//! cleanups finished, interrupted commands and turns recorded, orphans
//! archived) and every live agent respawned, one generation of the tree at a
//! time by a few spawning tasks per core, so supervisors are up before their
//! children and every core is busy.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use holarchy_supervision::cleanup::CleanupIntent;
use holarchy_supervision::effect::Plan;
use holarchy_supervision::plan::repair::repair;
use holarchy_supervision::recovery::{recover as plan_recovery, RecoveryPlan};
use holarchy_supervision::{AgentId, AgentRecord, MessageId, TaskKind, TaskRecord, WaitRecord};
use ractor::ActorProcessingErr;
use tokio::task::JoinSet;
use tracing::{info, warn};

use super::{damage, RuntimeSnapshot};
use crate::protocol::AgentMsg;
use crate::store::{DamagedRecord, StoreError};
use crate::supervisor::cleanup;
use crate::{now_ms, supervisor, Ctx};

/// Spawning tasks per core during recovery (see [`spawners_for`]).
const SPAWNERS_PER_CORE: usize = 2;

/// Brings the store to a consistent tree and respawns it.
pub(super) async fn recover(ctx: &Arc<Ctx>) -> Result<RuntimeSnapshot, ActorProcessingErr> {
    let mut report = RuntimeSnapshot::default();
    let began = Instant::now();
    let input = ctx.reads().recovery_input()?;
    let read = began.elapsed();
    let unfinished = finish_cleanups(ctx, &input.intents, &mut report)?;
    report.interrupted_commands = interrupt_commands(ctx, &input.running_tasks)?;
    // Those steps changed records; read again if there were any.
    let mut input = if input.intents.is_empty() && report.interrupted_commands == 0 {
        input
    } else {
        ctx.reads().recovery_input()?
    };
    input.damaged.extend(unfinished);
    let (failed, held) = damage::set_aside(&mut input);
    crate::apply::apply(ctx, Plan::writes(failed))?;
    report.held_agents = held.len();
    report.damaged_count = input.damaged.len();
    input.damaged.truncate(damage::MAX_KEPT);
    report.damaged = std::mem::take(&mut input.damaged);
    let mut plan = plan_recovery(input.agents, input.pending);
    let poison = plan.set_aside_poison(ctx.config.limits.max_message_attempts);
    let planned = began.elapsed();

    for message in &poison {
        warn!(agent_id = %message.agent_id, message_id = %message.id, attempts = message.attempts, "message set aside: its turns crashed the daemon");
    }
    let repair = repair(
        &plan,
        poison,
        input.running_tasks,
        input.armed_waits,
        now_ms(),
    );
    for orphan in &repair.orphans {
        warn!(agent_id = %orphan, "archiving a private agent whose supervisor is gone");
    }
    report.poison_messages = repair.poison_messages;
    report.cut_timers_cancelled = repair.cut_timers_cancelled;
    // The calls a cut turn parked, like the timers it armed: the turn
    // parks them again.
    report.cut_approvals_withdrawn = crate::approval::withdraw_cut(ctx, &repair.cut)?;
    crate::apply::apply(ctx, repair.plan)?;
    report.recovered_agents = plan.spawn.len();
    report.interrupted_runs = plan.interrupted.len();
    report.stranded_messages = plan.stranded_messages;
    report.orphans_archived = plan.orphans.len();
    report.rearmed_waits = repair.waits_to_arm.len();

    let committed = began.elapsed();
    let generations = plan.generations.len();
    respawn(ctx, plan, &repair.tasks_to_spawn, &repair.waits_to_arm).await?;
    // Where a slow start goes, for operators sizing a daemon.
    info!(
        read_ms = read.as_millis() as u64,
        repair_and_plan_ms = (planned - read).as_millis() as u64,
        commit_ms = (committed - planned).as_millis() as u64,
        spawn_ms = (began.elapsed() - committed).as_millis() as u64,
        generations,
        "recovery timings"
    );
    Ok(report)
}

/// Finishes the cleanups a crash interrupted. Returns, as damaged records,
/// those that cannot finish because a record they need is damaged: they
/// stay cut, for the next start, and their agents are held down meanwhile.
fn finish_cleanups(
    ctx: &Ctx,
    intents: &[CleanupIntent],
    report: &mut RuntimeSnapshot,
) -> Result<Vec<DamagedRecord>, StoreError> {
    let mut unfinished = Vec::new();
    for intent in intents {
        match cleanup::finish(ctx, intent) {
            Ok(finished) => {
                info!(agent_id = %intent.root_agent_id, finished, "finished an interrupted cleanup");
                report.cleanups_finished += 1;
            }
            Err(err @ (StoreError::Corrupt { .. } | StoreError::UnsupportedVersion { .. })) => {
                unfinished.push(DamagedRecord {
                    tree: "cleanups",
                    key: intent.id.to_string(),
                    agent_id: Some(intent.root_agent_id),
                    reason: format!("the cleanup it records cannot finish: {err}"),
                });
            }
            Err(err) => return Err(err),
        }
    }
    Ok(unfinished)
}

/// Interrupts the commands that ran when the daemon died, never silently
/// erased: their groups are killed if still there, and their owners told
/// (before the queues are rebuilt). Returns how many.
fn interrupt_commands(ctx: &Ctx, running: &[TaskRecord]) -> Result<usize, StoreError> {
    let mut interrupted = Plan::default();
    let mut count = 0;
    for task in running.iter().filter(|t| t.kind == TaskKind::Command) {
        // Still running as read: a cleanup stops its tasks in the batch
        // that records its intent, and nothing else writes while the
        // daemon recovers, so the ending write below cannot be refused.
        // An owner whose record is damaged is not coming back this start.
        let owner_live = match ctx.reads().agent(task.owner_agent_id) {
            Ok(owner) => owner.is_some_and(|a| a.state.is_live()),
            Err(StoreError::Corrupt { .. } | StoreError::UnsupportedVersion { .. }) => false,
            Err(err) => return Err(err),
        };
        let why = "the daemon restarted while it ran";
        interrupted.absorb(crate::apply::interrupt(ctx, task, why, owner_live));
        count += 1;
    }
    // No actor runs yet: the owners read their messages from the store.
    crate::apply::apply(ctx, interrupted)?;
    Ok(count)
}

/// Spawns the recovered tree generation by generation, then the task
/// handles and waits that come back with their owners, and opens the gate
/// to turns.
async fn respawn(
    ctx: &Arc<Ctx>,
    plan: RecoveryPlan,
    tasks: &[TaskRecord],
    waits: &[WaitRecord],
) -> Result<(), ActorProcessingErr> {
    ctx.directory.reserve(plan.spawn.len());
    let dealer = Arc::new(Dealer::new(plan.spawn, plan.queues));
    for &size in &plan.generations {
        spawn_generation(ctx, &dealer, size).await?;
    }
    // The plan's vector (hundreds of MB at a million agents) is given back
    // now, not when recovery returns.
    drop(dealer);
    for task in tasks {
        if let Some(owner) = ctx.directory.get(task.owner_agent_id) {
            // One handle that cannot start must not fail the whole start.
            if let Err(err) = supervisor::spawn_task(ctx, task, owner.actor.get_cell()).await {
                tracing::warn!(task_id = %task.id, agent_id = %task.owner_agent_id, error = %err, "a task handle did not start");
            }
        }
    }
    // Timers re-arm from the store; one whose deadline passed while the
    // daemon was down fires at once, and only once.
    for wait in waits {
        if let Some(owner) = ctx.directory.get(wait.owner_agent_id) {
            if let Err(err) = supervisor::spawn_wait(ctx, wait, owner.actor.get_cell()).await {
                tracing::warn!(wait_id = %wait.id, agent_id = %wait.owner_agent_id, error = %err, "a wait did not re-arm");
            }
        }
    }
    // Nothing else writes while the daemon recovers: the queues read
    // above are complete. Only agents with work parked at the gate.
    for actor in ctx.lifecycle.turns.open() {
        let _ = actor.cast(AgentMsg::Release {
            pending: Vec::new(),
        });
    }
    Ok(())
}

/// An agent to respawn, with its rebuilt queue.
type Recovered = (AgentRecord, Vec<MessageId>);

/// Agents handed to the spawning tasks a few at a time, straight from the
/// plan's vector. At 1,000,000 agents, copying each generation out of the
/// plan and dealing it into one vector per spawner meant two more copies
/// of every record (about 300 MB each) in fresh memory on the way from a
/// crash to serving.
struct Dealer {
    deck: Mutex<Deck>,
}

struct Deck {
    rest: std::vec::IntoIter<AgentRecord>,
    /// The queues of the agents with pending messages.
    queues: HashMap<AgentId, Vec<MessageId>>,
    /// Agents of the generation being spawned not yet handed out; none of
    /// the next generation is handed out before its supervisors run.
    left: usize,
}

/// Agents one spawning task takes at once: few enough that the tasks
/// finish a generation together, enough that the lock is rarely taken.
const HAND: usize = 64;

impl Dealer {
    fn new(agents: Vec<AgentRecord>, queues: HashMap<AgentId, Vec<MessageId>>) -> Self {
        Self {
            deck: Mutex::new(Deck {
                rest: agents.into_iter(),
                queues,
                left: 0,
            }),
        }
    }

    fn deck(&self) -> std::sync::MutexGuard<'_, Deck> {
        // Nothing panics while the lock is held; a poisoned deck is whole.
        self.deck.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn start_generation(&self, size: usize) {
        self.deck().left = size;
    }

    /// Fills `hand` with the next agents of the generation; empty when it
    /// is all handed out.
    fn deal(&self, hand: &mut Vec<Recovered>) {
        let mut deck = self.deck();
        let take = deck.left.min(HAND);
        deck.left -= take;
        let Deck { rest, queues, .. } = &mut *deck;
        for record in rest.by_ref().take(take) {
            // Most agents come back with nothing queued: no lookup then.
            let queue = match queues.is_empty() {
                true => Vec::new(),
                false => queues.remove(&record.id).unwrap_or_default(),
            };
            hand.push((record, queue));
        }
    }

    /// After a failure: the generation's other agents are not spawned.
    fn stop(&self) {
        self.deck().left = 0;
    }
}

/// Spawns one generation of `size` agents (agents whose supervisors
/// already run) by [`spawners_for`] tasks, each taking hands from the dealer
/// and spawning one agent after another: the workers stay busy with no
/// wakeup per agent, where a task per agent driven from this (non-worker)
/// thread left one core idle about half the time at 1,000,000 agents. The
/// turn gate keeps their turns back.
async fn spawn_generation(
    ctx: &Arc<Ctx>,
    dealer: &Arc<Dealer>,
    size: usize,
) -> Result<(), ActorProcessingErr> {
    dealer.start_generation(size);
    let mut spawners = JoinSet::new();
    for _ in 0..spawners_for(size) {
        let ctx = ctx.clone();
        let dealer = dealer.clone();
        spawners.spawn(async move {
            let spawned = spawn_hands(&ctx, &dealer).await;
            if spawned.is_err() {
                dealer.stop();
            }
            spawned
        });
    }
    let mut failure = None;
    while let Some(done) = spawners.join_next().await {
        match done {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                failure.get_or_insert(err);
            }
            Err(join) => {
                dealer.stop();
                failure.get_or_insert(RespawnError::Panicked(join));
            }
        }
    }
    match failure {
        Some(err) => Err(format!("could not respawn an agent: {err}").into()),
        None => Ok(()),
    }
}

/// Tasks that spawn a generation of `size`: a few per core, so a task
/// that meets a slow spawn does not leave a core without work, and no more
/// than there are hands to take.
fn spawners_for(size: usize) -> usize {
    let per_machine = std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(2)
        .saturating_mul(SPAWNERS_PER_CORE);
    per_machine.min(size.div_ceil(HAND)).max(1)
}

/// Spawns the hands `dealer` gives, one agent after another, until the
/// generation is handed out; no turn runs (and reshapes the tree) until
/// the gate opens with every agent up. Stops at the first failure.
async fn spawn_hands(ctx: &Arc<Ctx>, dealer: &Dealer) -> Result<(), RespawnError> {
    let mut hand = Vec::with_capacity(HAND);
    loop {
        dealer.deal(&mut hand);
        if hand.is_empty() {
            return Ok(());
        }
        for (record, queue) in hand.drain(..) {
            spawn_one(ctx, record, queue).await?;
        }
    }
}

async fn spawn_one(
    ctx: &Arc<Ctx>,
    record: AgentRecord,
    queue: Vec<MessageId>,
) -> Result<(), RespawnError> {
    let supervisor = match record.supervisor_agent_id {
        None => ctx
            .topology
            .partition_for(record.id)
            .ok_or(RespawnError::NoPartition)?,
        Some(sup) => match ctx.directory.get(sup) {
            Some(entry) => entry.actor.get_cell(),
            None => {
                return Err(RespawnError::NoSupervisor {
                    supervisor: sup,
                    agent: record.id,
                })
            }
        },
    };
    supervisor::spawn_recovered(ctx, record, queue, supervisor)
        .await
        .map(drop)
        .map_err(RespawnError::Spawn)
}

/// Why an agent was not respawned at start; the first one ends the
/// recovery.
#[derive(Debug, thiserror::Error)]
enum RespawnError {
    #[error("no root partition runs")]
    NoPartition,
    /// Its generation comes after its supervisor's, so the supervisor
    /// should be in the directory by now.
    #[error("supervisor {supervisor} of {agent} did not start")]
    NoSupervisor { supervisor: AgentId, agent: AgentId },
    #[error("{0}")]
    Spawn(ActorProcessingErr),
    #[error("an agent's respawn panicked: {0}")]
    Panicked(tokio::task::JoinError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agents(count: usize) -> Vec<AgentRecord> {
        (0..count)
            .map(|i| AgentRecord::public(format!("agent-{i}"), 0))
            .collect()
    }

    /// Deals until the dealer says the generation is handed out.
    fn deal_all(dealer: &Dealer) -> Vec<AgentId> {
        let mut dealt = Vec::new();
        let mut hand = Vec::new();
        loop {
            dealer.deal(&mut hand);
            if hand.is_empty() {
                return dealt;
            }
            assert!(hand.len() <= HAND, "a hand of {}", hand.len());
            dealt.extend(hand.drain(..).map(|(record, _)| record.id));
        }
    }

    #[test]
    fn each_generation_is_dealt_whole_in_order_and_no_further() {
        let plan = agents(HAND * 2 + 30);
        let ids: Vec<AgentId> = plan.iter().map(|a| a.id).collect();
        let dealer = Dealer::new(plan, HashMap::new());
        // Nothing before a generation starts.
        assert!(deal_all(&dealer).is_empty());
        let first = HAND + 5;
        dealer.start_generation(first);
        assert_eq!(deal_all(&dealer), ids[..first]);
        // The next generation waits for its turn, even though it is there.
        assert!(deal_all(&dealer).is_empty());
        dealer.start_generation(ids.len() - first);
        assert_eq!(deal_all(&dealer), ids[first..]);
    }

    #[test]
    fn each_agent_is_dealt_with_its_own_queue() {
        let plan = agents(3);
        let queued = plan[1].id;
        let message = MessageId::generate();
        let dealer = Dealer::new(plan, HashMap::from([(queued, vec![message])]));
        dealer.start_generation(3);
        let mut hand = Vec::new();
        dealer.deal(&mut hand);
        let queues: Vec<(AgentId, Vec<MessageId>)> = hand
            .into_iter()
            .map(|(record, queue)| (record.id, queue))
            .collect();
        assert_eq!(queues.len(), 3);
        for (id, queue) in queues {
            let expected = if id == queued { vec![message] } else { vec![] };
            assert_eq!(queue, expected, "{id}");
        }
    }

    #[test]
    fn a_stopped_generation_deals_nothing_more() {
        let dealer = Dealer::new(agents(HAND * 3), HashMap::new());
        dealer.start_generation(HAND * 3);
        let mut hand = Vec::new();
        dealer.deal(&mut hand);
        assert_eq!(hand.len(), HAND);
        dealer.stop();
        hand.clear();
        dealer.deal(&mut hand);
        assert!(hand.is_empty());
    }

    #[test]
    fn spawners_never_outnumber_the_hands() {
        assert_eq!(spawners_for(0), 1);
        assert_eq!(spawners_for(1), 1);
        let per_machine = spawners_for(usize::MAX);
        assert_eq!(spawners_for(HAND + 1), 2.min(per_machine));
        assert_eq!(spawners_for(HAND * per_machine), per_machine);
        assert_eq!(spawners_for(1_000_000), per_machine);
    }
}
