//! The runtime: the root supervisor actor, and [`Runtime`], the handle the
//! daemon (and benchmarks and tests) drive it through.
//!
//! The root supervises the gateway and every public agent. On start it
//! recovers from the store before it answers anything: interrupted turns
//! are requeued, live agents respawned, parents before children. A failed
//! agent is restarted one-for-one within the restart policy's intensity;
//! past it, the agent is marked failed in the store.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use holarchy_supervision::limits::{self, InvalidInput};
use holarchy_supervision::recovery::recover;
use holarchy_supervision::restart::{RestartBudget, RestartDecision};
use holarchy_supervision::{
    AgentId, AgentRecord, EventKind, LifecycleState, MessageId, MessageRecord, MessageStatus,
    Preset, Provenance, RunOutcome,
};
use ractor::{
    Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent,
};
use tracing::{error, info, warn};

use crate::agent::{AgentActor, AgentArgs};
use crate::directory::DirectoryEntry;
use crate::gateway::{GatewayActor, GatewayMsg};
use crate::store::{Batch, StoreError, Write};
use crate::{now_ms, Ctx};

mod handle;

pub use handle::Runtime;

/// Why an agent was not created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    #[error("an agent named `{0}` already exists")]
    NameTaken(String),
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
    pub busy_runs: usize,
    pub restarts: u64,
    pub given_up: u64,
    pub recovered_agents: usize,
    pub interrupted_runs: usize,
    pub stranded_messages: usize,
}

#[derive(Debug)]
pub enum RuntimeMsg {
    CreateAgent {
        name: String,
        initial_message: Option<String>,
        reply: RpcReplyPort<Result<AgentId, CreateError>>,
    },
    Snapshot(RpcReplyPort<RuntimeSnapshot>),
}

#[derive(Debug)]
pub struct RuntimeState {
    gateway: ActorRef<GatewayMsg>,
    /// Which agent each child actor runs, to read supervision events.
    agents_by_actor: HashMap<ActorId, AgentId>,
    /// Restart windows, only for agents that have failed at least once.
    budgets: HashMap<AgentId, RestartBudget>,
    restarts: u64,
    given_up: u64,
    recovered_agents: usize,
    interrupted_runs: usize,
    stranded_messages: usize,
}

#[derive(Debug, Clone)]
pub struct RuntimeActor {
    ctx: Arc<Ctx>,
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

    /// Spawns an agent's actor under its supervisor: the runtime for a
    /// self-owned agent, the supervising agent's actor for a private child.
    async fn spawn_agent(
        &self,
        myself: &ActorRef<RuntimeMsg>,
        state: &mut RuntimeState,
        record: AgentRecord,
        queue: Vec<MessageId>,
    ) -> Result<(), ActorProcessingErr> {
        let agent_id = record.id;
        let visibility = record.profile.visibility;
        let supervisor: ActorCell = match record.supervisor_agent_id {
            None => myself.get_cell(),
            Some(sup) => match self.ctx.directory.get(sup) {
                Some(entry) => entry.actor.get_cell(),
                None => return Err(format!("supervisor {sup} of {agent_id} is not running").into()),
            },
        };
        let (actor, _) = Actor::spawn_linked(
            None,
            AgentActor::new(self.ctx.clone()),
            AgentArgs { record, queue },
            supervisor,
        )
        .await?;
        state.agents_by_actor.insert(actor.get_id(), agent_id);
        self.ctx
            .directory
            .insert(agent_id, DirectoryEntry { actor, visibility });
        Ok(())
    }

