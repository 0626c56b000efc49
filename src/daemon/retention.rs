//! The event log's retention: events older than `serve --event-retention`
//! are removed, a bounded batch at a time, off the async threads.
//!
//! Why a rule at all: a scripted turn leaves about a kilobyte of events,
//! and agents live for months. What goes with them: the event history
//! older than the rule, and the memory search's hits on tool calls from
//! then (handled messages and notes are read from their own records).

use std::time::Duration;

use tokio::sync::watch;

use crate::store::Opened;

/// Runs removed per store call: bounds one call's time and the
/// transaction PostgreSQL holds for it.
const BATCH: usize = 512;

/// How often the log is looked at: a quarter of the rule, within these.
const MIN_EVERY: Duration = Duration::from_secs(1);
const MAX_EVERY: Duration = Duration::from_secs(60);

/// Removes what `keep` no longer covers, every so often, until `stop`.
pub async fn trim_until(store: Opened, keep: Duration, mut stop: watch::Receiver<bool>) {
    let every = (keep / 4).clamp(MIN_EVERY, MAX_EVERY);
    loop {
        tokio::select! {
            _ = stop.wait_for(|s| *s) => return,
            () = tokio::time::sleep(every) => {}
        }
        let before_ms = crate::access::audit::now_ms()
            .saturating_sub(u64::try_from(keep.as_millis()).unwrap_or(u64::MAX));
        // Batch after batch while whole batches go; a stop waits for the
        // one in hand only.
        loop {
            let store = store.clone();
            let trimmed =
                tokio::task::spawn_blocking(move || store.trim_events(before_ms, BATCH)).await;
            match trimmed {
                Ok(Ok(0)) => break,
                Ok(Ok(events)) => {
                    tracing::info!(events, "events past the log's retention removed");
                    if *stop.borrow() {
                        return;
                    }
                }
                Ok(Err(err)) => {
                    tracing::warn!(error = %err, "cannot remove events past the log's retention; trying again later");
                    break;
                }
                Err(join) => {
                    tracing::warn!(error = %join, "removing old events stopped");
                    break;
                }
            }
        }
    }
}
