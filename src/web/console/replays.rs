//! The console's replays (`ReplayService`, as `holarchy replay list` and
//! `holarchy replay show` read them): `GET /api/replays` lists the
//! caller's namespace's replays, newest first, each with its agent's
//! name; `GET /api/replays/ID?page=&limit=&all=1` is one replay and a
//! page of its turns, only those that differ unless `all=1`.
//!
//! Each turn's two sides, the recorded decision and the candidate's,
//! come as rows side by side: a side's lines are each step's reply and
//! calls, then its decision, whether it was done and why it failed (the
//! lines `replay show` diffs), aligned by the same diff, and a row whose
//! two sides are not the same line is marked. What agents said and the
//! inputs of their calls go into the page as text, never as markup.
//!
//! A replay of another namespace is answered as one that does not exist
//! (404): `ReplayService` keeps the caller, who acts through
//! [`super::req`], to its namespace.

use std::collections::HashMap;

use serde_json::{json, Value};
use similar::{capture_diff_slices, Algorithm, DiffTag};

use crate::api::pb;
use crate::api::pb::replay_service_server::ReplayService as _;

use super::query::Query;
use super::routes::called;
use super::{overview, Console, Refusal};

/// Turns per page, by default and at most: a turn's report holds up to
/// 32 steps a side, each text cut at 4 KiB by the report.
const TURN_PAGE: u32 = 10;
const MAX_TURN_PAGE: u32 = 50;
/// Lines of one side shown at most; the rest are counted, not sent.
const MAX_LINES: usize = 256;

/// `GET /api/replays`: every replay of the caller's namespace.
pub async fn list(console: &Console) -> Result<Value, Refusal> {
    let listed = called(
        console
            .replays
            .list_replays(super::req(pb::ListReplaysRequest {}))
            .await,
    )?;
    // Each agent named once, however many of its replays are listed (at
    // most the 64 a daemon stores).
    let mut names: HashMap<&str, String> = HashMap::new();
    for replay in &listed.replays {
        let agent = replay.agent_id.as_str();
        if !names.contains_key(agent) {
            names.insert(agent, overview::name_of(console, agent).await);
        }
    }
    let replays: Vec<Value> = listed
        .replays
        .iter()
        .map(|r| summary(r, names.get(r.agent_id.as_str()).map_or("", String::as_str)))
        .collect();
    Ok(json!({ "replays": replays }))
}

/// `GET /api/replays/ID`: the replay and one page of its turns.
pub async fn one(console: &Console, id: &str, query: &Query) -> Result<Value, Refusal> {
    let page_size = query
        .limit(TURN_PAGE, MAX_TURN_PAGE)
        .map_err(Refusal::from)?;
    let page_token = query.page().map_err(Refusal::from)?;
    let all = match query.text("all") {
        "" | "0" => false,
        "1" => true,
        _ => {
            return Err(Refusal::bad(
                "all must be 1 (every turn) or 0 (the turns that differ)",
            ))
        }
    };
    let page = called(
        console
            .replays
            .get_replay(super::req(pb::GetReplayRequest {
                replay_id: id.to_owned(),
                page_token,
                page_size,
                differences_only: !all,
            }))
            .await,
    )?;
    let replay = page.replay.unwrap_or_default();
    let name = overview::name_of(console, &replay.agent_id).await;
    Ok(json!({
        "replay": summary(&replay, &name),
        "turns": page.turns.iter().map(turn).collect::<Vec<_>>(),
        "next": page.next_page_token,
        "all": all,
    }))
}

/// A replay's summary: what it replays, how far it got, and its counts
/// by class.
fn summary(r: &pb::Replay, agent_name: &str) -> Value {
    json!({
        "replay_id": r.replay_id,
        "agent_id": r.agent_id,
        "agent_name": agent_name,
        "status": r.status,
        "reason": r.reason,
        "selected": r.selected,
        "replayed": r.replayed,
        "same": r.same,
        "same_tools_different_text": r.same_tools_different_text,
        "different_tools": r.different_tools,
        "errors": r.errors,
        "unrecorded_calls": r.unrecorded_calls,
        "recorded_tokens": r.recorded_tokens,
        "candidate_tokens": r.candidate_tokens,
        "candidate": r.candidate,
        "candidate_label": r.candidate_label,
        "created_at_ms": r.created_at_ms,
        "updated_at_ms": r.updated_at_ms,
    })
}

