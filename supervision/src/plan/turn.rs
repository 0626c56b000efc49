//! A turn's records, decided: its start (the head message handled by a new
//! run, one more attempt), its end (every step and tool call logged, the
//! reply, the decision, what its model calls spent, the message handled or
//! failed), and an operator's abort. The agent's actor carries these into
//! its grouped commit with whatever else it has to write.

use crate::effect::{Batch, Write};
use crate::{
    AgentId, EventKind, MessageEvent, MessageId, MessageRecord, RunId, RunOutcome, TokenUsage,
};

/// Starts `run_id` on `message`, with `carry` (writes not yet committed) in
/// the same batch; `None` unless the message is still queued (a duplicate
/// queue entry of one handled meanwhile is skipped).
pub fn start(
    message: MessageRecord,
    run_id: RunId,
    carry: Batch,
) -> Option<(Batch, MessageRecord)> {
    let handling = message.status.next(MessageEvent::Start { run_id })?;
    let message = MessageRecord {
        status: handling,
        attempts: message.attempts + 1,
        ..message
    };
    let batch = carry.write(Write::PutMessage(message.clone())).event(
        message.agent_id,
        EventKind::RunStarted {
            run_id,
            message_id: message.id,
        },
    );
    Some((batch, message))
}

/// The run a turn end is about.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    pub run_id: RunId,
    pub message_id: MessageId,
    /// What its model calls spent, if its brain reported it.
    pub usage: Option<TokenUsage>,
}

/// The run's `run_finished` after `batch`, preceded by what its model calls
/// spent: the `turn_usage` event and the agent's totals, in the same
/// commit. A turn whose brain reported nothing records nothing spent.
pub fn run_finished(
    batch: Batch,
    agent_id: AgentId,
    run: Run,
    outcome: RunOutcome,
    detail: String,
) -> Batch {
    let mut batch = batch;
    if let Some(usage) = run.usage {
        batch = batch
            .event(
                agent_id,
                EventKind::TurnUsage {
                    run_id: run.run_id,
                    prompt_tokens: usage.prompt_tokens,
                    completion_tokens: usage.completion_tokens,
                    cached_tokens: usage.cached_tokens,
                },
            )
            .write(Write::AddUsage { agent_id, usage });
    }
    batch.event(
        agent_id,
        EventKind::RunFinished {
            run_id: run.run_id,
            message_id: run.message_id,
            outcome,
            detail,
        },
    )
}

/// One tool call of a step, as it is logged (already redacted and cut).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub tool: String,
    pub input: String,
    pub output: String,
    pub is_error: bool,
}

/// One step of a turn: what the brain said, and its calls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Step {
    pub said: Option<String>,
    pub calls: Vec<Call>,
}

/// How a turn ended, as its brain reported it (texts already redacted).
#[derive(Debug, Clone)]
pub enum Outcome {
    Decided {
        reply: Option<String>,
        steps: Vec<Step>,
        /// The brain said the work is done.
        done: bool,
        /// The turn stopped at this step limit with tools still asked for.
        step_limit: Option<u32>,
        /// The turn's `decided` event, for the agents that log one.
        decided: Option<EventKind>,
    },
    BrainFailed(String),
}

/// What a turn's end decided.
#[derive(Debug)]
pub struct End {
    pub batch: Batch,
    pub outcome: RunOutcome,
    pub reply: Option<String>,
    pub detail: String,
    /// A supervised child's result for its parent, when its brain said
    /// `done`: handed over once the batch is written.
    pub result: Option<String>,
}

/// Ends `run` on `message` (as read) with `outcome`; `supervised` says the
/// agent has a parent to hand a result to.
pub fn finish(message: MessageRecord, run: Run, outcome: Outcome, supervised: bool) -> End {
    let agent_id = message.agent_id;
    let run_id = run.run_id;
    let mut message = message;
    let mut batch = Batch::new();
    let (outcome, reply, detail, handled, result) = match outcome {
        Outcome::Decided {
            reply,
            steps,
            done,
            step_limit,
            decided,
        } => {
            // Every step is logged, so an operator can replay the turn.
            for (n, step) in steps.into_iter().enumerate() {
                batch = batch.event(
                    agent_id,
                    EventKind::StepDecided {
                        run_id,
                        step: n as u32 + 1,
                        reply: step.said,
                        tool_calls: step.calls.len() as u32,
                    },
                );
                for call in step.calls {
                    batch = batch.event(
                        agent_id,
                        EventKind::ToolCalled {
                            run_id,
                            tool: call.tool,
                            input: call.input,
                            output: call.output,
                            is_error: call.is_error,
                        },
                    );
                }
            }
            if let Some(text) = &reply {
                batch = batch.event(
                    agent_id,
                    EventKind::Replied {
                        run_id,
                        message_id: message.id,
                        text: text.clone(),
                    },
                );
            }
            // In the turn's own commit: a turn is never logged as finished
            // without its decision, nor the other way round.
            if let Some(decided) = decided {
                batch = batch.event(agent_id, decided);
            }
            let detail = match (done, step_limit) {
                (true, _) => "done".into(),
                (false, Some(steps)) => format!(
                    "step_limit: the turn stopped after {steps} steps (--max-steps-per-turn)"
                ),
                (false, None) => String::new(),
            };
            let result = (done && supervised).then(|| reply.clone().unwrap_or("done".into()));
            (RunOutcome::Completed, reply, detail, true, result)
        }
        Outcome::BrainFailed(detail) => (RunOutcome::Failed, None, detail, false, None),
    };
    batch = run_finished(batch, agent_id, run, outcome, detail.clone());
    let finished = MessageEvent::Finish { run_id, handled };
    message.status = message.status.next(finished).unwrap_or(message.status);
    if handled {
        message.reply = reply.clone();
    }
    End {
        batch: batch.write(Write::PutMessage(message)),
        outcome,
        reply,
        detail,
        result,
    }
}

