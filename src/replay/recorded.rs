//! Recorded turns read back: which of an agent's turns a spec chooses (one
//! pass over the event log up to the replay's first cursor), and each
//! chosen turn whole (its events, its message, its stored input). Blocking
//! reads: callers run them off the async workers.

use std::collections::{HashMap, HashSet, VecDeque};

use holarchy_actors::replay::{RecordedCall, RecordedInput, RecordedStep, RecordedTurn};
use holarchy_actors::{Ctx, StoreError};
use holarchy_supervision::{AgentId, EventKind, MessageId, RunId, RunOutcome, TokenUsage};

use super::model::ReplaySpec;
use crate::api::read_model::ReadModel;

/// Events read per page of the log.
const PAGE: usize = 1024;

/// One chosen turn: where its events are in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnRef {
    pub run_id: RunId,
    pub message_id: MessageId,
    pub agent_id: AgentId,
    /// Its `run_started` and `run_finished` events.
    pub first: u64,
    pub last: u64,
    pub at_ms: u64,
}

/// The turns `spec` chooses, oldest first: its agent's turns that ended
/// (completed or failed) by `spec.until_cursor`, within its times and run
/// ids, the newest `max_turns` of them.
pub fn select(reads: &dyn ReadModel, spec: &ReplaySpec) -> Result<Vec<TurnRef>, StoreError> {
    let named: HashSet<RunId> = spec.run_ids.iter().copied().collect();
    let mut started: HashMap<RunId, TurnRef> = HashMap::new();
    let mut chosen: VecDeque<TurnRef> = VecDeque::new();
    let mut cursor = 0;
    let max = spec.max_turns as usize;
    'log: loop {
        let page = reads.events_after(cursor, PAGE)?;
        let Some(last) = page.last() else { break };
        cursor = last.cursor;
        for event in page {
            if event.cursor > spec.until_cursor {
                break 'log;
            }
            if event.agent_id != Some(spec.agent_id) {
                continue;
            }
            match event.kind {
                EventKind::RunStarted { run_id, message_id } => {
                    let within = spec.from_ms.is_none_or(|from| event.at_ms >= from)
                        && spec.to_ms.is_none_or(|to| event.at_ms < to)
                        && (named.is_empty() || named.contains(&run_id));
                    if within {
                        started.insert(
                            run_id,
                            TurnRef {
                                run_id,
                                message_id,
                                agent_id: spec.agent_id,
                                first: event.cursor,
                                last: event.cursor,
                                at_ms: event.at_ms,
                            },
                        );
                    }
                }
                EventKind::RunFinished {
                    run_id, outcome, ..
                } => {
                    let Some(mut turn) = started.remove(&run_id) else {
                        continue;
                    };
                    if matches!(outcome, RunOutcome::Completed | RunOutcome::Failed) {
                        turn.last = event.cursor;
                        chosen.push_back(turn);
                        if chosen.len() > max {
                            chosen.pop_front();
                        }
                    }
                }
                _ => {}
            }
        }
    }
    Ok(chosen.into())
}

/// The turn `turn` points at, whole, as the replay shows it a candidate.
pub fn load(ctx: &Ctx, reads: &dyn ReadModel, turn: &TurnRef) -> Result<RecordedTurn, StoreError> {
    let mut recorded = RecordedTurn {
        agent_id: turn.agent_id,
        run_id: turn.run_id,
        message: holarchy_actors::brain::MessageView {
            message_id: turn.message_id.to_string(),
            provenance: String::new(),
            from_agent_id: None,
            text: String::new(),
        },
        input: None,
        steps: Vec::new(),
        outcome: String::new(),
        detail: String::new(),
        decision: None,
        usage: None,
    };
    let mut cursor = turn.first.saturating_sub(1);
    // The turn's events lie between its first and last: read no further.
    let span = usize::try_from(turn.last.saturating_sub(turn.first) + 1).unwrap_or(PAGE);
    'log: loop {
        let page = reads.events_after(cursor, span.min(PAGE))?;
        let Some(last) = page.last() else { break };
        cursor = last.cursor;
        for event in page {
            if event.cursor > turn.last {
                break 'log;
            }
            if event.agent_id != Some(turn.agent_id) {
                continue;
            }
            take(&mut recorded, turn.run_id, event.kind);
        }
    }
    if let Some(message) = ctx.reads().message(turn.agent_id, turn.message_id)? {
        recorded.message = holarchy_actors::context::message_view(&message);
    }
    if let Some(record) = ctx.turn_inputs().turn_input(turn.agent_id, turn.run_id)? {
        if let Some(shared) = ctx.turn_inputs().shared_input(&record.shared)? {
            recorded.input = Some(RecordedInput { record, shared });
        }
    }
    Ok(recorded)
}

/// Adds one of the turn's events to `recorded`.
fn take(recorded: &mut RecordedTurn, run: RunId, kind: EventKind) {
    match kind {
        EventKind::StepDecided { run_id, reply, .. } if run_id == run => {
            recorded.steps.push(RecordedStep {
                reply,
                calls: Vec::new(),
            });
        }
        EventKind::ToolCalled {
            run_id,
            tool,
            input,
            output,
            is_error,
        } if run_id == run => {
            if recorded.steps.is_empty() {
                recorded.steps.push(RecordedStep::default());
            }
            if let Some(step) = recorded.steps.last_mut() {
                step.calls.push(RecordedCall {
                    tool,
                    input,
                    output,
                    is_error,
                });
            }
        }
        EventKind::RunFinished {
            run_id,
            outcome,
            detail,
            ..
        } if run_id == run => {
            recorded.outcome = outcome.name().to_owned();
            recorded.detail = detail;
        }
        ref decided @ EventKind::Decided { run_id, .. } if run_id == run => {
            recorded.decision = holarchy_actors::replay::decision_text(decided);
        }
        EventKind::TurnUsage {
            run_id,
            prompt_tokens,
            completion_tokens,
            cached_tokens,
        } if run_id == run => {
            recorded.usage = Some(TokenUsage {
                prompt_tokens,
                completion_tokens,
                cached_tokens,
            });
        }
        _ => {}
    }
}