    async fn create_agent(
        &self,
        myself: &ActorRef<RuntimeMsg>,
        state: &mut RuntimeState,
        name: String,
        initial_message: Option<String>,
    ) -> Result<AgentId, CreateError> {
        limits::check_name(&name)?;
        if let Some(body) = &initial_message {
            limits::check_message(body)?;
        }
        if self.ctx.store.agent_id_by_name(&name)?.is_some() {
            return Err(CreateError::NameTaken(name));
        }
        let now = now_ms();
        let profile = Preset::PublicNamed.profile();
        let record = AgentRecord {
            id: AgentId::generate(),
            name: Some(name.clone()),
            profile,
            lineage_parent_agent_id: None,
            supervisor_agent_id: None,
            state: LifecycleState::Active,
            created_at_ms: now,
            updated_at_ms: now,
        };
        let agent_id = record.id;
        let mut batch = Batch::new()
            .write(Write::CreateAgent(record.clone()))
            .event(
                agent_id,
                EventKind::AgentCreated {
                    name: Some(name),
                    preset: Some(Preset::PublicNamed.name().into()),
                    lineage_parent_agent_id: None,
                    supervisor_agent_id: None,
                },
            );
        let mut queue = Vec::new();
        if let Some(body) = initial_message {
            let message = MessageRecord {
                id: MessageId::generate(),
                agent_id,
                provenance: Provenance::Operator,
                body,
                dedupe_key: None,
                status: MessageStatus::Queued,
                reply: None,
                attempts: 0,
                created_at_ms: now,
            };
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
        self.ctx.store.commit(batch)?;
        if let Err(err) = self.spawn_agent(myself, state, record, queue).await {
            // The record is committed; leave it failed rather than live with
            // no actor, so status, listings and a retry all tell the truth.
            self.mark_failed(agent_id, format!("could not start: {err}"))?;
            return Err(CreateError::Spawn(err.to_string()));
        }
        Ok(agent_id)
    }

    /// One-for-one restart of a failed agent, within its restart budget.
    /// Either way, a turn the failure cut short is closed as interrupted
    /// and its message queued again, so no run is left open.
    async fn on_agent_failure(
        &self,
        myself: &ActorRef<RuntimeMsg>,
        state: &mut RuntimeState,
        agent_id: AgentId,
        reason: String,
    ) -> Result<(), ActorProcessingErr> {
        let Some(record) = self.ctx.store.agent(agent_id)? else {
            return Ok(());
        };
        if !record.state.is_live() {
            return Ok(());
        }
        let policy = self.ctx.config.restart_policy;
        let decision = state
            .budgets
            .entry(agent_id)
            .or_default()
            .on_failure(policy, now_ms());
        let (batch, queue) = self.requeue_interrupted(agent_id, &reason)?;
        match decision {
            RestartDecision::Restart => {
                self.ctx.store.commit(batch.event(
                    agent_id,
                    EventKind::AgentRestarted {
                        reason: reason.clone(),
                    },
                ))?;
                state.restarts += 1;
                warn!(agent_id = %agent_id, reason = %reason, "restarting failed agent");
                if let Err(err) = self.spawn_agent(myself, state, record, queue).await {
                    self.mark_failed(agent_id, format!("restart failed: {err}"))?;
                    state.given_up += 1;
                }
                Ok(())
            }
            RestartDecision::GiveUp => {
                self.ctx.store.commit(batch)?;
                let why = format!(
                    "restart intensity exceeded ({} in {} ms): {reason}",
                    policy.max_restarts, policy.period_ms
                );
                self.mark_failed(agent_id, why)?;
                state.given_up += 1;
                Ok(())
            }
        }
    }

    /// The agent's pending messages in queue order, with a batch that puts
    /// any in-flight one back to queued and closes its run as interrupted.
    fn requeue_interrupted(
        &self,
        agent_id: AgentId,
        reason: &str,
    ) -> Result<(Batch, Vec<MessageId>), StoreError> {
        let pending = self.ctx.store.pending_messages(agent_id)?;
        let mut batch = Batch::new();
        let mut queue = Vec::with_capacity(pending.len());
        for mut message in pending {
            queue.push(message.id);
            if let MessageStatus::Handling { run_id } = message.status {
                batch = batch.event(
                    agent_id,
                    EventKind::RunFinished {
                        run_id,
                        message_id: message.id,
                        outcome: RunOutcome::Interrupted,
                        detail: format!("agent actor failed: {reason}"),
                    },
                );
                message.status = MessageStatus::Queued;
                batch = batch.write(Write::PutMessage(message));
            }
        }
        Ok((batch, queue))
    }

    /// Records that the supervisor gave up on an agent; its actor is gone.
    fn mark_failed(&self, agent_id: AgentId, reason: String) -> Result<(), StoreError> {
        let Some(mut record) = self.ctx.store.agent(agent_id)? else {
            return Ok(());
        };
        record.state = LifecycleState::Failed;
        record.updated_at_ms = now_ms();
        warn!(agent_id = %agent_id, reason = %reason, "agent marked failed");
        self.ctx
            .store
            .commit(Batch::new().write(Write::PutAgent(record)).event(
                agent_id,
                EventKind::AgentStateChanged {
                    state: LifecycleState::Failed,
                    reason,
                },
            ))
    }

    async fn on_child_exit(
        &self,
        myself: &ActorRef<RuntimeMsg>,
        state: &mut RuntimeState,
        child: ActorCell,
        reason: String,
    ) -> Result<(), ActorProcessingErr> {
        if self.ctx.shutting_down.load(Ordering::Acquire) {
            return Ok(());
        }
        if child.get_id() == state.gateway.get_id() {
            warn!(reason = %reason, "gateway exited; restarting it");
            state.gateway = self.spawn_gateway(myself).await?;
            return Ok(());
        }
        if let Some(agent_id) = state.agents_by_actor.remove(&child.get_id()) {
            self.ctx.directory.remove(agent_id);
            // An agent stopped on purpose is no longer live in the store;
            // one that is still live has failed, whatever ractor reports.
            if let Err(err) = self.on_agent_failure(myself, state, agent_id, reason).await {
                // The root must outlive any one agent: if even recording the
                // failure fails, log it; the next start recovers the agent.
                error!(agent_id = %agent_id, error = %err, "could not handle agent failure");
            }
        }
        Ok(())
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
        let (agents, pending) = self.ctx.store.recovery_input()?;
        let plan = recover(agents, pending);
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
            message.status = MessageStatus::Queued;
            batch = batch.write(Write::PutMessage(message));
        }
        if !batch.is_empty() {
            self.ctx.store.commit(batch)?;
        }
        for orphan in &plan.orphans {
            warn!(agent_id = %orphan.id, "live agent whose supervisor is gone was not respawned");
        }
        let gateway = self.spawn_gateway(&myself).await?;
        let mut state = RuntimeState {
            gateway,
            agents_by_actor: HashMap::with_capacity(plan.spawn.len()),
            budgets: HashMap::new(),
            restarts: 0,
            given_up: 0,
            recovered_agents: plan.spawn.len(),
            interrupted_runs: plan.interrupted.len(),
            stranded_messages: plan.stranded_messages,
        };
        for agent in plan.spawn {
            self.spawn_agent(&myself, &mut state, agent.record, agent.queue)
                .await?;
        }
        info!(
            agents = state.recovered_agents,
            interrupted = state.interrupted_runs,
            "runtime recovered"
        );
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            RuntimeMsg::CreateAgent {
                name,
                initial_message,
                reply,
            } => {
                match self
                    .create_agent(&myself, state, name, initial_message)
                    .await
                {
                    Ok(agent_id) => {
                        let durable = self.ctx.store.durable();
                        tokio::spawn(async move {
                            let _ = reply
                                .send(durable.await.map(|()| agent_id).map_err(CreateError::Store));
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
                    busy_runs: self.ctx.busy.load(Ordering::Relaxed),
                    restarts: state.restarts,
                    given_up: state.given_up,
                    recovered_agents: state.recovered_agents,
                    interrupted_runs: state.interrupted_runs,
                    stranded_messages: state.stranded_messages,
                });
            }
        }
        Ok(())
    }

    /// Replaces ractor's default (stop on any child exit) with one-for-one
    /// restarts of the gateway and of failed agents.
    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let (child, reason) = match event {
            SupervisionEvent::ActorFailed(child, err) => (child, err.to_string()),
            SupervisionEvent::ActorTerminated(child, _, reason) => {
                (child, reason.unwrap_or_else(|| "stopped".into()))
            }
            SupervisionEvent::ActorStarted(_) | SupervisionEvent::ProcessGroupChanged(_) => {
                return Ok(());
            }
        };
        // An error here would stop the root and, through linkage, every
        // agent: supervision problems are logged, never propagated.
        if let Err(err) = self.on_child_exit(&myself, state, child, reason).await {
            error!(error = %err, "supervision step failed");
        }
        Ok(())
    }
}
