//! The best documents of a query, found under a budget of CPU.
//!
//! tantivy's collectors run a query to its end. Memory searches come from
//! untrusted text and run on a shared index, so this walks each segment's
//! matches itself and stops, with an error the caller can act on, once the
//! thread has spent its budget: no search can hold a core for long,
//! whatever the index holds.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::time::Duration;

use holarchy_actors::StoreError;
use tantivy::query::{EnableScoring, Query};
use tantivy::{DocAddress, DocId, DocSet, Score, Searcher, TERMINATED};

use super::failed;

/// Matches walked between two looks at the clock.
const CHECK_EVERY: u32 = 1024;

/// A hit ordered by score, then (as tantivy does) the earlier address first.
#[derive(Debug, Clone, Copy)]
struct Ranked(Score, DocAddress);

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0
            .total_cmp(&other.0)
            .then_with(|| other.1.cmp(&self.1))
    }
}

/// The `limit` best hits of `query`, best first; an error once the
/// calling thread has used `budget` of CPU on it.
pub(super) fn top_docs(
    searcher: &Searcher,
    query: &dyn Query,
    limit: usize,
    budget: Duration,
) -> Result<Vec<(Score, DocAddress)>, StoreError> {
    let started = thread_cpu();
    let over = || thread_cpu().saturating_sub(started) > budget;
    let weight = query
        .weight(EnableScoring::enabled_from_searcher(searcher))
        .map_err(failed)?;
    // The worst kept hit on top, to be pushed out by a better one.
    let mut kept: BinaryHeap<Reverse<Ranked>> = BinaryHeap::with_capacity(limit + 1);
    for (ord, segment) in searcher.segment_readers().iter().enumerate() {
        let mut scorer = weight.scorer(segment, 1.0).map_err(failed)?;
        let alive = segment.alive_bitset();
        let mut walked: u32 = 0;
        let mut doc: DocId = scorer.doc();
        while doc != TERMINATED {
            if alive.is_none_or(|bits| bits.is_alive(doc)) {
                let hit = Ranked(scorer.score(), DocAddress::new(ord as u32, doc));
                if kept.len() < limit {
                    kept.push(Reverse(hit));
                } else if kept.peek().is_some_and(|worst| hit > worst.0) {
                    kept.pop();
                    kept.push(Reverse(hit));
                }
            }
            walked = walked.wrapping_add(1);
            if walked.is_multiple_of(CHECK_EVERY) && over() {
                return Err(over_budget(budget));
            }
            doc = scorer.advance();
        }
        if over() {
            return Err(over_budget(budget));
        }
    }
    let mut best: Vec<Ranked> = kept.into_iter().map(|Reverse(hit)| hit).collect();
    best.sort_unstable_by(|a, b| b.cmp(a));
    Ok(best
        .into_iter()
        .map(|Ranked(score, at)| (score, at))
        .collect())
}

fn over_budget(budget: Duration) -> StoreError {
    StoreError::OverBudget(format!(
        "the memory search was stopped after {} ms of CPU: search for fewer or rarer words, or name the kinds to search",
        budget.as_millis()
    ))
}

/// CPU this thread has used. Zero where the clock cannot be read, which
/// leaves searches unbounded there rather than failing them all.
#[allow(unsafe_code)]
fn thread_cpu() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec for the call's duration;
    // CLOCK_THREAD_CPUTIME_ID needs nothing else.
    let read = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    if read != 0 {
        return Duration::ZERO;
    }
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}
