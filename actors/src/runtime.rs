//! The runtime: the root supervisor actor, and [`Runtime`], the handle the
//! daemon (and benchmarks and tests) drive it through.
//!
//! The root supervises the gateway and every self-owned agent. On start it
//! recovers from the store before it answers anything: cleanups a crash
//! interrupted are finished, private agents without a live supervisor are
//! archived, interrupted turns are requeued, and live agents respawned under
//! their supervisors, parents before children, with their task handles.
//! Failed children are handled by [`crate::supervise`].

use std::sync::atomic::Ordering;
use std::sync::Arc;

use holarchy_supervision::limits::{self, InvalidInput};
use holarchy_supervision::recovery::recover;
use holarchy_supervision::{
    AgentId, AgentRecord, BrainConfig, EventKind, LifecycleState, MessageEvent, MessageRecord,
    MessageStatus, Preset, Provenance, RunOutcome, TaskKind, TaskStatus, WaitStatus,
};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use tracing::{error, info, warn};

use crate::agent::AgentMsg;
use crate::gateway::{GatewayActor, GatewayMsg};
use crate::store::{Batch, StoreError, Write};
use crate::{cleanup, command_plane, now_ms, supervise, Ctx};

mod handle;

pub use handle::{ArchiveError, BrainError, Runtime};

/// Most agents one `CreateAgents` call may create.
pub const MAX_CREATE_BATCH: usize = 10_000;

/// An agent an operator asks for.
#[derive(Debug, Clone)]
pub struct NewAgent {
    pub name: String,
    pub initial_message: Option<String>,
    /// The daemon's default when `None`.
    pub brain: Option<BrainConfig>,
}

/// Why an agent was not created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    #[error(transparent)]
    InvalidBrain(#[from] holarchy_supervision::brain::BrainConfigError),
    #[error("an agent named `{0}` already exists")]
    NameTaken(String),
    #[error("at most {max} agents per call")]
    TooMany { max: usize },
    #[error(transparent)]
    Store(StoreError),
    #[error("could not start the agent's actor: {0}")]
    Spawn(String),
    #[error("the runtime did not answer: {0}")]
    Unavailable(String),
}

impl From<StoreError> for CreateError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NameTaken(name) => CreateError::NameTaken(name),
            other => CreateError::Store(other),
        }
    }
}

/// Why the runtime could not start or answer.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("recovery failed: {0}")]
    Recovery(#[from] StoreError),
    #[error("could not start the runtime: {0}")]
    Spawn(String),
    #[error("the runtime did not answer: {0}")]
    Unavailable(String),
}

/// What operators see of the runtime as a whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuntimeSnapshot {
    pub public_agents: usize,
    pub private_agents: usize,
    pub running_tasks: usize,
    pub busy_runs: usize,
    pub restarts: u64,
    pub given_up: u64,
    pub recovered_agents: usize,
    pub interrupted_runs: usize,
    pub stranded_messages: usize,
    pub orphans_archived: usize,
    pub cleanups_finished: usize,
    pub rearmed_waits: usize,
    pub interrupted_commands: usize,
    pub armed_waits: usize,
}

#[derive(Debug)]
pub enum RuntimeMsg {
    CreateAgents {
        specs: Vec<NewAgent>,
        reply: RpcReplyPort<Result<Vec<AgentId>, CreateError>>,
    },
    Snapshot(RpcReplyPort<RuntimeSnapshot>),
}

#[derive(Debug)]
pub struct RuntimeState {
    gateway: ActorRef<GatewayMsg>,
    /// What the start recovered, for status.
    recovered: RuntimeSnapshot,
}

#[derive(Debug, Clone)]
pub struct RuntimeActor {
    ctx: Arc<Ctx>,
}

/// Marks an agent failed, with the reason, when its actor could not start.
fn mark_failed(ctx: &Ctx, agent_id: AgentId, reason: String) -> Result<(), StoreError> {
    let Some(mut record) = ctx.store.agent(agent_id)? else {
        return Ok(());
    };
    record.state = LifecycleState::Failed;
    record.updated_at_ms = now_ms();
    warn!(agent_id = %agent_id, reason = %reason, "agent marked failed");
    ctx.store
        .commit(Batch::new().write(Write::PutAgent(record)).event(
            agent_id,
            EventKind::AgentStateChanged {
                state: LifecycleState::Failed,
                reason,
            },
        ))
}

