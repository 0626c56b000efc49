//! Notes in the sled store: writes, keys, counts, bounds and searches.

use std::time::{Duration, Instant};

use holarchy_actors::{Store, Write};
use holarchy_supervision::{AgentRecord, EventKind, RunId, RunOutcome};

use super::super::tests::{agent, created, message, open_after_raw};
use super::super::StoreConfig;
use super::*;

fn draft(agent: AgentId, key: Option<&str>, text: &str) -> NoteDraft {
    NoteDraft {
        agent_id: agent,
        key: key.map(str::to_owned),
        text: text.into(),
        tags: vec!["fact".into()],
    }
}

/// A live agent in `store`.
async fn live(store: &SledStore, name: &str) -> AgentId {
    let record = agent(name);
    store.commit(created(&record)).expect("created");
    record.id
}

/// Polls a search until it finds `want` hits, or gives up at a deadline.
fn found(
    store: &SledStore,
    agent: AgentId,
    query: &str,
    kinds: &[MemoryKind],
    want: usize,
) -> Vec<MemoryHit> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let hits = store
            .search_memory(agent, query, kinds, 10)
            .expect("searches");
        if hits.len() == want || Instant::now() > deadline {
            return hits;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn text(hit: &MemoryHit) -> String {
    hit.item.text()
}

#[tokio::test(flavor = "multi_thread")]
async fn notes_are_replaced_by_key_ranked_isolated_and_deleted_with_their_agent() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
    let (alice, bob) = (live(&store, "alice").await, live(&store, "bob").await);
    let first = store
        .put_note(&draft(alice, Some("color"), "the sky is green"), 1)
        .expect("stored");
    let replaced = store
        .put_note(&draft(alice, Some("color"), "the sky is blue"), 2)
        .expect("replaced");
    assert_eq!((replaced.id, replaced.created_at_ms), (first.id, 1));
    store
        .put_note(&draft(alice, None, "blue blue blue whales"), 3)
        .expect("stored");
    store
        .put_note(&draft(bob, None, "bob's blue secret"), 4)
        .expect("stored");
    assert_eq!(store.note_count(alice).expect("count"), 2);

    let hits = found(&store, alice, "blue", &[], 2);
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert_eq!(text(&hits[0]), "blue blue blue whales", "ranked");
    assert!(hits[0].score > hits[1].score);
    assert!(hits[0].snippet.contains("**blue**"), "{}", hits[0].snippet);
    assert!(found(&store, alice, "green", &[], 0).is_empty(), "replaced");

    assert_eq!(store.delete_memory(alice).expect("deleted"), 2);
    assert_eq!(store.delete_memory(alice).expect("again"), 0);
    assert!(store.notes(alice, None, 10).expect("list").is_empty());
    assert!(found(&store, alice, "blue", &[], 0).is_empty());
    assert_eq!(found(&store, bob, "blue", &[], 1).len(), 1, "bob keeps his");
    // The key is free again: a new note, counted from zero.
    store
        .put_note(&draft(alice, Some("color"), "red"), 5)
        .expect("stored");
    assert_eq!(store.note_count(alice).expect("count"), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn handled_messages_are_found_from_the_event_log_and_rebuilt() {
    let dir = tempfile::tempdir().expect("tmp");
    let alice;
    {
        let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
        alice = live(&store, "alice").await;
        let run_id = RunId::generate();
        let mut handled = message(alice, MessageStatus::Handled { run_id }, None);
        handled.body = "where do the pelicans nest?".into();
        handled.reply = Some("on the northern cliffs".into());
        let queued = message(alice, MessageStatus::Queued, None);
        let finished = EventKind::RunFinished {
            run_id,
            message_id: handled.id,
            outcome: RunOutcome::Completed,
            detail: String::new(),
        };
        let batch = holarchy_actors::Batch::new()
            .write(Write::PutMessage(handled.clone()))
            .write(Write::PutMessage(queued))
            .event(alice, finished);
        store.commit(batch).expect("committed");
        store.durable().await.expect("durable");
        let hits = found(&store, alice, "cliffs", &[MemoryKind::Message], 1);
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert!(matches!(&hits[0].item, Recalled::Message(m) if m.id == handled.id));
        assert!(
            hits[0].snippet.contains("**cliffs**"),
            "{}",
            hits[0].snippet
        );
        assert!(found(&store, alice, "cliffs", &[MemoryKind::Note], 0).is_empty());
        // A kind named a hundred thousand times is one clause, and finds
        // what naming it once finds.
        let repeated = vec![MemoryKind::Message; 100_000];
        let hits = store
            .search_memory(alice, "cliffs", &repeated, 10)
            .expect("searches");
        assert_eq!(hits.len(), 1, "{hits:?}");
        store.close().await;
    }
    std::fs::remove_dir_all(index_dir(dir.path())).expect("index removed");
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("reopens");
    assert_eq!(found(&store, alice, "pelicans", &[], 1).len(), 1);
    // The queued message ("hi") was never handled: not memory yet.
    assert!(found(&store, alice, "hi", &[], 0).is_empty());
}

/// A turn's handled message and its `run_finished` event, in one commit.
fn handled(agent_id: AgentId, body: &str) -> holarchy_actors::Batch {
    let run_id = RunId::generate();
    let mut message = message(agent_id, MessageStatus::Handled { run_id }, None);
    message.body = body.into();
    let finished = EventKind::RunFinished {
        run_id,
        message_id: message.id,
        outcome: RunOutcome::Completed,
        detail: String::new(),
    };
    holarchy_actors::Batch::new()
        .write(Write::PutMessage(message))
        .event(agent_id, finished)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreadable_run_of_events_is_left_out_of_the_index() {
    let dir = tempfile::tempdir().expect("tmp");
    let alice;
    let last;
    {
        let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
        alice = live(&store, "alice").await;
        store
            .commit(handled(alice, "where do the pelicans nest?"))
            .expect("committed");
        store
            .commit(handled(alice, "what do the gulls eat?"))
            .expect("committed");
        store.durable().await.expect("durable");
        last = event_log::last_cursor(&store.events).expect("reads");
        store.close().await;
    }
    // The pelicans' run, the one before the last, no longer decodes.
    {
        let db = sled::open(dir.path()).expect("raw");
        let events = db.open_tree(EVENTS).expect("tree");
        let (key, _) = events
            .iter()
            .rev()
            .nth(1)
            .expect("two runs")
            .expect("reads");
        events
            .insert(
                key,
                vec![crate::store::codec::EVENT_RUN_VERSION, 0xff, 0xff],
            )
            .expect("spoiled");
        db.flush().expect("flushed");
    }
    std::fs::remove_dir_all(index_dir(dir.path())).expect("index removed");
    let store = open_after_raw(dir.path());
    assert_eq!(found(&store, alice, "gulls", &[], 1).len(), 1);
    assert!(found(&store, alice, "pelicans", &[], 0).is_empty());
    // The index has moved past the spoiled run, to the log's end.
    let meta = store.db.open_tree(MEMORY_META).expect("meta");
    let deadline = Instant::now() + Duration::from_secs(10);
    let indexed_upto = loop {
        let upto = meta
            .get(EVENTS)
            .expect("reads")
            .map(|b| u64::from_be_bytes(b.as_ref().try_into().expect("8 bytes")));
        if upto == Some(last) || Instant::now() > deadline {
            break upto;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(indexed_upto, Some(last));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lost_index_is_rebuilt_from_the_notes() {
    let dir = tempfile::tempdir().expect("tmp");
    let agent;
    {
        let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
        agent = live(&store, "otter-keeper").await;
        for n in 0..50 {
            store
                .put_note(
                    &draft(agent, None, &format!("note number{n} about otters")),
                    n,
                )
                .expect("stored");
        }
        assert_eq!(found(&store, agent, "otters", &[], 10).len(), 10);
        store.close().await;
    }
    std::fs::remove_dir_all(index_dir(dir.path())).expect("index removed");
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("reopens");
    assert_eq!(found(&store, agent, "number42", &[], 1).len(), 1);
    assert_eq!(found(&store, agent, "otters", &[], 10).len(), 10);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_keeps_a_bounded_number_of_notes() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
    let agent = live(&store, "full").await;
    // Cheaper than writing them all: the count is what is checked.
    store
        .memory
        .tree_counts
        .insert(agent.to_bytes(), &MAX_NOTES_PER_TREE.to_be_bytes())
        .expect("count set");
    assert!(matches!(
        store.put_note(&draft(agent, None, "one too many"), 1),
        Err(StoreError::Precondition(_))
    ));
}

/// An agent spawned by another (public or private, at any depth) keeps
/// notes against its tree's bound: a brain that spawns many agents gets no
/// more room than one.
#[tokio::test(flavor = "multi_thread")]
async fn spawned_agents_share_their_trees_bound_on_notes() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
    let root = live(&store, "root").await;
    let spawned = |name: &str, lineage: AgentId, supervisor: Option<AgentId>| {
        let record = AgentRecord {
            name: supervisor.is_none().then(|| name.to_owned()),
            lineage_parent_agent_id: Some(lineage),
            supervisor_agent_id: supervisor,
            ..agent(name)
        };
        store.commit(created(&record)).expect("created");
        record.id
    };
    let public = spawned("public-child", root, None);
    let private = spawned("private-grandchild", public, Some(public));
    let other = live(&store, "other").await;
    store
        .put_note(&draft(private, None, "the first note of the tree"), 1)
        .expect("stored");
    assert_eq!(store.note_count(private).expect("count"), 1);
    // Room for one more note in the whole tree.
    store
        .memory
        .tree_counts
        .insert(root.to_bytes(), &(MAX_NOTES_PER_TREE - 1).to_be_bytes())
        .expect("count set");
    store
        .put_note(&draft(public, None, "the last note the tree may keep"), 2)
        .expect("stored");
    for writer in [root, public, private] {
        assert!(
            matches!(
                store.put_note(&draft(writer, None, "one too many"), 3),
                Err(StoreError::Precondition(why)) if why.contains(&root.to_string())
            ),
            "{writer} wrote past its tree's bound"
        );
    }
    // Another tree has its own room; a replaced note needs none.
    store
        .put_note(&draft(other, None, "another tree"), 4)
        .expect("stored");
    store
        .put_note(&draft(private, Some("k"), "keyed"), 5)
        .expect_err("a new key is a new note");
    // An agent's memory deleted gives its notes back to its tree, once.
    store.delete_memory(private).expect("deleted");
    store.delete_memory(private).expect("again");
    assert_eq!(
        count_of(
            store
                .memory
                .tree_counts
                .get(root.to_bytes())
                .expect("reads")
        ),
        MAX_NOTES_PER_TREE - 1
    );
    store
        .put_note(&draft(root, None, "room again"), 6)
        .expect("stored");
}

/// The store's query syntax is words, phrases and `+`/`-` only: what
/// tantivy's parser reads as a range (which walks the whole term
/// dictionary, seconds of CPU for a kilobyte of them) is plain words here,
/// and only the first words of a long query count.
#[tokio::test(flavor = "multi_thread")]
async fn a_query_is_words_not_ranges_and_its_words_are_bounded() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
    let agent = live(&store, "searcher").await;
    store
        .put_note(&draft(agent, None, "hello world"), 1)
        .expect("stored");
    store
        .put_note(
            &draft(agent, Some("shift"), "the night shift is on call"),
            2,
        )
        .expect("stored");
    // The indexer may commit the notes in two batches: wait for both.
    assert_eq!(found(&store, agent, "hello", &[], 1).len(), 1, "indexed");
    assert_eq!(found(&store, agent, "shift", &[], 1).len(), 1, "indexed");
    let search = |query: &str| {
        store
            .search_memory(agent, query, &[], 10)
            .expect("searches")
    };

    assert!(search("text:[a TO z]").is_empty(), "a range matched");
    assert!(search("text:[* TO *] key:{a TO zzzz}").is_empty());
    assert!(
        search("hel* wrld~2").is_empty(),
        "a prefix or fuzzy term matched"
    );
    assert_eq!(search(r#""night shift" +call -hello"#).len(), 1);
    assert!(
        search(r#""shift night""#).is_empty(),
        "a phrase's words come in order"
    );

    let filler = vec!["nothing"; crate::store::memory_index::MAX_QUERY_WORDS].join(" ");
    assert!(
        search(&format!("{filler} hello")).is_empty(),
        "words past the bound are ignored"
    );
    assert_eq!(search(&format!("hello {filler}")).len(), 1);
}

/// A search stops, with an error that says what to do, once it has used
/// its budget of CPU.
#[tokio::test(flavor = "multi_thread")]
async fn a_search_past_its_cpu_budget_is_stopped() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
    let agent = live(&store, "busy").await;
    for i in 0..3000 {
        store
            .put_note(&draft(agent, None, &format!("common word {i}")), i)
            .expect("stored");
    }
    assert_eq!(found(&store, agent, "common", &[], 10).len(), 10, "indexed");
    let recall = |id: &str| store.recall(agent, id);
    let stopped = store
        .memory
        .index
        .search(agent, "common", &[], 10, &recall, Duration::ZERO);
    match stopped {
        Err(StoreError::OverBudget(why)) => assert!(why.contains("fewer or rarer words"), "{why}"),
        other => panic!("not stopped: {other:?}"),
    }
    let within = store
        .memory
        .index
        .search(agent, "common", &[], 10, &recall, Duration::from_secs(5))
        .expect("within its budget");
    assert_eq!(within.len(), 10);
}
