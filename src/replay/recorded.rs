//! Recorded turns read back: which of an agent's turns a spec chooses
//! (from its messages, each settled one naming the run that handled it),
//! and each chosen turn whole (its events, its message, its stored input).
//! A turn's events are found by time: the log is in commit order, so a
//! search by halves finds where the turn's start lies, and only the
//! stretch from there to its end is read. Neither costs a walk of the
//! whole log, however long it grew. Blocking reads: callers run them off
//! the async workers.

use std::collections::{HashSet, VecDeque};

use holarchy_actors::replay::{RecordedCall, RecordedInput, RecordedStep, RecordedTurn};
use holarchy_actors::{Ctx, StoreError};
use holarchy_supervision::{AgentId, EventKind, MessageId, MessageStatus, RunId, TokenUsage};

use super::model::ReplaySpec;
use crate::api::read_model::ReadModel;

/// Messages read per page of an agent's.
const MESSAGE_PAGE: usize = 512;
/// Events read by the first page of a turn's stretch of the log, and by
/// any page at most: a short turn's events are a few, and each read page
/// doubles, so a long one's are read in few pages.
const FIRST_PAGE: usize = 16;
const EVENT_PAGE: usize = 256;
/// How long before its run id's time the search for a turn's events
/// starts, try after try: an event is stamped when its batch is made, so
/// stamps run out of order across commits by as long as a batch waits to
/// commit (milliseconds, unless the disk stalls). A try that finds the
/// turn's end before its start began too late, and the next starts
/// earlier.
const SLACK_MS: [u64; 3] = [20, 1_000, 60_000];
/// The most events read looking for one turn's: a turn whose events lie
/// further apart (a turn of hours on a busy daemon) is reported as one
/// that could not be read.
const MAX_SCAN: usize = 1_000_000;

/// One chosen turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnRef {
    pub run_id: RunId,
    pub message_id: MessageId,
    pub agent_id: AgentId,
    /// When it started (its run id's time), Unix ms.
    pub at_ms: u64,
}

/// The turns `spec` chooses, oldest first: its agent's messages that a
/// turn handled (or failed on) that started before the replay did, within
/// its times and run ids, the newest `max_turns` of them.
pub fn select(ctx: &Ctx, spec: &ReplaySpec) -> Result<Vec<TurnRef>, StoreError> {
    let named: HashSet<RunId> = spec.run_ids.iter().copied().collect();
    let mut chosen: VecDeque<TurnRef> = VecDeque::new();
    let mut after: Option<MessageId> = None;
    loop {
        let page = ctx
            .reads()
            .list_messages(spec.agent_id, after, MESSAGE_PAGE)?;
        let Some(last) = page.last() else { break };
        after = Some(last.id);
        for message in &page {
            let run_id = match message.status {
                MessageStatus::Handled { run_id } | MessageStatus::Failed { run_id } => run_id,
                _ => continue,
            };
            let at_ms = run_id.timestamp_ms();
            let within = at_ms < spec.until_ms
                && spec.from_ms.is_none_or(|from| at_ms >= from)
                && spec.to_ms.is_none_or(|to| at_ms < to)
                && (named.is_empty() || named.contains(&run_id));
            if within {
                chosen.push_back(TurnRef {
                    run_id,
                    message_id: message.id,
                    agent_id: spec.agent_id,
                    at_ms,
                });
                if chosen.len() > spec.max_turns as usize {
                    chosen.pop_front();
                }
            }
        }
        if page.len() < MESSAGE_PAGE {
            break;
        }
    }
    let mut chosen: Vec<TurnRef> = chosen.into();
    // Messages are in arrival order; turns are replayed in start order.
    chosen.sort_by_key(|t| (t.at_ms, t.run_id));
    Ok(chosen)
}

/// Where the last search found a stamp: replayed turns go in time order,
/// so the next search starts there and gallops forward (a few reads)
/// instead of halving the whole log (a few dozen).
#[derive(Debug, Default)]
pub struct Hint(std::sync::Mutex<Option<(u64, u64)>>);

