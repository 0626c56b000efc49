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
use std::time::{Duration, Instant};

use holarchy_supervision::limits::{self, InvalidInput};
use holarchy_supervision::recovery::recover;
use holarchy_supervision::restart::{RestartBudget, RestartDecision};
use holarchy_supervision::{
    AgentId, AgentRecord, EventKind, LifecycleState, MessageId, MessageRecord, MessageStatus,
    Preset, Provenance, RunOutcome,
};
use ractor::rpc::CallResult;
use ractor::{
    Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent,
};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::agent::{AgentActor, AgentArgs, AgentMsg, AgentSnapshot, DeliverError, Delivered};
use crate::directory::DirectoryEntry;
use crate::gateway::{GatewayActor, GatewayMsg};
use crate::store::{Batch, StoreError, Write};
use crate::{now_ms, Brain, Ctx, RuntimeConfig, Store};

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
        self.spawn_agent(myself, state, record, queue)
            .await
            .map_err(|err| CreateError::Spawn(err.to_string()))?;
        Ok(agent_id)
    }

    /// One-for-one restart of a failed agent, within its restart budget.
    async fn on_agent_failure(
        &self,
        myself: &ActorRef<RuntimeMsg>,
        state: &mut RuntimeState,
        agent_id: AgentId,
        reason: String,
    ) -> Result<(), ActorProcessingErr> {
        let Some(mut record) = self.ctx.store.agent(agent_id)? else {
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
        match decision {
            RestartDecision::Restart => {
                let pending = self.ctx.store.pending_messages(agent_id)?;
                let mut batch = Batch::new().event(
                    agent_id,
                    EventKind::AgentRestarted {
                        reason: reason.clone(),
                    },
                );
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
                self.ctx.store.commit(batch)?;
                state.restarts += 1;
                warn!(agent_id = %agent_id, reason = %reason, "restarting failed agent");
                self.spawn_agent(myself, state, record, queue).await
            }
            RestartDecision::GiveUp => {
                record.state = LifecycleState::Failed;
                record.updated_at_ms = now_ms();
                let why = format!(
                    "restart intensity exceeded ({} in {} ms): {reason}",
                    policy.max_restarts, policy.period_ms
                );
                self.ctx
                    .store
                    .commit(Batch::new().write(Write::PutAgent(record)).event(
                        agent_id,
                        EventKind::AgentStateChanged {
                            state: LifecycleState::Failed,
                            reason: why.clone(),
                        },
                    ))?;
                state.given_up += 1;
                warn!(agent_id = %agent_id, reason = %why, "agent marked failed");
                Ok(())
            }
        }
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
            self.on_agent_failure(myself, state, agent_id, reason)
                .await?;
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
        match event {
            SupervisionEvent::ActorFailed(child, err) => {
                self.on_child_exit(&myself, state, child, err.to_string())
                    .await?;
            }
            SupervisionEvent::ActorTerminated(child, _, reason) => {
                let reason = reason.unwrap_or_else(|| "stopped".into());
                self.on_child_exit(&myself, state, child, reason).await?;
            }
            SupervisionEvent::ActorStarted(_) | SupervisionEvent::ProcessGroupChanged(_) => {}
        }
        Ok(())
    }
}

/// The handle to a running runtime.
#[derive(Debug)]
pub struct Runtime {
    ctx: Arc<Ctx>,
    root: ActorRef<RuntimeMsg>,
    join: std::sync::Mutex<Option<JoinHandle<()>>>,
    started: Instant,
}

impl Runtime {
    /// Recovers from the store and starts every live agent. Returns once
    /// all of them run, so a caller can report SERVING right after.
    pub async fn start(
        store: Arc<dyn Store>,
        brain: Arc<dyn Brain>,
        config: RuntimeConfig,
    ) -> Result<Self, RuntimeError> {
        let ctx = Arc::new(Ctx::new(store, brain, config));
        let (root, join) = Actor::spawn(None, RuntimeActor { ctx: ctx.clone() }, ())
            .await
            .map_err(|err| RuntimeError::Spawn(err.to_string()))?;
        Ok(Self {
            ctx,
            root,
            join: std::sync::Mutex::new(Some(join)),
            started: Instant::now(),
        })
    }