impl RuntimeActor {
    async fn spawn_gateway(
        &self,
        myself: &ActorRef<RuntimeMsg>,
    ) -> Result<ActorRef<GatewayMsg>, ActorProcessingErr> {
        let (gateway, _) = Actor::spawn_linked(
            None,
            GatewayActor::new(self.ctx.clone()),
            (),
            myself.get_cell(),
        )
        .await?;
        self.ctx.set_gateway(gateway.clone());
        Ok(gateway)
    }

    /// Creates `public_named` agents in one durable batch: all of them, or
    /// (a bad name, a taken name) none.
    async fn create_agents(
        &self,
        myself: &ActorRef<RuntimeMsg>,
        specs: Vec<NewAgent>,
    ) -> Result<Vec<AgentId>, CreateError> {
        if specs.len() > MAX_CREATE_BATCH {
            return Err(CreateError::TooMany {
                max: MAX_CREATE_BATCH,
            });
        }
        let mut names = std::collections::HashSet::with_capacity(specs.len());
        for spec in &specs {
            limits::check_name(&spec.name)?;
            if let Some(brain) = &spec.brain {
                brain.validate()?;
            }
            if let Some(body) = &spec.initial_message {
                limits::check_message(body)?;
            }
            if !names.insert(spec.name.as_str())
                || self.ctx.store.agent_id_by_name(&spec.name)?.is_some()
            {
                return Err(CreateError::NameTaken(spec.name.clone()));
            }
        }
        let now = now_ms();
        let mut batch = Batch::new();
        let mut created = Vec::with_capacity(specs.len());
        for spec in specs {
            let record = AgentRecord {
                id: AgentId::generate(),
                name: Some(spec.name.clone()),
                profile: Preset::PublicNamed.profile(),
                lineage_parent_agent_id: None,
                supervisor_agent_id: None,
                state: LifecycleState::Active,
                brain: spec
                    .brain
                    .unwrap_or_else(|| self.ctx.config.default_brain.clone()),
                forked_context: None,
                created_at_ms: now,
                updated_at_ms: now,
            };
            let agent_id = record.id;
            batch = batch.write(Write::CreateAgent(record.clone())).event(
                agent_id,
                EventKind::AgentCreated {
                    name: Some(spec.name),
                    preset: Some(Preset::PublicNamed.name().into()),
                    lineage_parent_agent_id: None,
                    supervisor_agent_id: None,
                },
            );
            let mut queue = Vec::new();
            if let Some(body) = spec.initial_message {
                let message =
                    MessageRecord::queued(agent_id, Provenance::Operator, body, None, now);
                queue.push(message.id);
                batch = batch
                    .event(
                        agent_id,
                        EventKind::MessageQueued {
                            message_id: message.id,
                            provenance: message.provenance,
                        },
                    )
                    .write(Write::PutMessage(message));
            }
            created.push((record, queue));
        }
        // One transaction: every record lands, or none does.
        self.ctx.store.commit(batch)?;
        let total = created.len();
        let mut ids = Vec::with_capacity(total);
        let mut failed = 0;
        let mut failure = None;
        for (record, queue) in created {
            let agent_id = record.id;
            ids.push(agent_id);
            if let Err(err) =
                supervise::spawn_agent(&self.ctx, record, queue, myself.get_cell(), false).await
            {
                // The record is committed; leave it failed rather than live
                // with no actor, so status, listings and a retry all tell
                // the truth.
                mark_failed(&self.ctx, agent_id, format!("could not start: {err}"))?;
                failed += 1;
                failure.get_or_insert(err.to_string());
            }
        }
        match failure {
            // Say what exists now: a retry would meet the taken names.
            Some(err) => Err(CreateError::Spawn(format!(
                "{failed} of {total} agents were stored but could not start and are marked failed: {err}"
            ))),
            None => Ok(ids),
        }
    }

