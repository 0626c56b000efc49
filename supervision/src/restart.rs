//! Restart intensity, as in Erlang/OTP: a supervisor restarts a failed child
//! unless it already restarted it `max_restarts` times within `period_ms`;
//! then it gives up, so a child that fails at once on every start cannot
//! spin forever.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// How often a child may be restarted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    pub max_restarts: u32,
    pub period_ms: u64,
}

impl Default for RestartPolicy {
    /// OTP's defaults: 3 restarts in 5 seconds.
    fn default() -> Self {
        Self {
            max_restarts: 3,
            period_ms: 5_000,
        }
    }
}

/// What the supervisor does with a failed child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartDecision {
    Restart,
    GiveUp,
}

/// The restarts of one child inside the current window. Empty (and without
/// allocation) until the child first fails.
#[derive(Debug, Clone, Default)]
pub struct RestartBudget {
    recent_ms: VecDeque<u64>,
}

impl RestartBudget {
    /// Records a failure at `now_ms` and decides. Times must not go
    /// backwards; a clock that does is treated as standing still.
    pub fn on_failure(&mut self, policy: RestartPolicy, now_ms: u64) -> RestartDecision {
        let now_ms = now_ms.max(self.recent_ms.back().copied().unwrap_or(0));
        while let Some(&oldest) = self.recent_ms.front() {
            if now_ms.saturating_sub(oldest) >= policy.period_ms {
                self.recent_ms.pop_front();
            } else {
                break;
            }
        }
        if self.recent_ms.len() >= policy.max_restarts as usize {
            RestartDecision::GiveUp
        } else {
            self.recent_ms.push_back(now_ms);
            RestartDecision::Restart
        }
    }

    pub fn restarts_in_window(&self) -> usize {
        self.recent_ms.len()
    }
}

/// One supervisor's budgets, one per child that failed within its
/// period. Costs one pointer until a child first fails, and forgets a
/// child whose failures have all left the window, so a supervisor of many
/// children keeps only the ones failing now.
#[derive(Debug, Clone)]
pub struct RestartBudgets<K> {
    // Boxed on purpose: every agent is a supervisor, and an empty map is
    // six words where this is one.
    #[allow(clippy::box_collection)]
    children: Option<Box<HashMap<K, RestartBudget>>>,
}

impl<K> Default for RestartBudgets<K> {
    fn default() -> Self {
        Self { children: None }
    }
}

impl<K: Hash + Eq + Copy> RestartBudgets<K> {
    /// Records a failure of `child` at `now_ms` and decides.
    pub fn on_failure(&mut self, child: K, policy: RestartPolicy, now_ms: u64) -> RestartDecision {
        let children = self.children.get_or_insert_with(Default::default);
        children.retain(|id, budget| {
            *id == child
                || budget
                    .recent_ms
                    .back()
                    .is_some_and(|&last| now_ms.saturating_sub(last) < policy.period_ms)
        });
        children
            .entry(child)
            .or_default()
            .on_failure(policy, now_ms)
    }

    /// How many children have a failure in their window (or were not
    /// forgotten yet).
    pub fn tracked(&self) -> usize {
        self.children.as_ref().map_or(0, |c| c.len())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn no_window_holds_more_restarts_than_the_policy_allows(
            max in 0u32..6,
            period in 1u64..10_000,
            gaps in proptest::collection::vec(0u64..4_000, 1..60),
        ) {
            let policy = RestartPolicy { max_restarts: max, period_ms: period };
            let mut budget = RestartBudget::default();
            let mut now = 0;
            let mut restarts = Vec::new();
            for gap in gaps {
                now += gap;
                if budget.on_failure(policy, now) == RestartDecision::Restart {
                    restarts.push(now);
                }
            }
            for (i, start) in restarts.iter().enumerate() {
                let in_window = restarts[i..].iter().take_while(|t| **t - start < period).count();
                prop_assert!(in_window <= max as usize);
            }
        }

        #[test]
        fn failures_spaced_wider_than_the_period_always_restart(
            max in 1u32..6,
            period in 1u64..10_000,
            count in 1usize..50,
        ) {
            let policy = RestartPolicy { max_restarts: max, period_ms: period };
            let mut budget = RestartBudget::default();
            for i in 0..count {
                prop_assert_eq!(budget.on_failure(policy, i as u64 * period), RestartDecision::Restart);
            }
        }
    }

    #[test]
    fn each_child_has_its_own_budget_and_calm_ones_are_forgotten() {
        let policy = RestartPolicy::default();
        let mut budgets = RestartBudgets::default();
        assert_eq!(budgets.tracked(), 0);
        for _ in 0..3 {
            assert_eq!(
                budgets.on_failure(1u32, policy, 10),
                RestartDecision::Restart
            );
        }
        // Another child's failures do not spend the first one's budget.
        assert_eq!(budgets.on_failure(2, policy, 20), RestartDecision::Restart);
        assert_eq!(budgets.on_failure(1, policy, 30), RestartDecision::GiveUp);
        assert_eq!(budgets.tracked(), 2);
        // Past the period, a failure of a third child forgets both.
        assert_eq!(
            budgets.on_failure(3, policy, 10_000),
            RestartDecision::Restart
        );
        assert_eq!(budgets.tracked(), 1);
    }

    #[test]
    fn a_burst_past_the_intensity_gives_up() {
        let policy = RestartPolicy::default();
        let mut budget = RestartBudget::default();
        for _ in 0..3 {
            assert_eq!(budget.on_failure(policy, 10), RestartDecision::Restart);
        }
        assert_eq!(budget.on_failure(policy, 11), RestartDecision::GiveUp);
        assert_eq!(budget.on_failure(policy, 5_011), RestartDecision::Restart);
    }
}
