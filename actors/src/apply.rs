//! The executor of plans: what the pure planners of
//! `holarchy_supervision::plan` decide, carried out against the store and
//! the processes. Planners never commit or signal; this module is where
//! their directives meet the system.

use holarchy_supervision::effect::{Batch, Directive, Plan};
use holarchy_supervision::{MessageId, TaskRecord};

use crate::now_ms;
use crate::process::kill_group_if_ours;

/// Carries out one directive.
fn direct(directive: Directive) {
    match directive {
        Directive::KillGroup(process) => kill_group_if_ours(process),
    }
}

/// Carries out the plan's directives, and hands back its batch for the
/// caller to commit (alone, or in a batch of its own).
pub fn directives_first(plan: Plan) -> Batch {
    plan.directives.into_iter().for_each(direct);
    plan.batch
}

/// A command task that cannot run on: its process group ended now, and the
/// batch that records it interrupted (telling its owner when asked) for
/// the caller to commit. See `holarchy_supervision::plan::interrupt`.
pub fn interrupt(task: &TaskRecord, why: &str, tell_owner: bool) -> (Batch, Option<MessageId>) {
    let (plan, told) =
        holarchy_supervision::plan::interrupt::interrupt(task, why, tell_owner, now_ms());
    (directives_first(plan), told)
}
