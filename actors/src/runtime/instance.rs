//! Instances: apply (create or update), read and delete. An instance's
//! agent is the public agent of the same name whose composition names the
//! instance; applying writes the agent first (created with its
//! composition, or updated from its next turn), then the instance record by
//! compare-and-swap. A crash between the two leaves an agent the next apply
//! of the same manifest adopts.

use std::collections::BTreeMap;
use std::sync::Arc;

use holarchy_composition::instance::InstanceRecord;
use holarchy_composition::manifest::{self, InstanceSpec, ManifestError};
use holarchy_supervision::cleanup::CleanupReason;
use holarchy_supervision::plan::{self, instance::Apply};
use holarchy_supervision::{AgentId, AgentRecord};

use super::create::{self, CreateError, NewAgent};
use crate::compose::instance::{self as lookup, LookupError};
use crate::protocol::AgentMsg;
use crate::store::{DurableFuture, StoreError};
use crate::supervisor::cleanup;
use crate::{now_ms, Ctx};

/// What an apply did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Created,
    Updated,
    /// The manifest was the one applied last: nothing was written.
    Unchanged,
}

impl Change {
    pub fn name(self) -> &'static str {
        match self {
            Change::Created => "created",
            Change::Updated => "updated",
            Change::Unchanged => "unchanged",
        }
    }
}

pub use crate::compose::instance::InstanceView;

#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    #[error(transparent)]
    Invalid(#[from] ManifestError),
    #[error("no instance named `{0}`")]
    NotFound(String),
    /// The daemon cannot take the manifest as it stands (a name held by
    /// another agent, a secret not set, a racing apply).
    #[error("{0}")]
    Precondition(String),
    #[error(transparent)]
    Create(CreateError),
    #[error(transparent)]
    Store(StoreError),
}

impl From<LookupError> for InstanceError {
    fn from(err: LookupError) -> Self {
        match err {
            LookupError::NotFound(name) => InstanceError::NotFound(name),
            LookupError::Precondition(why) => InstanceError::Precondition(why),
            LookupError::Store(err) => InstanceError::Store(err),
        }
    }
}

impl From<StoreError> for InstanceError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Precondition(why) => InstanceError::Precondition(why),
            other => InstanceError::Store(other),
        }
    }
}

/// Parses, checks and applies a manifest. Idempotent: the same manifest
/// twice changes nothing the second time.
pub async fn apply(
    ctx: &Arc<Ctx>,
    manifest_text: &str,
    files: &BTreeMap<String, String>,
) -> Result<(InstanceView, Change), InstanceError> {
    let spec = manifest::parse(manifest_text, files)?;
    check(ctx, &spec).await?;
    // Orders this apply's two writes (the agent, then the instance) against
    // another apply of the same instance. Held for the writes only, never
    // across their flush, which comes after it is let go.
    let one_at_a_time = ctx.locks.instances.lock(spec.name.clone()).await;
    let previous = ctx.instances().instance(&spec.name)?;
    let record = InstanceRecord {
        digest: spec.digest(),
        created_at_ms: previous.as_ref().map_or_else(now_ms, |p| p.created_at_ms),
        updated_at_ms: now_ms(),
        spec,
    };
    let name = record.spec.name.clone();
    let agent = agent_of(ctx, &name)?;
    let wanted = wanted(ctx, &record);
    let previous_digest = previous.as_ref().map(|p| p.digest.as_str());
    let decided = plan::instance::apply(
        previous_digest,
        &record.digest,
        agent.as_ref(),
        &wanted,
        now_ms(),
    );
    let (agent, created, change) = match decided {
        Apply::Unchanged => {
            drop(one_at_a_time);
            // What it found may be an earlier apply's writes not yet
            // flushed: "unchanged" is an answer, so it waits for them too.
            crate::apply::durable(ctx).await?;
            let record = previous.unwrap_or(record);
            return Ok((InstanceView { record, agent }, Change::Unchanged));
        }
        Apply::Ended { agent_id, state } => {
            // Agent names are never reused, so neither is an instance's.
            let hint = match previous {
                Some(_) => "delete the instance, then apply it under another name",
                None => "apply it under another name",
            };
            return Err(InstanceError::Precondition(format!(
                "instance `{name}`'s agent {agent_id} has ended ({}) and keeps the name: {hint}",
                state.name()
            )));
        }
        // Committed, not yet flushed; from the agent's next turn.
        Apply::Update { agent, plan } => {
            crate::apply::apply(ctx, plan)?;
            (*agent, None, Change::Updated)
        }
        Apply::Create => {
            let (agent, created) = create_agent(ctx, &record).await?;
            (agent, Some(created), Change::Created)
        }
    };
    ctx.instances()
        .swap_instance(&name, previous_digest, Some(&record))?;
    let changed = plan::instance::changed(Some(agent.id), &name, change.name(), &record.digest);
    crate::apply::apply(ctx, changed)?;
    drop(one_at_a_time);
    if let Some(created) = created {
        created.await?;
    }
    crate::apply::durable(ctx).await?;
    if change == Change::Updated {
        tell_recomposed(ctx, agent.id, &record);
    }
    ctx.topology.schedules_changed();
    let agent = Some(agent);
    Ok((InstanceView { record, agent }, change))
}

/// What the instance's agent is to run, from its manifest.
fn wanted(ctx: &Ctx, record: &InstanceRecord) -> plan::instance::Wanted {
    plan::instance::Wanted {
        brain: record
            .spec
            .brain
            .clone()
            .unwrap_or_else(|| ctx.config.default_brain.clone()),
        composition: record.composition(),
        context_tokens: record.spec.context_tokens,
        mcp_servers: record.spec.mcp_servers.clone(),
        network: record.spec.network.clone(),
    }
}

