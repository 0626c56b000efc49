//! The event log's layout in its sled tree. A commit writes its events as
//! a few runs, each one value holding consecutive cursors and keyed by the
//! first of them (8 bytes, big-endian), instead of a key per event.
//!
//! Why: every sled insert rewrites a leaf of the tree and logs it, and a
//! scripted turn wrote five events among its nine keys. A group of turns
//! committed together now writes its events as one or a few inserts.
//!
//! A reader finds the run that holds a cursor as the last key at or before
//! it. Logs written one event per key (the first release) read the same
//! way: each of their values is a run of one.

use std::collections::VecDeque;

use holarchy_actors::StoreError;
use holarchy_supervision::{slot_of, AgentId, Event, EventCursor, EventKind, Slot};
use sled::Tree;

use super::codec::{append_event, decode_event_run, start_event_run, EventPlace};

const TREE: &str = "events";

/// A run is closed once it holds this many bytes: bounds what sled copies
/// when it rewrites the run's leaf and what a reader decodes to reach one
/// event in it.
const RUN_BYTES: usize = 8 * 1024;

/// A run: its first event's cursor, slot and number in that slot, and
/// its encoded value. In a run built [`Runs::per_slot`], every event is
/// of that slot, numbered on from that number.
#[derive(Debug)]
pub struct EncodedRun {
    pub first: EventCursor,
    pub slot: Slot,
    pub seq: u64,
    pub value: Vec<u8>,
}

impl EncodedRun {
    /// The key the sled tree keeps it under.
    pub fn key(&self) -> [u8; 8] {
        self.first.to_be_bytes()
    }
}

/// Builds the runs of one commit, in cursor order.
#[derive(Debug, Default)]
pub struct Runs {
    closed: Vec<EncodedRun>,
    open: Option<EncodedRun>,
    /// A run ends where the slot changes.
    per_slot: bool,
}

impl Runs {
    /// Runs of one slot each (the commit's events come ordered by slot,
    /// see [`crate::store::slots::log_order`]), for a store that keys its
    /// runs by slot.
    pub fn per_slot() -> Self {
        Self {
            per_slot: true,
            ..Self::default()
        }
    }

    /// Appends the event at `place`, one cursor after the previous one's.
    pub fn push(
        &mut self,
        place: EventPlace,
        at_ms: u64,
        agent_id: &Option<AgentId>,
        kind: &EventKind,
    ) -> Result<(), StoreError> {
        let slot = slot_of(*agent_id);
        if self.per_slot && self.open.as_ref().is_some_and(|run| run.slot != slot) {
            self.closed.extend(self.open.take());
        }
        let run = self.open.get_or_insert_with(|| EncodedRun {
            first: place.cursor,
            slot,
            seq: place.seq,
            value: start_event_run(),
        });
        append_event(TREE, &mut run.value, place, at_ms, agent_id, kind)?;
        if run.value.len() >= RUN_BYTES {
            self.closed.extend(self.open.take());
        }
        Ok(())
    }

    pub fn finish(mut self) -> Vec<EncodedRun> {
        self.closed.extend(self.open.take());
        self.closed
    }
}

/// A run as a store keyed by slot keeps it: its cursors, and the slot
/// and first number of its events, unless they were written before
/// events were numbered by slot.
#[derive(Debug)]
pub struct SlotRun {
    pub first: EventCursor,
    pub last: EventCursor,
    pub slot: Option<(Slot, u64)>,
    pub value: Vec<u8>,
}

/// Splits a run where its slot changes (a commit's run of a store that
/// does not key by slot holds several), each part one slot's events
/// numbered on from its first. A run from before slots stays whole.
pub fn split_by_slot(value: Vec<u8>) -> Result<Vec<SlotRun>, StoreError> {
    let events = decode_event_run(TREE, &value)?;
    let (Some(first), Some(last)) = (events.first(), events.last()) else {
        return Ok(Vec::new());
    };
    if events.iter().any(|event| event.seq == 0) {
        return Ok(vec![SlotRun {
            first: first.cursor,
            last: last.cursor,
            slot: None,
            value,
        }]);
    }
    let mut runs = Runs::per_slot();
    let mut previous: Option<&Event> = None;
    for event in &events {
        // A slot's numbers go on by one within a run; if not, a new run
        // starts there (a store never writes that, but a copy must keep
        // every number as it is).
        if previous.is_some_and(|p| p.slot() == event.slot() && p.seq + 1 != event.seq) {
            runs.closed.extend(runs.open.take());
        }
        let place = EventPlace {
            cursor: event.cursor,
            seq: event.seq,
        };
        runs.push(place, event.at_ms, &event.agent_id, &event.kind)?;
        previous = Some(event);
    }
    let runs = runs.finish();
    let ends: Vec<EventCursor> = runs
        .iter()
        .skip(1)
        .map(|run| run.first - 1)
        .chain(std::iter::once(last.cursor))
        .collect();
    Ok(runs
        .into_iter()
        .zip(ends)
        .map(|(run, last)| SlotRun {
            first: run.first,
            last,
            slot: Some((run.slot, run.seq)),
            value: run.value,
        })
        .collect())
}

