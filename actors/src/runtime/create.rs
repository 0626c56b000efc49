//! Creating public agents: validated, committed in one batch (all or
//! none), started under their root partitions, then flushed once. Runs in
//! the caller's task, not in an actor's mailbox, so concurrent callers
//! create in parallel.

use std::sync::Arc;

use holarchy_supervision::bounds::{self, InvalidInput};
use holarchy_supervision::plan::{
    self,
    create::{Created, PublicAgent},
};
use holarchy_supervision::{AgentId, BrainConfig, Composition};
use ractor::ActorStatus;
use tokio::task::JoinSet;
use tracing::warn;

use crate::limits::AgentSlots;
use crate::store::{DurableFuture, StoreError};
use crate::topology::partition_of;
use crate::{now_ms, supervisor, Ctx};

/// Most agents one `CreateAgents` call may create.
pub const MAX_CREATE_BATCH: usize = 10_000;

/// An agent an operator asks for.
#[derive(Debug, Clone)]
pub struct NewAgent {
    pub name: String,
    pub initial_message: Option<String>,
    /// The daemon's default when `None`.
    pub brain: Option<BrainConfig>,
    /// Its own context budget (checked by
    /// [`holarchy_supervision::bounds::check_context_tokens`]); `None`: the
    /// daemon's or its brain kind's.
    pub context_tokens: Option<u32>,
    /// The daemon's MCP servers (by name) whose tools it may call; each
    /// must be in the daemon's MCP configuration.
    pub mcp_servers: Vec<String>,
    /// What network its commands may reach; children inherit it.
    pub network: holarchy_supervision::NetworkPolicy,
    /// The namespace it is made in (its caller's); checked by
    /// [`holarchy_supervision::namespace::check`].
    pub namespace: String,
    /// Its operator's labels (checked by
    /// [`holarchy_supervision::labels::check`]).
    pub labels: holarchy_supervision::labels::Labels,
    /// Who asked for it, as the audit trail names callers: logged as an
    /// `operator_action` in its creation's commit. `None` for the
    /// daemon's own creations.
    pub created_by: Option<holarchy_supervision::event::ActedBy>,
}

