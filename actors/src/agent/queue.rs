//! An agent's queue of message ids. It counts itself into the daemon's
//! queued-messages gauge as it changes, and out when the agent's state
//! goes (a stop, a crash, an archive), so the gauge is the sum of live
//! agents' queues without ever walking them.

use std::collections::VecDeque;

use holarchy_supervision::MessageId;
use prometheus_client::metrics::gauge::Gauge;

#[derive(Debug)]
pub(super) struct Queue {
    ids: VecDeque<MessageId>,
    depth: Gauge,
}

impl Queue {
    pub(super) fn new(ids: Vec<MessageId>, depth: &Gauge) -> Self {
        depth.inc_by(ids.len() as i64);
        Self {
            ids: ids.into(),
            depth: depth.clone(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.ids.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub(super) fn contains(&self, id: &MessageId) -> bool {
        self.ids.contains(id)
    }

    pub(super) fn push_back(&mut self, id: MessageId) {
        self.ids.push_back(id);
        self.depth.inc();
    }

    pub(super) fn push_front(&mut self, id: MessageId) {
        self.ids.push_front(id);
        self.depth.inc();
    }

    pub(super) fn pop_front(&mut self) -> Option<MessageId> {
        let id = self.ids.pop_front()?;
        self.depth.dec();
        Some(id)
    }

    pub(super) fn retain(&mut self, keep: impl FnMut(&MessageId) -> bool) {
        let before = self.ids.len();
        self.ids.retain(keep);
        self.depth.dec_by((before - self.ids.len()) as i64);
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        self.depth.dec_by(self.ids.len() as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gauge_follows_every_change_and_the_drop() {
        let depth = Gauge::default();
        let (a, b, c) = (
            MessageId::generate(),
            MessageId::generate(),
            MessageId::generate(),
        );
        let mut queue = Queue::new(vec![a, b], &depth);
        assert_eq!(depth.get(), 2);
        queue.push_back(c);
        queue.push_front(a);
        assert_eq!(depth.get(), 4);
        assert_eq!(queue.pop_front(), Some(a));
        queue.retain(|id| *id != b);
        assert_eq!((queue.len(), depth.get()), (2, 2));
        drop(queue);
        assert_eq!(depth.get(), 0);
    }
}