impl Hint {
    fn get(&self) -> Option<(u64, u64)> {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn set(&self, cursor: u64, at_ms: u64) {
        let mut hint = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if hint.is_none_or(|(_, seen)| seen < at_ms) {
            *hint = Some((cursor, at_ms));
        }
    }
}

/// The cursor after which the first event stamped at or after `at_ms`
/// lies (the last event stamped before it): galloping from `hint` when it
/// lies before, then a search by halves over the bracket found.
fn cursor_before(reads: &dyn ReadModel, at_ms: u64, hint: &Hint) -> Result<u64, StoreError> {
    let probe = |cursor: u64| -> Result<Option<(u64, u64)>, StoreError> {
        Ok(reads
            .events_after(cursor.saturating_sub(1), 1)?
            .into_iter()
            .next()
            .map(|e| (e.cursor, e.at_ms)))
    };
    let Some((first, first_ms)) = probe(1)? else {
        return Ok(0);
    };
    if first_ms >= at_ms {
        return Ok(first.saturating_sub(1));
    }
    // `lo` is an event stamped before `at_ms`; `hi` a cursor past it.
    let mut lo = first;
    let mut hi = *reads.event_watermark().borrow() + 1;
    if let Some((cursor, _)) = hint.get().filter(|&(c, seen)| seen <= at_ms && c >= first) {
        lo = cursor;
        let mut step = 16;
        loop {
            match probe(lo + step)? {
                Some((cursor, stamp)) if stamp < at_ms => {
                    lo = cursor;
                    step *= 2;
                }
                Some(_) => {
                    hi = lo + step;
                    break;
                }
                None => break,
            }
        }
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        match probe(mid)? {
            Some((cursor, stamp)) if stamp < at_ms && cursor < hi => lo = cursor,
            _ => hi = mid,
        }
    }
    hint.set(lo, at_ms);
    Ok(lo)
}

/// The turn `turn` points at, whole, as the replay shows it a candidate.
pub fn load(
    ctx: &Ctx,
    reads: &dyn ReadModel,
    turn: &TurnRef,
    hint: &Hint,
) -> Result<RecordedTurn, StoreError> {
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
    for slack in SLACK_MS {
        let start = cursor_before(reads, turn.at_ms.saturating_sub(slack), hint)?;
        let mut found = recorded.clone();
        if scan(reads, turn, start, &mut found)? {
            recorded = found;
            break;
        }
    }
    if recorded.outcome.is_empty() {
        return Err(StoreError::Precondition(format!(
            "the events of turn {} are no longer in the log (its retention, or a turn cut short)",
            turn.run_id
        )));
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

/// Reads the log after `cursor` into `recorded` until the turn's end:
/// whether the read began before the turn's start (else what it read is
/// only part of the turn, or none of it).
fn scan(
    reads: &dyn ReadModel,
    turn: &TurnRef,
    mut cursor: u64,
    recorded: &mut RecordedTurn,
) -> Result<bool, StoreError> {
    let mut started = false;
    let (mut read, mut size) = (0, FIRST_PAGE);
    loop {
        let page = reads.events_after(cursor, size)?;
        size = (size * 2).min(EVENT_PAGE);
        let Some(last) = page.last() else {
            return Ok(false);
        };
        cursor = last.cursor;
        read += page.len();
        for event in page {
            if event.agent_id != Some(turn.agent_id) {
                continue;
            }
            if let EventKind::RunStarted { run_id, .. } = &event.kind {
                started |= *run_id == turn.run_id;
                continue;
            }
            let ended = take(recorded, turn.run_id, event.kind);
            if !started && (ended || !recorded.steps.is_empty()) {
                return Ok(false);
            }
            if ended {
                return Ok(true);
            }
        }
        if read >= MAX_SCAN {
            return Ok(false);
        }
    }
}

/// Adds one of the turn's events to `recorded`; true once the turn ended.
fn take(recorded: &mut RecordedTurn, run: RunId, kind: EventKind) -> bool {
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
        // The turn's decision and usage are in the commit of its end,
        // before `run_finished`.
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
        EventKind::RunFinished {
            run_id,
            outcome,
            detail,
            ..
        } if run_id == run => {
            recorded.outcome = outcome.name().to_owned();
            recorded.detail = detail;
            return true;
        }
        _ => {}
    }
    false
}
