//! The end of a turn: its steps, reply and outcome as one batch of writes,
//! left for the agent to commit with whatever comes next.

use holarchy_composition::decision::{Decision, ToolCall, MAX_REASON_BYTES};
use holarchy_supervision::effect::Plan;
use holarchy_supervision::plan::turn;
use holarchy_supervision::{AgentId, EventKind, RunId, RunOutcome};
use ractor::{ActorProcessingErr, ActorRef};
use tracing::{debug, warn};

use super::{ActiveRun, AgentActor, AgentState};
use crate::protocol::{AgentMsg, ToolResult, TurnDecision, TurnDone, TurnOutcome};
use crate::replies::{ReplyEvent, ReplyKind};
use crate::store::{Batch, StoreError};
use crate::Ctx;

/// What a finished turn leaves for its agent to do once it is written.
#[derive(Default)]
pub(super) struct Finished {
    pub(super) batch: Batch,
    pub(super) run: Option<ActiveRun>,
    /// A done child's result for its parent.
    pub(super) result: Option<String>,
    /// How the turn ended, for watchers of its replies.
    pub(super) ended: Option<Ended>,
}

/// How a turn ended, as its reply watchers are told.
pub(super) struct Ended {
    pub(super) outcome: RunOutcome,
    pub(super) reply: Option<String>,
    pub(super) detail: String,
}

/// The run as the planner of its end sees it; what its model calls spent
/// is taken from the meter, so it is recorded once.
/// The message of `run` as stored: as its start wrote it, unless a
/// cleanup ending the agent may have written it since (it cancels a
/// message in a turn), in which case it is read back.
pub(super) fn kept_message(
    ctx: &Ctx,
    state: &AgentState,
    run: &mut ActiveRun,
) -> Result<Option<holarchy_supervision::MessageRecord>, StoreError> {
    let kept = run.message.take().map(|message| *message);
    if state.queue.live().is_ending() {
        return ctx.reads().message(state.id(), run.message_id);
    }
    Ok(kept)
}

pub(super) fn run_of(run: &ActiveRun) -> turn::Run {
    turn::Run {
        run_id: run.run_id,
        message_id: run.message_id,
        usage: run.usage.take(),
    }
}

impl AgentActor {
    /// Records a finished turn and frees the agent for the next one.
    /// Returns the turn's writes for the caller to commit (with the next
    /// turn's start, if one starts), the run (kept until then, so a graceful
    /// shutdown waits for the commit), and, for a supervised child whose
    /// brain said `done`, its result for the parent: handed over only once
    /// the turn is written.
    pub(super) fn finish_turn(
        &self,
        state: &mut AgentState,
        done: TurnDone,
    ) -> Result<Finished, StoreError> {
        let mut finished = Finished::default();
        let Some(mut run) = state.run.take_if(|r| r.run_id == done.run_id) else {
            debug!(agent_id = %state.id(), run_id = %done.run_id, "stale turn result ignored");
            return Ok(finished);
        };
        state.queue.live().turn_ended();
        let agent_id = state.id();
        let run_id = run.run_id;
        let Some(message) = kept_message(&self.ctx, state, &mut run)? else {
            warn!(agent_id = %agent_id, run_id = %run_id, "finished turn has no message");
            finished.run = Some(run);
            return Ok(finished);
        };
        let outcome = self.outcome(run_id, done.outcome);
        if let turn::Outcome::BrainFailed(detail) = &outcome {
            // The operator's first sign of a missing key or a broken
            // brain, without reading the event log.
            warn!(agent_id = %agent_id, run_id = %run_id, reason = %detail, "turn failed");
        }
        let supervised = state.target.supervisor_agent_id.is_some();
        let end = turn::finish(message, run_of(&run), outcome, supervised);
        finished.ended = Some(Ended {
            outcome: end.outcome,
            reply: end.reply,
            detail: end.detail,
        });
        finished.result = end.result;
        state.queue.live().turn_completed();
        finished.run = Some(run);
        finished.batch = end.batch;
        Ok(finished)
    }

    /// The turn's outcome as it is stored: no text the brain saw keeps a
    /// secret (a trigger token), every tool output within its bound, and
    /// the decision read off the steps before they move into their events.
    fn outcome(&self, run_id: RunId, outcome: TurnOutcome) -> turn::Outcome {
        let redact = crate::secrets::redact_trigger_tokens;
        match outcome {
            TurnOutcome::Decided {
                reply,
                steps,
                done,
                step_limit,
                decision,
            } => {
                let reply = reply.as_deref().map(redact);
                let decided =
                    decision.map(|source| decided(run_id, reply.as_deref(), &steps, source));
                let max_output = self.ctx.config.limits.max_tool_result_bytes;
                let steps = steps
                    .into_iter()
                    .map(|(said, results)| turn::Step {
                        said: said.as_deref().map(redact),
                        calls: results
                            .into_iter()
                            .map(|result| turn::Call {
                                tool: result.tool,
                                // The event log keeps calls as JSON text.
                                input: redact(&result.input.text()),
                                // Already cut by the turn; cut here too, so
                                // no producer can store more than the bound
                                // (redacting a token only shortens it).
                                output: redact(
                                    &crate::tools::cap_output(result.output, max_output)
                                        .to_string(),
                                ),
                                is_error: result.is_error,
                            })
                            .collect(),
                    })
                    .collect();
                turn::Outcome::Decided {
                    reply,
                    steps,
                    done,
                    step_limit,
                    decided,
                }
            }
            TurnOutcome::BrainFailed(detail) => turn::Outcome::BrainFailed(redact(&detail)),
        }
    }
}

