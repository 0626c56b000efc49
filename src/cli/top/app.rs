//! The state of `holarchy top` and what each key does to it: the last
//! activity read, the rates between the last two, which table is shown,
//! its sort, filter and selection, and the pane (an agent's messages and
//! events, or its subtree). No terminal and no daemon here, so keys and
//! rows are unit-tested.

use std::time::Instant;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

pub use super::rows::duration;
use super::rows::{agent_rows, task_rows, wait_rows};
use crate::api::pb;

/// The tables, in the order tab goes through them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    Busiest,
    Queues,
    Tasks,
    Waits,
}

impl Table {
    pub const ALL: [Table; 4] = [Table::Busiest, Table::Queues, Table::Tasks, Table::Waits];

    fn index(self) -> usize {
        match self {
            Table::Busiest => 0,
            Table::Queues => 1,
            Table::Tasks => 2,
            Table::Waits => 3,
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Table::Busiest => "busiest agents",
            Table::Queues => "longest queues",
            Table::Tasks => "running tasks",
            Table::Waits => "armed waits",
        }
    }

    pub fn headers(self) -> &'static [&'static str] {
        match self {
            Table::Busiest | Table::Queues => {
                &["NAME", "AGENT", "VIS", "STATE", "QUEUE", "TURNS/MIN", "RUN"]
            }
            Table::Tasks => &["LABEL", "TASK", "OWNER", "KIND", "AGE"],
            Table::Waits => &["REASON", "WAIT", "OWNER", "KIND", "FIRES IN"],
        }
    }

    /// The columns `s` cycles through (indexes into [`Table::headers`]);
    /// the first is the table's own order.
    pub fn sort_columns(self) -> &'static [usize] {
        match self {
            Table::Busiest => &[5, 4, 0, 3],
            Table::Queues => &[4, 5, 0, 3],
            Table::Tasks => &[4, 2, 3],
            Table::Waits => &[4, 2, 3],
        }
    }
}

/// The agent a key acts on: its whole id for the daemon, and its name as
/// people read it, so a pane's title and an action's notice name it as
/// its row did rather than by an id no table shows whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRef {
    pub id: String,
    /// The name, then the id cut to the tail its row shows (`ops
    /// (X11111)`); the tail alone for an agent with no name.
    pub label: String,
}

/// What the caller does after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    None,
    Quit,
    /// Fetch this pane of the agent and show it.
    Open(PaneKind, AgentRef),
    /// Pause the agent (k9s-style keys: p, r, a).
    Pause(AgentRef),
    Resume(AgentRef),
    /// Abort the agent's current turn.
    Abort(AgentRef),
}

/// What a pane shows of its agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaneKind {
    /// Its latest messages and events (enter).
    Agent,
    /// Its subtree, as `holarchy tree` draws it (t).
    Subtree,
}

/// A pane that replaces the tables: one agent, drawn as lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pane {
    pub kind: PaneKind,
    pub agent: AgentRef,
    pub lines: Vec<String>,
    pub scroll: usize,
}

impl Pane {
    pub fn title(&self) -> String {
        match self.kind {
            PaneKind::Agent => format!("messages and events of {}", self.agent.label),
            PaneKind::Subtree => format!("subtree of {}", self.agent.label),
        }
    }
}

/// One row of a table: its cells, and the agent enter opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub cells: Vec<String>,
    /// Lowercase text the filter matches besides the cells: the whole ids
    /// and texts the cells cut, so a pasted id still finds its row.
    pub search: String,
    pub agent: AgentRef,
}

/// Turn totals at one read, for rates.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    finished: u64,
    failed: u64,
}

/// Turns a second between the last two reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    pub turns: f64,
    pub failed: f64,
    /// Averaged since the daemon started (only one read so far).
    pub since_start: bool,
}