/// One replayed turn, its two sides as aligned rows.
fn turn(t: &pb::ReplayTurn) -> Value {
    let (recorded, recorded_cut) = lines(t.recorded.as_ref());
    let (candidate, candidate_cut) = lines(t.candidate.as_ref());
    let mut rows = rows(&recorded, &candidate);
    rows.extend(ends(t.recorded.as_ref(), t.candidate.as_ref()));
    let tokens = |d: Option<&pb::ReplayDecision>| {
        d.map_or(
            json!(null),
            |d| json!({ "prompt": d.prompt_tokens, "completion": d.completion_tokens }),
        )
    };
    json!({
        "index": t.index,
        "run_id": t.run_id,
        "at_ms": t.at_ms,
        "class": t.class,
        "unrecorded_calls": t.unrecorded_calls,
        "error": t.error,
        "rows": rows,
        "recorded_lines_cut": recorded_cut,
        "candidate_lines_cut": candidate_cut,
        "recorded_tokens": tokens(t.recorded.as_ref()),
        "candidate_tokens": tokens(t.candidate.as_ref()),
    })
}

/// One line of a side: a step's reply or one of its calls. Two lines are
/// the same when every field is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Line {
    /// From 1.
    step: usize,
    kind: &'static str,
    tool: String,
    text: String,
}

impl Line {
    fn view(&self) -> Value {
        let mut out = json!({ "kind": self.kind, "step": self.step, "text": self.text });
        if self.kind == "call" {
            out["tool"] = json!(self.tool);
        }
        out
    }
}

/// A side's steps as lines, in the order `holarchy replay show` writes
/// them, at most [`MAX_LINES`]; and how many more there were.
fn lines(d: Option<&pb::ReplayDecision>) -> (Vec<Line>, usize) {
    let Some(d) = d else {
        return (Vec::new(), 0);
    };
    let mut out = Vec::new();
    for (i, step) in d.steps.iter().enumerate() {
        if !step.reply.is_empty() {
            out.push(Line {
                step: i + 1,
                kind: "reply",
                tool: String::new(),
                text: step.reply.clone(),
            });
        }
        for call in &step.calls {
            out.push(Line {
                step: i + 1,
                kind: "call",
                tool: call.tool.clone(),
                text: call.input.clone(),
            });
        }
    }
    let cut = out.len().saturating_sub(MAX_LINES);
    out.truncate(MAX_LINES);
    (out, cut)
}

/// How each side ended, a row each where either side says it: the logged
/// decision, whether it was done, why it failed. A `done` one side does
/// not know (a recorded turn whose input was not recorded) is shown as
/// unknown and not marked, as the turn's class does not hold it against
/// the other side.
fn ends(
    recorded: Option<&pb::ReplayDecision>,
    candidate: Option<&pb::ReplayDecision>,
) -> Vec<Value> {
    let text = |d: Option<&pb::ReplayDecision>, field: fn(&pb::ReplayDecision) -> &str| {
        d.map(field).filter(|t| !t.is_empty()).map(str::to_owned)
    };
    let done = |d: Option<&pb::ReplayDecision>| d.and_then(|d| d.done);
    let known = |done: Option<bool>| Some(done.map_or("unknown".to_owned(), |d| d.to_string()));
    let mut out = Vec::new();
    let mut row = |kind: &str, same: bool, (a, b): (Option<String>, Option<String>)| {
        if a.is_some() || b.is_some() {
            let side =
                |t: Option<String>| t.map_or(Value::Null, |t| json!({ "kind": kind, "text": t }));
            out.push(json!({ "same": same, "recorded": side(a), "candidate": side(b) }));
        }
    };
    let decision = (
        text(recorded, |d| &d.decision),
        text(candidate, |d| &d.decision),
    );
    row("decision", decision.0 == decision.1, decision);
    let (was_done, is_done) = (done(recorded), done(candidate));
    if was_done.is_some() || is_done.is_some() {
        let same = !matches!((was_done, is_done), (Some(a), Some(b)) if a != b);
        row("done", same, (known(was_done), known(is_done)));
    }
    let failed = (
        text(recorded, |d| &d.failed),
        text(candidate, |d| &d.failed),
    );
    row("failed", failed.0 == failed.1, failed);
    out
}

