//! `holarchy top` without a terminal: one plain-text frame (`--once`, or
//! stdout not a terminal), or the read as one JSON object (`--json`). The
//! header lines are the interactive view's too.

use serde_json::{json, Value};

use super::app::{duration, App, Rates, Table};
use crate::api::pb;

/// The totals and rates, in two lines.
pub fn header(a: &pb::GetActivityResponse, rates: Option<Rates>) -> Vec<String> {
    let t = a.totals.unwrap_or_default();
    let rates = match rates {
        Some(r) => format!(
            "turns/s {:.1}{}, failed/s {:.1}",
            r.turns,
            if r.since_start { " (since start)" } else { "" },
            r.failed
        ),
        None => "turns/s -".to_owned(),
    };
    let mut second = format!(
        "queued {} (longest {}), tasks {}, waits {}, restarts {}, given up {}, hot agents {}",
        t.queued_messages,
        t.queue_max,
        t.running_tasks,
        t.armed_waits,
        t.restarts,
        t.agents_given_up,
        a.hot_agents
    );
    if a.hot_left_out > 0 {
        second.push_str(&format!(
            " (hot set full: {} updates left out, lists may miss agents)",
            a.hot_left_out
        ));
    }
    vec![
        format!(
            "holarchy top: up {}, agents {} public {} private, turns running {}, {rates}; since start {} turns started, {} finished, {} failed",
            duration(t.uptime_ms),
            t.public_agents,
            t.private_agents,
            t.busy_runs,
            t.turns_started,
            t.turns_finished,
            t.turns_failed,
        ),
        second,
    ]
}

/// Lines of aligned columns, two spaces apart.
fn aligned(headers: &[&str], rows: &[Vec<String>]) -> Vec<String> {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        padded.join("  ").trim_end().to_owned()
    };
    let mut lines = vec![line(headers.to_vec())];
    lines.extend(
        rows.iter()
            .map(|row| line(row.iter().map(String::as_str).collect())),
    );
    lines
}

/// One whole frame: the header, then each table under its title.
pub fn frame(app: &App) -> String {
    let Some(activity) = &app.activity else {
        return String::new();
    };
    let mut out = header(activity, app.rates);
    for table in Table::ALL {
        out.push(String::new());
        out.push(table.title().to_uppercase());
        let rows: Vec<Vec<String>> = app.rows(table).into_iter().map(|r| r.cells).collect();
        if rows.is_empty() {
            out.push("(none)".to_owned());
        } else {
            out.extend(aligned(table.headers(), &rows));
        }
    }
    out.join("\n")
}

fn agents_json(agents: &[pb::ActiveAgent]) -> Value {
    agents
        .iter()
        .map(|a| {
            json!({
                "agent_id": a.agent_id,
                "name": a.name,
                "visibility": pb::Visibility::try_from(a.visibility)
                    .map(|v| v.as_str_name().trim_start_matches("VISIBILITY_").to_lowercase())
                    .unwrap_or_default(),
                "state": pb::LifecycleState::try_from(a.state)
                    .map(|v| v.as_str_name().trim_start_matches("LIFECYCLE_STATE_").to_lowercase())
                    .unwrap_or_default(),
                "queue_length": a.queue_length,
                "current_run_id": a.current_run_id,
                "recent_turns": a.recent_turns,
            })
        })
        .collect()
}

/// The read as one JSON object.
pub fn json(a: &pb::GetActivityResponse) -> Value {
    let t = a.totals.unwrap_or_default();
    json!({
        "totals": {
            "uptime_ms": t.uptime_ms,
            "public_agents": t.public_agents,
            "private_agents": t.private_agents,
            "busy_runs": t.busy_runs,
            "turns_started": t.turns_started,
            "turns_finished": t.turns_finished,
            "turns_failed": t.turns_failed,
            "queued_messages": t.queued_messages,
            "queue_max": t.queue_max,
            "running_tasks": t.running_tasks,
            "armed_waits": t.armed_waits,
            "restarts": t.restarts,
            "agents_given_up": t.agents_given_up,
        },
        "busiest": agents_json(&a.busiest),
        "longest_queues": agents_json(&a.longest_queues),
        "running_tasks": a.running_tasks.iter().map(|t| json!({
            "task_id": t.task_id,
            "owner_agent_id": t.owner_agent_id,
            "owner_name": t.owner_name,
            "kind": t.kind,
            "label": t.label,
            "started_at_ms": t.started_at_ms,
        })).collect::<Vec<_>>(),
        "armed_waits": a.armed_waits.iter().map(|w| json!({
            "wait_id": w.wait_id,
            "owner_agent_id": w.owner_agent_id,
            "owner_name": w.owner_name,
            "kind": w.kind,
            "reason": w.reason,
            "fires_at_ms": w.fires_at_ms,
        })).collect::<Vec<_>>(),
        "hot_agents": a.hot_agents,
        "hot_left_out": a.hot_left_out,
        "window_ms": a.window_ms,
        "now_ms": a.now_ms,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::super::app::tests::sample;
    use super::*;

    #[test]
    fn a_frame_lists_every_table_with_aligned_columns() {
        let mut app = App::default();
        app.update(sample(), Instant::now());
        let text = frame(&app);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("holarchy top: up 10s, agents 3 public 0 private"));
        let at = lines
            .iter()
            .position(|l| *l == "LONGEST QUEUES")
            .expect("title");
        assert!(lines[at + 1].starts_with("NAME   AGENT  VIS"), "{text}");
        assert!(
            lines[at + 2].starts_with("stuck  agt_q  public  active  40"),
            "{text}"
        );
        assert!(text.contains("RUNNING TASKS\nLABEL"), "{text}");

        let mut empty = sample();
        empty.armed_waits.clear();
        app.update(empty, Instant::now());
        assert!(frame(&app).ends_with("ARMED WAITS\n(none)"));
    }

    #[test]
    fn the_json_names_states_and_visibilities() {
        let value = json(&sample());
        assert_eq!(value["longest_queues"][0]["queue_length"], 40);
        assert_eq!(value["busiest"][0]["visibility"], "public");
        assert_eq!(value["busiest"][0]["state"], "active");
        assert_eq!(value["totals"]["queue_max"], 40);
    }
}
