//! The runtime: the root supervisor actor, and [`Runtime`], the handle the
//! daemon (and benchmarks and tests) drive it through.
//!
//! The root supervises the gateway and the root partitions
//! ([`partition`]), which supervise the self-owned agents. On start it
//! recovers from the store before it answers anything: cleanups a crash
//! interrupted are finished, private agents without a live supervisor are
//! archived, interrupted turns are requeued, and live agents respawned under
//! their supervisors, parents before children, with their task handles.
//! Failed children are handled by [`crate::supervisor`].

use std::sync::atomic::Ordering;
use std::sync::Arc;

use holarchy_supervision::restart::{RestartBudgets, RestartDecision};
use holarchy_supervision::AgentId;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use tracing::{error, info, warn};

use crate::gateway::GatewayActor;
use crate::inbound::scheduler::SchedulerActor;
use crate::protocol::{GatewayMsg, SchedulerMsg};
use crate::store::StoreError;
use crate::{now_ms, supervisor, Ctx};

pub mod activity;
mod bounded;
mod create;
mod damage;
pub mod factory;
mod handle;
pub mod inspect;
pub mod instance;
pub mod levels;
mod operator;
pub mod partition;
mod recovery;

pub use bounded::Bounded;
pub use create::{CreateError, NewAgent, MAX_CREATE_BATCH};
pub use handle::{ArchiveError, BrainError, Runtime};

/// One message of a [`Runtime::send_messages`] batch.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub agent_id: AgentId,
    pub body: String,
    pub dedupe_key: Option<String>,
    /// Logged for the agent in the message's commit if it is queued (who
    /// sent it).
    pub events: Vec<holarchy_supervision::EventKind>,
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
    /// Records the start could not read (see `damage`).
    /// The first 100 of them (`damage::MAX_KEPT`): the snapshot is copied on
    /// every status call, and a disk that lost thousands of records is
    /// told by their count.
    pub damaged: Vec<crate::store::DamagedRecord>,
    /// Every damaged record, listed or not.
    pub damaged_count: usize,
    /// Agents not started because a record of theirs, or of a
    /// supervisor above them, is damaged.
    pub held_agents: usize,
    /// Timers armed by turns a crash cut short, cancelled: the turns run
    /// again and arm their own.
    pub cut_timers_cancelled: usize,
    /// Calls parked by turns a crash cut short, withdrawn: the turns run
    /// again and park their own.
    pub cut_approvals_withdrawn: usize,
}

#[derive(Debug)]
pub enum RuntimeMsg {
    Snapshot(RpcReplyPort<RuntimeSnapshot>),
}

/// The root's own children, as its restart budgets know them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum RootChild {
    Gateway,
    Scheduler,
    Partition(usize),
}