/// An operator's abort of `run` on `message` (as read, if it still is):
/// the run ends aborted, and the message is set aside unless another run
/// took it meanwhile.
pub fn abort(agent_id: AgentId, message: Option<&MessageRecord>, run: Run) -> Batch {
    let detail = "operator_aborted".to_owned();
    let mut batch = run_finished(Batch::new(), agent_id, run, RunOutcome::Aborted, detail);
    let aborted = message.and_then(|m| {
        let status = m.status.next(MessageEvent::Abort { run_id: run.run_id })?;
        Some(MessageRecord {
            status,
            ..m.clone()
        })
    });
    if let Some(message) = aborted {
        batch = batch.write(Write::PutMessage(message));
    }
    batch
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::{MessageStatus, Provenance};

    fn handling(run_id: RunId) -> MessageRecord {
        let mut message = MessageRecord::queued(
            AgentId::generate(),
            Provenance::Operator,
            "hi".into(),
            None,
            1,
        );
        message.status = MessageStatus::Handling { run_id };
        message.attempts = 1;
        message
    }

    fn outcome() -> impl Strategy<Value = Outcome> {
        prop_oneof![
            (
                proptest::option::of("\\PC{0,20}"),
                proptest::collection::vec(0usize..3, 0..4),
                any::<bool>(),
                proptest::option::of(1u32..9),
            )
                .prop_map(|(reply, steps, done, step_limit)| Outcome::Decided {
                    reply,
                    steps: steps
                        .into_iter()
                        .map(|calls| Step {
                            said: None,
                            calls: (0..calls)
                                .map(|_| Call {
                                    tool: "Echo".into(),
                                    input: "{}".into(),
                                    output: "ok".into(),
                                    is_error: false,
                                })
                                .collect(),
                        })
                        .collect(),
                    done,
                    step_limit,
                    decided: None,
                }),
            "\\PC{0,20}".prop_map(Outcome::BrainFailed),
        ]
    }

    proptest! {
        /// A turn ends with one `run_finished` after every step and call it
        /// made, the message handled (with the reply) or failed, usage
        /// added exactly when reported, and a result for the parent only
        /// from a supervised child whose brain said `done`.
        #[test]
        fn a_turn_ends_once_with_every_step_and_its_message_settled(
            outcome in outcome(),
            supervised in any::<bool>(),
            spent in any::<bool>(),
        ) {
            let run_id = RunId::generate();
            let message = handling(run_id);
            let usage = spent.then_some(TokenUsage { prompt_tokens: 3, completion_tokens: 2, cached_tokens: 0 });
            let run = Run { run_id, message_id: message.id, usage };
            let (calls, steps, done, failed) = match &outcome {
                Outcome::Decided { steps, done, .. } => (
                    steps.iter().map(|s| s.calls.len()).sum::<usize>(),
                    steps.len(),
                    *done,
                    false,
                ),
                Outcome::BrainFailed(_) => (0, 0, false, true),
            };
            let end = finish(message.clone(), run, outcome, supervised);
            let events = &end.batch.events;
            let count = |f: &dyn Fn(&EventKind) -> bool| events.iter().filter(|(_, e)| f(e)).count();
            prop_assert_eq!(count(&|e| matches!(e, EventKind::RunFinished { .. })), 1);
            let last_is_end = matches!(events.last(), Some((_, EventKind::RunFinished { .. })));
            prop_assert!(last_is_end);
            prop_assert_eq!(count(&|e| matches!(e, EventKind::StepDecided { .. })), steps);
            prop_assert_eq!(count(&|e| matches!(e, EventKind::ToolCalled { .. })), calls);
            prop_assert_eq!(count(&|e| matches!(e, EventKind::TurnUsage { .. })), usize::from(spent));
            let stored: Vec<&MessageRecord> = end.batch.writes.iter().filter_map(|w| match w {
                Write::PutMessage(m) => Some(m),
                _ => None,
            }).collect();
            prop_assert_eq!(stored.len(), 1);
            let want = if failed { MessageStatus::Failed { run_id } } else { MessageStatus::Handled { run_id } };
            prop_assert_eq!(stored[0].status, want);
            prop_assert_eq!(end.outcome == RunOutcome::Failed, failed);
            prop_assert_eq!(end.result.is_some(), done && supervised && !failed);
        }

        /// Only a queued message starts a run, one attempt more, by one
        /// write carried with what came before it.
        #[test]
        fn only_a_queued_message_starts_a_run(queued in any::<bool>()) {
            let run_id = RunId::generate();
            let mut message =
                MessageRecord::queued(AgentId::generate(), Provenance::Operator, "hi".into(), None, 1);
            if !queued {
                message.status = MessageStatus::Handled { run_id: RunId::generate() };
            }
            let carry = Batch::new().write(Write::DropOutput { task_id: crate::TaskId::generate(), offset: 0 });
            match start(message.clone(), run_id, carry) {
                Some((batch, started)) => {
                    prop_assert!(queued);
                    prop_assert_eq!(started.status, MessageStatus::Handling { run_id });
                    prop_assert_eq!(started.attempts, message.attempts + 1);
                    prop_assert_eq!(batch.writes.len(), 2);
                }
                None => prop_assert!(!queued),
            }
        }
    }
}
