//! What went wrong in an agent's turns, read off the event log: a failed
//! run's reason (`run_finished`'s detail) and each tool error
//! (`tool_called` with `is_error`). The human views show them beside
//! what they concern (`events`, `agent messages`, `agent get`), where a
//! bare `[failed]` used to send the reader to `--json events`.
//!
//! The log has no index by run, so collecting reads the agent's events
//! through the daemon's filter: `agent messages` reads its whole history
//! (it lists the whole history anyway), `agent get` only the log's recent
//! end. Under `--json` none of this is read: scripts have `events`.

use std::collections::HashMap;

use serde_json::Value;
use tokio_stream::StreamExt;

use super::output::escape::one_line;
use crate::api::pb;
use crate::client::Clients;

/// The most characters of a reason shown on one line; the whole of it is
/// in `holarchy --json events`.
const MAX_SHOWN: usize = 300;

/// How far back from the log's end `agent get` looks for a last error.
pub const RECENT_EVENTS: u64 = 100_000;

/// An event's problem, as one line for people: a failed run's reason or a
/// tool's error. `None` for every other event.
pub fn problem(e: &pb::Event) -> Option<String> {
    match e.kind.as_str() {
        "run_finished" => {
            let detail = detail(e);
            if detail["outcome"] != "failed" {
                return None;
            }
            let why = detail["detail"].as_str().unwrap_or_default();
            Some(format!("run failed: {}", shown(or_unsaid(why))))
        }
        "tool_called" => {
            let detail = detail(e);
            if detail["is_error"] != true {
                return None;
            }
            let tool = detail["tool"].as_str().unwrap_or_default();
            let output = detail["output"].as_str().unwrap_or_default();
            // A tool's error is `{"error": ..., "kind": ...}`; any other
            // output (an MCP server's, say) is shown as it is.
            let error: Value = serde_json::from_str(output).unwrap_or(Value::Null);
            Some(match (error["error"].as_str(), error["kind"].as_str()) {
                (Some(why), Some(kind)) => {
                    let kind = kind.replace('_', " ");
                    format!("tool {tool} {kind}: {}", shown(or_unsaid(why)))
                }
                (Some(why), None) => format!("tool {tool} failed: {}", shown(or_unsaid(why))),
                (None, _) => format!("tool {tool} failed: {}", shown(or_unsaid(output))),
            })
        }
        _ => None,
    }
}

fn detail(e: &pb::Event) -> Value {
    serde_json::from_str(&e.detail_json).unwrap_or(Value::Null)
}

fn or_unsaid(text: &str) -> &str {
    if text.trim().is_empty() {
        "(no reason given)"
    } else {
        text
    }
}

/// `text` on one line (its line breaks and runs of spaces one space),
/// escaped, cut to [`MAX_SHOWN`] characters.
fn shown(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let line = one_line(&joined);
    match line.char_indices().nth(MAX_SHOWN) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.into_owned(),
    }
}

/// An agent's problems, by the run they happened in, in log order.
#[derive(Debug, Default)]
pub struct RunErrors {
    by_run: HashMap<String, Vec<String>>,
    /// The latest problem, with its cursor and run.
    last: Option<(u64, String, String)>,
}

impl RunErrors {
    /// Reads `agent_id`'s events after `after` (0: all of them).
    pub async fn collect(
        clients: &mut Clients,
        agent_id: &str,
        after: u64,
    ) -> anyhow::Result<RunErrors> {
        let mut stream = clients
            .agents
            .watch_events(pb::WatchEventsRequest {
                after_cursor: after,
                follow: false,
                agent_id: agent_id.to_owned(),
            })
            .await?
            .into_inner();
        let mut errors = RunErrors::default();
        while let Some(event) = stream.next().await {
            let event = event?;
            if let Some(problem) = problem(&event) {
                errors.last = Some((event.cursor, event.run_id.clone(), problem.clone()));
                errors.by_run.entry(event.run_id).or_default().push(problem);
            }
        }
        Ok(errors)
    }

    /// As `collect`, over the log's last [`RECENT_EVENTS`] events only.
    pub async fn recent(clients: &mut Clients, agent_id: &str) -> anyhow::Result<RunErrors> {
        let end = clients
            .runtime
            .get_status(pb::GetStatusRequest {})
            .await?
            .into_inner()
            .event_cursor;
        Self::collect(clients, agent_id, end.saturating_sub(RECENT_EVENTS)).await
    }

    /// The problems of one run, oldest first.
    pub fn of_run(&self, run_id: &str) -> &[String] {
        if run_id.is_empty() {
            return &[];
        }
        self.by_run.get(run_id).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The latest problem: its text, run and cursor.
    pub fn last(&self) -> Option<String> {
        self.last
            .as_ref()
            .map(|(cursor, run, problem)| format!("{problem} (run {run}, event {cursor})"))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(kind: &str, detail: Value) -> pb::Event {
        pb::Event {
            kind: kind.to_owned(),
            detail_json: detail.to_string(),
            ..Default::default()
        }
    }

    #[test]
    fn a_failed_run_and_a_tool_error_say_why_and_nothing_else_does() {
        let failed = event(
            "run_finished",
            json!({"outcome": "failed", "detail": "OPENAI_API_KEY is not set"}),
        );
        assert_eq!(
            problem(&failed).as_deref(),
            Some("run failed: OPENAI_API_KEY is not set")
        );
        let tool = event(
            "tool_called",
            json!({"tool": "Nope", "output": "unknown tool `Nope`\nsecond line", "is_error": true}),
        );
        assert_eq!(
            problem(&tool).as_deref(),
            Some("tool Nope failed: unknown tool `Nope` second line")
        );
        let refused = event(
            "tool_called",
            json!({"tool": "Nope", "output": r#"{"error":"not in the catalog","kind":"refused"}"#, "is_error": true}),
        );
        assert_eq!(
            problem(&refused).as_deref(),
            Some("tool Nope refused: not in the catalog")
        );
        let fine = event(
            "tool_called",
            json!({"tool": "AgentGet", "is_error": false}),
        );
        assert_eq!(problem(&fine), None);
        let done = event(
            "run_finished",
            json!({"outcome": "completed", "detail": ""}),
        );
        assert_eq!(problem(&done), None);
    }

    #[test]
    fn a_long_reason_is_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_SHOWN * 2);
        let cut = shown(&long);
        assert_eq!(cut.chars().count(), MAX_SHOWN + 1);
        assert!(cut.ends_with('…'));
    }
}
