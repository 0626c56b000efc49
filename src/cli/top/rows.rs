//! The rows of `holarchy top`'s tables, built from one activity read:
//! sorted by the chosen column, agent-written text kept on one line.

use std::cmp::Ordering;

use super::app::Row;
use crate::api::pb;

fn visibility(v: i32) -> &'static str {
    match pb::Visibility::try_from(v) {
        Ok(pb::Visibility::Public) => "public",
        Ok(pb::Visibility::Private) => "private",
        _ => "-",
    }
}

fn state(v: i32) -> &'static str {
    match pb::LifecycleState::try_from(v) {
        Ok(pb::LifecycleState::Active) => "active",
        Ok(pb::LifecycleState::Paused) => "paused",
        Ok(pb::LifecycleState::Failed) => "failed",
        Ok(pb::LifecycleState::Archived) => "archived",
        _ => "-",
    }
}

fn or_dash(text: &str) -> String {
    if text.is_empty() {
        "-".to_owned()
    } else {
        text.to_owned()
    }
}

/// `ms` as a short duration: 950ms, 12s, 3m04s, 2h05m.
pub fn duration(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

/// Sorts `items` by the chosen column: numbers biggest first, text
/// alphabetically; ties keep the daemon's order.
fn sorted<T>(items: &[T], cmp: impl Fn(&T, &T) -> Ordering) -> Vec<&T> {
    let mut items: Vec<&T> = items.iter().collect();
    items.sort_by(|a, b| cmp(a, b));
    items
}

pub(super) fn agent_rows(agents: &[pb::ActiveAgent], column: usize) -> Vec<Row> {
    let items = sorted(agents, |a, b| match column {
        4 => b.queue_length.cmp(&a.queue_length),
        5 => b.recent_turns.cmp(&a.recent_turns),
        1 => a.name.cmp(&b.name),
        3 => state(a.state).cmp(state(b.state)),
        _ => Ordering::Equal,
    });
    items
        .into_iter()
        .map(|a| Row {
            cells: vec![
                a.agent_id.clone(),
                or_dash(&a.name),
                visibility(a.visibility).to_owned(),
                state(a.state).to_owned(),
                a.queue_length.to_string(),
                a.recent_turns.to_string(),
                or_dash(&a.current_run_id),
            ],
            agent_id: a.agent_id.clone(),
        })
        .collect()
}

pub(super) fn task_rows(tasks: &[pb::RunningTask], column: usize, now_ms: u64) -> Vec<Row> {
    let items = sorted(tasks, |a, b| match column {
        // Oldest (longest running) first.
        3 => a.started_at_ms.cmp(&b.started_at_ms),
        1 => a.owner_agent_id.cmp(&b.owner_agent_id),
        2 => a.kind.cmp(&b.kind),
        _ => Ordering::Equal,
    });
    items
        .into_iter()
        .map(|t| Row {
            cells: vec![
                t.task_id.clone(),
                t.owner_agent_id.clone(),
                t.kind.clone(),
                duration(now_ms.saturating_sub(t.started_at_ms)),
                or_dash(&one_line(&t.label)),
            ],
            agent_id: t.owner_agent_id.clone(),
        })
        .collect()
}

pub(super) fn wait_rows(waits: &[pb::ArmedWait], column: usize, now_ms: u64) -> Vec<Row> {
    let items = sorted(waits, |a, b| match column {
        // The next to fire first; triggers (no time) last.
        3 => (a.fires_at_ms == 0, a.fires_at_ms).cmp(&(b.fires_at_ms == 0, b.fires_at_ms)),
        1 => a.owner_agent_id.cmp(&b.owner_agent_id),
        2 => a.kind.cmp(&b.kind),
        _ => Ordering::Equal,
    });
    items
        .into_iter()
        .map(|w| Row {
            cells: vec![
                w.wait_id.clone(),
                w.owner_agent_id.clone(),
                w.kind.clone(),
                match w.fires_at_ms {
                    0 => "-".to_owned(),
                    at => duration(at.saturating_sub(now_ms)),
                },
                or_dash(&one_line(&w.reason)),
            ],
            agent_id: w.owner_agent_id.clone(),
        })
        .collect()
}

/// Agent-written text on one line: control characters (a newline, an
/// escape sequence) would break the table or the terminal.
pub(super) fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}