/// Each slot's last number in the log's runs that start after cursor
/// `after` (a note's cursor ends a commit's runs); the log's last cursor
/// read. Runs from before slots number nothing and are not decoded, so
/// the first start after an upgrade reads an old log by its version bytes.
pub fn seqs_after(
    tree: &Tree,
    after: EventCursor,
    seqs: &mut super::slots::SlotSeqs,
) -> Result<EventCursor, StoreError> {
    let mut last = after;
    for run in tree.range(after.saturating_add(1).to_be_bytes()..) {
        let (key, value) = run.map_err(backend)?;
        last = last.max(key_cursor(&key)?);
        if value
            .first()
            .is_some_and(|version| *version < super::codec::EVENT_RUN_VERSION)
        {
            continue;
        }
        match decode_event_run(TREE, &value) {
            Ok(events) => {
                for event in events {
                    seqs.saw(event.slot(), event.seq);
                    last = last.max(event.cursor);
                }
            }
            // A run that does not decode numbers nothing anyone can read;
            // the start goes on (see `last_cursor`). Its slots' numbers may
            // be given again.
            Err(err @ StoreError::Corrupt { .. }) => {
                tracing::warn!(error = %err, "an event run does not decode; its slots' numbers are not read");
            }
            Err(err) => return Err(err),
        }
    }
    Ok(last)
}

/// Whether the oldest run is due for removal: all its events made before
/// `before_ms`, and it is not the newest run.
pub fn oldest_due(tree: &Tree, before_ms: u64) -> Result<bool, StoreError> {
    let (Some((first, value)), Some((newest, _))) = (
        tree.first().map_err(backend)?,
        tree.last().map_err(backend)?,
    ) else {
        return Ok(false);
    };
    if first == newest {
        return Ok(false);
    }
    let events = decode_event_run(TREE, &value)?;
    Ok(events.iter().all(|event| event.at_ms < before_ms))
}

/// Removes up to `limit` of the oldest runs whose events were all made
/// before `before_ms`, none past cursor `through` (the last note of each
/// slot's numbers: the numbers of what goes stay written there), and
/// never the newest run (the next cursor follows it). How many events
/// went.
pub fn trim(
    tree: &Tree,
    before_ms: u64,
    through: EventCursor,
    limit: usize,
) -> Result<u64, StoreError> {
    let newest = match tree.last().map_err(backend)? {
        Some((key, _)) => key_cursor(&key)?,
        None => return Ok(0),
    };
    let mut removed = 0;
    for run in tree.iter().take(limit) {
        let (key, value) = run.map_err(backend)?;
        let first = key_cursor(&key)?;
        if first >= newest {
            break;
        }
        let events = decode_event_run(TREE, &value)?;
        let done = events.last().is_some_and(|last| last.cursor <= through)
            && events.iter().all(|event| event.at_ms < before_ms);
        if !done {
            break;
        }
        tree.remove(&key).map_err(backend)?;
        removed += events.len() as u64;
    }
    Ok(removed)
}

fn key_cursor(key: &[u8]) -> Result<EventCursor, StoreError> {
    let bytes: [u8; 8] = key.try_into().map_err(|_| StoreError::Corrupt {
        tree: TREE,
        detail: format!("a key of {} bytes", key.len()),
    })?;
    Ok(u64::from_be_bytes(bytes))
}

/// The run that may hold `cursor` (key and value): the last one that
/// starts at or before it.
fn run_holding(
    tree: &Tree,
    cursor: EventCursor,
) -> Result<Option<(sled::IVec, sled::IVec)>, StoreError> {
    tree.range(..=cursor.to_be_bytes())
        .next_back()
        .transpose()
        .map_err(backend)
}

