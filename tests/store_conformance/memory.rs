//! Agents' memory: notes kept, replaced by their key, paged, and bounded
//! per tree of agents; notes, handled messages and tool calls found by
//! search, each agent's its own; nothing found once deleted, nor for an
//! agent that has ended; a query is words, phrases and signs, bounded.
//!
//! A store's search may trail its writes briefly (the sled store indexes in
//! the background), so a check waits for what it expects, up to a deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use holarchy_actors::store::memory::MAX_NOTES_PER_TREE;
use holarchy_actors::{
    Batch, MemoryHit, MemoryKind, MemoryStore, NoteDraft, Recalled, RecalledToolCall, Store,
    StoreError, Write,
};
use holarchy_supervision::{
    AgentId, AgentRecord, EventKind, LifecycleState, MessageRecord, MessageStatus, RunId,
    RunOutcome,
};

use crate::fixtures::*;
use crate::harness::Harness;

/// How long a check waits for a search to catch up with the writes.
const CATCH_UP: Duration = Duration::from_secs(10);

fn draft(agent: AgentId, key: Option<&str>, text: &str) -> NoteDraft {
    NoteDraft {
        agent_id: agent,
        key: key.map(str::to_owned),
        text: text.into(),
        tags: vec!["fact".into()],
    }
}

/// A live public agent named `name`.
fn live(store: &impl Store, name: &str) -> AgentId {
    let record = public(name);
    store.commit(created(&record)).expect("created");
    record.id
}

