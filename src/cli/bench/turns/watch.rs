//! Following the event log while the bench sends: each turn of the bench's
//! agents counts as handled when its `run_finished` arrives. The stream
//! only carries durable events, so a turn seen here has its reply on disk.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio_stream::StreamExt;

use crate::api::pb;
use crate::client::Clients;

/// How long the stream may stay silent before the run is called stuck: a
/// turn of the scripted brain takes microseconds, so a minute without a
/// single event means the daemon stopped handling them.
const STALL: Duration = Duration::from_secs(60);

/// A turn's end as the watcher saw it.
#[derive(Debug, Clone)]
pub struct Ended {
    /// When the event reached this tool.
    pub at: Instant,
    /// When the daemon stamped the event (its `at_ms`, wall clock): with
    /// `at`, how far the stream runs behind the turns.
    pub stamped_ms: i64,
    /// `completed`, `failed`, `aborted` (the event's text).
    pub outcome: String,
}

/// What the watch saw, by message id.
#[derive(Debug, Default)]
pub struct Seen {
    pub ended: HashMap<String, Ended>,
    /// Events of the bench's agents that the stream carried, of every kind.
    pub events: u64,
}

/// Opens a followed watch after `cursor`. Opened before the first message
/// is sent, so no event of the run can fall before it.
pub async fn open(
    clients: &mut Clients,
    cursor: u64,
) -> anyhow::Result<tonic::Streaming<pb::Event>> {
    Ok(clients
        .agents
        .watch_events(pb::WatchEventsRequest {
            after_cursor: cursor,
            follow: true,
            agent_id: String::new(),
        })
        .await
        .context("cannot follow the event log")?
        .into_inner())
}

/// Reads `stream` until `expected` turns of `agents` have ended, counting
/// them in `handled` as they do. An `interrupted` end is not an end: the
/// message goes back on the queue and its turn runs again.
pub async fn follow(
    mut stream: tonic::Streaming<pb::Event>,
    agents: HashSet<String>,
    expected: usize,
    handled: Arc<AtomicUsize>,
) -> anyhow::Result<Seen> {
    let mut seen = Seen::default();
    while seen.ended.len() < expected {
        let event = match tokio::time::timeout(STALL, stream.next()).await {
            Ok(Some(event)) => event.context("the event stream failed")?,
            Ok(None) => anyhow::bail!(
                "the event stream ended after {} of {expected} turns",
                seen.ended.len()
            ),
            Err(_) => anyhow::bail!(
                "no event for {STALL:?}: {} of {expected} turns handled",
                seen.ended.len()
            ),
        };
        if !agents.contains(&event.agent_id) {
            continue;
        }
        seen.events += 1;
        if event.kind != "run_finished" || event.text == "interrupted" {
            continue;
        }
        let at = Instant::now();
        // The first end counts; a second would be a turn handled twice,
        // which the message's own record (not this bench) is the judge of.
        seen.ended.entry(event.message_id).or_insert(Ended {
            at,
            stamped_ms: event.at_ms,
            outcome: event.text,
        });
        handled.store(seen.ended.len(), Ordering::Relaxed);
    }
    Ok(seen)
}