fn backend(err: sled::Error) -> StoreError {
    StoreError::Backend(err.to_string())
}

/// The highest cursor in the log, 0 when it is empty, or a cursor past it.
///
/// A last run that does not decode still bounds its cursors: every event
/// takes at least a byte after the version byte, so none is past its key
/// plus its length. New events then start after that bound, leaving a gap
/// (harmless to readers) rather than a daemon that cannot start or a
/// cursor used twice. A run of a version this build does not know stays an
/// error.
pub fn last_cursor(tree: &Tree) -> Result<EventCursor, StoreError> {
    let Some((key, value)) = tree.last().map_err(backend)? else {
        return Ok(0);
    };
    let first = key_cursor(&key)?;
    match decode_event_run(TREE, &value) {
        Ok(events) => Ok(events.last().map_or(first, |event| event.cursor)),
        Err(err @ StoreError::Corrupt { .. }) => {
            let past = first.saturating_add(value.len() as u64);
            tracing::warn!(error = %err, first, past, "the event log's last run does not decode; new events start past it");
            Ok(past)
        }
        Err(err) => Err(err),
    }
}

/// The event at `cursor`.
pub fn at(tree: &Tree, cursor: EventCursor) -> Result<Option<Event>, StoreError> {
    let Some((_, value)) = run_holding(tree, cursor)? else {
        return Ok(None);
    };
    Ok(decode_event_run(TREE, &value)?
        .into_iter()
        .find(|event| event.cursor == cursor))
}

/// The events with cursors after `after` and up to `upto`, in order. A run
/// that cannot be read is one error item; the events after it follow.
pub fn range(tree: &Tree, after: EventCursor, upto: EventCursor) -> Events {
    let first = after.saturating_add(1);
    let start = match run_holding(tree, first) {
        Ok(Some((key, _))) => key.to_vec(),
        Ok(None) => first.to_be_bytes().to_vec(),
        Err(err) => {
            return Events {
                runs: None,
                buffered: VecDeque::new(),
                after,
                upto,
                failed: Some(err),
            }
        }
    };
    Events {
        runs: (first <= upto).then(|| tree.range(start..=upto.to_be_bytes().to_vec())),
        buffered: VecDeque::new(),
        after,
        upto,
        failed: None,
    }
}

/// See [`range`].
pub struct Events {
    runs: Option<sled::Iter>,
    buffered: VecDeque<Event>,
    after: EventCursor,
    upto: EventCursor,
    failed: Option<StoreError>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field("after", &self.after)
            .field("upto", &self.upto)
            .finish_non_exhaustive()
    }
}

