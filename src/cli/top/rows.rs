//! The rows of `holarchy top`'s tables, built from one activity read:
//! sorted by the chosen column, agent-written text kept on one line.
//! Names come first and ids are cut to the tail that tells a table's rows
//! apart, as `agent list` and `task list` print them (and as any command
//! takes them); an owner is named by the daemon's answer, so no row costs
//! a call of its own. Each row names the agent its keys act on the same
//! way, for the titles and notices those keys lead to.

use std::cmp::Ordering;

use super::app::{AgentRef, Row};
use crate::api::pb;
use crate::cli::output::table;

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

/// Agent-written text shown in a cell at most (a command line may be 200
/// bytes); the filter still searches all of it.
const TEXT_CELL: usize = 40;

/// `text` on one line, cut to [`TEXT_CELL`] characters.
fn cell_text(text: &str) -> String {
    let text = one_line(text);
    if text.chars().count() <= TEXT_CELL {
        return or_dash(&text);
    }
    let mut cut: String = text.chars().take(TEXT_CELL - 1).collect();
    cut.push('…');
    cut
}

/// An owner as people know it: its name, or (a private agent has none)
/// the tail of its id that tells the listed owners apart.
fn owner(name: &str, id: &str, tail: usize) -> String {
    if name.is_empty() {
        table::tail(id, tail).to_owned()
    } else {
        one_line(name)
    }
}

/// The agent a row's keys act on, named as `events` names one: `name
/// (tail)`, with the tail the row shows; the tail alone without a name.
fn agent_ref(id: &str, name: &str, tail: usize) -> AgentRef {
    let short = table::tail(id, tail);
    let label = if name.is_empty() {
        short.to_owned()
    } else {
        format!("{} ({short})", one_line(name))
    };
    AgentRef {
        id: id.to_owned(),
        label,
    }
}

/// What the filter searches besides the cells: the whole ids and texts the
/// cells cut.
fn search(words: &[&str]) -> String {
    words.join(" ").to_lowercase()
}

pub(super) fn agent_rows(agents: &[pb::ActiveAgent], column: usize) -> Vec<Row> {
    let items = sorted(agents, |a, b| match column {
        4 => b.queue_length.cmp(&a.queue_length),
        5 => b.recent_turns.cmp(&a.recent_turns),
        0 => a.name.cmp(&b.name),
        3 => state(a.state).cmp(state(b.state)),
        _ => Ordering::Equal,
    });
    let tail = table::tail_len(agents.iter().map(|a| a.agent_id.as_str()));
    let run_tail = table::tail_len(
        agents
            .iter()
            .map(|a| a.current_run_id.as_str())
            .filter(|id| !id.is_empty()),
    );
    items
        .into_iter()
        .map(|a| Row {
            cells: vec![
                or_dash(&one_line(&a.name)),
                table::tail(&a.agent_id, tail).to_owned(),
                visibility(a.visibility).to_owned(),
                state(a.state).to_owned(),
                a.queue_length.to_string(),
                a.recent_turns.to_string(),
                or_dash(table::tail(&a.current_run_id, run_tail)),
            ],
            search: search(&[&a.agent_id, &a.current_run_id]),
            agent: agent_ref(&a.agent_id, &a.name, tail),
        })
        .collect()
}

pub(super) fn task_rows(tasks: &[pb::RunningTask], column: usize, now_ms: u64) -> Vec<Row> {
    let owner_tail = table::tail_len(tasks.iter().map(|t| t.owner_agent_id.as_str()));
    let owner_of = |t: &pb::RunningTask| owner(&t.owner_name, &t.owner_agent_id, owner_tail);
    let items = sorted(tasks, |a, b| match column {
        // Oldest (longest running) first.
        4 => a.started_at_ms.cmp(&b.started_at_ms),
        2 => owner_of(a).cmp(&owner_of(b)),
        3 => a.kind.cmp(&b.kind),
        _ => Ordering::Equal,
    });
    let tail = table::tail_len(tasks.iter().map(|t| t.task_id.as_str()));
    items
        .into_iter()
        .map(|t| Row {
            cells: vec![
                cell_text(&t.label),
                table::tail(&t.task_id, tail).to_owned(),
                owner_of(t),
                t.kind.clone(),
                duration(now_ms.saturating_sub(t.started_at_ms)),
            ],
            search: search(&[&t.task_id, &t.owner_agent_id, &one_line(&t.label)]),
            agent: agent_ref(&t.owner_agent_id, &t.owner_name, owner_tail),
        })
        .collect()
}

