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
//! How each problem is worded is [`crate::problems`]'s, which the
//! console's overview shares.

use std::collections::HashMap;

use tokio_stream::StreamExt;

use crate::api::pb;
use crate::client::Clients;
use crate::problems::problem;

/// How far back from the log's end `agent get` looks for a last error.
pub const RECENT_EVENTS: u64 = 100_000;

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
