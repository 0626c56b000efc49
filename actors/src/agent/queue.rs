//! An agent's queue of message ids. It counts itself into the daemon's
//! queued-messages gauge, the hot set (the agents with work, for
//! `holarchy top` and the longest-queue gauge) and the agent's live view
//! (`crate::live`) as it changes, and out of
//! both when the agent's state goes (a stop, a crash, an archive), so the
//! gauge is the sum of live agents' queues and the hot set holds what is
//! queued, without ever walking the agents.
//!
//! An empty queue holds no allocation: its ids live in a box made with
//! the first message and dropped with the last, so an idle agent's queue
//! is three pointers (the agent's id is in its live view).

use std::collections::VecDeque;
use std::sync::Arc;

use holarchy_supervision::MessageId;

use crate::live::LiveView;
use crate::metrics::QueueMeters;

#[derive(Debug)]
pub(super) struct Queue {
    #[allow(clippy::box_collection)] // 8 bytes on every idle agent, not 32
    ids: Option<Box<VecDeque<MessageId>>>,
    meters: Arc<QueueMeters>,
    /// Where the agent publishes its length (and its turns, see
    /// [`Queue::live`]).
    live: Arc<LiveView>,
}

impl Queue {
    pub(super) fn new(ids: Vec<MessageId>, meters: &Arc<QueueMeters>, live: Arc<LiveView>) -> Self {
        let agent = live.agent();
        let queue = Self {
            ids: (!ids.is_empty()).then(|| Box::new(ids.into())),
            meters: meters.clone(),
            live,
        };
        if !queue.is_empty() {
            queue.meters.depth.inc_by(queue.len() as i64);
            queue.meters.hot.queue_changed(agent, queue.len());
            queue.live.queue_changed(queue.len());
        }
        queue
    }

    /// The agent's published view, shared with its directory entry. The
    /// queue holds it so that an idle agent pays one pointer for it.
    pub(super) fn live(&self) -> &LiveView {
        &self.live
    }

    pub(super) fn len(&self) -> usize {
        self.ids.as_ref().map_or(0, |ids| ids.len())
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(super) fn contains(&self, id: &MessageId) -> bool {
        self.ids.as_ref().is_some_and(|ids| ids.contains(id))
    }

    fn ids_mut(&mut self) -> &mut VecDeque<MessageId> {
        self.ids.get_or_insert_with(Box::default)
    }

    /// Reports a change of `delta` messages, and lets the box go once empty.
    fn changed(&mut self, delta: i64) {
        if self.ids.as_ref().is_some_and(|ids| ids.is_empty()) {
            self.ids = None;
        }
        self.meters.depth.inc_by(delta);
        self.meters.hot.queue_changed(self.live.agent(), self.len());
        self.live.queue_changed(self.len());
    }

    pub(super) fn push_back(&mut self, id: MessageId) {
        self.ids_mut().push_back(id);
        self.changed(1);
    }

    pub(super) fn push_front(&mut self, id: MessageId) {
        self.ids_mut().push_front(id);
        self.changed(1);
    }

    pub(super) fn pop_front(&mut self) -> Option<MessageId> {
        let id = self.ids.as_mut()?.pop_front()?;
        self.changed(-1);
        Some(id)
    }

    pub(super) fn retain(&mut self, keep: impl FnMut(&MessageId) -> bool) {
        let Some(ids) = self.ids.as_mut() else {
            return;
        };
        let before = ids.len();
        ids.retain(keep);
        let removed = before - ids.len();
        if removed > 0 {
            self.changed(-(removed as i64));
        }
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        self.meters.depth.dec_by(self.len() as i64);
        self.meters.hot.forget(self.live.agent());
    }
}

#[cfg(test)]
mod tests {
    use holarchy_supervision::AgentId;

    use super::*;

    #[test]
    fn the_gauge_and_the_hot_set_follow_every_change_and_the_drop() {
        let meters = Arc::new(QueueMeters::default());
        let agent = AgentId::generate();
        let (a, b, c) = (
            MessageId::generate(),
            MessageId::generate(),
            MessageId::generate(),
        );
        let depth = || meters.depth.get();
        let hot_len = || meters.hot.agents().first().map(|h| h.queue_len);
        let live = Arc::new(LiveView::new(agent));
        let published = || {
            live.snapshot(holarchy_supervision::LifecycleState::Active)
                .queue_len
        };
        let mut queue = Queue::new(vec![a, b], &meters, live.clone());
        assert_eq!((depth(), hot_len(), published()), (2, Some(2), 2));
        queue.push_back(c);
        queue.push_front(a);
        assert_eq!((depth(), hot_len(), published()), (4, Some(4), 4));
        assert_eq!(queue.pop_front(), Some(a));
        queue.retain(|id| *id != b);
        assert_eq!((queue.len(), depth(), hot_len()), (2, 2, Some(2)));
        assert_eq!(published(), 2);
        while queue.pop_front().is_some() {}
        assert!(queue.ids.is_none(), "an empty queue keeps no allocation");
        // Emptied, with no turn: the agent leaves the hot set.
        assert_eq!((depth(), hot_len()), (0, None));
        queue.push_back(c);
        drop(queue);
        assert_eq!((depth(), hot_len()), (0, None));
    }

    #[test]
    fn an_idle_queue_is_small() {
        // The box's pointer, the meters' and the live view's (which holds
        // the agent's id).
        assert!(std::mem::size_of::<Queue>() <= 24);
    }
}