/// Tells the agent its composition changed, once the change is on disk. An
/// agent not running now (restarting) reads its record when it starts.
fn tell_recomposed(ctx: &Ctx, agent_id: AgentId, record: &InstanceRecord) {
    if let Some(entry) = ctx.directory.get(agent_id) {
        let max_turns_per_hour = record.spec.limits.max_turns_per_hour;
        let _ = entry
            .actor
            .cast(AgentMsg::Recomposed { max_turns_per_hour });
    }
}

/// An instance and its agent.
pub fn get(ctx: &Ctx, name: &str) -> Result<InstanceView, InstanceError> {
    Ok(lookup::get(ctx.instances(), ctx.reads(), name)?)
}

pub fn list(ctx: &Ctx) -> Result<Vec<InstanceView>, InstanceError> {
    Ok(lookup::list(ctx.instances(), ctx.reads())?)
}

/// Archives the instance's agent (and its private subtree), then forgets
/// the instance. A crash between the two leaves the record of an instance
/// whose agent has ended; deleting again finishes.
///
/// No apply lock: the cleanup stops processes, and needs none. An apply
/// racing it finds the agent archived (its guarded write fails), or
/// changes the digest this delete then finds changed.
pub async fn delete(ctx: &Arc<Ctx>, name: &str) -> Result<InstanceView, InstanceError> {
    let view = get(ctx, name)?;
    if let Some(agent) = view.agent.as_ref().filter(|a| a.state.is_live()) {
        cleanup::run(ctx, agent.id, CleanupReason::Archived, Default::default())
            .await
            .map_err(|err| InstanceError::Precondition(err.to_string()))?;
    }
    ctx.instances()
        .swap_instance(name, Some(&view.record.digest), None)?;
    // Its stored events and schedule progress go too: an instance made
    // again under the name starts clean (a crash before this leaves them
    // for the next delete of the name, or a re-created instance's replays
    // answered as duplicates).
    ctx.inbound().forget_instance(name)?;
    let agent_id = view.agent.as_ref().map(|a| a.id);
    let changed = plan::instance::changed(agent_id, name, "deleted", &view.record.digest);
    crate::apply::apply(ctx, changed)?;
    crate::apply::durable(ctx).await?;
    ctx.topology.schedules_changed();
    Ok(get_after_delete(ctx, view))
}

fn get_after_delete(ctx: &Ctx, view: InstanceView) -> InstanceView {
    let agent = view
        .agent
        .as_ref()
        .and_then(|a| ctx.reads().agent(a.id).ok().flatten())
        .or(view.agent);
    InstanceView {
        record: view.record,
        agent,
    }
}

/// The names a spec uses, against what this daemon has.
async fn check(ctx: &Arc<Ctx>, spec: &InstanceSpec) -> Result<(), InstanceError> {
    // Reading the skill folders is disk work: off the async workers.
    let reading = ctx.clone();
    let skills = tokio::task::spawn_blocking(move || reading.skills.reload())
        .await
        .map_err(|err| InstanceError::Precondition(format!("reading the skills failed: {err}")))?;
    let tools: Vec<&str> = crate::tools::CATALOG.iter().map(|t| t.name).collect();
    let known = manifest::Known {
        skill: &|name| skills.contains(name),
        mcp_server: &|name| ctx.mcp.knows(name),
        tools: &tools,
    };
    manifest::check_references(spec, &known)?;
    for ingress in &spec.ingress {
        if let manifest::Ingress::Webhook {
            provider,
            secret_env,
            ..
        } = ingress
        {
            // Through the secrets: a name that looks secret has left the
            // environment at start.
            let set = ctx
                .config
                .secrets
                .var(secret_env)
                .is_some_and(|v| !v.is_empty());
            if !set {
                return Err(InstanceError::Precondition(format!(
                    "the {} webhook's secret_env `{secret_env}` is not set in the daemon's environment",
                    provider.name()
                )));
            }
        }
    }
    Ok(())
}

/// The public agent named `name`, if it runs (or ran) instance `name`. A
/// public agent of that name that is no instance's is a conflict.
fn agent_of(ctx: &Ctx, name: &str) -> Result<Option<AgentRecord>, InstanceError> {
    Ok(lookup::agent_of(ctx.reads(), name)?)
}

async fn create_agent(
    ctx: &Arc<Ctx>,
    record: &InstanceRecord,
) -> Result<(AgentRecord, DurableFuture), InstanceError> {
    let spec = &record.spec;
    let new = NewAgent {
        name: spec.name.clone(),
        initial_message: None,
        brain: spec.brain.clone(),
        context_tokens: spec.context_tokens,
        mcp_servers: spec.mcp_servers.clone(),
        network: spec.network.clone(),
        // Instances live in the default namespace (see docs/security.md).
        namespace: holarchy_supervision::namespace::DEFAULT.to_owned(),
        labels: Default::default(),
        created_by: None,
    };
    let composed = vec![(new, Some(Box::new(record.composition())))];
    let (ids, flushed) = create::create_composed_unflushed(ctx, composed)
        .await
        .map_err(|err| match err {
            CreateError::NameTaken(name) => InstanceError::Precondition(format!(
                "an agent named `{name}` was created meanwhile"
            )),
            other => InstanceError::Create(other),
        })?;
    let id: AgentId = ids
        .into_iter()
        .next()
        .ok_or_else(|| InstanceError::Precondition("no agent was created".into()))?;
    let agent = ctx
        .reads()
        .agent(id)?
        .ok_or_else(|| InstanceError::Precondition(format!("agent {id} vanished")))?;
    Ok((agent, flushed))
}