    /// Brings the store to a consistent tree and respawns it.
    async fn recover(
        &self,
        myself: &ActorRef<RuntimeMsg>,
    ) -> Result<RuntimeSnapshot, ActorProcessingErr> {
        let ctx = &self.ctx;
        let mut report = RuntimeSnapshot::default();
        let input = ctx.store.recovery_input()?;
        for intent in &input.intents {
            let finished = cleanup::finish(ctx, intent)?;
            info!(agent_id = %intent.root_agent_id, finished, "finished an interrupted cleanup");
            report.cleanups_finished += 1;
        }
        // Commands that ran when the daemon died are interrupted, never
        // silently erased: their groups are killed if still there, and
        // their owners told (before the queues are rebuilt below).
        let mut interrupted_commands = Batch::new();
        for task in input
            .running_tasks
            .iter()
            .filter(|t| t.kind == TaskKind::Command)
        {
            let owner_live = ctx
                .store
                .agent(task.owner_agent_id)?
                .is_some_and(|a| a.state.is_live());
            let (batch, _) =
                command_plane::interrupt(task, "the daemon restarted while it ran", owner_live);
            interrupted_commands.writes.extend(batch.writes);
            interrupted_commands.events.extend(batch.events);
            report.interrupted_commands += 1;
        }
        if !interrupted_commands.is_empty() {
            ctx.store.commit(interrupted_commands)?;
        }
        // Those steps changed records; read again if there were any.
        let input = if input.intents.is_empty() && report.interrupted_commands == 0 {
            input
        } else {
            ctx.store.recovery_input()?
        };
        let plan = recover(input.agents, input.pending);

        let mut batch = Batch::new();
        for mut message in plan.interrupted.iter().cloned() {
            if let MessageStatus::Handling { run_id } = message.status {
                batch = batch.event(
                    message.agent_id,
                    EventKind::RunFinished {
                        run_id,
                        message_id: message.id,
                        outcome: RunOutcome::Interrupted,
                        detail: "daemon stopped mid-turn; message queued again".into(),
                    },
                );
            }
            message.status = message
                .status
                .next(MessageEvent::Requeue)
                .unwrap_or(message.status);
            batch = batch.write(Write::PutMessage(message));
        }
        // No private agent may live without a live supervisor.
        for mut orphan in plan.orphans.iter().cloned() {
            warn!(agent_id = %orphan.id, "archiving a private agent whose supervisor is gone");
            orphan.state = LifecycleState::Archived;
            orphan.updated_at_ms = now_ms();
            batch = batch.event(
                orphan.id,
                EventKind::AgentStateChanged {
                    state: LifecycleState::Archived,
                    reason: "orphaned: supervisor not live at restart".into(),
                },
            );
            batch = batch.write(Write::PutAgent(orphan));
        }
        let spawned: std::collections::HashSet<AgentId> =
            plan.spawn.iter().map(|a| a.record.id).collect();
        let mut tasks_to_spawn = Vec::new();
        for mut task in input.running_tasks {
            let child_alive = match task.kind {
                TaskKind::Command => false,
                TaskKind::ChildAgent { child_agent_id } => spawned.contains(&child_agent_id),
            };
            if spawned.contains(&task.owner_agent_id) && child_alive {
                tasks_to_spawn.push(task);
            } else {
                task.status = TaskStatus::Failed;
                task.output = Some("its child was not live at restart".into());
                task.updated_at_ms = now_ms();
                batch = batch.write(Write::PutTask(task));
            }
        }
        let mut waits_to_arm = Vec::new();
        for mut wait in input.armed_waits {
            if spawned.contains(&wait.owner_agent_id) {
                waits_to_arm.push(wait);
            } else {
                // Its owner is not coming back: nothing is left to wake.
                wait.status = WaitStatus::Cancelled;
                wait.updated_at_ms = now_ms();
                batch = batch.write(Write::PutWait(wait));
            }
        }
        if !batch.is_empty() {
            ctx.store.commit(batch)?;
        }
        report.recovered_agents = plan.spawn.len();
        report.interrupted_runs = plan.interrupted.len();
        report.stranded_messages = plan.stranded_messages;
        report.orphans_archived = plan.orphans.len();

        let mut started = Vec::with_capacity(plan.spawn.len());
        for agent in plan.spawn {
            let supervisor = match agent.record.supervisor_agent_id {
                None => myself.get_cell(),
                Some(sup) => match ctx.directory.get(sup) {
                    Some(entry) => entry.actor.get_cell(),
                    None => {
                        return Err(format!(
                            "supervisor {sup} of {} did not start",
                            agent.record.id
                        )
                        .into())
                    }
                },
            };
            // Held: no turn runs (and reshapes the tree) until all are up.
            if let Some(actor) =
                supervise::spawn_agent(ctx, agent.record, agent.queue, supervisor, true).await?
            {
                started.push(actor);
            }
        }
        for task in &tasks_to_spawn {
            if let Some(owner) = ctx.directory.get(task.owner_agent_id) {
                supervise::spawn_task(ctx, task, owner.actor.get_cell()).await?;
            }
        }
        // Timers re-arm from the store; one whose deadline passed while the
        // daemon was down fires at once, and only once.
        for wait in &waits_to_arm {
            if let Some(owner) = ctx.directory.get(wait.owner_agent_id) {
                supervise::spawn_wait(ctx, wait, owner.actor.get_cell()).await?;
            }
        }
        report.rearmed_waits = waits_to_arm.len();
        // Nothing else writes while the daemon recovers: the queues read
        // above are complete.
        for actor in started {
            let _ = actor.cast(AgentMsg::Release {
                pending: Vec::new(),
            });
        }
        Ok(report)
    }
}