#[derive(Debug, Default)]
pub struct App {
    pub activity: Option<pb::GetActivityResponse>,
    pub rates: Option<Rates>,
    last: Option<Sample>,
    table: usize,
    /// Per table: the position in its sort columns, and the selected row.
    sort: [usize; 4],
    selected: [usize; 4],
    pub pane: Option<Pane>,
    /// The last failed read or pane fetch, shown until the next success.
    pub error: Option<String>,
    /// Why the daemon cannot be read, while it cannot: the view goes on
    /// retrying at every tick and says so.
    pub disconnected: Option<String>,
    /// Rows are kept when a cell holds this (any case); `/` edits it.
    pub filter: String,
    /// Whether keys are typed into the filter.
    pub editing_filter: bool,
    /// What the last action did (`paused ops (X11111)`), until the next
    /// key.
    pub notice: Option<String>,
}

impl App {
    pub fn table(&self) -> Table {
        Table::ALL[self.table]
    }

    pub fn selected(&self) -> usize {
        self.selected[self.table]
    }

    /// The header index the shown table is sorted by.
    pub fn sort_column(&self) -> usize {
        let table = self.table();
        table.sort_columns()[self.sort[table.index()]]
    }

    /// Takes a new read, taken at `at`.
    pub fn update(&mut self, activity: pb::GetActivityResponse, at: Instant) {
        let totals = activity.totals.unwrap_or_default();
        let now = Sample {
            at,
            finished: totals.turns_finished,
            failed: totals.turns_failed,
        };
        self.rates = match self.last {
            Some(last) if at > last.at => {
                let seconds = (at - last.at).as_secs_f64();
                Some(Rates {
                    turns: now.finished.saturating_sub(last.finished) as f64 / seconds,
                    failed: now.failed.saturating_sub(last.failed) as f64 / seconds,
                    since_start: false,
                })
            }
            _ => since_start(&totals),
        };
        self.last = Some(now);
        self.activity = Some(activity);
        self.error = None;
        // Lists shrink between reads; the selection stays on a row.
        for table in Table::ALL {
            let rows = self.row_count(table);
            let selected = &mut self.selected[table.index()];
            *selected = (*selected).min(rows.saturating_sub(1));
        }
    }

    /// New lines for the open pane; the scroll stays where it was while
    /// there are as many.
    pub fn refresh_pane(&mut self, lines: Vec<String>) {
        if let Some(pane) = &mut self.pane {
            pane.scroll = pane.scroll.min(lines.len().saturating_sub(1));
            pane.lines = lines;
        }
    }