/// A turn's `decided` event: the brain's explicit decision when it gave
/// one that holds, else the one read off the turn. A refused explicit
/// decision is no failure of the turn: the derived one is recorded, its
/// reason saying why the brain's was refused.
pub(crate) fn decided(
    run_id: RunId,
    reply: Option<&str>,
    steps: &[(Option<String>, Vec<ToolResult>)],
    source: TurnDecision,
) -> EventKind {
    let run = run_id.to_string();
    let derive = || {
        let calls: Vec<ToolCall<'_>> = steps
            .iter()
            .flat_map(|(_, results)| results)
            .map(|result| ToolCall {
                name: &result.tool,
                input: result.input.value(),
            })
            .collect();
        Decision::derive(&run, reply, &calls)
    };
    let decision = match source.explicit.as_deref() {
        None => derive(),
        Some(json) => match Decision::parse_explicit(&run, json) {
            Ok(decision) => decision,
            Err(refused) => {
                let mut decision = derive();
                decision.reason = cut(
                    format!(
                        "{}; the brain's decision was refused: {refused}",
                        decision.reason
                    ),
                    MAX_REASON_BYTES,
                );
                decision
            }
        },
    };
    // A brain may echo a trigger token it saw; the log never keeps one.
    let redact = |text: &str| crate::secrets::redact_trigger_tokens(text);
    EventKind::Decided {
        run_id,
        instance: source.instance,
        kind: decision.kind.as_str().to_owned(),
        reason: redact(&decision.reason),
        target: decision.target.as_deref().map(redact),
        idempotency_key: redact(&decision.idempotency_key),
        requires_approval: decision.requires_approval,
        explicit: decision.explicit,
    }
}

/// `text` within `max` bytes, cut at a character boundary.
fn cut(mut text: String, max: usize) -> String {
    holarchy_supervision::bounds::truncate(&mut text, max);
    text
}

impl AgentActor {
    /// A turn reported back: its writes go with the next turn's start (or
    /// alone), and a done child hands its result over once they are in.
    pub(super) async fn turn_done(
        &self,
        myself: &ActorRef<AgentMsg>,
        state: &mut AgentState,
        done: TurnDone,
    ) -> Result<(), ActorProcessingErr> {
        let Finished {
            batch,
            run,
            result,
            ended,
        } = self.finish_turn(state, done)?;
        let flushed = match result {
            // A child that is done starts no other turn: it ends.
            Some(output) => {
                // Its flush is the hand-over's to wait for.
                let flushed = self.apply(Plan::writes(batch)).await?;
                self.hand_over(state.id(), output);
                Some(flushed)
            }
            None => self
                .start_turns(myself, state, None, batch)
                .await
                .into_result()?,
        };
        if let (Some(run), Some(ended)) = (&run, ended) {
            self.tell_end(state.id(), run, ended, flushed);
        }
        // Only now, with the turn written, may a shutdown count it as ended.
        drop(run);
        Ok(())
    }

    /// Tells the agent's reply watchers that a turn ended, once its end is
    /// durable: a watcher that then reads the message finds its reply.
    /// Nothing to do (no task) when nobody watches.
    pub(super) fn tell_end(
        &self,
        agent_id: AgentId,
        run: &ActiveRun,
        ended: Ended,
        flushed: Option<crate::store::DurableFuture>,
    ) {
        if !self.ctx.replies.is_watched(agent_id) {
            return;
        }
        // As stored: the store redacts every secret it knows.
        let secrets = &self.ctx.config.secrets;
        let reply = ended.reply.map(|mut text| {
            secrets.redact(&mut text);
            text
        });
        let mut detail = ended.detail;
        secrets.redact(&mut detail);
        let event = ReplyEvent {
            agent_id,
            run_id: run.run_id,
            message_id: run.message_id,
            step: 0,
            kind: ReplyKind::End {
                outcome: ended.outcome,
                reply,
                detail,
            },
        };
        let replies = self.ctx.replies.clone();
        let tasks = self.ctx.lifecycle.tasks.clone();
        tasks.spawn(async move {
            if let Some(flushed) = flushed {
                // A flush that failed leaves nothing to tell: the daemon
                // is going down.
                if flushed.await.is_err() {
                    return;
                }
            }
            replies.publish(event);
        });
    }
}