#[derive(Debug)]
pub struct RuntimeState {
    gateway: ActorRef<GatewayMsg>,
    /// Fires the instances' schedules; started after recovery.
    scheduler: ActorRef<SchedulerMsg>,
    /// What the start recovered, for status.
    recovered: RuntimeSnapshot,
    /// Restarts of the gateway, the scheduler and each partition: one that
    /// keeps dying past the policy stops the root (and the daemon), as an
    /// OTP supervisor escalates, rather than restart it forever.
    budgets: RestartBudgets<RootChild>,
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
        self.ctx.topology.set_gateway(gateway.clone());
        Ok(gateway)
    }

    async fn spawn_scheduler(
        &self,
        myself: &ActorRef<RuntimeMsg>,
    ) -> Result<ActorRef<SchedulerMsg>, ActorProcessingErr> {
        let (scheduler, _) = Actor::spawn_linked(
            None,
            SchedulerActor::new(self.ctx.clone()),
            (),
            myself.get_cell(),
        )
        .await?;
        self.ctx.topology.set_scheduler(scheduler.clone());
        Ok(scheduler)
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
        self.ctx.topology.set_root(myself.get_cell());
        let gateway = self.spawn_gateway(&myself).await?;
        let mut partitions = Vec::with_capacity(self.ctx.config.partitions.max(1));
        for index in 0..self.ctx.config.partitions.max(1) {
            partitions
                .push(partition::PartitionActor::spawn(&self.ctx, index, myself.get_cell()).await?);
        }
        self.ctx.topology.set_partitions(partitions);
        // Before any agent runs: none may wake up in a worktree a crash
        // kept git from making.
        let restored = crate::workspace::worktree::restore_running(&self.ctx).await?;
        if restored > 0 {
            info!(restored, "worktrees made again after a crash");
        }
        let recovered = recovery::recover(&self.ctx).await?;
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
        let tasks = ctx.lifecycle.tasks.clone();
        tasks.spawn(async move {
            match crate::workspace::worktree::sweep(&ctx).await {
                Ok(0) => {}
                Ok(removed) => info!(removed, "stale worktrees removed"),
                Err(err) => warn!(error = %err, "worktree sweep failed"),
            }
        });
        // After recovery, with every agent running: an approved call the
        // daemon died running is closed (never run again), and outcomes a
        // crash kept from their agents are told.
        // Closed here, before the daemon answers, so no operator's approve
        // can race it; the telling goes on beside the serving daemon.
        let untold = crate::approval::close_interrupted(&self.ctx)?;
        let ctx = self.ctx.clone();
        let tasks = ctx.lifecycle.tasks.clone();
        tasks.spawn(async move {
            match crate::approval::tell_untold(&ctx, untold).await {
                Ok(0) => {}
                Ok(told) => info!(told, "approval outcomes delivered after a restart"),
                Err(err) => warn!(error = %err, "approval recovery failed"),
            }
        });
        // After recovery, so a schedule missed while the daemon was down
        // finds its agent running.
        let scheduler = self.spawn_scheduler(&myself).await?;
        Ok(RuntimeState {
            gateway,
            scheduler,
            recovered,
            budgets: RestartBudgets::default(),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            RuntimeMsg::Snapshot(reply) => {
                let counts = self.ctx.directory.counts();
                let _ = reply.send(RuntimeSnapshot {
                    public_agents: counts.public,
                    private_agents: counts.private,
                    running_tasks: counts.tasks,
                    armed_waits: counts.waits,
                    busy_runs: self.ctx.stats.busy.load(Ordering::Relaxed),
                    restarts: self.ctx.stats.restarts.load(Ordering::Relaxed),
                    given_up: self.ctx.stats.given_up.load(Ordering::Relaxed),
                    ..state.recovered.clone()
                });
            }
        }
        Ok(())
    }

    /// Replaces ractor's default (stop on any child exit): the gateway is
    /// restarted, agents go through [`supervisor::on_child_exit`]. Nothing
    /// here may fail: an error would stop the root and every agent with it.
    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let Some((child, reason)) = supervisor::exit_of(event) else {
            return Ok(());
        };
        if self.ctx.lifecycle.is_shutting_down() {
            return Ok(());
        }
        let which = if child.get_id() == state.gateway.get_id() {
            RootChild::Gateway
        } else if child.get_id() == state.scheduler.get_id() {
            RootChild::Scheduler
        } else if let Some(index) = self.ctx.topology.partition_index(child.get_id()) {
            RootChild::Partition(index)
        } else {
            // Only the gateway, the scheduler and the partitions are linked here.
            warn!(reason = %reason, "an unexpected child of the root exited");
            return Ok(());
        };
        let policy = self.ctx.config.restart_policy;
        if state.budgets.on_failure(which, policy, now_ms()) == RestartDecision::GiveUp {
            error!(
                child = ?which,
                reason = %reason,
                max_restarts = policy.max_restarts,
                period_ms = policy.period_ms,
                "a child of the root keeps failing; the runtime stops"
            );
            myself.stop(Some(format!("{which:?} failed too often: {reason}")));
            return Ok(());
        }
        match which {
            RootChild::Gateway => {
                warn!(reason = %reason, "gateway exited; restarting it");
                match self.spawn_gateway(&myself).await {
                    Ok(gateway) => state.gateway = gateway,
                    Err(err) => error!(error = %err, "could not restart the gateway"),
                }
            }
            RootChild::Scheduler => {
                warn!(reason = %reason, "scheduler exited; restarting it");
                match self.spawn_scheduler(&myself).await {
                    Ok(scheduler) => state.scheduler = scheduler,
                    Err(err) => error!(error = %err, "could not restart the scheduler"),
                }
            }
            RootChild::Partition(index) => {
                partition::restart(&self.ctx, index, myself.get_cell(), reason);
            }
        }
        Ok(())
    }
}