    pub fn ctx(&self) -> &Arc<Ctx> {
        &self.ctx
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// Creates a `public_named` agent as an operator would.
    pub async fn create_agent(
        &self,
        name: String,
        initial_message: Option<String>,
    ) -> Result<AgentId, CreateError> {
        let result = self
            .root
            .call(
                |reply| RuntimeMsg::CreateAgent {
                    name,
                    initial_message,
                    reply,
                },
                Some(self.ctx.config.call_timeout),
            )
            .await;
        match result {
            Ok(CallResult::Success(answer)) => answer,
            Ok(CallResult::Timeout) => Err(CreateError::Unavailable("timed out".into())),
            Ok(CallResult::SenderError) => Err(CreateError::Unavailable(
                "runtime dropped the request".into(),
            )),
            Err(err) => Err(CreateError::Unavailable(err.to_string())),
        }
    }

    /// Operator ingress: through the gateway, to public agents only.
    /// Resolves once the message is durable.
    pub async fn send_message(
        &self,
        agent_id: AgentId,
        body: String,
        dedupe_key: Option<String>,
    ) -> Result<Delivered, DeliverError> {
        limits::check_message(&body)?;
        if let Some(key) = &dedupe_key {
            limits::check_dedupe_key(key)?;
        }
        let gateway = self
            .ctx
            .gateway()
            .ok_or_else(|| DeliverError::Unavailable("gateway not running".into()))?;
        let result = gateway
            .call(
                |reply| GatewayMsg::Ingress {
                    agent_id,
                    body,
                    dedupe_key,
                    reply,
                },
                Some(self.ctx.config.call_timeout),
            )
            .await;
        match result {
            Ok(CallResult::Success(answer)) => answer,
            Ok(CallResult::Timeout) => Err(DeliverError::Unavailable("timed out".into())),
            Ok(CallResult::SenderError) => Err(DeliverError::Unavailable("request dropped".into())),
            Err(err) => Err(DeliverError::Unavailable(err.to_string())),
        }
    }

    /// The live view of a running agent; `None` if its actor is not running.
    pub async fn agent_snapshot(&self, agent_id: AgentId) -> Option<AgentSnapshot> {
        let entry = self.ctx.directory.get(agent_id)?;
        match entry
            .actor
            .call(AgentMsg::Snapshot, Some(self.ctx.config.call_timeout))
            .await
        {
            Ok(CallResult::Success(snapshot)) => Some(snapshot),
            _ => None,
        }
    }

    pub async fn snapshot(&self) -> Result<RuntimeSnapshot, RuntimeError> {
        match self
            .root
            .call(RuntimeMsg::Snapshot, Some(self.ctx.config.call_timeout))
            .await
        {
            Ok(CallResult::Success(snapshot)) => Ok(snapshot),
            Ok(_) => Err(RuntimeError::Unavailable("no answer".into())),
            Err(err) => Err(RuntimeError::Unavailable(err.to_string())),
        }
    }

    /// Stops every actor, top-down, within `timeout`. Pending work stays in
    /// the store and resumes on the next start.
    pub async fn shutdown(&self, timeout: Duration) {
        self.ctx.shutting_down.store(true, Ordering::Release);
        if let Err(err) = self
            .root
            .stop_and_wait(Some("shutdown".into()), Some(timeout))
            .await
        {
            warn!(error = %err, "runtime did not stop in time; killing it");
            self.root.kill();
        }
        let join = self
            .join
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(join) = join {
            let _ = tokio::time::timeout(timeout, join).await;
        }
    }
}