impl Iterator for Events {
    type Item = Result<Event, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(err) = self.failed.take() {
            return Some(Err(err));
        }
        loop {
            if let Some(event) = self.buffered.pop_front() {
                if event.cursor <= self.after {
                    continue;
                }
                if event.cursor > self.upto {
                    self.buffered.clear();
                    self.runs = None;
                    return None;
                }
                return Some(Ok(event));
            }
            let entry = self.runs.as_mut()?.next()?;
            match entry
                .map_err(backend)
                .and_then(|(_, value)| decode_event_run(TREE, &value))
            {
                Ok(events) => self.buffered.extend(events),
                Err(err) => return Some(Err(err)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use holarchy_supervision::{AgentId, Event, EventKind, MessageId, RunId, RunOutcome, Slot};

    use super::*;
    use crate::store::codec::encode;

    fn kind(i: u64) -> EventKind {
        EventKind::RunFinished {
            run_id: RunId::generate(),
            message_id: MessageId::generate(),
            outcome: if i.is_multiple_of(2) {
                RunOutcome::Completed
            } else {
                RunOutcome::Failed
            },
            detail: "x".repeat((i % 50) as usize),
        }
    }

    fn place(event: &Event) -> EventPlace {
        EventPlace {
            cursor: event.cursor,
            seq: event.seq,
        }
    }

    fn insert(tree: &Tree, runs: Vec<EncodedRun>) {
        for run in runs {
            tree.insert(run.key(), run.value).expect("inserts");
        }
    }

    /// An event as versions 1 and 2 wrote it.
    #[derive(serde::Serialize)]
    struct Legacy<'a> {
        cursor: EventCursor,
        at_ms: u64,
        agent_id: Option<AgentId>,
        kind: &'a EventKind,
    }

    fn legacy(event: &Event) -> Legacy<'_> {
        Legacy {
            cursor: event.cursor,
            at_ms: event.at_ms,
            agent_id: event.agent_id,
            kind: &event.kind,
        }
    }

    #[test]
    fn a_commit_s_runs_split_by_slot_keep_each_event_and_number() {
        let (a, b) = (AgentId::generate(), AgentId::generate());
        let mut ordered = [(Some(a), 1), (Some(b), 2), (Some(a), 3), (None, 4)];
        ordered.sort_by_key(|(agent, _)| slot_of(*agent));
        let mut seqs = crate::store::slots::SlotSeqs::default();
        let mut runs = Runs::default();
        let mut events = Vec::new();
        for (cursor, (agent_id, n)) in (10..).zip(ordered) {
            let event = Event {
                cursor,
                seq: seqs.take(slot_of(agent_id)),
                at_ms: n,
                agent_id,
                kind: kind(n),
            };
            runs.push(place(&event), event.at_ms, &event.agent_id, &event.kind)
                .expect("encodes");
            events.push(event);
        }
        let [run] = <[EncodedRun; 1]>::try_from(runs.finish()).expect("one mixed run");
        let split = split_by_slot(run.value).expect("splits");
        let slots: std::collections::BTreeSet<Slot> = events.iter().map(Event::slot).collect();
        assert_eq!(split.len(), slots.len(), "one run per slot");
        let mut read = Vec::new();
        for part in split {
            let (slot, seq) = part.slot.expect("numbered");
            let got = decode_event_run(TREE, &part.value).expect("decodes");
            assert!(got.iter().all(|e| e.slot() == slot));
            assert_eq!(
                got.first().map(|e| (e.cursor, e.seq)),
                Some((part.first, seq))
            );
            assert_eq!(got.last().map(|e| e.cursor), Some(part.last));
            read.extend(got);
        }
        assert_eq!(read, events);
    }

    fn db() -> (tempfile::TempDir, Tree) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sled::open(dir.path()).expect("opens");
        let tree = db.open_tree(TREE).expect("tree");
        (dir, tree)
    }

    #[test]
    fn a_run_reads_back_as_the_events_it_was_built_from() {
        let (_dir, tree) = db();
        let agent = Some(AgentId::generate());
        let events: Vec<Event> = (1..=3_000)
            .map(|cursor| Event {
                cursor,
                seq: cursor,
                at_ms: 1_000 + cursor,
                agent_id: if cursor.is_multiple_of(3) {
                    None
                } else {
                    agent
                },
                kind: kind(cursor),
            })
            .collect();
        let mut runs = Runs::default();
        for event in &events {
            runs.push(place(event), event.at_ms, &event.agent_id, &event.kind)
                .expect("encodes");
        }
        let runs = runs.finish();
        assert!(runs.len() > 1, "3,000 events make more than one run");
        assert!(runs.len() < 300, "and far fewer runs than events");
        insert(&tree, runs);
        let all: Vec<Event> = range(&tree, 0, 3_000).map(|e| e.expect("reads")).collect();
        assert_eq!(all, events);
        // Any window, starting and ending inside runs.
        for (after, upto) in [
            (0, 1),
            (17, 18),
            (100, 2_500),
            (2_999, 3_000),
            (3_000, 3_000),
        ] {
            let got: Vec<u64> = range(&tree, after, upto)
                .map(|e| e.expect("reads").cursor)
                .collect();
            assert_eq!(
                got,
                ((after + 1)..=upto).collect::<Vec<_>>(),
                "({after}, {upto}]"
            );
        }
        assert_eq!(
            at(&tree, 1_234).expect("reads"),
            Some(events[1_233].clone())
        );
        assert_eq!(at(&tree, 3_001).expect("reads"), None);
        assert_eq!(last_cursor(&tree).expect("reads"), 3_000);
    }

