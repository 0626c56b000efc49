//! Events numbered within their slots: the order a commit gives its
//! events, and each slot's last number, which both stores keep beside
//! their cursors.
//!
//! Why by slot: a slot is the part of the agents (a tree always whole in
//! one, see [`Slot`]) that a cluster of daemons will hand to one owner, as
//! a sharded store hands out shards. Numbered densely within its slot, an
//! owner can write a slot's log alone and a reader can resume it by one
//! number, whoever wrote it before.
//!
//! A group of commits puts its events in the log by slot, each slot's in
//! the order they were made, so one slot's events of a group are
//! consecutive in cursors too: a store can keep them as one run per slot
//! (PostgreSQL keys its runs by slot and number). An agent's events are
//! always in one slot, so its own order is never changed.

use holarchy_actors::StoreError;
use holarchy_supervision::{slot_of, AgentId, EventCursor, EventKind, Slot};
use serde::{Deserialize, Serialize};

use super::codec::{decode, encode};

/// How many events a sled store writes between two notes of each slot's
/// last number: a start reads at most this many events to number on.
/// (Small in this crate's tests, so they reach it.)
pub const NOTE_EVERY: u64 = if cfg!(test) { 64 } else { 65_536 };

/// The note's key in the sled tree [`NOTE_TREE`].
pub const NOTE_KEY: &[u8] = b"seqs";
pub const NOTE_TREE: &str = "event_slots";

/// Each slot's last number as of a cursor, as a sled store notes it.
#[derive(Debug, Serialize, Deserialize)]
struct Note {
    through: EventCursor,
    lasts: Vec<u64>,
}

pub fn encode_note(through: EventCursor, seqs: &SlotSeqs) -> Result<Vec<u8>, StoreError> {
    encode(
        NOTE_TREE,
        &Note {
            through,
            lasts: seqs.lasts().to_vec(),
        },
    )
}

/// A note's cursor and numbers.
pub fn decode_note(bytes: &[u8]) -> Result<(EventCursor, SlotSeqs), StoreError> {
    let note: Note = decode(NOTE_TREE, bytes)?;
    let seqs = SlotSeqs::from_lasts(note.lasts).ok_or_else(|| StoreError::Corrupt {
        tree: NOTE_TREE,
        detail: "a note of each slot's last number without every slot".into(),
    })?;
    Ok((note.through, seqs))
}

/// One event of a group: which batch it came from, and the event.
pub type GroupEvent<'a> = (usize, &'a (Option<AgentId>, EventKind));

/// The events of a group's batches (each batch's in its order), in the
/// order the log takes them: by slot, then as made.
pub fn log_order<'a>(
    batches: impl Iterator<Item = &'a [(Option<AgentId>, EventKind)]>,
) -> Vec<GroupEvent<'a>> {
    let mut events: Vec<GroupEvent<'a>> = batches
        .enumerate()
        .flat_map(|(at, events)| events.iter().map(move |event| (at, event)))
        .collect();
    // Stable: a slot's events keep the order they were made in.
    events.sort_by_key(|(_, (agent_id, _))| slot_of(*agent_id));
    events
}

/// The last number given in each slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotSeqs(Box<[u64]>);

impl Default for SlotSeqs {
    fn default() -> Self {
        Self(vec![0; usize::from(Slot::COUNT)].into_boxed_slice())
    }
}

impl SlotSeqs {
    /// From each slot's last number, in slot order; `None` unless there
    /// is one for every slot.
    pub fn from_lasts(lasts: Vec<u64>) -> Option<Self> {
        (lasts.len() == usize::from(Slot::COUNT)).then(|| Self(lasts.into_boxed_slice()))
    }

    pub fn lasts(&self) -> &[u64] {
        &self.0
    }

    pub fn last(&self, slot: Slot) -> u64 {
        self.0[usize::from(slot.get())]
    }

    /// The next number in `slot`, taken.
    pub fn take(&mut self, slot: Slot) -> u64 {
        let last = &mut self.0[usize::from(slot.get())];
        *last += 1;
        *last
    }

    /// Gives back the last number taken in each of `taken` (a commit that
    /// did not apply), when nothing was taken since.
    pub fn give_back(&mut self, taken: &[Slot]) {
        for slot in taken {
            let last = &mut self.0[usize::from(slot.get())];
            *last = last.saturating_sub(1);
        }
    }

    /// Notes that `seq` was given in `slot` (reading a log back).
    pub fn saw(&mut self, slot: Slot, seq: u64) {
        let last = &mut self.0[usize::from(slot.get())];
        *last = (*last).max(seq);
    }
}

#[cfg(test)]
mod tests {
    use holarchy_supervision::{MessageId, RunId, RunOutcome};

    use super::*;

    fn kind(n: u64) -> EventKind {
        EventKind::RunFinished {
            run_id: RunId::generate(),
            message_id: MessageId::generate(),
            outcome: RunOutcome::Completed,
            detail: n.to_string(),
        }
    }

    #[test]
    fn a_group_is_ordered_by_slot_and_each_agent_keeps_its_order() {
        let slot = |n| Slot::new(n).expect("a slot");
        let (a, b) = (AgentId::generate_in(slot(7)), AgentId::generate_in(slot(3)));
        let child = AgentId::generate_in(a.slot());
        let first = vec![(Some(a), kind(1)), (Some(b), kind(2)), (None, kind(3))];
        let second = vec![
            (Some(child), kind(4)),
            (Some(b), kind(5)),
            (Some(a), kind(6)),
        ];
        let ordered: Vec<String> = log_order([first.as_slice(), second.as_slice()].into_iter())
            .into_iter()
            .map(|(at, (_, kind))| match kind {
                EventKind::RunFinished { detail, .. } => format!("{at}:{detail}"),
                _ => unreachable!(),
            })
            .collect();
        // Slot 0 (no agent), then 3 (b), then 7 (a and its child), each
        // slot's events in the order they were made.
        assert_eq!(ordered, ["0:3", "0:2", "1:5", "0:1", "1:4", "1:6"]);

        let mut seqs = SlotSeqs::default();
        assert_eq!((seqs.take(slot(3)), seqs.take(slot(3))), (1, 2));
        seqs.give_back(&[slot(3)]);
        assert_eq!(seqs.take(slot(3)), 2, "given back, taken again");
        seqs.saw(slot(9), 40);
        seqs.saw(slot(9), 12);
        assert_eq!(seqs.take(slot(9)), 41);
        assert_eq!(seqs.last(slot(0)), 0);
    }
}
