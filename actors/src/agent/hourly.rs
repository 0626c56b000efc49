//! An instance's hourly turn limit (`max_turns_per_hour`): the rate, and
//! the turn starts that count against it. An actor's window begins empty,
//! so at its first turn it reads back the last hour's starts from the
//! store: a restart must not hand the instance a fresh hour.

use holarchy_composition::constraint::{TurnRate, TurnWindow, HOUR_MS};
use holarchy_supervision::AgentId;

use crate::store::{Reads, StoreError};

/// The limit and its window; boxed in the agent's state, since most agents
/// have none.
#[derive(Debug)]
pub(super) struct Hourly {
    rate: TurnRate,
    window: TurnWindow,
    /// Whether the window holds what the store shows of the last hour.
    read_back: bool,
}

impl Hourly {
    pub(super) fn of(max_per_hour: Option<u32>) -> Option<Box<Hourly>> {
        let rate = TurnRate::new(max_per_hour?).ok()?;
        Some(Box::new(Hourly {
            rate,
            window: TurnWindow::new(),
            read_back: false,
        }))
    }

    /// The limit after an apply: the turns already counted still count
    /// under the new one.
    pub(super) fn recomposed(
        old: Option<Box<Hourly>>,
        max_per_hour: Option<u32>,
    ) -> Option<Box<Hourly>> {
        let mut new = Hourly::of(max_per_hour)?;
        if let Some(old) = old {
            new.window = old.window;
            new.read_back = old.read_back;
        }
        Some(new)
    }

    /// `Ok` if a turn may start at `now_ms`, else when one may. The first
    /// call reads back the turn starts of the agent's newest messages:
    /// `backlog` (its queue bound) plus the limit covers every turn that
    /// can count, even behind a full queue. A message keeps the run id of
    /// its last turn only, so a retried message counts once.
    pub(super) fn admits(
        &mut self,
        store: &dyn Reads,
        agent: AgentId,
        backlog: usize,
        now_ms: u64,
    ) -> Result<Result<(), u64>, StoreError> {
        if !self.read_back {
            let limit = self.rate.max_per_hour() as usize;
            let since = now_ms.saturating_sub(HOUR_MS);
            for start in store.last_run_starts(agent, limit.saturating_add(backlog))? {
                if start > since {
                    self.window.record(self.rate, start);
                }
            }
            self.read_back = true;
        }
        Ok(self.rate.admits(&self.window, now_ms))
    }

    pub(super) fn record(&mut self, start_ms: u64) {
        self.window.record(self.rate, start_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_back_with(max: u32, starts: &[u64]) -> Option<Box<Hourly>> {
        let mut hourly = Hourly::of(Some(max))?;
        hourly.read_back = true;
        for &start in starts {
            hourly.record(start);
        }
        Some(hourly)
    }

    #[test]
    fn a_new_limit_keeps_the_turns_counted_and_what_was_read_back() {
        let now = 10 * HOUR_MS;
        let raised =
            Hourly::recomposed(read_back_with(2, &[now - 2, now - 1]), Some(3)).expect("a limit");
        assert!(raised.read_back, "the store is not read a second time");
        assert_eq!(raised.rate.admits(&raised.window, now), Ok(()));
        let same =
            Hourly::recomposed(read_back_with(2, &[now - 2, now - 1]), Some(2)).expect("a limit");
        assert_eq!(same.rate.admits(&same.window, now), Err(now - 2 + HOUR_MS));
        assert!(Hourly::recomposed(read_back_with(2, &[now]), None).is_none());
        let fresh = Hourly::recomposed(None, Some(2)).expect("a limit");
        assert!(!fresh.read_back, "a limit new to the actor reads the store");
    }
}
