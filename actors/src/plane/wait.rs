//! The waiting plane: timers (`Sleep`) and external triggers
//! (`CreateExternalTrigger`, `CancelExternalTrigger`, and the machine-facing
//! `DeliverTrigger`). Every armed wait has a wait actor linked under its
//! owner's actor, so it lives and dies with the owner's subtree.

use std::sync::Arc;

use holarchy_supervision::plan;
use holarchy_supervision::{
    AgentId, Provenance, WaitId, WaitKind, WaitRecord, WaitStatus, WorkItemId,
};
use sha2::{Digest, Sha256};

use crate::directory;
use crate::protocol::{DeliverError, Delivered, NewMessage};
use crate::store::StoreError;
use crate::{now_ms, supervisor, Ctx};

mod actor;

pub use actor::WaitActor;

/// Longest timer: a year. Longer is surely a mistake.
pub const MAX_SLEEP_MS: u64 = 366 * 24 * 3600 * 1000;
/// Printed before a trigger token, so a leaked one is recognisable.
pub const TOKEN_PREFIX: &str = crate::secrets::TRIGGER_TOKEN_PREFIX;

#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    #[error("wait {0} not found")]
    NotFound(WaitId),
    #[error("work item {0} not found")]
    WorkItemNotFound(WorkItemId),
    #[error("wait {wait_id} is {status}, not armed")]
    NotArmed {
        wait_id: WaitId,
        status: &'static str,
    },
    #[error("a timer lasts from 0 ms to a year")]
    BadDuration,
    #[error("the owning agent is not running")]
    OwnerGone,
    /// Deliberately vague: a caller with a wrong token learns nothing.
    #[error("unknown trigger token")]
    UnknownToken,
    #[error("this trigger was cancelled")]
    RevokedToken,
    #[error(transparent)]
    Limit(#[from] crate::limits::LimitError),
    #[error(transparent)]
    Deliver(#[from] DeliverError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn new_token() -> Result<String, WaitError> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret).map_err(|e| StoreError::Backend(format!("no randomness: {e}")))?;
    Ok(format!("{TOKEN_PREFIX}{}", hex::encode(secret)))
}

fn check_anchor(ctx: &Ctx, owner: AgentId, work_item: Option<WorkItemId>) -> Result<(), WaitError> {
    let Some(id) = work_item else {
        return Ok(());
    };
    match ctx.reads().work_item(id)? {
        Some(item) if item.owner_agent_id == owner => Ok(()),
        _ => Err(WaitError::WorkItemNotFound(id)),
    }
}

/// Records an armed wait and starts its actor under the owner's. Under the
/// owner's structure lock: its restart or cleanup either happened before
/// (then the owner is checked here) or happens after (and sees the record).
async fn arm(ctx: &Arc<Ctx>, wait: WaitRecord) -> Result<WaitRecord, WaitError> {
    let structure = ctx.locks.structure.lock(wait.owner_agent_id).await;
    if !ctx
        .reads()
        .agent(wait.owner_agent_id)?
        .is_some_and(|a| a.state.is_live())
    {
        return Err(WaitError::OwnerGone);
    }
    let owner = ctx
        .directory
        .get(wait.owner_agent_id)
        .ok_or(WaitError::OwnerGone)?;
    // Counted under the owner's lock, which every new wait takes: exact.
    crate::quota::check_waits(ctx, wait.owner_agent_id)?;
    crate::apply::apply(ctx, plan::wait::arm(&wait))?;
    if let Err(err) = supervisor::spawn_wait(ctx, &wait, owner.actor.get_cell()).await {
        // The owner is going down; its pending restart re-arms the wait
        // from the record committed above.
        tracing::debug!(wait_id = %wait.id, error = %err, "wait left to the owner's restart");
    }
    drop(structure);
    crate::apply::durable(ctx).await?;
    Ok(wait)
}

fn new_wait(
    owner: AgentId,
    kind: WaitKind,
    reason: String,
    work_item_id: Option<WorkItemId>,
) -> WaitRecord {
    let now = now_ms();
    WaitRecord {
        id: WaitId::generate(),
        owner_agent_id: owner,
        kind,
        reason,
        work_item_id,
        status: WaitStatus::Armed,
        created_at_ms: now,
        updated_at_ms: now,
    }
}

/// `Sleep`: a timer that wakes `owner` with a timer-provenance message.
pub async fn sleep(
    ctx: &Arc<Ctx>,
    owner: AgentId,
    duration_ms: u64,
    reason: String,
    work_item: Option<WorkItemId>,
) -> Result<WaitRecord, WaitError> {
    if duration_ms > MAX_SLEEP_MS {
        return Err(WaitError::BadDuration);
    }
    check_anchor(ctx, owner, work_item)?;
    let deadline_ms = now_ms().saturating_add(duration_ms);
    arm(
        ctx,
        new_wait(owner, WaitKind::Timer { deadline_ms }, reason, work_item),
    )
    .await
}

/// `CreateExternalTrigger`: returns the wait and its token, shown once;
/// only the token's hash is stored.
pub async fn create_trigger(
    ctx: &Arc<Ctx>,
    owner: AgentId,
    reason: String,
    work_item: Option<WorkItemId>,
) -> Result<(WaitRecord, String), WaitError> {
    check_anchor(ctx, owner, work_item)?;
    let token = new_token()?;
    let kind = WaitKind::Trigger {
        token_hash: token_hash(&token),
    };
    let wait = arm(ctx, new_wait(owner, kind, reason, work_item)).await?;
    Ok((wait, token))
}

/// Cancels an armed wait of `owner` (any owner, for operators).
pub async fn cancel(
    ctx: &Ctx,
    wait_id: WaitId,
    owner: Option<AgentId>,
) -> Result<WaitRecord, WaitError> {
    let wait = ctx
        .reads()
        .wait(wait_id)?
        .filter(|w| owner.is_none_or(|o| w.owner_agent_id == o))
        .ok_or(WaitError::NotFound(wait_id))?;
    let Some((plan, wait)) = plan::wait::cancel(&wait, now_ms()) else {
        return Err(WaitError::NotArmed {
            wait_id,
            status: wait.status.name(),
        });
    };
    crate::apply::apply(ctx, plan).map_err(|err| match err {
        // It fired (or was cancelled) since it was read.
        StoreError::Precondition(_) => WaitError::NotArmed {
            wait_id,
            status: "no longer armed",
        },
        other => other.into(),
    })?;
    if let Some(actor) = ctx.directory.remove_wait(wait_id) {
        actor.stop(Some("cancelled".into()));
    }
    crate::apply::durable(ctx).await?;
    Ok(wait)
}

/// `DeliverTrigger`: the machine-facing wake channel. Not operator ingress:
/// it reaches private agents too. A repeated `dedupe_key` is delivered once.
pub async fn deliver(
    ctx: &Ctx,
    token: &str,
    payload: String,
    dedupe_key: Option<String>,
) -> Result<Delivered, WaitError> {
    let wait_id = ctx
        .reads()
        .wait_by_token_hash(&token_hash(token))?
        .ok_or(WaitError::UnknownToken)?;
    let wait = ctx.reads().wait(wait_id)?.ok_or(WaitError::UnknownToken)?;
    if wait.status != WaitStatus::Armed {
        return Err(WaitError::RevokedToken);
    }
    let owner = wait.owner_agent_id;
    // Never name the agent to the caller: it holds only a token.
    let entry = ctx.directory.get(owner).ok_or_else(|| {
        DeliverError::Unavailable("the trigger's agent is not available right now".into())
    })?;
    // A payload grows the store as an operator's message does: none into
    // a namespace over its store quota.
    if entry.namespace.store_refusal().is_some() {
        return Err(DeliverError::Quota(crate::namespaces::QuotaError::TriggerTargetFull).into());
    }
    let message = NewMessage {
        cause: None,
        provenance: Provenance::Trigger { wait_id },
        body: payload,
        // Scoped to the trigger, so two triggers' keys never collide.
        dedupe_key: dedupe_key.map(|key| format!("trigger:{wait_id}:{key}")),
        events: Vec::new(),
    };
    match directory::deliver(&entry.actor, message, ctx.config.call_timeout).await {
        Ok(delivered) => Ok(delivered),
        // Refusals name the agent; a trigger caller learns only that it failed.
        Err(DeliverError::QueueFull { limit }) => Err(DeliverError::QueueFull { limit }.into()),
        Err(_) => Err(DeliverError::Unavailable(
            "the trigger's agent is not available right now".into(),
        )
        .into()),
    }
}