    pub fn on_key(&mut self, key: KeyEvent) -> Action {
        if key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL) {
            return Action::Quit;
        }
        self.notice = None;
        if self.editing_filter {
            self.edit_filter(key);
            return Action::None;
        }
        if let Some(pane) = &mut self.pane {
            match key.code {
                KeyCode::Char('q') => return Action::Quit,
                KeyCode::Char('p') => return Action::Pause(pane.agent.clone()),
                KeyCode::Char('r') => return Action::Resume(pane.agent.clone()),
                KeyCode::Char('a') => return Action::Abort(pane.agent.clone()),
                KeyCode::Esc => self.pane = None,
                KeyCode::Up | KeyCode::Char('k') => pane.scroll = pane.scroll.saturating_sub(1),
                KeyCode::Down | KeyCode::Char('j') => {
                    pane.scroll = (pane.scroll + 1).min(pane.lines.len().saturating_sub(1));
                }
                KeyCode::PageUp => pane.scroll = pane.scroll.saturating_sub(20),
                KeyCode::PageDown => {
                    pane.scroll = (pane.scroll + 20).min(pane.lines.len().saturating_sub(1));
                }
                _ => {}
            }
            return Action::None;
        }
        let table = self.table();
        let rows = self.row_count(table);
        let agent = self
            .rows(table)
            .into_iter()
            .nth(self.selected())
            .map(|row| row.agent);
        match (key.code, agent) {
            (KeyCode::Enter, Some(agent)) => return Action::Open(PaneKind::Agent, agent),
            (KeyCode::Char('t'), Some(agent)) => return Action::Open(PaneKind::Subtree, agent),
            (KeyCode::Char('p'), Some(agent)) => return Action::Pause(agent),
            (KeyCode::Char('r'), Some(agent)) => return Action::Resume(agent),
            (KeyCode::Char('a'), Some(agent)) => return Action::Abort(agent),
            _ => {}
        }
        match key.code {
            KeyCode::Char('/') => self.editing_filter = true,
            KeyCode::Esc => self.set_filter(String::new()),
            _ => {}
        }
        let selected = &mut self.selected[table.index()];
        match key.code {
            KeyCode::Char('q') => return Action::Quit,
            KeyCode::Char('s') => {
                let sort = &mut self.sort[table.index()];
                *sort = (*sort + 1) % table.sort_columns().len();
                *selected = 0;
            }
            KeyCode::Tab => self.table = (self.table + 1) % Table::ALL.len(),
            KeyCode::BackTab => self.table = (self.table + Table::ALL.len() - 1) % Table::ALL.len(),
            KeyCode::Up | KeyCode::Char('k') => *selected = selected.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => {
                *selected = (*selected + 1).min(rows.saturating_sub(1));
            }
            _ => {}
        }
        Action::None
    }

    /// A key typed while `/` edits the filter: enter keeps it, esc drops it.
    fn edit_filter(&mut self, key: KeyEvent) {
        let mut filter = self.filter.clone();
        match key.code {
            KeyCode::Enter => self.editing_filter = false,
            KeyCode::Esc => {
                self.editing_filter = false;
                filter.clear();
            }
            KeyCode::Backspace => {
                filter.pop();
            }
            KeyCode::Char(c) if !c.is_control() && filter.len() < 64 => filter.push(c),
            _ => {}
        }
        self.set_filter(filter);
    }

    /// A new filter; the selections go back to the first row it keeps.
    fn set_filter(&mut self, filter: String) {
        if filter != self.filter {
            self.filter = filter;
            self.selected = [0; 4];
        }
    }

    fn row_count(&self, table: Table) -> usize {
        self.rows(table).len()
    }

    /// The rows of `table` the filter keeps, in its current sort.
    pub fn rows(&self, table: Table) -> Vec<Row> {
        let Some(a) = &self.activity else {
            return Vec::new();
        };
        let column = table.sort_columns()[self.sort[table.index()]];
        let mut rows = match table {
            Table::Busiest => agent_rows(&a.busiest, column),
            Table::Queues => agent_rows(&a.longest_queues, column),
            Table::Tasks => task_rows(&a.running_tasks, column, a.now_ms),
            Table::Waits => wait_rows(&a.armed_waits, column, a.now_ms),
        };
        if !self.filter.is_empty() {
            let wanted = self.filter.to_lowercase();
            rows.retain(|row| {
                row.search.contains(&wanted)
                    || row.cells.iter().any(|c| c.to_lowercase().contains(&wanted))
            });
        }
        rows
    }
}

