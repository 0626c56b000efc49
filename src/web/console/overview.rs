//! The console's overview: what an operator checks first. Live agents by
//! state, turns since start (the page turns two reads into turns/s), the
//! longest queues and the busiest agents (`GetActivity`, read from the
//! daemon's hot set, never a walk of all agents), and the recent failures:
//! failed runs and tool errors, in the words `holarchy events` uses,
//! found in the log's newest [`FAILURE_WINDOW`] events, then in what
//! came since the page's last read.
//!
//! Failures say what agents were told or did, so only the operator sees
//! them; the counts and queues are structure, shown to anyone where
//! `serve --console-public-read` allows.

use futures::StreamExt as _;
use serde_json::{json, Value};

use crate::api::pb;
use crate::api::pb::agent_service_server::AgentService as _;
use crate::api::pb::runtime_service_server::RuntimeService as _;
use crate::problems::problem;

use super::query::Query;
use super::routes::called;
use super::{views, Caller, Console, Refusal};

/// Entries in the queue and busy lists.
const LISTED: u32 = 10;
/// How far back from the log's end failures are looked for, at most:
/// a page polling with `after` reads only what came since, and never
/// more than this at once however busy the daemon (an event is at most
/// about 1 MiB, most far less; each is dropped once looked at).
const FAILURE_WINDOW: u64 = 2_000;
/// Failures returned by one answer, newest last.
const FAILURES: usize = 20;

pub async fn answer(console: &Console, query: &Query, caller: Caller) -> Result<Value, Refusal> {
    let after = query.number("after").map_err(Refusal::from)?;
    let activity = called(
        console
            .activity
            .get_activity(super::req(pb::GetActivityRequest { limit: LISTED }))
            .await,
    )?;
    let totals = activity.totals.unwrap_or_default();
    let levels = console.runtime.levels();
    let counts = &levels.counts;
    let mut out = json!({
        "uptime_ms": totals.uptime_ms,
        "now_ms": activity.now_ms,
        "agents": {
            "public": {
                "active": counts.public.saturating_sub(counts.paused_public),
                "paused": counts.paused_public,
            },
            "private": {
                "active": counts.private.saturating_sub(counts.paused_private),
                "paused": counts.paused_private,
            },
            "busy": levels.turns_in_flight,
            "restarts": levels.restarts,
            "given_up": levels.given_up,
        },
        "turns": {
            "started": totals.turns_started,
            "finished": totals.turns_finished,
            "failed": totals.turns_failed,
        },
        "queued_messages": totals.queued_messages,
        "queue_max": totals.queue_max,
        "running_tasks": totals.running_tasks,
        "armed_waits": totals.armed_waits,
        "longest_queues": activity.longest_queues.iter()
            .filter(|a| a.queue_length > 0)
            .map(views::active_agent)
            .collect::<Vec<_>>(),
        "busiest": activity.busiest.iter()
            .filter(|a| a.recent_turns > 0)
            .map(views::active_agent)
            .collect::<Vec<_>>(),
        "window_ms": activity.window_ms,
        "failures": Value::Null,
    });
    if caller.signed_in() {
        let (failures, cursor) = failures(console, after).await?;
        out["failures"] = json!(failures);
        out["cursor"] = json!(cursor);
    }
    Ok(out)
}

/// The failures logged after `after` (or in the newest window), newest
/// last, each with its agent's name; and the cursor read up to, for the
/// next poll.
async fn failures(console: &Console, after: Option<u64>) -> Result<(Vec<Value>, u64), Refusal> {
    let end = *console.store.event_watermark().borrow();
    let from = after
        .unwrap_or(0)
        .max(end.saturating_sub(FAILURE_WINDOW))
        .min(end);
    let mut events = called(
        console
            .agents
            .watch_events(super::req(pb::WatchEventsRequest {
                after_cursor: from,
                follow: false,
                agent_id: String::new(),
            }))
            .await,
    )?;
    // What is kept of each failure: never its event's whole detail.
    let mut found: Vec<Failure> = Vec::new();
    let mut cursor = from;
    while let Some(event) = events.next().await {
        let event = event.map_err(|status| Refusal::of(&status))?;
        cursor = cursor.max(event.cursor);
        // Only what was durable when the call began: a busy log does not
        // keep this answer reading.
        if event.cursor > end {
            break;
        }
        if let Some(problem) = problem(&event) {
            if found.len() == FAILURES {
                found.remove(0);
            }
            found.push(Failure {
                cursor: event.cursor,
                at_ms: event.at_ms,
                agent_id: event.agent_id,
                run_id: event.run_id,
                problem,
            });
        }
    }
    let mut out = Vec::with_capacity(found.len());
    for failure in found {
        let name = name_of(console, &failure.agent_id).await;
        out.push(json!({
            "cursor": failure.cursor,
            "at_ms": failure.at_ms,
            "agent_id": failure.agent_id,
            "agent_name": name,
            "run_id": failure.run_id,
            "problem": failure.problem,
        }));
    }
    Ok((out, cursor))
}

/// A failed run or tool error, as the overview lists it.
struct Failure {
    cursor: u64,
    at_ms: i64,
    agent_id: String,
    run_id: String,
    /// One line, cut (see `crate::problems::problem`).
    problem: String,
}

/// An agent's name; empty when it has none (a private child) or is gone.
pub async fn name_of(console: &Console, agent_id: &str) -> String {
    if agent_id.is_empty() {
        return String::new();
    }
    let found = console
        .agents
        .get_agent(super::req(pb::GetAgentRequest {
            agent: Some(pb::get_agent_request::Agent::AgentId(agent_id.to_owned())),
        }))
        .await;
    found
        .ok()
        .and_then(|r| r.into_inner().agent)
        .map(|a| a.name)
        .unwrap_or_default()
}
