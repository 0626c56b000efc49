//! Approvals: a tool call an instance's constraints hold for an operator.
//!
//! A turn that makes such a call parks it (durably, with its filled-in
//! input) and goes on: the brain is told the call waits. An operator then
//! approves it, and the runtime runs it once, as the agent, outside any
//! turn; or denies it with a reason. Either way the outcome reaches the
//! agent as a message (provenance `runtime`), whose turn sees the tool's
//! output or the refusal.
//!
//! Each step is a compare-and-swap on the approval's status, flushed
//! before the next: `pending -> running -> approved` or `pending ->
//! denied`. A start that finds one `running` (the daemon died while it
//! ran) records that its effect is unknown and never runs it again; an
//! outcome a crash kept from its agent is delivered at start.

use std::sync::Arc;

use holarchy_composition::approval::{
    ApprovalRecord, ApprovalStatus, MAX_PENDING_PER_AGENT, MAX_REASON_BYTES,
};
use holarchy_composition::constraint::Layer;
use holarchy_supervision::limits::MAX_MESSAGE_LEN;
use holarchy_supervision::{AgentId, ApprovalId, Provenance, RunId};
use serde_json::{json, Value};
use tracing::{info, warn};

use crate::brain::ToolCall;
use crate::protocol::NewMessage;
use crate::store::StoreError;
use crate::tools::{self, ErrorKind, ToolError};
use crate::{compose, directory, now_ms, Ctx};

/// Most approvals a listing or a start's recovery reads.
pub const MAX_LISTED: usize = 10_000;

#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    #[error("no approval {0}")]
    NotFound(ApprovalId),
    #[error("{0}")]
    Invalid(String),
    /// Decided already, its agent ended or not running, or another
    /// operator won a race.
    #[error("{0}")]
    Precondition(String),
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for ApprovalError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Precondition(why) => ApprovalError::Precondition(why),
            other => ApprovalError::Store(other),
        }
    }
}

/// Parks `call` (its input filled in) for an operator; what the brain is
/// told. Refused once the agent has [`MAX_PENDING_PER_AGENT`] waiting.
pub async fn park(
    ctx: &Ctx,
    agent_id: AgentId,
    run_id: RunId,
    call: &ToolCall,
    layer: Layer,
) -> Result<Value, ToolError> {
    let failed = |err: StoreError| ToolError::new(ErrorKind::Failed, err);
    let waiting = ctx
        .store
        .approvals(Some(agent_id), MAX_LISTED)
        .map_err(failed)?
        .iter()
        .filter(|a| !a.status.is_decided())
        .count();
    if waiting >= MAX_PENDING_PER_AGENT {
        return Err(ToolError::new(
            ErrorKind::Refused,
            format!(
                "{waiting} calls already wait for approval; the limit is {MAX_PENDING_PER_AGENT}"
            ),
        ));
    }
    let instance = ctx
        .store
        .agent(agent_id)
        .map_err(failed)?
        .and_then(|r| r.composition.and_then(|c| c.instance));
    let record = ApprovalRecord {
        id: ApprovalId::generate(),
        agent_id,
        instance,
        run_id,
        tool: call.name.clone(),
        input: call.input.to_string(),
        layer: layer.as_str().to_owned(),
        status: ApprovalStatus::Pending,
        delivered: false,
        created_at_ms: now_ms(),
        decided_at_ms: None,
    };
    ctx.store.insert_approval(&record).map_err(failed)?;
    ctx.store.durable().await.map_err(failed)?;
    info!(agent_id = %agent_id, run_id = %run_id, approval_id = %record.id, tool = %record.tool, "call parked for approval");
    Ok(json!({
        "approval_id": record.id.to_string(),
        "status": "pending_approval",
        "note": format!(
            "{} needs an operator's approval ({} constraints). It has not run; its outcome will reach you as a new message.",
            record.tool,
            layer.as_str()
        ),
    }))
}

pub fn list(ctx: &Ctx, agent: Option<AgentId>) -> Result<Vec<ApprovalRecord>, ApprovalError> {
    Ok(ctx.store.approvals(agent, MAX_LISTED)?)
}