/// Searches until exactly `want` hits come back, or the deadline passes;
/// the last answer either way.
async fn found(
    store: &impl MemoryStore,
    agent: AgentId,
    query: &str,
    kinds: &[MemoryKind],
    want: usize,
) -> Vec<MemoryHit> {
    let deadline = Instant::now() + CATCH_UP;
    loop {
        let hits = store
            .search_memory(agent, query, kinds, 10)
            .expect("searches");
        if hits.len() == want || Instant::now() > deadline {
            return hits;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A turn's handled message (with `reply`) and its `run_finished` event,
/// in one batch: what makes a message memory.
fn handled(agent: AgentId, body: &str, reply: Option<&str>) -> (MessageRecord, Batch) {
    let run_id = RunId::generate();
    let mut record = message(agent, MessageStatus::Handled { run_id }, None);
    record.body = body.into();
    record.reply = reply.map(str::to_owned);
    let finished = EventKind::RunFinished {
        run_id,
        message_id: record.id,
        outcome: RunOutcome::Completed,
        detail: String::new(),
    };
    let batch = Batch::new()
        .write(Write::PutMessage(record.clone()))
        .event(agent, finished);
    (record, batch)
}

/// A batch with one `tool_called` event of `agent`'s.
fn tool_called(agent: AgentId, tool: &str, input: &str, output: &str) -> Batch {
    Batch::new().event(
        agent,
        EventKind::ToolCalled {
            run_id: RunId::generate(),
            tool: tool.into(),
            input: input.into(),
            output: output.into(),
            is_error: false,
        },
    )
}

fn refused<T: std::fmt::Debug>(outcome: Result<T, StoreError>) -> String {
    match outcome {
        Err(StoreError::Precondition(why)) => why,
        other => panic!("not refused: {other:?}"),
    }
}

pub async fn a_note_is_replaced_by_its_key_and_read_back<H: Harness>() {
    let (_place, store) = H::create().await;
    let (alice, bob) = (live(&*store, "alice"), live(&*store, "bob"));
    let first = store
        .put_note(&draft(alice, Some("color"), "the sky is green"), 1)
        .expect("stored");
    let replaced = store
        .put_note(&draft(alice, Some("color"), "the sky is blue"), 2)
        .expect("replaced");
    assert_eq!(
        (replaced.id, replaced.created_at_ms, replaced.updated_at_ms),
        (first.id, 1, 2),
        "the same note, written again"
    );
    assert_eq!(replaced.text, "the sky is blue");
    let other = store
        .put_note(&draft(alice, None, "a note without a key"), 3)
        .expect("stored");
    assert_ne!(other.id, first.id);
    assert_eq!(store.note_count(alice).expect("count"), 2);
    assert_eq!(
        store.note(alice, first.id).expect("reads"),
        Some(replaced.clone())
    );
    assert_eq!(
        store.recall(alice, &first.id.to_string()).expect("recalls"),
        Some(Recalled::Note(replaced.clone()))
    );
    // Another agent's notes are not its own.
    assert_eq!(store.note(bob, first.id).expect("reads"), None);
    assert_eq!(
        store.recall(bob, &first.id.to_string()).expect("recalls"),
        None
    );
    assert_eq!(store.note_count(bob).expect("count"), 0);
    assert_eq!(
        store.recall(alice, "not an id").expect("recalls"),
        None,
        "an id of no memory form"
    );

    let blue = found(&*store, alice, "blue", &[MemoryKind::Note], 1).await;
    assert_eq!(blue.len(), 1, "{blue:?}");
    assert_eq!(blue[0].item, Recalled::Note(replaced));
    assert!(blue[0].snippet.contains("**blue**"), "{}", blue[0].snippet);
    assert!(
        found(&*store, alice, "green", &[], 0).await.is_empty(),
        "the replaced text is not found"
    );
}

pub async fn notes_are_paged_oldest_first<H: Harness>() {
    let (_place, store) = H::create().await;
    let (alice, bob) = (live(&*store, "alice"), live(&*store, "bob"));
    let mut written = Vec::new();
    for n in 0..5 {
        written.push(
            store
                .put_note(&draft(alice, None, &format!("note {n}")), n)
                .expect("stored"),
        );
        store
            .put_note(&draft(bob, None, &format!("bob's note {n}")), n)
            .expect("stored");
    }
    let first = store.notes(alice, None, 2).expect("a page");
    assert_eq!(first, written[..2]);
    let second = store.notes(alice, Some(first[1].id), 2).expect("a page");
    assert_eq!(second, written[2..4]);
    let last = store.notes(alice, Some(second[1].id), 2).expect("a page");
    assert_eq!(last, written[4..]);
    assert!(store
        .notes(alice, Some(last[0].id), 2)
        .expect("a page")
        .is_empty());
    assert_eq!(store.notes(alice, None, 100).expect("a page"), written);
}

/// Three agents of one tree (an operator's agent, one it spawned, and a
/// private child of that one) write at once: exactly
/// [`MAX_NOTES_PER_TREE`] notes are kept between them, however they race.
pub async fn a_tree_of_agents_keeps_a_bounded_number_of_notes<H: Harness>() {
    let (_place, store) = H::create().await;
    let root = live(&*store, "root");
    let spawned = AgentRecord {
        lineage_parent_agent_id: Some(root),
        ..public("spawned")
    };
    store.commit(created(&spawned)).expect("created");
    let private = child_of(spawned.id);
    store.commit(created(&private)).expect("created");
    let other = live(&*store, "other");

    for n in 0..3 {
        store
            .put_note(&draft(private.id, None, &format!("private {n}")), n)
            .expect("stored");
    }
    store
        .put_note(&draft(root, Some("kept"), "a keyed note"), 1)
        .expect("stored");
    // Two writers race until their tree is full.
    let writers: Vec<_> = [root, spawned.id]
        .into_iter()
        .enumerate()
        .map(|(w, agent)| {
            let store = Arc::clone(&store);
            tokio::task::spawn_blocking(move || {
                let mut kept = 0u64;
                loop {
                    let text = format!("writer {w} note {kept}");
                    match store.put_note(&draft(agent, None, &text), kept) {
                        Ok(_) => kept += 1,
                        Err(StoreError::Precondition(_)) => return kept,
                        Err(err) => panic!("a note failed: {err}"),
                    }
                }
            })
        })
        .collect();
    let mut kept = 4;
    for writer in writers {
        kept += writer.await.expect("a writer");
    }
    assert_eq!(kept, MAX_NOTES_PER_TREE, "the tree's notes, all writers'");
    for writer in [root, spawned.id, private.id] {
        let why = refused(store.put_note(&draft(writer, None, "one too many"), 9));
        assert!(why.contains(&root.to_string()), "{why}");
    }
    // Another tree has its own room; a note replaced by its key needs none.
    store
        .put_note(&draft(other, None, "another tree"), 9)
        .expect("stored");
    store
        .put_note(&draft(root, Some("kept"), "the keyed note, replaced"), 9)
        .expect("replaced");
    refused(store.put_note(&draft(root, Some("new"), "a new key is a new note"), 9));

    // An agent's memory deleted gives its notes back to its tree, once.
    assert_eq!(store.delete_memory(private.id).expect("deleted"), 3);
    assert_eq!(store.delete_memory(private.id).expect("again"), 0);
    assert_eq!(store.note_count(private.id).expect("count"), 0);
    for n in 0..3 {
        store
            .put_note(&draft(root, None, &format!("room again {n}")), 10)
            .expect("stored");
    }
    refused(store.put_note(&draft(root, None, "full again"), 11));
}

pub async fn no_note_is_kept_for_an_agent_that_has_ended_or_never_was<H: Harness>() {
    let (_place, store) = H::create().await;
    let record = public("gone");
    store.commit(created(&record)).expect("created");
    store
        .put_note(&draft(record.id, None, "remember the otters"), 1)
        .expect("stored");
    let (_, batch) = handled(record.id, "where are the otters?", Some("in the bay"));
    store.commit(batch).expect("committed");
    assert_eq!(
        found(&*store, record.id, "otters", &[], 2).await.len(),
        2,
        "found while live"
    );
    store
        .commit(Batch::new().write(Write::PutAgent(in_state(&record, LifecycleState::Archived))))
        .expect("archived");
    assert!(
        store
            .search_memory(record.id, "otters", &[], 10)
            .expect("searches")
            .is_empty(),
        "an agent that is not live has no memory, whatever is still indexed"
    );
    for agent in [record.id, AgentId::generate()] {
        refused(store.put_note(&draft(agent, None, "too late"), 2));
    }
    assert_eq!(store.note_count(AgentId::generate()).expect("count"), 0);
}

pub async fn notes_handled_messages_and_tool_calls_are_found<H: Harness>() {
    let (_place, store) = H::create().await;
    let (alice, bob) = (live(&*store, "alice"), live(&*store, "bob"));
    let note = store
        .put_note(
            &draft(
                alice,
                Some("birds"),
                "the pelicans nest on the northern cliffs",
            ),
            1,
        )
        .expect("stored");
    let (asked, batch) = handled(alice, "where do the gulls nest?", Some("on the cliffs"));
    store.commit(batch).expect("committed");
    // Still queued: work, not memory.
    let queued = message(alice, MessageStatus::Queued, None);
    let queued = MessageRecord {
        body: "the cliffs, queued".into(),
        ..queued
    };
    store
        .commit(Batch::new().write(Write::PutMessage(queued.clone())))
        .expect("committed");
    store
        .commit(tool_called(
            alice,
            "ReadFile",
            r#"{"path":"cliffs.txt"}"#,
            "the cliffs are steep",
        ))
        .expect("committed");
    store
        .commit(tool_called(bob, "ReadFile", "{}", "bob's cliffs"))
        .expect("committed");

    let all = found(&*store, alice, "cliffs", &[], 3).await;
    let mut kinds: Vec<&str> = all.iter().map(|hit| hit.item.kind().name()).collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["message", "note", "tool_call"], "{all:?}");

    let messages = found(&*store, alice, "cliffs", &[MemoryKind::Message], 1).await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(matches!(&messages[0].item, Recalled::Message(m) if m.id == asked.id));
    assert!(
        messages[0].snippet.contains("**cliffs**"),
        "{}",
        messages[0].snippet
    );
    assert_eq!(
        store
            .recall(alice, &queued.id.to_string())
            .expect("recalls"),
        None,
        "a queued message is not memory"
    );
    assert_eq!(
        store.recall(alice, &asked.id.to_string()).expect("recalls"),
        Some(messages[0].item.clone())
    );

    let calls = found(&*store, alice, "steep", &[MemoryKind::ToolCall], 1).await;
    let Some(Recalled::ToolCall(call)) = calls.first().map(|hit| hit.item.clone()) else {
        panic!("no tool call found: {calls:?}");
    };
    assert_eq!(
        (call.tool.as_str(), call.output.as_str()),
        ("ReadFile", "the cliffs are steep")
    );
    let id = RecalledToolCall::memory_id(call.cursor);
    assert_eq!(
        store.recall(alice, &id).expect("recalls"),
        Some(Recalled::ToolCall(call.clone()))
    );
    assert_eq!(
        store.recall(bob, &id).expect("recalls"),
        None,
        "another agent's call"
    );

    // Found by its key alone: no passage of the text to show.
    let keyed = found(&*store, alice, "birds", &[MemoryKind::Note], 1).await;
    assert_eq!(keyed.len(), 1, "{keyed:?}");
    assert_eq!(keyed[0].item, Recalled::Note(note));
    assert_eq!(keyed[0].snippet, "");
    // A kind named many times is named once.
    let repeated = vec![MemoryKind::ToolCall; 1_000];
    assert_eq!(
        store
            .search_memory(alice, "cliffs", &repeated, 10)
            .expect("searches")
            .len(),
        1
    );
    let bobs = found(&*store, bob, "cliffs", &[], 1).await;
    assert_eq!(bobs.len(), 1, "bob finds his own only: {bobs:?}");

    let size = store.memory_size(alice).expect("size");
    assert_eq!((size.notes, size.entries), (1, 3));
}

pub async fn a_deleted_memory_is_never_found<H: Harness>() {
    let (_place, store) = H::create().await;
    let (alice, bob) = (live(&*store, "alice"), live(&*store, "bob"));
    store
        .put_note(&draft(alice, Some("sea"), "blue whales"), 1)
        .expect("stored");
    let (_, batch) = handled(alice, "why is the sky blue?", None);
    store.commit(batch).expect("committed");
    store
        .commit(tool_called(alice, "Search", "blue", "blue light scatters"))
        .expect("committed");
    store
        .put_note(&draft(bob, None, "bob's blue secret"), 2)
        .expect("stored");
    assert_eq!(found(&*store, alice, "blue", &[], 3).await.len(), 3);

    assert_eq!(store.delete_memory(alice).expect("deleted"), 1);
    assert_eq!(store.delete_memory(alice).expect("again"), 0);
    assert!(store.notes(alice, None, 10).expect("a page").is_empty());
    assert_eq!(store.note_count(alice).expect("count"), 0);
    assert!(found(&*store, alice, "blue", &[], 0).await.is_empty());
    assert_eq!(
        found(&*store, bob, "blue", &[], 1).await.len(),
        1,
        "bob keeps his"
    );
    // The key is free again: a new note, counted from zero.
    let again = store
        .put_note(&draft(alice, Some("sea"), "red crabs"), 3)
        .expect("stored");
    assert_eq!(again.created_at_ms, 3);
    assert_eq!(store.note_count(alice).expect("count"), 1);
}

/// The query syntax is words, phrases and `+`/`-` only: what a query
/// parser would read as a range, a prefix or a fuzzy term is plain words
/// here, and only the first words of a long query count.
pub async fn a_query_is_words_phrases_and_signs_only<H: Harness>() {
    let (_place, store) = H::create().await;
    let agent = live(&*store, "searcher");
    store
        .put_note(&draft(agent, None, "hello world"), 1)
        .expect("stored");
    store
        .put_note(
            &draft(agent, Some("shift"), "the night shift is on call"),
            2,
        )
        .expect("stored");
    assert_eq!(found(&*store, agent, "hello", &[], 1).await.len(), 1);
    assert_eq!(found(&*store, agent, "night", &[], 1).await.len(), 1);
    let search = |query: &str| {
        store
            .search_memory(agent, query, &[], 10)
            .expect("searches")
    };
    assert!(search("text:[a TO z]").is_empty(), "a range matched");
    assert!(
        search("hel* wrld~2").is_empty(),
        "a prefix or fuzzy term matched"
    );
    assert_eq!(search(r#""night shift" +call -hello"#).len(), 1);
    assert_eq!(search("hello call").len(), 2, "any word");
    assert_eq!(search("+hello +call").len(), 0, "every + word");
    assert!(
        search("-hello").is_empty(),
        "nothing to match but exclusions"
    );
    assert!(
        search(r#""shift night""#).is_empty(),
        "a phrase's words come in order"
    );
    assert!(search("+ - \"\" ?!").is_empty(), "punctuation only");

    let filler = vec!["nothing"; holarchy::store::memory_index::MAX_QUERY_WORDS].join(" ");
    assert!(
        search(&format!("{filler} hello")).is_empty(),
        "words past the bound are ignored"
    );
    assert_eq!(search(&format!("hello {filler}")).len(), 1);
}

/// A search stops, with an error that says what to do, past its budget.
pub async fn a_search_past_its_budget_is_stopped<H: Harness>() {
    let (_place, store) = H::create().await;
    let agent = live(&*store, "busy");
    // Many entries with one word in common, in one commit.
    let mut batch = Batch::new();
    for i in 0..5_000 {
        let (_, one) = handled(agent, &format!("a common word, and {i} others"), None);
        batch.writes.extend(one.writes);
        batch.events.extend(one.events);
    }
    store.commit(batch).expect("committed");
    assert_eq!(found(&*store, agent, "common", &[], 10).await.len(), 10);
    let deadline = Instant::now() + CATCH_UP;
    while store.memory_size(agent).expect("size").entries < 5_000 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    match H::search_within(&*store, agent, "common", &[], 10, Duration::ZERO) {
        Err(StoreError::OverBudget(why)) => {
            assert!(why.contains("fewer or rarer words"), "{why}")
        }
        other => panic!("not stopped: {other:?}"),
    }
    let within = H::search_within(&*store, agent, "common", &[], 10, Duration::from_secs(5))
        .expect("within its budget");
    assert_eq!(within.len(), 10);
}