/// Why an agent was not created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    #[error(transparent)]
    InvalidBrain(#[from] holarchy_supervision::brain::BrainConfigError),
    #[error(transparent)]
    InvalidNamespace(#[from] holarchy_supervision::namespace::InvalidNamespace),
    #[error(transparent)]
    InvalidLabel(#[from] holarchy_supervision::labels::InvalidLabel),
    #[error("an agent named `{0}` already exists")]
    NameTaken(String),
    #[error("no MCP server named `{0}` in the daemon's MCP configuration (serve --mcp-config)")]
    UnknownMcpServer(String),
    #[error("mcp_servers names `{0}` more than once")]
    DuplicateMcpServer(String),
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

/// Marks an agent failed, with the reason, when its actor could not start,
/// unless it runs after all: a restarted partition's respawn may have
/// started it meanwhile (checked under the agent's own lock, which that
/// respawn takes). Returns whether it runs.
async fn mark_failed(ctx: &Ctx, agent_id: AgentId, reason: String) -> Result<bool, StoreError> {
    let _own = ctx.locks.structure.lock(agent_id).await;
    let runs = ctx
        .directory
        .get(agent_id)
        .is_some_and(|entry| entry.actor.get_status() < ActorStatus::Draining);
    if runs {
        return Ok(true);
    }
    let Some(record) = ctx.reads().agent(agent_id)? else {
        return Ok(false);
    };
    let Some(plan) = plan::create::mark_failed(&record, reason.clone(), now_ms()) else {
        return Ok(false);
    };
    warn!(agent_id = %agent_id, reason = %reason, "agent marked failed");
    match crate::apply::apply(ctx, plan) {
        // Ended meanwhile (a cleanup): its end stands.
        Err(StoreError::Precondition(_)) => Ok(false),
        other => other.map(|()| false),
    }
}

/// Creates the agents and waits until they are on disk and running. Runs
/// in a task of its own, so a caller that goes away half-way cannot leave
/// committed agents without actors.
pub(super) async fn create_agents(
    ctx: &Arc<Ctx>,
    specs: Vec<NewAgent>,
) -> Result<Vec<AgentId>, CreateError> {
    create_composed(ctx, specs.into_iter().map(|spec| (spec, None)).collect()).await
}

/// Like [`create_agents`], each agent with its composition (an instance's
/// agent): the composition lands in the same commit as the agent, so no
/// turn ever runs without it.
pub(super) async fn create_composed(
    ctx: &Arc<Ctx>,
    specs: Vec<(NewAgent, Option<Box<Composition>>)>,
) -> Result<Vec<AgentId>, CreateError> {
    let ctx = ctx.clone();
    let tasks = ctx.lifecycle.tasks.clone();
    tasks
        .spawn(async move {
            let (ids, flushed) = create_to_completion(&ctx, specs).await?;
            // Never answer before the flush that covers the commit has ended.
            flushed.await.map_err(CreateError::Store)?;
            Ok(ids)
        })
        .await
        .map_err(|join| CreateError::Spawn(format!("the create task failed: {join}")))?
}

/// Like [`create_composed`], without waiting for the flush: the caller
/// gets it to await once it has let go of what it holds (an instance's
/// apply lock), and must await it before it answers anyone.
pub(super) async fn create_composed_unflushed(
    ctx: &Arc<Ctx>,
    specs: Vec<(NewAgent, Option<Box<Composition>>)>,
) -> Result<(Vec<AgentId>, DurableFuture), CreateError> {
    create_to_completion(ctx, specs).await
}

/// Creates `public_named` agents in one batch: all of them, or (a bad
/// name, a taken name) none. Returns their ids and the flush that makes
/// them durable, asked for as soon as they are committed so that it runs
/// while their actors start.
async fn create_to_completion(
    ctx: &Arc<Ctx>,
    specs: Vec<(NewAgent, Option<Box<Composition>>)>,
) -> Result<(Vec<AgentId>, DurableFuture), CreateError> {
    validate(ctx, &specs)?;
    // Each given back as its agent is in the directory (or failed).
    let mut slots =
        crate::quota::reserve_agents(ctx, specs.iter().map(|(spec, _)| spec.namespace.as_str()))?;
    let agents = specs
        .into_iter()
        .map(|(spec, composition)| PublicAgent {
            name: spec.name,
            initial_message: spec.initial_message,
            brain: spec
                .brain
                .unwrap_or_else(|| ctx.config.default_brain.clone()),
            context_tokens: spec.context_tokens,
            mcp_servers: spec.mcp_servers,
            network: spec.network,
            namespace: spec.namespace,
            labels: spec.labels,
            created_by: spec.created_by,
            composition,
        })
        .collect();
    let (plan, created) = plan::create::public_agents(agents, now_ms());
    // One transaction: every record lands, or none does.
    // Grouped: concurrent single creations share one transaction (and its
    // log writes) instead of each taking sled's lock on its own.
    let ends_before = crate::apply::agent_ends(ctx);
    let flushed = crate::apply::apply_grouped(ctx, plan).await?;
    let total = created.len();
    let ids: Vec<AgentId> = created.iter().map(|(record, _)| record.id).collect();
    let outcome = start_all(ctx, created, ends_before, &mut slots).await;
    if let Some(err) = outcome.store {
        return Err(CreateError::Store(err));
    }
    match outcome.failure {
        // Say what exists now: a retry would meet the taken names.
        Some(err) => Err(CreateError::Spawn(format!(
            "{} of {total} agents were stored but could not start and are marked failed: {err}",
            outcome.failed
        ))),
        None => Ok((ids, flushed)),
    }
}

/// Refuses the whole call, before anything is written, if any agent is
/// malformed or two share a name. A name taken in the store is refused by
/// the commit, which must check anyway; reading it here too would wait
/// behind the store's writer whenever it is in a transaction.
fn validate(ctx: &Ctx, specs: &[(NewAgent, Option<Box<Composition>>)]) -> Result<(), CreateError> {
    if specs.len() > MAX_CREATE_BATCH {
        return Err(CreateError::TooMany {
            max: MAX_CREATE_BATCH,
        });
    }
    let mut names = std::collections::HashSet::with_capacity(specs.len());
    for (spec, _) in specs {
        bounds::check_name(&spec.name)?;
        if let Some(tokens) = spec.context_tokens {
            bounds::check_context_tokens(u64::from(tokens))?;
        }
        if let Some(brain) = &spec.brain {
            brain.validate()?;
        }
        if let Some(body) = &spec.initial_message {
            bounds::check_message(body)?;
        }
        check_mcp_servers(ctx, &spec.mcp_servers)?;
        holarchy_supervision::namespace::check(&spec.namespace)?;
        holarchy_supervision::labels::check(&spec.labels)?;
        if !names.insert((spec.namespace.as_str(), spec.name.as_str())) {
            return Err(CreateError::NameTaken(spec.name.clone()));
        }
    }
    Ok(())
}

/// Starts the committed agents, each partition's share in a task of its
/// own: a batch is spread over the cores as its agents are over the
/// partitions. Every share runs to its end, whatever another met.
async fn start_all(
    ctx: &Arc<Ctx>,
    created: Created,
    ends_before: u64,
    slots: &mut AgentSlots,
) -> ShareOutcome {
    let count = ctx.topology.partition_count();
    let mut shares: Vec<Created> = (0..count).map(|_| Vec::new()).collect();
    for (record, queue) in created {
        shares[partition_of(record.id, count)].push((record, queue));
    }
    let mut shares: Vec<_> = shares.into_iter().filter(|s| !s.is_empty()).collect();
    // A single call (one agent) starts it here: a task of its own would
    // cost two wakeups for nothing.
    if shares.len() == 1 {
        if let Some(share) = shares.pop() {
            return start_share(ctx, share, ends_before, slots).await;
        }
    }
    let mut outcome = ShareOutcome::default();
    let mut starts = JoinSet::new();
    for share in shares {
        let ctx = ctx.clone();
        let mut slots = slots.split(share.len());
        starts.spawn(async move { start_share(&ctx, share, ends_before, &mut slots).await });
    }
    // Dropping the set early would abort starts and leave committed agents
    // with no actor.
    while let Some(done) = starts.join_next().await {
        match done {
            Ok(share) => outcome.merge(share),
            Err(join) => outcome.merge(ShareOutcome {
                failed: 1,
                failure: Some(format!("a start task failed: {join}")),
                store: None,
            }),
        }
    }
    outcome
}

/// What starting one partition's share came to.
#[derive(Default)]
struct ShareOutcome {
    /// Agents that could not start.
    failed: usize,
    /// Why the first of them did not.
    failure: Option<String>,
    /// The first store error met while marking one failed.
    store: Option<StoreError>,
}

impl ShareOutcome {
    fn merge(&mut self, other: ShareOutcome) {
        self.failed += other.failed;
        if self.failure.is_none() {
            self.failure = other.failure;
        }
        if self.store.is_none() {
            self.store = other.store;
        }
    }
}

/// Starts one partition's share of a batch under that partition, every
/// agent of it even when one fails. `ends_before` is the store's count of
/// agent ends before the batch's commit (see [`supervisor::spawn_created`]).
async fn start_share(
    ctx: &Arc<Ctx>,
    share: Created,
    ends_before: u64,
    slots: &mut AgentSlots,
) -> ShareOutcome {
    let mut outcome = ShareOutcome::default();
    for (record, queue) in share {
        let agent_id = record.id;
        let held_before = slots.remaining();
        let started = match ctx.topology.partition_for(agent_id) {
            Some(partition) => {
                supervisor::spawn_created(ctx, record, queue, partition, ends_before, slots)
                    .await
                    .map(drop)
                    .map_err(|err| err.to_string())
            }
            None => Err("the runtime is stopping".to_owned()),
        };
        // Given back with the registration; one that never registered
        // (could not start) here.
        if slots.remaining() == held_before {
            slots.release_one();
        }
        if let Err(err) = started {
            // The record is committed; leave it failed rather than live
            // with no actor, so status, listings and a retry all tell
            // the truth.
            match mark_failed(ctx, agent_id, format!("could not start: {err}")).await {
                Ok(true) => continue,
                Ok(false) => {}
                Err(store) => {
                    outcome.store.get_or_insert(store);
                }
            }
            outcome.failed += 1;
            outcome.failure.get_or_insert(err);
        }
    }
    outcome
}

/// Every name one of the daemon's MCP servers, none twice (so a list is
/// never longer than the configuration).
fn check_mcp_servers(ctx: &Ctx, names: &[String]) -> Result<(), CreateError> {
    let mut seen = std::collections::HashSet::with_capacity(names.len());
    for name in names {
        if !ctx.mcp.knows(name) {
            let shown = holarchy_supervision::bounds::head(name, 64).to_owned();
            return Err(CreateError::UnknownMcpServer(shown));
        }
        if !seen.insert(name.as_str()) {
            return Err(CreateError::DuplicateMcpServer(name.clone()));
        }
    }
    Ok(())
}