    #[test]
    fn a_log_of_one_event_per_key_reads_as_runs_of_one() {
        let (_dir, tree) = db();
        let events: Vec<Event> = (1..=5)
            .map(|cursor| Event {
                cursor,
                seq: 0,
                at_ms: cursor,
                agent_id: None,
                kind: kind(cursor),
            })
            .collect();
        for event in &events {
            // As the first release wrote an event: before slots.
            let value = encode(TREE, &legacy(event)).expect("encodes");
            tree.insert(event.cursor.to_be_bytes(), value)
                .expect("inserts");
        }
        // Then a commit in the new layout after them.
        let mut runs = Runs::default();
        for cursor in [6, 7] {
            let at = EventPlace {
                cursor,
                seq: cursor - 5,
            };
            runs.push(at, cursor, &None, &kind(cursor))
                .expect("encodes");
        }
        insert(&tree, runs.finish());
        let mut seqs = crate::store::slots::SlotSeqs::default();
        assert_eq!(seqs_after(&tree, 0, &mut seqs).expect("reads"), 7);
        assert_eq!(
            seqs.last(Slot::FIRST),
            2,
            "numbered from the first run with numbers"
        );
        let got: Vec<u64> = range(&tree, 2, 7)
            .map(|e| e.expect("reads").cursor)
            .collect();
        assert_eq!(got, vec![3, 4, 5, 6, 7]);
        assert_eq!(at(&tree, 4).expect("reads"), Some(events[3].clone()));
        assert_eq!(last_cursor(&tree).expect("reads"), 7);
    }

    #[test]
    fn a_run_from_before_slots_reads_numbered_zero_and_copies_whole() {
        let (_dir, tree) = db();
        let agent = Some(AgentId::generate());
        let events: Vec<Event> = (1..=4)
            .map(|cursor| Event {
                cursor,
                seq: 0,
                at_ms: cursor,
                agent_id: if cursor == 2 { None } else { agent },
                kind: kind(cursor),
            })
            .collect();
        // Version 2: events back to back, each without its number.
        let mut value = vec![2u8];
        for event in &events {
            bincode::serde::encode_into_std_write(
                legacy(event),
                &mut value,
                bincode::config::standard(),
            )
            .expect("encodes");
        }
        tree.insert(1u64.to_be_bytes(), value.clone())
            .expect("inserts");
        let read: Vec<Event> = range(&tree, 0, 4).map(|e| e.expect("reads")).collect();
        assert_eq!(read, events);
        let mut seqs = crate::store::slots::SlotSeqs::default();
        seqs_after(&tree, 0, &mut seqs).expect("reads");
        assert_eq!(
            seqs,
            crate::store::slots::SlotSeqs::default(),
            "nothing numbered"
        );
        let split = split_by_slot(value.clone()).expect("splits");
        assert_eq!(split.len(), 1, "an old run is copied whole");
        assert_eq!((split[0].first, split[0].last, split[0].slot), (1, 4, None));
        assert_eq!(split[0].value, value);
    }

    #[test]
    fn a_last_run_that_does_not_decode_still_bounds_the_cursors() {
        let (_dir, tree) = db();
        let mut runs = Runs::default();
        for cursor in 1..=3 {
            let at = EventPlace {
                cursor,
                seq: cursor,
            };
            runs.push(at, cursor, &None, &kind(cursor))
                .expect("encodes");
        }
        insert(&tree, runs.finish());
        let spoiled = vec![super::super::codec::EVENT_RUN_VERSION, 0xff, 0xff];
        tree.insert(4u64.to_be_bytes(), spoiled.clone())
            .expect("inserts");
        let past = last_cursor(&tree).expect("a bound, not an error");
        assert!(past >= 4 + spoiled.len() as u64 - 1, "{past}");
        // An unknown version is still refused.
        tree.insert(9u64.to_be_bytes(), vec![99u8, 0])
            .expect("inserts");
        assert!(matches!(
            last_cursor(&tree),
            Err(StoreError::UnsupportedVersion { .. })
        ));
    }

    #[test]
    fn an_event_borrowed_into_a_run_encodes_as_the_event_itself() {
        let event = Event {
            cursor: 42,
            seq: 3,
            at_ms: 7,
            agent_id: Some(AgentId::generate()),
            kind: kind(1),
        };
        let mut run = start_event_run();
        append_event(
            TREE,
            &mut run,
            place(&event),
            event.at_ms,
            &event.agent_id,
            &event.kind,
        )
        .expect("encodes");
        // The run's body is the bytes a version-1 value holds for the event.
        assert_eq!(run[1..], encode(TREE, &event).expect("encodes")[1..]);
    }
}