/// Runs a pending call once, as its agent, and tells the agent.
pub async fn approve(ctx: &Arc<Ctx>, id: ApprovalId) -> Result<ApprovalRecord, ApprovalError> {
    let pending = pending(ctx, id)?;
    let agent = ctx
        .store
        .agent(pending.agent_id)?
        .filter(|a| a.state.is_live())
        .ok_or_else(|| {
            ApprovalError::Precondition(format!("agent {} has ended", pending.agent_id))
        })?;
    if ctx.directory.get(agent.id).is_none() {
        return Err(ApprovalError::Precondition(format!(
            "agent {} is not running now (restarting); approve again shortly",
            agent.id
        )));
    }
    let running = ApprovalRecord {
        status: ApprovalStatus::Running,
        decided_at_ms: Some(now_ms()),
        ..pending.clone()
    };
    // Durable before the call runs: a crash from here on never runs it
    // a second time.
    ctx.store
        .swap_approval(&ApprovalStatus::Pending, &running)?;
    ctx.store.durable().await?;
    let input: Value = serde_json::from_str(&pending.input).unwrap_or(Value::Null);
    let call = ToolCall {
        name: pending.tool.clone(),
        input,
    };
    // The constraints as they are now: a tool denied since it was parked
    // does not run. Approval itself is what was asked, so it is no bar.
    let denied = agent
        .composition
        .as_deref()
        .map(compose::policy)
        .and_then(|p| compose::denial(&p, &call.name));
    let (output, is_error) = match denied {
        Some(reason) => (
            tools::error_json(ErrorKind::Refused, &reason).to_string(),
            true,
        ),
        None => {
            let result = tools::call(ctx, agent.id, agent.profile, &call).await;
            (result.output, result.is_error)
        }
    };
    let done = ApprovalRecord {
        status: ApprovalStatus::Approved { output, is_error },
        ..running.clone()
    };
    ctx.store.swap_approval(&ApprovalStatus::Running, &done)?;
    ctx.store.durable().await?;
    info!(agent_id = %agent.id, approval_id = %id, is_error, "approved call ran");
    Ok(tell(ctx, done).await)
}

/// Refuses a pending call with `reason`, and tells the agent.
pub async fn deny(
    ctx: &Arc<Ctx>,
    id: ApprovalId,
    reason: String,
) -> Result<ApprovalRecord, ApprovalError> {
    let reason = reason.trim().to_owned();
    if reason.is_empty() || reason.len() > MAX_REASON_BYTES {
        return Err(ApprovalError::Invalid(format!(
            "a denial needs a reason of 1 to {MAX_REASON_BYTES} bytes"
        )));
    }
    let pending = pending(ctx, id)?;
    let denied = ApprovalRecord {
        status: ApprovalStatus::Denied { reason },
        decided_at_ms: Some(now_ms()),
        ..pending
    };
    ctx.store.swap_approval(&ApprovalStatus::Pending, &denied)?;
    ctx.store.durable().await?;
    info!(agent_id = %denied.agent_id, approval_id = %id, "call denied");
    Ok(tell(ctx, denied).await)
}

/// At start: a call the daemon died running is recorded as such (it is
/// not run again), and every outcome its agent was not told is told.
pub async fn recover(ctx: &Arc<Ctx>) -> Result<usize, StoreError> {
    let mut told = 0;
    for record in ctx.store.approvals(None, MAX_LISTED)? {
        let record = if record.status == ApprovalStatus::Running {
            let output = tools::error_json(
                ErrorKind::Failed,
                "the daemon stopped while this approved call ran: its effect is unknown, and it is not run again",
            );
            let ended = ApprovalRecord {
                status: ApprovalStatus::Approved {
                    output: output.to_string(),
                    is_error: true,
                },
                ..record
            };
            ctx.store.swap_approval(&ApprovalStatus::Running, &ended)?;
            ended
        } else {
            record
        };
        if record.status.is_decided() && !record.delivered {
            ctx.store.durable().await?;
            if tell(ctx, record).await.delivered {
                told += 1;
            }
        }
    }
    Ok(told)
}

fn pending(ctx: &Ctx, id: ApprovalId) -> Result<ApprovalRecord, ApprovalError> {
    let record = ctx.store.approval(id)?.ok_or(ApprovalError::NotFound(id))?;
    if record.status != ApprovalStatus::Pending {
        return Err(ApprovalError::Precondition(format!(
            "approval {id} is already {}",
            record.status.name()
        )));
    }
    Ok(record)
}

/// Queues the outcome for the agent (once: the message's dedupe key is
/// the approval's) and marks it told. An agent not running now is told at
/// the next start.
async fn tell(ctx: &Ctx, record: ApprovalRecord) -> ApprovalRecord {
    let Some(entry) = ctx.directory.get(record.agent_id) else {
        return record;
    };
    let message = NewMessage {
        provenance: Provenance::Runtime,
        body: record.outcome_message(MAX_MESSAGE_LEN),
        dedupe_key: Some(format!("approval:{}", record.id)),
        events: Vec::new(),
    };
    if let Err(err) = directory::deliver(&entry.actor, message, ctx.config.call_timeout).await {
        warn!(approval_id = %record.id, error = %err, "approval outcome not delivered; the next start delivers it");
        return record;
    }
    let told = ApprovalRecord {
        delivered: true,
        ..record.clone()
    };
    match ctx.store.swap_approval(&record.status, &told) {
        Ok(()) => told,
        Err(err) => {
            warn!(approval_id = %record.id, error = %err, "approval not marked delivered");
            record
        }
    }
}
