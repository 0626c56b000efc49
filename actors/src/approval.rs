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
use holarchy_supervision::bounds::MAX_MESSAGE_LEN;
use holarchy_supervision::{AgentId, ApprovalId, Provenance, RunId};
use serde_json::{json, Value};
use tracing::{info, warn};

use crate::brain::ToolCall;
use crate::protocol::{DeliverError, NewMessage};
use crate::secrets::REDACTED;
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
        .approvals()
        .open_approvals(Some(agent_id), MAX_LISTED)
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
        .reads()
        .agent(agent_id)
        .map_err(failed)?
        .and_then(|r| r.composition.and_then(|c| c.instance));
    // Where the call would run now: it runs there once approved.
    let place = crate::workspace::place(ctx, agent_id).map_err(failed)?;
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
        place: Some(place),
    };
    ctx.approvals().insert_approval(&record).map_err(failed)?;
    crate::apply::durable(ctx).await.map_err(failed)?;
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

/// Approvals waiting on an operator (or on telling their agent); with
/// `history`, decided ones too, oldest first.
pub fn list(
    ctx: &Ctx,
    agent: Option<AgentId>,
    history: bool,
) -> Result<Vec<ApprovalRecord>, ApprovalError> {
    if history {
        Ok(ctx.approvals().approvals(agent, MAX_LISTED)?)
    } else {
        Ok(ctx.approvals().open_approvals(agent, MAX_LISTED)?)
    }
}

/// Runs a pending call once, as its agent, and tells the agent.
pub async fn approve(ctx: &Arc<Ctx>, id: ApprovalId) -> Result<ApprovalRecord, ApprovalError> {
    let pending = pending(ctx, id)?;
    let agent = ctx
        .reads()
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
    // The stored input is redacted: a call whose input held a secret would
    // run with the marker in its place, so it is refused, not run.
    let input: Value = serde_json::from_str(&pending.input).map_err(|err| {
        ApprovalError::Precondition(format!("approval {id}'s input is not JSON: {err}"))
    })?;
    if pending.input.contains(REDACTED) {
        return Err(ApprovalError::Precondition(format!(
            "approval {id}'s input held a secret, which is not stored: it cannot run; deny it"
        )));
    }
    // It runs where it was parked, as the operator was shown; if that
    // workspace is gone, running it elsewhere is not what was approved.
    if let Some(place) = &pending.place {
        let view = crate::workspace::view(ctx, agent.id)?;
        if !view.projection.holds(&view.home, place) {
            return Err(ApprovalError::Precondition(format!(
                "approval {id} was parked in workspace `{}` ({}), which the agent no longer has attached: it cannot run there; deny it",
                place.workspace_id,
                place.dir.display()
            )));
        }
    }
    let running = ApprovalRecord {
        status: ApprovalStatus::Running,
        decided_at_ms: Some(now_ms()),
        ..pending.clone()
    };
    // Durable before the call runs: a crash from here on never runs it
    // a second time.
    ctx.approvals()
        .swap_approval(&ApprovalStatus::Pending, &running)?;
    crate::apply::durable(ctx).await?;
    let call = ToolCall {
        name: pending.tool.clone(),
        input,
    };
    // The constraints as they are now: a tool denied since it was parked
    // does not run. Approval itself is what was asked, so it is no bar.
    let denied = agent
        .composition
        .as_deref()
        .map(|stored| compose::policy(&compose::current(ctx.instances(), stored)))
        .and_then(|p| compose::denial(&p, &call.name));
    let (output, is_error) = match denied {
        Some(reason) => (
            tools::error_json(ErrorKind::Refused, &reason).to_string(),
            true,
        ),
        None => {
            let run = tools::call(ctx, agent.id, agent.profile, &call);
            let result = match pending.place.clone() {
                Some(place) => crate::workspace::pinned(place, run).await,
                None => run.await,
            };
            // The approval's record keeps it as JSON text.
            (result.output.to_string(), result.is_error)
        }
    };
    let done = ApprovalRecord {
        status: ApprovalStatus::Approved { output, is_error },
        input: kept_input(&running),
        ..running.clone()
    };
    ctx.approvals()
        .swap_approval(&ApprovalStatus::Running, &done)?;
    crate::apply::durable(ctx).await?;
    info!(agent_id = %agent.id, approval_id = %id, is_error, "approved call ran");
    Ok(tell(ctx, stored(ctx, done)).await)
}

