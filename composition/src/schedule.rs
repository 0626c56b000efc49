//! Cron schedules as an ingress: when a schedule is next due, and which one
//! slot a daemon that was down fires on start.
//!
//! Expressions have the five classic fields (`0 9 * * MON-FRI`: minute,
//! hour, day of month, month, day of week, with names, ranges, lists and
//! steps), read in an explicit IANA timezone, UTC by default. Parsing and
//! matching are croner's: it reads five-field expressions as they are
//! written, takes a chrono timezone, and searches backwards as well as
//! forwards, so the latest slot before now is found by jumping over
//! fields, not by walking every minute of a long downtime.
//!
//! Around daylight-saving changes a slot follows croner's rule: a fixed
//! time that falls in a skipped hour fires just after the gap, one in a
//! repeated hour fires once, at its first occurrence.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Bounds on what a manifest may give.
pub const MAX_EXPR_BYTES: usize = 256;
pub const MAX_TIMEZONE_BYTES: usize = 64;

/// How many forward steps [`Schedule::due_on_start`] takes to settle on the
/// latest slot once croner's backward search has found a candidate. One is
/// the normal case; more happen only next to a daylight-saving change.
const MAX_SETTLE_STEPS: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ScheduleError {
    #[error("cron expression {expr:?} is invalid: {reason}")]
    Expression { expr: String, reason: String },
    #[error("unknown timezone {0:?} (expected an IANA name such as Europe/Paris)")]
    UnknownTimezone(String),
    #[error("{field} is {len} bytes, over the limit of {max}")]
    TooLong {
        field: &'static str,
        len: usize,
        max: usize,
    },
}

/// A parsed cron expression in its timezone.
#[derive(Debug, Clone)]
pub struct Schedule {
    expr: String,
    cron: Cron,
    timezone: Tz,
}

impl Schedule {
    /// Parses `expr` (exactly five fields) in `timezone` (UTC if `None`).
    pub fn parse(expr: &str, timezone: Option<&str>) -> Result<Self, ScheduleError> {
        bounded("the cron expression", expr, MAX_EXPR_BYTES)?;
        let timezone = match timezone {
            None => Tz::UTC,
            Some(name) => {
                bounded("the timezone", name, MAX_TIMEZONE_BYTES)?;
                Tz::from_str(name).map_err(|_| ScheduleError::UnknownTimezone(name.to_string()))?
            }
        };
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build()
            .parse(expr)
            .map_err(|error| ScheduleError::Expression {
                expr: expr.to_string(),
                reason: error.to_string(),
            })?;
        Ok(Self {
            expr: expr.to_string(),
            cron,
            timezone,
        })
    }

    pub fn expr(&self) -> &str {
        &self.expr
    }

    /// The IANA name of the timezone (`UTC` by default).
    pub fn timezone(&self) -> &str {
        self.timezone.name()
    }

    /// The first slot strictly after `after_ms`, in ms since the epoch;
    /// `None` if there is none that chrono can represent.
    pub fn next_after(&self, after_ms: u64) -> Option<u64> {
        // Slots are whole minutes, so searching after the whole second
        // that holds `after_ms` gives the same answer.
        let from = self.at(after_ms / 1000)?;
        let next = self.cron.find_next_occurrence(&from, false).ok()?;
        millis(&next)
    }

    /// The slot to fire now, if any: the latest slot `s` with
    /// `max(last_fired, since) < s <= now`. A schedule missed while the
    /// daemon was down therefore fires once, for its latest slot, and a
    /// slot already fired is never fired again. `since` is when the
    /// schedule started to count (say, when the instance was applied), so
    /// a new schedule does not fire for a slot before it existed.
    pub fn due_on_start(
        &self,
        last_fired_ms: Option<u64>,
        since_ms: u64,
        now_ms: u64,
    ) -> Option<u64> {
        let floor = last_fired_ms.unwrap_or(0).max(since_ms);
        if now_ms <= floor {
            return None;
        }
        self.latest_at_or_before(now_ms)
            .filter(|&slot| slot > floor)
    }

    /// The latest slot at or before `now_ms`. croner's backward search
    /// jumps over fields, so a year of downtime costs a few steps; its
    /// candidate is then confirmed with the forward search, which is what
    /// defines a slot (the two can disagree inside a daylight-saving gap).
    fn latest_at_or_before(&self, now_ms: u64) -> Option<u64> {
        let mut cursor_s = now_ms / 1000;
        for _ in 0..4 {
            let candidate = self
                .cron
                .find_previous_occurrence(&self.at(cursor_s)?, true)
                .ok()?;
            let candidate_ms = millis(&candidate)?;
            let confirmed = self.next_after(candidate_ms.checked_sub(1)?)?;
            if confirmed <= now_ms {
                return Some(self.settle(confirmed, now_ms));
            }
            cursor_s = (candidate_ms / 1000).checked_sub(1)?;
        }
        None
    }

    /// Steps forward from `slot` to the last slot at or before `now_ms`.
    fn settle(&self, mut slot: u64, now_ms: u64) -> u64 {
        for _ in 0..MAX_SETTLE_STEPS {
            match self.next_after(slot) {
                Some(next) if next <= now_ms => slot = next,
                _ => break,
            }
        }
        slot
    }

    fn at(&self, secs: u64) -> Option<DateTime<Tz>> {
        let utc = DateTime::<Utc>::from_timestamp(i64::try_from(secs).ok()?, 0)?;
        Some(utc.with_timezone(&self.timezone))
    }
}

/// What the store keeps per schedule to never fire a slot twice.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ScheduleState {
    pub last_fired_ms: Option<u64>,
}

impl ScheduleState {
    /// Records that `slot_ms` fired; a late, older slot never moves it back.
    pub fn fired(&mut self, slot_ms: u64) {
        self.last_fired_ms = Some(self.last_fired_ms.map_or(slot_ms, |last| last.max(slot_ms)));
    }
}

fn millis(at: &DateTime<Tz>) -> Option<u64> {
    u64::try_from(at.timestamp_millis()).ok()
}

fn bounded(field: &'static str, value: &str, max: usize) -> Result<(), ScheduleError> {
    if value.len() > max {
        return Err(ScheduleError::TooLong {
            field,
            len: value.len(),
            max,
        });
    }
    Ok(())
}

#[cfg(test)]
#[path = "schedule/tests.rs"]
mod tests;
