//! Waits: why an agent is blocked and what will wake it. A timer fires at
//! a deadline; an external trigger fires when a machine presents its token.

use serde::{Deserialize, Serialize};

use crate::ids::{AgentId, WaitId, WorkItemId};

/// What a wait waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WaitKind {
    /// Fires once, at `deadline_ms` (Unix milliseconds).
    Timer { deadline_ms: u64 },
    /// Fires on each delivery of its token; only the token's SHA-256 is kept.
    Trigger { token_hash: [u8; 32] },
}

impl WaitKind {
    pub const fn name(&self) -> &'static str {
        match self {
            WaitKind::Timer { .. } => "timer",
            WaitKind::Trigger { .. } => "external_trigger",
        }
    }
}

/// Where a wait is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WaitStatus {
    Armed,
    /// A timer that fired. Triggers stay armed across deliveries.
    Fired,
    /// Cancelled by its agent, or cleaned up with it.
    Cancelled,
}

impl WaitStatus {
    pub const fn name(self) -> &'static str {
        match self {
            WaitStatus::Armed => "armed",
            WaitStatus::Fired => "fired",
            WaitStatus::Cancelled => "cancelled",
        }
    }
}

/// One wait as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitRecord {
    pub id: WaitId,
    pub owner_agent_id: AgentId,
    pub kind: WaitKind,
    /// What the agent waits on, in its own words.
    pub reason: String,
    /// The work item this wait blocks, if any.
    pub work_item_id: Option<WorkItemId>,
    pub status: WaitStatus,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
}

/// `ms` since the epoch as an RFC 3339 time in UTC, to the second
/// (`2026-11-29T08:01:02Z`): what operators and models read.
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

impl WaitRecord {
    /// How long until a timer fires, from `now_ms`; zero if overdue (a timer
    /// whose deadline passed while the daemon was down fires at once).
    pub fn remaining_ms(&self, now_ms: u64) -> Option<u64> {
        match (self.kind, self.status) {
            (WaitKind::Timer { deadline_ms }, WaitStatus::Armed) => {
                Some(deadline_ms.saturating_sub(now_ms))
            }
            _ => None,
        }
    }

    /// The line an agent summary shows: `waiting on ...`.
    pub fn describe(&self) -> String {
        let what = match self.kind {
            WaitKind::Timer { deadline_ms } => format!("timer until {}", utc(deadline_ms)),
            WaitKind::Trigger { .. } => "external trigger".to_owned(),
        };
        match (&self.reason, self.work_item_id) {
            (reason, Some(item)) if !reason.is_empty() => {
                format!("{what} ({reason}; work item {item})")
            }
            (reason, None) if !reason.is_empty() => format!("{what} ({reason})"),
            (_, Some(item)) => format!("{what} (work item {item})"),
            (_, None) => what,
        }
    }

    /// Fires a timer: `Some` new record only if it is an armed timer.
    pub fn fire(&self, now_ms: u64) -> Option<WaitRecord> {
        match (self.kind, self.status) {
            (WaitKind::Timer { .. }, WaitStatus::Armed) => Some(WaitRecord {
                status: WaitStatus::Fired,
                updated_at_ms: now_ms,
                ..self.clone()
            }),
            _ => None,
        }
    }
}

impl WaitRecord {
    /// Calls `f` on the wait's free text (its reason), for redaction.
    pub fn texts_mut(&mut self, f: &mut dyn FnMut(&mut String)) {
        f(&mut self.reason);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn times_read_as_utc_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_795_000_000_999), "2026-11-18T11:06:40Z");
    }

    fn timer(deadline_ms: u64, status: WaitStatus) -> WaitRecord {
        WaitRecord {
            id: WaitId::from_u128(1),
            owner_agent_id: AgentId::from_u128(2),
            kind: WaitKind::Timer { deadline_ms },
            reason: String::new(),
            work_item_id: None,
            status,
            created_at_ms: 0,
            updated_at_ms: 0,
        }
    }

    proptest! {
        #[test]
        fn a_timer_fires_at_most_once(deadline in any::<u64>(), now in any::<u64>()) {
            let armed = timer(deadline, WaitStatus::Armed);
            let fired = armed.fire(now).expect("an armed timer fires");
            prop_assert_eq!(fired.status, WaitStatus::Fired);
            prop_assert!(fired.fire(now).is_none());
            prop_assert!(timer(deadline, WaitStatus::Cancelled).fire(now).is_none());
        }

        #[test]
        fn overdue_timers_fire_at_once(deadline in any::<u64>(), now in any::<u64>()) {
            let remaining = timer(deadline, WaitStatus::Armed).remaining_ms(now).expect("armed");
            prop_assert_eq!(remaining == 0, deadline <= now);
            prop_assert!(timer(deadline, WaitStatus::Fired).remaining_ms(now).is_none());
        }
    }
}
