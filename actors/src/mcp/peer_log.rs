//! What a server says that reaches the daemon's log. A server is a program
//! the daemon does not trust: any text of its (a request's id or method, a
//! line it printed, its stderr, an error it answered) is escaped, so a
//! newline cannot forge a log line, and cut, so a 4 MB id is not a 4 MB
//! line. Lines about what a server sends are also limited per server
//! ([`LogLimit`]), so 100,000 requests are not 100,000 lines.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Characters kept of a server's id, method or printed line.
pub const MAX_SHOWN: usize = 64;
/// Characters kept of why a server stopped or could not start (its stderr
/// among it): more, as it is what the operator debugs from.
pub const MAX_REASON: usize = 1024;
/// Lines about one server's messages logged a minute; the rest are
/// counted, and the count logged.
pub const LINES_PER_MINUTE: u32 = 10;
const WINDOW: Duration = Duration::from_secs(60);

/// `text` with every character escaped as Rust's `{:?}` does (control
/// characters, newlines among them, become `\n`, `\u{1b}`, ...), cut to at
/// most `max` characters of escaped text; a cut says how long `text` was.
pub fn shown(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut kept = 0;
    for c in text.chars() {
        let escaped = c.escape_debug();
        if kept + escaped.len() > max {
            out.push_str(&format!("… ({} bytes in all)", text.len()));
            return out;
        }
        kept += escaped.len();
        out.extend(escaped);
    }
    out
}

/// The budget of log lines about one server's messages: at most
/// [`LINES_PER_MINUTE`] a minute. The first line refused in a minute says
/// that lines are now being counted; how many were is logged with the
/// next line allowed after the minute, or when the server's connection
/// ends ([`LogLimit::flush`]).
#[derive(Debug)]
pub struct LogLimit {
    server: String,
    window: Mutex<Window>,
}

#[derive(Debug, Default)]
struct Window {
    started: Option<Instant>,
    logged: u32,
    suppressed: u64,
}

impl LogLimit {
    pub fn new(server: &str) -> Self {
        Self {
            server: server.to_owned(),
            window: Mutex::default(),
        }
    }

    /// Whether one more line about the server's messages may be logged.
    pub fn allow(&self) -> bool {
        self.allow_at(Instant::now())
    }

    fn allow_at(&self, now: Instant) -> bool {
        let (allowed, ended, now_counting) = {
            let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
            let over = window
                .started
                .is_none_or(|started| now.saturating_duration_since(started) >= WINDOW);
            let mut ended = 0;
            if over {
                ended = std::mem::take(&mut window.suppressed);
                window.started = Some(now);
                window.logged = 0;
            }
            if window.logged < LINES_PER_MINUTE {
                window.logged += 1;
                (true, ended, false)
            } else {
                window.suppressed += 1;
                (false, ended, window.suppressed == 1)
            }
        };
        self.report(ended);
        if now_counting {
            tracing::warn!(
                server = %self.server,
                limit = LINES_PER_MINUTE,
                "MCP server: over the limit of log lines a minute about what it sends; the rest of this minute's are counted, not logged"
            );
        }
        allowed
    }

    /// Logs how many lines were held back since the last such report.
    pub fn flush(&self) {
        let suppressed = std::mem::take(
            &mut self
                .window
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .suppressed,
        );
        self.report(suppressed);
    }

    fn report(&self, suppressed: u64) {
        if suppressed > 0 {
            tracing::warn!(
                server = %self.server,
                suppressed,
                "MCP server: log lines about what it sent were suppressed"
            );
        }
    }

    #[cfg(test)]
    fn suppressed(&self) -> u64 {
        self.window
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .suppressed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_long_text_cut() {
        assert_eq!(shown("plain-id_1", MAX_SHOWN), "plain-id_1");
        let forged = shown("x\n2026-01-01T00:00:00Z  WARN forged\r\u{1b}[2J", MAX_SHOWN);
        assert!(!forged.contains(['\n', '\r', '\u{1b}']), "{forged}");
        assert!(forged.starts_with("x\\n2026"), "{forged}");
        let huge = shown(&"y".repeat(4 << 20), MAX_SHOWN);
        assert!(huge.starts_with(&"y".repeat(MAX_SHOWN)), "{huge}");
        assert!(
            huge.ends_with(&format!("… ({} bytes in all)", 4 << 20)),
            "{huge}"
        );
        assert!(huge.chars().count() < MAX_SHOWN + 32);
        // A cut never splits an escape.
        let cut = shown(&"\n".repeat(100), 7);
        assert!(cut.starts_with("\\n\\n\\n…"), "{cut}");
    }

    #[test]
    fn lines_are_limited_per_minute_and_the_rest_counted() {
        let limit = LogLimit::new("hostile");
        let start = Instant::now();
        let allowed = (0..1000).filter(|_| limit.allow_at(start)).count();
        assert_eq!(allowed, LINES_PER_MINUTE as usize);
        assert_eq!(limit.suppressed(), 1000 - u64::from(LINES_PER_MINUTE));
        // A new minute: a new budget, and the count is reported (reset).
        assert!(limit.allow_at(start + WINDOW));
        assert_eq!(limit.suppressed(), 0);
        let more = (0..20).filter(|_| limit.allow_at(start + WINDOW)).count();
        assert_eq!(more, LINES_PER_MINUTE as usize - 1);
        limit.flush();
        assert_eq!(limit.suppressed(), 0);
    }
}
