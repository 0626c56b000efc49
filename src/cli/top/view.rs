//! Drawing `holarchy top` with ratatui: the header of totals and rates, a
//! tab per table, the shown table with its selection, or a pane (an
//! agent's messages and events, or its subtree), and a line of keys, or
//! of what went wrong. Draws from [`App`] only, so a test backend can
//! check every frame.

use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table as TableWidget, TableState, Tabs};
use ratatui::Frame;

use super::app::{App, Table};
use super::plain;

const KEYS: &str = "q quit  s sort  tab table  / filter  up/down select  enter messages  t subtree  p pause  r resume  a abort  esc back";

pub fn draw(frame: &mut Frame, app: &App) {
    let [header, tabs, body, footer] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(frame.area());

    let lines: Vec<Line> = match &app.activity {
        Some(activity) => plain::header(activity, app.rates)
            .into_iter()
            .map(Line::from)
            .collect(),
        None => vec![Line::from("holarchy top: waiting for the daemon...")],
    };
    frame.render_widget(Paragraph::new(lines), header);

    let titles = Table::ALL.iter().map(|t| {
        let count = app.rows(*t).len();
        format!("{} ({count})", t.title())
    });
    let selected = Table::ALL.iter().position(|t| *t == app.table());
    frame.render_widget(
        Tabs::new(titles)
            .select(selected)
            .highlight_style(Style::new().add_modifier(Modifier::REVERSED)),
        tabs,
    );

    match &app.pane {
        Some(pane) => {
            let text: Vec<Line> = pane
                .lines
                .iter()
                .skip(pane.scroll)
                .map(|l| Line::from(l.as_str()))
                .collect();
            let block = Block::bordered().title(format!(
                " {} (esc back, up/down scroll, p/r/a pause/resume/abort) ",
                pane.title()
            ));
            frame.render_widget(Paragraph::new(text).block(block), body);
        }
        None => draw_table(frame, app, body),
    }

    let red = Style::new().fg(Color::Red);
    let footer_line = match (&app.disconnected, &app.error, &app.notice) {
        (Some(why), _, _) => Line::styled(
            format!("disconnected from the daemon, retrying: {why}"),
            red.add_modifier(Modifier::BOLD),
        ),
        (None, Some(err), _) => Line::styled(format!("error: {err}"), red),
        _ if app.editing_filter => {
            Line::from(format!("filter: /{}_  (enter keep, esc clear)", app.filter))
        }
        (None, None, Some(notice)) => Line::from(notice.as_str()),
        (None, None, None) if !app.filter.is_empty() => {
            Line::from(format!("filter: /{}  (esc clear)  {KEYS}", app.filter))
        }
        (None, None, None) => Line::from(KEYS),
    };
    frame.render_widget(Paragraph::new(footer_line), footer);
}

fn draw_table(frame: &mut Frame, app: &App, area: ratatui::layout::Rect) {
    let table = app.table();
    let sorted_by = app.sort_column();
    let header = Row::new(table.headers().iter().enumerate().map(|(i, h)| {
        let text = if i == sorted_by {
            format!("{h} v")
        } else {
            (*h).to_owned()
        };
        Cell::from(text)
    }))
    .style(Style::new().add_modifier(Modifier::BOLD));
    let rows = app.rows(table).into_iter().map(|r| Row::new(r.cells));
    let widths: &[Constraint] = match table {
        // Names first; ids are tails (6 characters, rarely more).
        Table::Busiest | Table::Queues => &[
            Constraint::Length(20),
            Constraint::Length(10),
            Constraint::Length(7),
            Constraint::Length(8),
            Constraint::Length(7),
            Constraint::Length(11),
            Constraint::Min(10),
        ],
        Table::Tasks | Table::Waits => &[
            Constraint::Length(40),
            Constraint::Length(10),
            Constraint::Length(20),
            Constraint::Length(16),
            Constraint::Min(9),
        ],
    };
    let widget = TableWidget::new(rows, widths.iter().copied())
        .header(header)
        .block(Block::bordered().title(format!(" {} ", table.title())))
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .highlight_symbol("> ");
    let mut state = TableState::default().with_selected(Some(app.selected()));
    frame.render_stateful_widget(widget, area, &mut state);
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use crossterm::event::KeyCode;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    use super::super::app::tests::{agent_ref, key, sample};
    use super::super::app::{Pane, PaneKind};
    use super::*;

    fn screen(app: &App) -> String {
        let mut terminal = Terminal::new(TestBackend::new(140, 20)).expect("test terminal");
        terminal.draw(|f| draw(f, app)).expect("draws");
        terminal.backend().to_string()
    }

    #[test]
    fn the_frame_shows_totals_tabs_the_table_and_the_keys() {
        let mut app = App::default();
        app.update(sample(), Instant::now());
        let shown = screen(&app);
        for text in [
            "turns/s 10.0 (since start)",
            "queued 47 (longest 40)",
            "busiest agents (2)",
            "armed waits (1)",
            "TURNS/MIN v",
            "> busy ",
            "q quit",
        ] {
            assert!(shown.contains(text), "{text} missing from:\n{shown}");
        }
        app.on_key(key(KeyCode::Tab));
        let shown = screen(&app);
        assert!(
            shown.contains("QUEUE v") && shown.contains("> stuck "),
            "{shown}"
        );
    }

    #[test]
    fn the_subtree_pane_replaces_the_table_and_an_error_replaces_the_keys() {
        let mut app = App::default();
        app.update(sample(), Instant::now());
        app.pane = Some(Pane {
            kind: PaneKind::Subtree,
            agent: agent_ref("agt_01KQ8ZAAAAAAAAAAAAAAX11111", "busy (X11111)"),
            lines: vec!["agent \"busy\" X11111 (public_named, active)".into()],
            scroll: 0,
        });
        app.error = Some("the daemon went away".into());
        let shown = screen(&app);
        assert!(shown.contains("subtree of busy (X11111) "), "{shown}");
        assert!(!shown.contains("01KQ8Z"), "no whole id: {shown}");
        assert!(shown.contains("agent \"busy\" X11111"), "{shown}");
        assert!(!shown.contains("TURNS/MIN"), "{shown}");
        assert!(shown.contains("error: the daemon went away"), "{shown}");
        app.disconnected = Some("connection refused".into());
        let shown = screen(&app);
        assert!(
            shown.contains("disconnected from the daemon, retrying: connection refused"),
            "{shown}"
        );
    }
}
