//! The executor of plans: what the pure planners of
//! `holarchy_supervision::plan` decide, carried out against the store, the
//! directory and the processes. Planners never commit or signal; this
//! module is the one place where their batches are committed and their
//! directives meet the system, so a second store implements "commit this
//! batch" and nothing else. It is a child of `shared` because it alone sees
//! the store whole; everyone else takes a door of [`Ctx`].

use holarchy_supervision::effect::{Batch, Directive, Plan};
use holarchy_supervision::TaskRecord;

use crate::process::kill_group_if_ours;
use crate::store::{DurableFuture, StoreError};
use crate::{now_ms, Ctx};

/// Carries out one directive.
fn direct(ctx: &Ctx, directive: Directive) {
    match directive {
        Directive::KillGroup(process) => kill_group_if_ours(process),
        Directive::Wake {
            agent_id,
            message_id,
        } => ctx.directory.wake(agent_id, message_id),
        Directive::NotifyOutput(task_id) => ctx.notify_output(task_id),
        Directive::ForgetWait(wait_id) => {
            ctx.directory.remove_wait(wait_id);
        }
        Directive::ForgetCommand(task_id) => {
            ctx.directory.remove_command(task_id);
        }
    }
}

/// Splits the plan's directives into those before its commit and those
/// after it.
fn split(plan: Plan) -> (Vec<Directive>, Batch, Vec<Directive>) {
    let (before, after) = plan
        .directives
        .into_iter()
        .partition(Directive::before_commit);
    (before, plan.batch, after)
}

/// Carries out `plan`: the directives that come first, the batch, then the
/// rest. A batch the store refuses (a precondition, a name taken) changes
/// nothing and runs no later directive; the error says why. Durable once a
/// later [`durable`] resolves.
pub fn apply(ctx: &Ctx, plan: Plan) -> Result<(), StoreError> {
    let (before, batch, after) = split(plan);
    before.into_iter().for_each(|d| direct(ctx, d));
    if !batch.is_empty() {
        ctx.store.commit(batch)?;
    }
    after.into_iter().for_each(|d| direct(ctx, d));
    Ok(())
}

/// [`apply`], then waits until it is on disk.
pub async fn apply_durable(ctx: &Ctx, plan: Plan) -> Result<(), StoreError> {
    apply(ctx, plan)?;
    ctx.store.durable().await
}

/// [`apply`] through the store's grouped commit: waits without holding the
/// thread, may share one transaction with other callers' batches, and
/// resolves to the flush that covers it. What a turn commits goes this way.
pub async fn apply_grouped(ctx: &Ctx, plan: Plan) -> Result<DurableFuture, StoreError> {
    let (before, batch, after) = split(plan);
    before.into_iter().for_each(|d| direct(ctx, d));
    let flushed = ctx.store.commit_grouped(batch).await?;
    after.into_iter().for_each(|d| direct(ctx, d));
    Ok(flushed)
}

/// Resolves once everything committed before the call is on disk: what a
/// caller awaits before it acknowledges a change, whether a plan's batch or
/// a side store's write.
pub fn durable(ctx: &Ctx) -> DurableFuture {
    ctx.store.durable()
}

/// The store's count of commits that may end an agent (see
/// [`Store::agent_ends`](crate::store::Store::agent_ends)): read before a
/// commit and again after a later step, an unchanged count means no agent
/// ended in between.
pub fn agent_ends(ctx: &Ctx) -> u64 {
    ctx.store.agent_ends()
}

/// Carries out the plan's directives that come before its commit, and
/// hands back its batch for the caller to fold into a plan of its own.
pub fn directives_first(ctx: &Ctx, plan: Plan) -> Plan {
    let (before, batch, after) = split(plan);
    before.into_iter().for_each(|d| direct(ctx, d));
    Plan {
        batch,
        directives: after,
    }
}

/// A command task that cannot run on: its process group ended now, and the
/// plan that records it interrupted (telling its owner when asked, and
/// waking it once that lands) for the caller to apply, alone or folded
/// into its own. See `holarchy_supervision::plan::interrupt`.
pub fn interrupt(ctx: &Ctx, task: &TaskRecord, why: &str, tell_owner: bool) -> Plan {
    let plan = holarchy_supervision::plan::interrupt::interrupt(task, why, tell_owner, now_ms());
    directives_first(ctx, plan)
}
