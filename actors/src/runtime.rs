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
use holarchy_supervision::{
    AgentId, AgentRecord, BrainConfig, EventKind, LifecycleState, MessageRecord, Preset, Provenance,
};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use tracing::{error, info, warn};

use crate::gateway::{GatewayActor, GatewayMsg};
use crate::store::{Batch, StoreError, Write};
use crate::{now_ms, supervise, Ctx};

mod handle;
mod recovery;

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
    Limit(#[from] crate::limits::LimitError),
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
    /// Messages set aside at start: their turns crashed the daemon
    /// `--max-message-attempts` times.
    pub poison_messages: usize,
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
        // Held until every new agent is in the directory (or failed).
        let _slots = crate::limits::reserve_agents(&self.ctx, specs.len())?;
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
        // Before any agent runs: none may wake up in a worktree a crash
        // kept git from making.
        let restored = crate::worktree::restore_running(&self.ctx).await?;
        if restored > 0 {
            info!(restored, "worktrees made again after a crash");
        }
        let recovered = recovery::recover(&self.ctx, &myself).await?;
        info!(
            agents = recovered.recovered_agents,
            interrupted = recovered.interrupted_runs,
            orphans = recovered.orphans_archived,
            cleanups = recovered.cleanups_finished,
            "runtime recovered"
        );
        // Worktrees whose tasks ended while the daemon was down, or whose
        // removal a crash cut short, go now, beside the serving daemon.
        let ctx = self.ctx.clone();
        tokio::spawn(async move {
            match crate::worktree::sweep(&ctx).await {
                Ok(0) => {}
                Ok(removed) => info!(removed, "stale worktrees removed"),
                Err(err) => warn!(error = %err, "worktree sweep failed"),
            }
        });
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
