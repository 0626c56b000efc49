//! Progress on stderr for the commands that take a while (`bench`, `store
//! copy`): `indicatif` bars, drawn in place on a terminal and not at all
//! anywhere else. Each frame is redrawn over the last one with `\r` and
//! escape codes, which a log file or a pipe would keep as one endless
//! line; what such a command has to say goes to stdout or in its final
//! lines instead.

use std::io::IsTerminal as _;
use std::sync::Mutex;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// Redraws a second at most: often enough to look live, rarely enough
/// that drawing costs nothing next to the work it shows.
const REDRAWS_PER_S: u8 = 10;

/// Whether progress is drawn: never when `quiet` (`--json`), nor when
/// stderr is no terminal.
fn drawn(quiet: bool) -> bool {
    !quiet && std::io::stderr().is_terminal()
}

fn target() -> ProgressDrawTarget {
    ProgressDrawTarget::stderr_with_hz(REDRAWS_PER_S)
}

/// A style from a template of this module's, or indicatif's default one:
/// the templates are constants a unit test parses, so the fallback is
/// never seen.
fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
}

/// `LABEL [####......] DONE/TOTAL RATE/s`, the rate averaged since the
/// progress was made (across every line it draws).
const BAR: &str = "{prefix:<16} [{bar:30}] {pos}/{len} {rate:>11}";

/// Progress towards a known total, shown as a bar.
///
/// [`Progress::finish`] ends the bar's line; a later [`Progress::show`]
/// starts a new one below whatever was printed meanwhile (another bar, say),
/// rather than redrawing over it.
#[derive(Debug)]
pub struct Progress {
    label: &'static str,
    total: u64,
    started: Instant,
    drawn: bool,
    /// The line being drawn, `None` until the first show after a finish.
    bar: Mutex<Option<ProgressBar>>,
}

impl Progress {
    pub fn new(label: &'static str, total: usize, quiet: bool) -> Self {
        Self {
            label,
            total: total as u64,
            started: Instant::now(),
            drawn: drawn(quiet),
            bar: Mutex::new(None),
        }
    }

    /// Shows `done` of the total.
    pub fn show(&self, done: usize) {
        if !self.drawn {
            return;
        }
        // A poisoned lock only means a panic elsewhere mid-draw: the bar
        // itself is still whole.
        let mut bar = self
            .bar
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        bar.get_or_insert_with(|| self.line())
            .set_position(done as u64);
    }

    /// Ends the current line, leaving its last frame on the terminal.
    pub fn finish(&self) {
        let mut bar = self
            .bar
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(bar) = bar.take() {
            bar.finish();
            // indicatif leaves the cursor after the frame: what is printed
            // next (another bar, the report) starts a line of its own. It
            // draws nothing for TERM=dumb, so then nothing is ended.
            if !bar.is_hidden() {
                eprintln!();
            }
        }
    }

    fn line(&self) -> ProgressBar {
        let started = self.started;
        let rate = move |state: &ProgressState, out: &mut dyn std::fmt::Write| {
            let per_s = state.pos() as f64 / started.elapsed().as_secs_f64().max(1e-9);
            let _ = write!(out, "{per_s:.0}/s");
        };
        let style = style(BAR).with_key("rate", rate).progress_chars("#.");
        ProgressBar::with_draw_target(Some(self.total), target())
            .with_style(style)
            .with_prefix(self.label)
    }
}

/// `copying TABLE: N records read`, for work whose total is not known.
const COUNTER: &str = "copying {msg}: {pos} records read";

/// A count of records read, table by table, as `store copy` goes.
/// Cheap to clone: the clones draw one line.
#[derive(Debug, Clone)]
pub struct Counter(ProgressBar);

impl Counter {
    pub fn new(quiet: bool) -> Self {
        if !drawn(quiet) {
            return Self(ProgressBar::hidden());
        }
        Self(ProgressBar::with_draw_target(None, target()).with_style(style(COUNTER)))
    }

    /// `read` records of `table` so far.
    pub fn show(&self, table: &'static str, read: u64) {
        self.0.set_message(table);
        self.0.set_position(read);
    }

    /// Takes the line off the terminal: the command's report replaces it.
    pub fn clear(&self) {
        self.0.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_templates_parse() {
        for template in [BAR, COUNTER] {
            assert!(ProgressStyle::with_template(template).is_ok(), "{template}");
        }
    }

    #[test]
    fn nothing_is_drawn_when_quiet() {
        let progress = Progress::new("agents", 10, true);
        progress.show(5);
        progress.finish();
        assert!(progress.bar.lock().expect("lock").is_none());
        assert!(Counter::new(true).0.is_hidden());
    }
}