/// The two sides as rows: lines both hold side by side, unmarked; where
/// they part, the recorded side's lines beside the candidate's, row by
/// row, each row marked (a side with fewer lines there is left empty).
fn rows(recorded: &[Line], candidate: &[Line]) -> Vec<Value> {
    let side = |line: Option<&Line>| line.map_or(Value::Null, Line::view);
    let mut out = Vec::new();
    for op in capture_diff_slices(Algorithm::Myers, recorded, candidate) {
        let (tag, old, new) = op.as_tag_tuple();
        let same = tag == DiffTag::Equal;
        for i in 0..old.len().max(new.len()) {
            out.push(json!({
                "same": same,
                "recorded": side(recorded.get(old.start + i).filter(|_| i < old.len())),
                "candidate": side(candidate.get(new.start + i).filter(|_| i < new.len())),
            }));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(steps: &[(&str, &[(&str, &str)])], done: Option<bool>) -> pb::ReplayDecision {
        pb::ReplayDecision {
            steps: steps
                .iter()
                .map(|(reply, calls)| pb::ReplayStep {
                    reply: (*reply).to_owned(),
                    calls: calls
                        .iter()
                        .map(|(tool, input)| pb::ReplayCall {
                            tool: (*tool).to_owned(),
                            input: (*input).to_owned(),
                        })
                        .collect(),
                })
                .collect(),
            done,
            ..Default::default()
        }
    }

    fn marks(rows: &[Value]) -> Vec<bool> {
        rows.iter().map(|r| r["same"] == true).collect()
    }

    /// Both sides' rows, as `turn` makes them.
    fn both(
        recorded: Option<&pb::ReplayDecision>,
        candidate: Option<&pb::ReplayDecision>,
    ) -> Vec<Value> {
        let (a, _) = lines(recorded);
        let (b, _) = lines(candidate);
        let mut out = rows(&a, &b);
        out.extend(ends(recorded, candidate));
        out
    }

    #[test]
    fn the_same_decision_is_unmarked_row_by_row() {
        let d = decision(&[("hi", &[("MemoryWrite", r#"{"key":"k"}"#)])], Some(true));
        let rows = both(Some(&d), Some(&d));
        assert_eq!(marks(&rows), vec![true, true, true]);
        assert_eq!(
            rows[0]["recorded"],
            json!({ "kind": "reply", "text": "hi", "step": 1 })
        );
        assert_eq!(rows[1]["candidate"]["tool"], "MemoryWrite");
        assert_eq!(
            rows[2]["recorded"],
            json!({ "kind": "done", "text": "true" })
        );
    }

    #[test]
    fn where_the_sides_part_the_rows_are_marked_and_aligned() {
        let mut recorded = decision(
            &[("hi", &[("MemoryWrite", "{}"), ("ExecCommand", "ls")])],
            Some(true),
        );
        recorded.decision = "answered".into();
        let mut candidate = decision(&[("hello", &[("MemoryWrite", "{}")])], Some(false));
        candidate.decision = "answered".into();
        candidate.failed = "the brain timed out".into();
        let rows = both(Some(&recorded), Some(&candidate));
        // The replies differ, the first call is the same, the recorded
        // side's second call has nothing beside it; the decision is the
        // same, `done` is not, only the candidate failed.
        assert_eq!(
            marks(&rows),
            vec![false, true, false, true, false, false],
            "{rows:?}"
        );
        assert_eq!(rows[0]["recorded"]["text"], "hi");
        assert_eq!(rows[0]["candidate"]["text"], "hello");
        assert_eq!(rows[2]["recorded"]["tool"], "ExecCommand");
        assert_eq!(rows[2]["candidate"], Value::Null);
        assert_eq!(rows[3]["recorded"]["kind"], "decision");
        assert_eq!(rows[5]["recorded"], Value::Null);
        assert_eq!(rows[5]["candidate"]["text"], "the brain timed out");
    }

    #[test]
    fn an_unknown_done_is_not_held_against_the_other_side() {
        let recorded = decision(&[("hi", &[])], None);
        let candidate = decision(&[("hi", &[])], Some(false));
        let rows = both(Some(&recorded), Some(&candidate));
        assert_eq!(marks(&rows), vec![true, true], "{rows:?}");
        assert_eq!(rows[1]["recorded"]["text"], "unknown");
        assert_eq!(rows[1]["candidate"]["text"], "false");
        let unknown = both(Some(&recorded), Some(&recorded));
        assert_eq!(
            unknown.len(),
            1,
            "no done row when neither knows: {unknown:?}"
        );
    }

    #[test]
    fn a_missing_side_is_all_marked_and_a_long_one_is_cut() {
        let d = decision(&[("hi", &[])], None);
        let (none, cut) = lines(None);
        assert!(none.is_empty());
        assert_eq!(cut, 0);
        let rows = both(Some(&d), None);
        assert_eq!(marks(&rows), vec![false]);
        assert_eq!(rows[0]["candidate"], Value::Null);
        let calls: Vec<(&str, &str)> = vec![("Tool", "{}"); MAX_LINES + 5];
        let long = decision(&[("", &calls)], Some(false));
        let (kept, cut) = lines(Some(&long));
        assert_eq!((kept.len(), cut), (MAX_LINES, 5));
    }
}
