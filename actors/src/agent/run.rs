//! A turn as it runs beside its agent's actor: made durable, run under
//! its deadline, and always reported back by message.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;

use holarchy_supervision::{AgentId, MessageRecord, Profile, RunId};
use ractor::ActorRef;
use tokio::task::AbortHandle;

use crate::brain::UsageMeter;
use crate::protocol::{AgentMsg, TurnDone, TurnOutcome};
use crate::turn;
use crate::Ctx;

/// Aborts a task when dropped, so a cancelled turn takes its work along.
#[derive(Debug)]
pub(super) struct AbortOnDrop(pub(super) AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The turn itself: runs outside the actor and always reports back by
/// message, even when the brain or a tool panics or the turn runs past its
/// deadline; otherwise the agent would wait for it forever.
pub(super) async fn run_turn(
    ctx: Arc<Ctx>,
    profile: Profile,
    agent_id: AgentId,
    run_id: RunId,
    message: MessageRecord,
    usage: UsageMeter,
    myself: ActorRef<AgentMsg>,
) {
    let trace = ctx.config.trace_causes;
    // The turn's start (its attempt count) is on disk before the turn
    // runs: a turn that crashes the daemon is counted, so recovery can set
    // the message aside after `--max-message-attempts` crashes.
    if let Err(err) = crate::apply::durable(&ctx).await {
        let outcome = TurnOutcome::BrainFailed(format!("the turn's start was not stored: {err}"));
        let _ = myself.cast(done(trace, run_id, outcome));
        return;
    }
    let deadline = ctx.config.turn_timeout;
    // In this task, not one of its own: a panic is caught here, and
    // aborting this task (the agent went away) takes the turn along.
    let turn =
        AssertUnwindSafe(turn::run(ctx, profile, agent_id, run_id, message, usage)).catch_unwind();
    let outcome = match tokio::time::timeout(deadline, turn).await {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(_panic)) => TurnOutcome::BrainFailed("the turn panicked".into()),
        Err(_) => TurnOutcome::BrainFailed(format!("the turn ran past its {deadline:?} deadline")),
    };
    // The agent may be gone (archived, killed); its turn result goes with it.
    let _ = myself.cast(done(trace, run_id, outcome));
}

/// The turn's report to its agent, under the turn's span (this task runs
/// in it) when spans are exported: ractor does not carry a sender's span
/// along with its messages here (its span propagation is off: a span in
/// every message slot was 1.3 KB on every idle actor).
fn done(trace: bool, run_id: RunId, outcome: TurnOutcome) -> AgentMsg {
    AgentMsg::TurnDone(Box::new(TurnDone {
        run_id,
        outcome,
        span: trace.then(tracing::Span::current),
    }))
}