/// A decided call's input as it stays stored: what the tool never keeps
/// (an `ExecCommand`'s `env` values) was kept only while the operator had
/// to see it and the call might still run.
fn kept_input(record: &ApprovalRecord) -> String {
    serde_json::from_str::<Value>(&record.input)
        .ok()
        .and_then(|input| tools::recorded_input(&record.tool, &input))
        .map_or_else(|| record.input.clone(), |kept| kept.to_string())
}

/// The record as the store keeps it (redacted): what the agent is told and
/// the operator shown, and what later swaps must expect.
fn stored(ctx: &Ctx, written: ApprovalRecord) -> ApprovalRecord {
    match ctx.approvals().approval(written.id) {
        Ok(Some(record)) => record,
        Ok(None) | Err(_) => written,
    }
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
        input: kept_input(&pending),
        ..pending
    };
    ctx.approvals()
        .swap_approval(&ApprovalStatus::Pending, &denied)?;
    crate::apply::durable(ctx).await?;
    info!(agent_id = %denied.agent_id, approval_id = %id, "call denied");
    Ok(tell(ctx, stored(ctx, denied)).await)
}

/// At start, before the daemon answers: a call the daemon died running is
/// recorded as such (it is never run again). Returns the decided
/// approvals whose agents were not told, for [`tell_untold`].
pub fn close_interrupted(ctx: &Ctx) -> Result<Vec<ApprovalRecord>, StoreError> {
    let mut untold = Vec::new();
    for record in ctx.approvals().open_approvals(None, MAX_LISTED)? {
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
                input: kept_input(&record),
                ..record
            };
            ctx.approvals()
                .swap_approval(&ApprovalStatus::Running, &ended)?;
            stored(ctx, ended)
        } else {
            record
        };
        if record.status.is_decided() && !record.delivered {
            untold.push(record);
        }
    }
    Ok(untold)
}

/// At start, before any agent runs: a call still pending whose parking
/// turn a crash cut short is withdrawn (denied with that reason, and not
/// told: the turn runs again from its start and parks its call anew).
/// Left pending, the one call would wait under two approvals, and run
/// twice if an operator approved both (found by the chaos run). `cut`
/// maps each agent to the run the crash cut. Returns how many were
/// withdrawn.
pub fn withdraw_cut(
    ctx: &Ctx,
    cut: &std::collections::HashMap<AgentId, u128>,
) -> Result<usize, StoreError> {
    let mut withdrawn = 0;
    // Each cut agent's own open approvals (a few at most): not a listing
    // of every agent's, which a cap could cut short on a large daemon.
    let parked = cut.iter().map(|(&agent, &run)| {
        ctx.approvals()
            .open_approvals(Some(agent), MAX_LISTED)
            .map(|open| {
                open.into_iter().filter(move |record| {
                    record.status == ApprovalStatus::Pending && record.run_id.as_u128() == run
                })
            })
    });
    for record in parked.collect::<Result<Vec<_>, _>>()?.into_iter().flatten() {
        let closed = ApprovalRecord {
            status: ApprovalStatus::Denied {
                reason: "withdrawn: the turn that parked this call was cut short by a restart; it runs again and asks anew".into(),
            },
            decided_at_ms: Some(now_ms()),
            delivered: true,
            input: kept_input(&record),
            ..record
        };
        match ctx
            .approvals()
            .swap_approval(&ApprovalStatus::Pending, &closed)
        {
            Ok(()) => {
                withdrawn += 1;
                info!(agent_id = %closed.agent_id, approval_id = %closed.id, "pending call of a cut turn withdrawn");
            }
            // Decided already: it stays as it is.
            Err(StoreError::Precondition(_)) => {}
            Err(err) => return Err(err),
        }
    }
    Ok(withdrawn)
}