pub(super) fn wait_rows(waits: &[pb::ArmedWait], column: usize, now_ms: u64) -> Vec<Row> {
    let owner_tail = table::tail_len(waits.iter().map(|w| w.owner_agent_id.as_str()));
    let owner_of = |w: &pb::ArmedWait| owner(&w.owner_name, &w.owner_agent_id, owner_tail);
    let items = sorted(waits, |a, b| match column {
        // The next to fire first; triggers (no time) last.
        4 => (a.fires_at_ms == 0, a.fires_at_ms).cmp(&(b.fires_at_ms == 0, b.fires_at_ms)),
        2 => owner_of(a).cmp(&owner_of(b)),
        3 => a.kind.cmp(&b.kind),
        _ => Ordering::Equal,
    });
    let tail = table::tail_len(waits.iter().map(|w| w.wait_id.as_str()));
    items
        .into_iter()
        .map(|w| Row {
            cells: vec![
                cell_text(&w.reason),
                table::tail(&w.wait_id, tail).to_owned(),
                owner_of(w),
                w.kind.clone(),
                match w.fires_at_ms {
                    0 => "-".to_owned(),
                    at => duration(at.saturating_sub(now_ms)),
                },
            ],
            search: search(&[&w.wait_id, &w.owner_agent_id, &one_line(&w.reason)]),
            agent: agent_ref(&w.owner_agent_id, &w.owner_name, owner_tail),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Two ids made in the same millisecond: the same start, different
    /// ends.
    const TWINS: [&str; 2] = [
        "agt_01KQ8ZAAAAAAAAAAAAAAX11111",
        "agt_01KQ8ZAAAAAAAAAAAAAAY22222",
    ];

    fn task(id: &str, owner: &str, owner_name: &str) -> pb::RunningTask {
        pb::RunningTask {
            task_id: id.into(),
            owner_agent_id: owner.into(),
            kind: "command".into(),
            label: "x".repeat(100),
            owner_name: owner_name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn agent_rows_put_the_name_first_and_cut_ids_to_the_tail_that_differs() {
        let agents: Vec<_> = TWINS
            .iter()
            .zip(["ops", ""])
            .map(|(id, name)| pb::ActiveAgent {
                agent_id: (*id).into(),
                name: name.into(),
                current_run_id: format!("run_{id}"),
                ..Default::default()
            })
            .collect();
        let rows = agent_rows(&agents, 5);
        assert_eq!(rows[0].cells[..2], ["ops", "X11111"]);
        assert_eq!(rows[1].cells[..2], ["-", "Y22222"]);
        assert_eq!(rows[0].cells[6], "X11111");
        assert_eq!(rows[0].agent.id, TWINS[0], "keys act on the whole id");
        // Titles and notices name it as its row does.
        assert_eq!(rows[0].agent.label, "ops (X11111)");
        assert_eq!(rows[1].agent.label, "Y22222");
    }

    #[test]
    fn task_rows_name_their_owner_or_cut_its_id_and_search_what_they_cut() {
        let tasks = [
            task("tsk_01KQ8ZAAAAAAAAAAAAAAAA0001", TWINS[0], "ops"),
            // A private owner has no name; a daemon before `owner_name`
            // sends none either.
            task("tsk_01KQ8ZAAAAAAAAAAAAAAAA0002", TWINS[1], ""),
        ];
        let rows = task_rows(&tasks, 4, 0);
        let label = format!("{}…", "x".repeat(TEXT_CELL - 1));
        assert_eq!(rows[0].cells[..3], [label.as_str(), "AA0001", "ops"]);
        assert_eq!(rows[1].cells[2], "Y22222");
        assert!(rows[0].cells.iter().all(|c| !c.contains("01KQ8Z")));
        assert!(rows[1].search.contains(&TWINS[1].to_lowercase()));
        assert!(rows[1].search.contains(&"x".repeat(100)));
        assert_eq!(
            rows[0].agent.label, "ops (X11111)",
            "a task acts on its owner"
        );
        assert_eq!(rows[1].agent.id, TWINS[1]);
        // Sorted by owner: names and tails alike.
        let by_owner = task_rows(&tasks, 2, 0);
        assert_eq!(by_owner[0].cells[2], "Y22222");
    }
}