fn since_start(totals: &pb::ActivityTotals) -> Option<Rates> {
    let seconds = totals.uptime_ms as f64 / 1000.0;
    (seconds > 0.0).then(|| Rates {
        turns: totals.turns_finished as f64 / seconds,
        failed: totals.turns_failed as f64 / seconds,
        since_start: true,
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub fn agent(id: &str, name: &str, queue: u64, turns: u32) -> pb::ActiveAgent {
        pb::ActiveAgent {
            agent_id: id.into(),
            name: name.into(),
            visibility: pb::Visibility::Public.into(),
            state: pb::LifecycleState::Active.into(),
            queue_length: queue,
            current_run_id: String::new(),
            recent_turns: turns,
        }
    }

    pub fn sample() -> pb::GetActivityResponse {
        pb::GetActivityResponse {
            totals: Some(pb::ActivityTotals {
                uptime_ms: 10_000,
                public_agents: 3,
                turns_finished: 100,
                turns_started: 101,
                queued_messages: 47,
                queue_max: 40,
                running_tasks: 1,
                armed_waits: 1,
                ..Default::default()
            }),
            busiest: vec![agent("agt_b", "busy", 2, 9), agent("agt_a", "also", 5, 3)],
            longest_queues: vec![agent("agt_q", "stuck", 40, 0), agent("agt_a", "also", 5, 3)],
            running_tasks: vec![pb::RunningTask {
                task_id: "tsk_1".into(),
                owner_agent_id: "agt_o".into(),
                kind: "command".into(),
                label: "sleep 60\nrm -rf".into(),
                started_at_ms: 1_000,
                owner_name: "owner".into(),
            }],
            armed_waits: vec![pb::ArmedWait {
                wait_id: "wai_1".into(),
                owner_agent_id: "agt_w".into(),
                kind: "timer".into(),
                reason: "release".into(),
                fires_at_ms: 125_000,
                owner_name: String::new(),
            }],
            hot_agents: 3,
            hot_left_out: 0,
            window_ms: 60_000,
            now_ms: 5_000,
        }
    }

    pub fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn first_ids(app: &App) -> Vec<String> {
        app.rows(app.table())
            .into_iter()
            .map(|r| r.agent.id)
            .collect()
    }

    /// The agent of a sample row, as its keys name it.
    pub fn agent_ref(id: &str, label: &str) -> AgentRef {
        AgentRef {
            id: id.into(),
            label: label.into(),
        }
    }

    #[test]
    fn rates_come_from_two_reads_and_from_uptime_before_that() {
        let mut app = App::default();
        let start = Instant::now();
        app.update(sample(), start);
        let rates = app.rates.expect("rates");
        assert!(rates.since_start && (rates.turns - 10.0).abs() < 1e-9);
        let mut later = sample();
        if let Some(t) = later.totals.as_mut() {
            t.turns_finished = 150;
            t.turns_failed = 5;
        }
        app.update(later, start + std::time::Duration::from_secs(2));
        let rates = app.rates.expect("rates");
        assert!(!rates.since_start);
        assert!((rates.turns - 25.0).abs() < 1e-9 && (rates.failed - 2.5).abs() < 1e-9);
    }

    #[test]
    fn tab_switches_tables_s_cycles_the_sort_and_enter_opens_the_selected_agent() {
        let mut app = App::default();
        app.update(sample(), Instant::now());
        assert_eq!(app.table(), Table::Busiest);
        assert_eq!(first_ids(&app), ["agt_b", "agt_a"]);
        // Sorted by queue now.
        assert_eq!(app.on_key(key(KeyCode::Char('s'))), Action::None);
        assert_eq!(app.sort_column(), 4);
        assert_eq!(first_ids(&app), ["agt_a", "agt_b"]);
        app.on_key(key(KeyCode::Down));
        app.on_key(key(KeyCode::Down));
        assert_eq!(app.selected(), 1, "the selection stops at the last row");
        assert_eq!(
            app.on_key(key(KeyCode::Enter)),
            Action::Open(PaneKind::Agent, agent_ref("agt_b", "busy (agt_b)"))
        );
        app.on_key(key(KeyCode::Tab));
        app.on_key(key(KeyCode::Tab));
        assert_eq!(app.table(), Table::Tasks);
        assert_eq!(
            app.on_key(key(KeyCode::Enter)),
            Action::Open(PaneKind::Agent, agent_ref("agt_o", "owner (agt_o)")),
            "a task opens its owner"
        );
        app.on_key(key(KeyCode::BackTab));
        assert_eq!(app.table(), Table::Queues);
        assert_eq!(app.on_key(key(KeyCode::Char('q'))), Action::Quit);
        assert_eq!(
            app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Action::Quit
        );
    }

    #[test]
    fn p_r_and_a_act_on_the_selected_agent_and_slash_filters_the_rows() {
        let mut app = App::default();
        app.update(sample(), Instant::now());
        app.on_key(key(KeyCode::Down));
        assert_eq!(
            app.on_key(key(KeyCode::Char('p'))),
            Action::Pause(agent_ref("agt_a", "also (agt_a)"))
        );
        assert_eq!(
            app.on_key(key(KeyCode::Char('r'))),
            Action::Resume(agent_ref("agt_a", "also (agt_a)"))
        );
        assert_eq!(
            app.on_key(key(KeyCode::Char('a'))),
            Action::Abort(agent_ref("agt_a", "also (agt_a)"))
        );
        assert_eq!(
            app.on_key(key(KeyCode::Char('t'))),
            Action::Open(PaneKind::Subtree, agent_ref("agt_a", "also (agt_a)"))
        );
        // `/` types into the filter: q is a letter there, not quit.
        app.on_key(key(KeyCode::Char('/')));
        for c in "BUSq".chars() {
            assert_eq!(app.on_key(key(KeyCode::Char(c))), Action::None);
        }
        assert!(first_ids(&app).is_empty(), "no row holds `busq`");
        app.on_key(key(KeyCode::Backspace));
        app.on_key(key(KeyCode::Enter));
        assert!(!app.editing_filter);
        assert_eq!(first_ids(&app), ["agt_b"], "names match in any case");
        assert_eq!(app.selected(), 0);
        assert_eq!(
            app.on_key(key(KeyCode::Char('p'))),
            Action::Pause(agent_ref("agt_b", "busy (agt_b)"))
        );
        // esc drops the filter.
        app.on_key(key(KeyCode::Esc));
        assert_eq!(first_ids(&app), ["agt_b", "agt_a"]);
        // In a pane, the keys act on the pane's agent.
        app.pane = Some(Pane {
            kind: PaneKind::Agent,
            agent: agent_ref("agt_q", "stuck (agt_q)"),
            lines: Vec::new(),
            scroll: 0,
        });
        assert_eq!(
            app.on_key(key(KeyCode::Char('r'))),
            Action::Resume(agent_ref("agt_q", "stuck (agt_q)"))
        );
    }

    #[test]
    fn the_subtree_pane_scrolls_and_esc_goes_back_to_the_tables() {
        let mut app = App::default();
        app.update(sample(), Instant::now());
        app.pane = Some(Pane {
            kind: PaneKind::Subtree,
            agent: agent_ref("agt_b", "busy (agt_b)"),
            lines: vec!["a".into(), "b".into()],
            scroll: 0,
        });
        for _ in 0..5 {
            app.on_key(key(KeyCode::Down));
        }
        assert_eq!(app.pane.as_ref().map(|s| s.scroll), Some(1));
        // A refresh that shortens the tree pulls the scroll back.
        app.refresh_pane(vec!["a".into()]);
        assert_eq!(app.pane.as_ref().map(|s| s.scroll), Some(0));
        assert_eq!(app.on_key(key(KeyCode::Esc)), Action::None);
        assert!(app.pane.is_none());
        // A second esc does not quit: only q does.
        assert_eq!(app.on_key(key(KeyCode::Esc)), Action::None);
    }

    #[test]
    fn rows_show_ages_and_times_and_keep_agent_text_on_one_line() {
        let mut app = App::default();
        app.update(sample(), Instant::now());
        let tasks = app.rows(Table::Tasks);
        assert_eq!(tasks[0].cells[4], "4s");
        assert_eq!(tasks[0].cells[0], "sleep 60 rm -rf");
        let waits = app.rows(Table::Waits);
        assert_eq!(waits[0].cells[4], "2m00s");
        assert_eq!(duration(7_500_000), "2h05m");
    }

    #[test]
    fn a_shorter_list_pulls_the_selection_back() {
        let mut app = App::default();
        app.update(sample(), Instant::now());
        app.on_key(key(KeyCode::Down));
        assert_eq!(app.selected(), 1);
        let mut fewer = sample();
        fewer.busiest.truncate(1);
        app.update(fewer, Instant::now());
        assert_eq!(app.selected(), 0);
    }
}