/// Tells agents the outcomes a crash kept from them; how many were told.
pub async fn tell_untold(ctx: &Arc<Ctx>, untold: Vec<ApprovalRecord>) -> Result<usize, StoreError> {
    crate::apply::durable(ctx).await?;
    let mut told = 0;
    for record in untold {
        if tell(ctx, record).await.delivered {
            told += 1;
        }
    }
    Ok(told)
}

fn pending(ctx: &Ctx, id: ApprovalId) -> Result<ApprovalRecord, ApprovalError> {
    let record = ctx
        .approvals()
        .approval(id)?
        .ok_or(ApprovalError::NotFound(id))?;
    match &record.status {
        ApprovalStatus::Pending => {}
        // A withdrawn call says so, and that its turn asks anew.
        ApprovalStatus::Denied { reason } => {
            return Err(ApprovalError::Precondition(format!(
                "approval {id} is already denied ({reason})"
            )))
        }
        other => {
            return Err(ApprovalError::Precondition(format!(
                "approval {id} is already {}",
                other.name()
            )))
        }
    }
    Ok(record)
}

/// Queues the outcome for the agent (once: the message's dedupe key is
/// the approval's) and marks it told. An agent that cannot take it now (a
/// full queue, a restart under way) is tried again a few times in the
/// background, and at every start until it is told.
async fn tell(ctx: &Arc<Ctx>, record: ApprovalRecord) -> ApprovalRecord {
    match tell_once(ctx, &record).await {
        Ok(told) => told,
        Err(err) => {
            warn!(approval_id = %record.id, error = %err, "approval outcome not delivered yet; retrying");
            let ctx = ctx.clone();
            let pending = record.clone();
            let tasks = ctx.lifecycle.tasks.clone();
            tasks.spawn(async move {
                for attempt in 1..=RETELLS {
                    tokio::time::sleep(RETELL_EVERY * attempt).await;
                    if tell_once(&ctx, &pending).await.is_ok() {
                        return;
                    }
                }
                warn!(approval_id = %pending.id, "approval outcome still not delivered; the next start delivers it");
            });
            record
        }
    }
}

/// Times a failed telling is tried again, and the first pause (growing
/// linearly: 2 s, 4 s, ... about a minute and a half in all).
const RETELLS: u32 = 8;
const RETELL_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Why an outcome did not reach its agent this time; it is told again.
#[derive(Debug, thiserror::Error)]
enum Untold {
    #[error("its agent is not running")]
    NotRunning,
    #[error(transparent)]
    Delivery(#[from] DeliverError),
}

async fn tell_once(ctx: &Ctx, record: &ApprovalRecord) -> Result<ApprovalRecord, Untold> {
    let entry = ctx
        .directory
        .get(record.agent_id)
        .ok_or(Untold::NotRunning)?;
    let message = NewMessage {
        cause: None,
        provenance: Provenance::Runtime,
        body: record.outcome_message(MAX_MESSAGE_LEN),
        dedupe_key: Some(format!("approval:{}", record.id)),
        events: Vec::new(),
    };
    directory::deliver(&entry.actor, message, ctx.config.call_timeout).await?;
    let told = ApprovalRecord {
        delivered: true,
        ..record.clone()
    };
    match ctx.approvals().swap_approval(&record.status, &told) {
        Ok(()) => Ok(told),
        Err(err) => {
            // Delivered all the same; a start would find it untold and
            // deliver it again, which the dedupe key makes a no-op.
            warn!(approval_id = %record.id, error = %err, "approval not marked delivered");
            Ok(record.clone())
        }
    }
}
