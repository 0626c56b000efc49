//! The `WatchEvents` stream: durable events after a cursor, read from the
//! store in pages and, when followed, woken by each flush that moves the
//! durable watermark.
//!
//! The stream is polled by the gRPC response itself, with no task or
//! channel between the store and the encoder. Why: a task handing events
//! over a channel one at a time spent tokio's cooperative budget on every
//! send and receive, so each side yielded after 128 events and waited for
//! its next turn on run queues shared with every call in flight; under
//! load the followed stream fell seconds behind. Polled in place, one
//! wake-up of the response carries as many events as the encoder takes
//! (a page at a time), and nothing waits but the watermark.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use holarchy_supervision::{AgentId, EventCursor};
use tokio::sync::watch;
use tonic::Status;

use crate::api::budget;
use crate::api::convert::{self, ApiError};
use crate::api::pb;
use crate::api::read_model::ReadModel;

/// Events read from the store per page: also the most a stream holds
/// converted and not yet sent.
const PAGE: usize = 512;

/// What a watch is asked for.
#[derive(Debug, Clone)]
pub(super) struct Watch {
    pub(super) after: EventCursor,
    /// Only this agent's events.
    pub(super) agent: Option<AgentId>,
    /// Only the events of this namespace's agents.
    pub(super) namespace: String,
    /// The caller acts for every namespace (the machine's operators):
    /// it also sees the events of deleted agents, whose namespace is gone
    /// with their records.
    pub(super) global: bool,
    /// Keep going once caught up, until the client leaves or the daemon
    /// shuts down.
    pub(super) follow: bool,
}

/// A watch's state between two items.
struct Follower {
    store: Arc<dyn ReadModel>,
    watch: Watch,
    watermark: watch::Receiver<EventCursor>,
    shutdown: watch::Receiver<bool>,
    /// Converted events of the last page, not yet sent.
    ready: VecDeque<pb::Event>,
    /// Nothing more will be read: send what is ready, then end.
    last_page: bool,
    /// Whether each agent met is the watch's namespace's.
    mine: HashMap<AgentId, bool>,
}

/// The most agents a watch remembers the namespace of; past it the
/// memory starts again.
const MAX_REMEMBERED: usize = 10_000;

/// The stream of events `watch` asks for.
pub(super) fn stream(
    store: Arc<dyn ReadModel>,
    watch: Watch,
    shutdown: watch::Receiver<bool>,
) -> impl futures::Stream<Item = Result<pb::Event, Status>> + Send {
    let follower = Follower {
        watermark: store.event_watermark(),
        store,
        watch,
        shutdown,
        ready: VecDeque::new(),
        last_page: false,
        mine: HashMap::new(),
    };
    futures::stream::unfold(follower, |mut follower| async move {
        let next = follower.next().await?;
        Some((next, follower))
    })
}

impl Follower {
    /// Whether events of `agent` are for this watch's namespace. Events
    /// of no agent are the default namespace's. Those of an agent whose
    /// record is gone (deleted) could be any namespace's: only a caller
    /// of every namespace sees them.
    fn mine(&mut self, agent: Option<AgentId>) -> bool {
        let default = self.watch.namespace == holarchy_supervision::namespace::DEFAULT;
        let Some(id) = agent else {
            return default;
        };
        if let Some(mine) = self.mine.get(&id) {
            return *mine;
        }
        let mine = match self.store.agent(id) {
            Ok(Some(record)) => record.namespace == self.watch.namespace,
            Ok(None) => self.watch.global,
            // Unreadable: not shown.
            Err(_) => false,
        };
        if self.mine.len() >= MAX_REMEMBERED {
            self.mine.clear();
        }
        self.mine.insert(id, mine);
        mine
    }

    /// The next item; None once the stream is over.
    async fn next(&mut self) -> Option<Result<pb::Event, Status>> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(Ok(event));
            }
            if self.last_page {
                return None;
            }
            // Mark the watermark seen before reading, so an event made
            // durable during the read still wakes the wait below.
            self.watermark.borrow_and_update();
            let page = match self.store.events_after(self.watch.after, PAGE) {
                Ok(page) => page,
                Err(err) => {
                    self.last_page = true;
                    return Some(Err(Status::from(ApiError::from(err))));
                }
            };
            let full = page.len() == PAGE;
            for event in &page {
                self.watch.after = event.cursor;
                if self
                    .watch
                    .agent
                    .is_some_and(|id| event.agent_id != Some(id))
                    || !self.mine(event.agent_id)
                {
                    continue;
                }
                // Each event is its own stream message: one over the
                // record budget goes out cut, with its full size.
                let mut event = convert::event(event);
                budget::bound(&mut event);
                self.ready.push_back(event);
            }
            if full {
                // A filtered watch may read page after page without a
                // match: give the worker back between pages.
                tokio::task::consume_budget().await;
                continue;
            }
            if !self.watch.follow {
                self.last_page = true;
                continue;
            }
            if !self.ready.is_empty() {
                continue;
            }
            // Caught up: wait for the next flush that moves the watermark.
            tokio::select! {
                changed = self.watermark.changed() => if changed.is_err() { return None },
                _ = self.shutdown.wait_for(|stop| *stop) => return None,
            }
        }
    }
}
