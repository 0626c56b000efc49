//! Root partitions, as Elixir's `PartitionSupervisor`: public agents are
//! spread over `--partitions` supervisor actors by a hash of their id, so
//! creation, recovery and restarts of public agents are not funnelled
//! through one actor, and a partition that dies takes only its share down
//! (the root brings the partition and its agents back).

use std::sync::Arc;
use std::time::Instant;

use holarchy_supervision::AgentId;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::task::JoinSet;
use tracing::{error, info, warn};

use crate::store::StoreError;
use crate::topology::partition_of;
use crate::{supervisor, Ctx};

/// One partition: the supervisor of its share of the public agents. It
/// takes no messages; it exists to be their linked parent.
#[derive(Debug, Clone)]
pub struct PartitionActor {
    ctx: Arc<Ctx>,
    index: usize,
}

impl PartitionActor {
    /// Starts partition `index`, linked under the root.
    pub async fn spawn(
        ctx: &Arc<Ctx>,
        index: usize,
        root: ActorCell,
    ) -> Result<ActorCell, ActorProcessingErr> {
        let actor = PartitionActor {
            ctx: ctx.clone(),
            index,
        };
        let (partition, _) = Actor::spawn_linked(None, actor, (), root).await?;
        Ok(partition.get_cell())
    }
}

impl Actor for PartitionActor {
    type Msg = ();
    /// Restart budgets of its agents.
    type State = supervisor::Budgets;
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        _args: (),
    ) -> Result<Self::State, ActorProcessingErr> {
        tracing::debug!(partition = self.index, "partition started");
        Ok(supervisor::Budgets::default())
    }

    /// Replaces ractor's default (stop on any child exit): agents go
    /// through [`supervisor::on_child_exit`]. Nothing here may fail: an
    /// error would stop the partition and every agent under it.
    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        budgets: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let Some((child, reason)) = supervisor::exit_of(event) else {
            return Ok(());
        };
        if self.ctx.lifecycle.is_shutting_down() {
            return Ok(());
        }
        supervisor::on_child_exit(&self.ctx, myself.get_cell(), budgets, child, reason).await;
        Ok(())
    }
}

/// Brings partition `index` back after it died, and with it every public
/// agent it supervised (their subtrees died with it), from the store. Runs
/// in a task of its own: the root's `handle` must not wait for it.
pub fn restart(ctx: &Arc<Ctx>, index: usize, root: ActorCell, reason: String) {
    warn!(partition = index, reason = %reason, "partition exited; restarting it and its agents");
    let ctx = ctx.clone();
    let tasks = ctx.lifecycle.tasks.clone();
    tasks.spawn(async move {
        let started = Instant::now();
        // Listed before the new partition is in place: one created under
        // the new partition is never respawned a second time.
        let agents = match share_of(&ctx, index).await {
            Ok(agents) => agents,
            Err(err) => {
                error!(partition = index, error = %err, "could not list a restarted partition's agents");
                return;
            }
        };
        if ctx.lifecycle.is_shutting_down() {
            return;
        }
        let partition = match PartitionActor::spawn(&ctx, index, root.clone()).await {
            Ok(partition) => partition,
            Err(err) => {
                // Without it a share of the agents has no supervisor: the
                // runtime stops, as when a partition dies too often.
                error!(partition = index, error = %err, "could not restart a partition; the runtime stops");
                root.stop(Some(format!("partition {index} could not restart: {err}")));
                return;
            }
        };
        ctx.topology.set_partition(index, partition.clone());
        // The listing and the new partition's start.
        let ready_in = started.elapsed();
        let respawned = respawn_share(&ctx, index, &agents, partition).await;
        info!(
            partition = index,
            listed = agents.len(),
            respawned,
            ready_ms = ready_in.as_millis() as u64,
            total_ms = started.elapsed().as_millis() as u64,
            "partition restarted; its agents and their subtrees respawned"
        );
    });
}

/// Partition `index`'s share of the public agents, from the store: the
/// directory may lack one whose respawn a death of the partition cut
/// short. An ended agent is passed over by its respawn.
async fn share_of(ctx: &Arc<Ctx>, index: usize) -> Result<Vec<AgentId>, StoreError> {
    let count = ctx.topology.partition_count();
    // A scan of every public id: on the blocking pool, not a worker.
    let reading = ctx.clone();
    let ids = tokio::task::spawn_blocking(move || reading.reads().public_agent_ids())
        .await
        .unwrap_or_else(|join| Err(StoreError::Backend(join.to_string())))?;
    Ok(ids
        .into_iter()
        .filter(|id| partition_of(*id, count) == index)
        .collect())
}

/// Respawns `agents` and their subtrees under `partition`. Their subtrees
/// are independent: a few tasks bring them back side by side, so a large
/// partition is not respawned one by one. Returns how many agents came
/// back.
async fn respawn_share(
    ctx: &Arc<Ctx>,
    index: usize,
    agents: &[AgentId],
    partition: ActorCell,
) -> usize {
    let workers = std::thread::available_parallelism()
        .map(usize::from)
        .unwrap_or(2)
        .min(agents.len().max(1));
    let share = agents.len().div_ceil(workers).max(1);
    let mut respawning = JoinSet::new();
    for chunk in agents.chunks(share) {
        let (ctx, partition, chunk) = (ctx.clone(), partition.clone(), chunk.to_vec());
        respawning.spawn(async move {
            let mut respawned = 0;
            for agent_id in chunk {
                let why = "its partition died";
                match supervisor::respawn_subtree(&ctx, agent_id, partition.clone(), why).await {
                    Ok(agents) => respawned += agents,
                    Err(err) => {
                        error!(agent_id = %agent_id, error = %err, "could not respawn an agent of a restarted partition");
                    }
                }
            }
            respawned
        });
    }
    let mut respawned = 0;
    while let Some(done) = respawning.join_next().await {
        match done {
            Ok(agents) => respawned += agents,
            // Its share's remaining agents stay down until a restart.
            Err(err) => {
                error!(partition = index, error = %err, "a respawning task of a restarted partition failed")
            }
        }
    }
    respawned
}
