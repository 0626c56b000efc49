//! The work plane: an agent's work items, through `update_work_item` and
//! `update_work_plan`, and the self-queued messages of `Enqueue`.

use std::sync::Arc;

use holarchy_supervision::plan;
use holarchy_supervision::work::{WorkError, WorkUpdate};
use holarchy_supervision::{AgentId, Provenance, WorkItemId, WorkItemRecord};

use crate::directory::deliver;
use crate::protocol::{DeliverError, Delivered, NewMessage, NotRunning};
use crate::store::StoreError;
use crate::{now_ms, Ctx};

#[derive(Debug, thiserror::Error)]
pub enum WorkPlaneError {
    #[error(transparent)]
    Refused(#[from] WorkError),
    #[error(transparent)]
    Deliver(#[from] DeliverError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Creates or updates one of `owner`'s work items.
pub async fn update(
    ctx: &Ctx,
    owner: AgentId,
    change: WorkUpdate,
) -> Result<WorkItemRecord, WorkPlaneError> {
    let items = ctx.reads().work_items_of(owner)?;
    let (plan, item) =
        plan::workspace::work_item(owner, &items, change, WorkItemId::generate(), now_ms())?;
    crate::apply::apply(ctx, plan)?;
    crate::apply::durable(ctx).await?;
    Ok(item)
}

/// `Enqueue`: a message from the agent to itself, for a later turn.
pub async fn enqueue(
    ctx: &Arc<Ctx>,
    owner: AgentId,
    body: String,
) -> Result<Delivered, WorkPlaneError> {
    let entry = ctx.directory.get(owner).ok_or(DeliverError::NotRunning {
        agent_id: owner,
        why: NotRunning::Restarting,
    })?;
    let message = NewMessage {
        cause: None,
        provenance: Provenance::SelfQueued,
        body,
        dedupe_key: None,
        events: Vec::new(),
    };
    Ok(deliver(&entry.actor, message, ctx.config.call_timeout).await?)
}