impl Actor for RuntimeActor {
    type Msg = RuntimeMsg;
    type State = RuntimeState;
    type Arguments = ();

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        _args: (),
    ) -> Result<Self::State, ActorProcessingErr> {
        self.ctx.set_root(myself.get_cell());
        let gateway = self.spawn_gateway(&myself).await?;
        let recovered = self.recover(&myself).await?;
        info!(
            agents = recovered.recovered_agents,
            interrupted = recovered.interrupted_runs,
            orphans = recovered.orphans_archived,
            cleanups = recovered.cleanups_finished,
            "runtime recovered"
        );
        Ok(RuntimeState { gateway, recovered })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            RuntimeMsg::CreateAgents { specs, reply } => {
                match self.create_agents(&myself, specs).await {
                    Ok(ids) => {
                        // One flush for the whole batch, waited for beside the
                        // actor.
                        let durable = self.ctx.store.durable();
                        tokio::spawn(async move {
                            let _ =
                                reply.send(durable.await.map(|()| ids).map_err(CreateError::Store));
                        });
                    }
                    Err(err) => {
                        let _ = reply.send(Err(err));
                    }
                }
            }
            RuntimeMsg::Snapshot(reply) => {
                let counts = self.ctx.directory.counts();
                let _ = reply.send(RuntimeSnapshot {
                    public_agents: counts.public,
                    private_agents: counts.private,
                    running_tasks: counts.tasks,
                    armed_waits: counts.waits,
                    busy_runs: self.ctx.busy.load(Ordering::Relaxed),
                    restarts: self.ctx.restarts.load(Ordering::Relaxed),
                    given_up: self.ctx.given_up.load(Ordering::Relaxed),
                    ..state.recovered.clone()
                });
            }
        }
        Ok(())
    }

    /// Replaces ractor's default (stop on any child exit): the gateway is
    /// restarted, agents go through [`supervise::on_child_exit`]. Nothing
    /// here may fail: an error would stop the root and every agent with it.
    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let Some((child, reason)) = supervise::exit_of(event) else {
            return Ok(());
        };
        if self.ctx.shutting_down.load(Ordering::Acquire) {
            return Ok(());
        }
        if child.get_id() == state.gateway.get_id() {
            warn!(reason = %reason, "gateway exited; restarting it");
            match self.spawn_gateway(&myself).await {
                Ok(gateway) => state.gateway = gateway,
                Err(err) => error!(error = %err, "could not restart the gateway"),
            }
            return Ok(());
        }
        supervise::on_child_exit(&self.ctx, myself.get_cell(), child, reason).await;
        Ok(())
    }
}
