//! Tests of the sled store against a temporary directory.

use holarchy_actors::{Reads, Store, Write};
use holarchy_supervision::{EventKind, MessageId, MessageRecord, MessageStatus, Provenance, RunId};

use super::*;

pub(super) fn agent(name: &str) -> AgentRecord {
    AgentRecord::public(name, 1)
}

/// An unnamed private child under `parent`.
fn private_child(parent: AgentId) -> AgentRecord {
    AgentRecord {
        name: None,
        profile: holarchy_supervision::Preset::PrivateChild.profile(),
        supervisor_agent_id: Some(parent),
        ..AgentRecord::public("child", 1)
    }
}

pub(super) fn message(
    agent_id: AgentId,
    status: MessageStatus,
    dedupe: Option<&str>,
) -> MessageRecord {
    MessageRecord {
        id: MessageId::generate(),
        agent_id,
        provenance: Provenance::Operator,
        body: "hi".into(),
        dedupe_key: dedupe.map(str::to_owned),
        status,
        reply: None,
        attempts: 0,
        created_at_ms: 1,
    }
}

/// Opens the store at `dir` once a raw sled handle just dropped there has
/// let go of the directory's lock: sled's own threads release it a moment
/// after the handle goes.
pub(super) fn open_after_raw(dir: &std::path::Path) -> SledStore {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match SledStore::open(dir, &StoreConfig::default()) {
            Ok(store) => return store,
            Err(err) if std::time::Instant::now() < deadline => {
                assert!(err.to_string().contains("lock"), "opens: {err}");
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(err) => panic!("the store stayed locked: {err}"),
        }
    }
}

pub(super) fn created(record: &AgentRecord) -> Batch {
    Batch::new()
        .write(Write::CreateAgent(record.clone()))
        .event(
            record.id,
            EventKind::AgentCreated {
                name: record.name.clone(),
                preset: None,
                lineage_parent_agent_id: None,
                supervisor_agent_id: None,
            },
        )
}

#[tokio::test]
async fn a_taken_name_fails_the_whole_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
    let first = agent("ops");
    store.commit(created(&first)).expect("first create");
    let second = agent("ops");
    assert!(matches!(store.commit(created(&second)), Err(StoreError::NameTaken(n)) if n == "ops"));
    assert_eq!(store.agent(second.id).expect("reads"), None);
    store.durable().await.expect("flushes");
    let events = store.events_after(0, 10).expect("reads events");
    assert_eq!(events.len(), 1, "the failed batch wrote no event");
    assert_eq!(events[0].cursor, 1);
}

#[tokio::test]
async fn pending_and_dedupe_indexes_follow_the_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
    let owner = agent("a");
    store.commit(created(&owner)).expect("create");
    let mut m = message(owner.id, MessageStatus::Queued, Some("k1"));
    store
        .commit(Batch::new().write(Write::PutMessage(m.clone())))
        .expect("put");
    assert_eq!(store.pending_messages(owner.id).expect("pending").len(), 1);
    assert_eq!(
        store
            .message_id_by_dedupe_key(owner.id, "k1")
            .expect("dedupe"),
        Some(m.id)
    );
    m.status = MessageStatus::Handled {
        run_id: RunId::generate(),
    };
    store
        .commit(Batch::new().write(Write::PutMessage(m.clone())))
        .expect("put");
    assert!(store
        .pending_messages(owner.id)
        .expect("pending")
        .is_empty());
    assert_eq!(
        store.list_messages(owner.id, None, 10).expect("list"),
        vec![m.clone()]
    );
    assert!(store
        .list_messages(owner.id, Some(m.id), 10)
        .expect("list")
        .is_empty());
}

#[tokio::test]
async fn run_starts_are_read_newest_first_within_the_scan_and_the_agent() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
    let (owner, other) = (agent("a"), agent("b"));
    store.commit(created(&owner)).expect("create");
    store.commit(created(&other)).expect("create");
    let run_at = |ms: u64| RunId::from_u128(u128::from(ms) << 80);
    let statuses = [
        MessageStatus::Handled { run_id: run_at(10) },
        MessageStatus::Failed { run_id: run_at(20) },
        MessageStatus::Cancelled,
        MessageStatus::Aborted { run_id: run_at(30) },
        MessageStatus::Handling { run_id: run_at(40) },
        MessageStatus::Queued,
    ];
    let mut batch = Batch::new();
    for status in statuses {
        batch = batch.write(Write::PutMessage(message(owner.id, status, None)));
    }
    let elsewhere = MessageStatus::Handled { run_id: run_at(50) };
    batch = batch.write(Write::PutMessage(message(other.id, elsewhere, None)));
    store.commit(batch).expect("put");

    assert_eq!(
        store.last_run_starts(owner.id, 100).expect("reads"),
        [40, 30, 20, 10]
    );
    // The scan counts messages, started or not: the newest three are the
    // queued one, the one in a turn and the aborted one.
    assert_eq!(store.last_run_starts(owner.id, 3).expect("reads"), [40, 30]);
    assert_eq!(store.last_run_starts(other.id, 100).expect("reads"), [50]);
}

#[tokio::test]
async fn events_become_visible_only_once_durable_and_survive_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
        for i in 0..5 {
            store
                .commit(created(&agent(&format!("a{i}"))))
                .expect("create");
        }
        store.durable().await.expect("flushes");
        let events = store.events_after(0, 100).expect("events");
        let cursors: Vec<_> = events.iter().map(|e| e.cursor).collect();
        assert_eq!(cursors, [1, 2, 3, 4, 5]);
        assert_eq!(store.events_after(3, 1).expect("events")[0].cursor, 4);
        store.close().await;
    }
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("reopens");
    store.commit(created(&agent("later"))).expect("create");
    store.durable().await.expect("flushes");
    let cursors: Vec<_> = store
        .events_after(4, 100)
        .expect("events")
        .iter()
        .map(|e| e.cursor)
        .collect();
    assert_eq!(cursors, [5, 6], "cursors continue densely after a reopen");
}

#[tokio::test]
async fn concurrent_waiters_share_flushes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SledStore::open(dir.path(), &StoreConfig::default()).expect("opens"));
    // 200 commits, then 200 waiters asking at once (a request is sent when
    // `durable` is called, not when awaited): whatever the machine's
    // speed, waiters that arrive while a flush runs share the next one.
    // Committing and waiting task by task instead measured the scheduler.
    for i in 0..200 {
        store
            .commit(created(&agent(&format!("n{i}"))))
            .expect("create");
    }
    let before = store.flushes();
    let waiters: Vec<_> = (0..200).map(|_| store.durable()).collect();
    for waiter in waiters {
        waiter.await.expect("durable");
    }
    let flushes = store.flushes() - before;
    assert!(flushes < 20, "200 waiters took {flushes} flushes");
    assert_eq!(
        store.list_agents(None, 1000, true).expect("list").len(),
        200
    );
}

#[tokio::test]
async fn output_reads_start_exactly_at_the_offset_asked_for() {
    use holarchy_supervision::{OutputChunk, Stream, TaskId};
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
    let task_id = TaskId::generate();
    for (offset, data) in [(0u64, "hello "), (6, "world"), (11, "!")] {
        let chunk = OutputChunk {
            offset,
            stream: Stream::Stdout,
            data: data.as_bytes().to_vec(),
        };
        store
            .commit(Batch::new().write(Write::PutOutput { task_id, chunk }))
            .expect("commit");
    }
    let read = store.output_after(task_id, 8, 1024).expect("read");
    assert_eq!(read[0].offset, 8);
    let text: Vec<u8> = read.into_iter().flat_map(|c| c.data).collect();
    assert_eq!(text, b"rld!");
    // The limit counts only the bytes returned.
    let first = store.output_after(task_id, 3, 3).expect("read");
    assert_eq!(
        (first.len(), first[0].data.as_slice()),
        (1, b"lo ".as_slice())
    );
    store
        .commit(Batch::new().write(Write::DropOutput { task_id, offset: 0 }))
        .expect("drop");
    let after_drop = store.output_after(task_id, 0, 1024).expect("read");
    assert_eq!(
        after_drop[0].offset, 6,
        "a dropped start shows as a later first offset"
    );
}

#[tokio::test]
async fn public_listings_skip_private_agents_and_full_ones_merge_both_in_id_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
    let parent = agent("parent");
    store.commit(created(&parent)).expect("parent");
    let mut public = vec![parent.id];
    let mut every = vec![parent.id];
    for i in 0..5 {
        let child = private_child(parent.id);
        store.commit(created(&child)).expect("private child");
        every.push(child.id);
        let other = agent(&format!("public-{i}"));
        public.push(other.id);
        every.push(other.id);
        store.commit(created(&other)).expect("public");
    }
    let first: Vec<_> = store
        .list_agents(None, 3, false)
        .expect("page")
        .iter()
        .map(|a| a.id)
        .collect();
    assert_eq!(first, public[..3]);
    let rest: Vec<_> = store
        .list_agents(Some(first[2]), 10, false)
        .expect("page")
        .iter()
        .map(|a| a.id)
        .collect();
    assert_eq!(rest, public[3..]);
    // Private and public records live in two trees; a full listing pages
    // through both in one id order.
    let mut listed = Vec::new();
    let mut after = None;
    loop {
        let page = store.list_agents(after, 4, true).expect("page");
        let Some(last) = page.last() else { break };
        after = Some(last.id);
        listed.extend(page.iter().map(|a| a.id));
    }
    assert_eq!(listed, every);
}

#[tokio::test]
async fn worktrees_are_indexed_until_removed_and_projections_survive_reopen() {
    use holarchy_supervision::workspace::{Projection, Worktree};
    use holarchy_supervision::{TaskId, TaskKind, TaskRecord, TaskStatus};

    let dir = tempfile::tempdir().expect("tempdir");
    let owner = agent("lead");
    let id = TaskId::generate();
    let kind = TaskKind::ChildAgent {
        child_agent_id: AgentId::generate(),
    };
    let mut task = TaskRecord {
        worktree: Some(Worktree::for_task(
            "/repo/.git".into(),
            "abc".into(),
            std::path::Path::new("/wt"),
            id,
        )),
        ..TaskRecord::running(id, owner.id, kind, "work".into(), 1)
    };
    let projection = Projection::confined(owner.id, "repo".into(), "/r".into(), "/r/s".into(), 1);
    {
        let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
        store
            .commit(
                created(&owner)
                    .write(Write::PutTask(task.clone()))
                    .write(Write::PutWorkspaces(projection.clone())),
            )
            .expect("commit");
        task.status = TaskStatus::Stopped;
        store
            .commit(Batch::new().write(Write::PutTask(task.clone())))
            .expect("end");
        // Ended, its worktree still on disk: still indexed for the sweep.
        let indexed = store.worktree_tasks().expect("index");
        assert_eq!(indexed, [task.clone()]);
        store.durable().await.expect("flushes");
        store.close().await;
    }
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("reopens");
    assert_eq!(store.workspaces(owner.id).expect("reads"), Some(projection));
    assert_eq!(store.task(id).expect("reads"), Some(task.clone()));
    if let Some(worktree) = task.worktree.as_mut() {
        worktree.removed = true;
    }
    store
        .commit(Batch::new().write(Write::PutTask(task)))
        .expect("removed");
    assert!(store.worktree_tasks().expect("index").is_empty());
}

#[tokio::test]
async fn turn_usage_is_summed_per_agent_in_the_batch_of_the_turn_and_survives_reopen() {
    use holarchy_supervision::{TokenUsage, UsageTotals};
    let dir = tempfile::tempdir().expect("tempdir");
    let one = agent("one");
    let two = agent("two");
    let turn = |prompt: u64| TokenUsage {
        prompt_tokens: prompt,
        completion_tokens: 10,
        cached_tokens: prompt / 2,
    };
    let ended = |agent_id: AgentId, usage: TokenUsage| {
        Batch::new()
            .write(Write::AddUsage { agent_id, usage })
            .event(
                agent_id,
                EventKind::TurnUsage {
                    run_id: RunId::generate(),
                    prompt_tokens: usage.prompt_tokens,
                    completion_tokens: usage.completion_tokens,
                    cached_tokens: usage.cached_tokens,
                },
            )
    };
    {
        let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
        store.commit(created(&one)).expect("create");
        store.commit(created(&two)).expect("create");
        assert_eq!(store.usage_of(one.id).expect("read"), None);
        // Two turns of one agent in one transaction (a group) add up too.
        let mut both = ended(one.id, turn(100));
        let second = ended(one.id, turn(40));
        both.writes.extend(second.writes);
        both.events.extend(second.events);
        store.commit(both).expect("two turns");
        store
            .commit_grouped(ended(two.id, turn(7)))
            .await
            .expect("grouped")
            .await
            .expect("durable");
        store.close().await;
    }
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("reopens");
    assert_eq!(
        store.usage_of(one.id).expect("read"),
        Some(UsageTotals {
            tokens: TokenUsage {
                prompt_tokens: 140,
                completion_tokens: 20,
                cached_tokens: 70
            },
            turns: 2
        })
    );
    assert_eq!(
        store.usage_of(two.id).expect("read").map(|u| u.turns),
        Some(1)
    );
    let kinds: Vec<&str> = store
        .events_after(0, 100)
        .expect("events")
        .iter()
        .map(|e| e.kind.name())
        .collect();
    assert_eq!(kinds.iter().filter(|k| **k == "turn_usage").count(), 3);
}

#[test]
fn the_turn_usage_event_is_the_last_variant_so_older_logs_still_decode() {
    // bincode writes a variant by its index: every variant before it keeps
    // its number, and logs written before it decode as they did.
    let event = EventKind::TurnUsage {
        run_id: RunId::generate(),
        prompt_tokens: 1,
        completion_tokens: 2,
        cached_tokens: 3,
    };
    let bytes = crate::store::codec::encode(EVENTS, &event).expect("encodes");
    assert_eq!(bytes[1], 17, "TurnUsage is variant 17, after Decided (16)");
}

#[tokio::test]
async fn a_store_of_the_old_layout_opens_with_every_agent_where_it_belongs() {
    use crate::store::codec::encode_agent;

    let dir = tempfile::tempdir().expect("tempdir");
    let public = agent("lead");
    let child = private_child(public.id);
    // Written as a store of the old layout held them: every record in
    // `agents`, public ids in the `public` index.
    {
        let db = sled::Config::new().path(dir.path()).open().expect("sled");
        let records = db.open_tree(AGENTS).expect("tree");
        for record in [&public, &child] {
            let value = encode_agent(AGENTS, record).expect("encodes");
            records.insert(record.id.to_bytes(), value).expect("insert");
        }
        db.open_tree("public")
            .expect("tree")
            .insert(public.id.to_bytes(), &[] as &[u8])
            .expect("insert");
        db.open_tree(NAMES)
            .expect("tree")
            .insert("lead", &public.id.to_bytes())
            .expect("insert");
        db.flush().expect("flush");
    }

    let store = open_after_raw(dir.path());
    assert_eq!(store.agent(public.id).expect("reads"), Some(public.clone()));
    assert_eq!(store.agent(child.id).expect("reads"), Some(child.clone()));
    let listed: Vec<_> = store
        .list_agents(None, 10, false)
        .expect("page")
        .into_iter()
        .map(|a| a.id)
        .collect();
    assert_eq!(listed, [public.id]);
    let mut recovered: Vec<_> = store
        .recovery_input()
        .expect("reads")
        .agents
        .into_iter()
        .map(|a| a.id)
        .collect();
    recovered.sort();
    assert_eq!(recovered, [public.id, child.id]);
    // A name the old store held is still taken.
    assert!(matches!(
        store.commit(created(&agent("lead"))),
        Err(StoreError::NameTaken(_))
    ));
    // And the moved agent takes new writes in its new tree.
    let ended = AgentRecord {
        state: holarchy_supervision::LifecycleState::Archived,
        ..public.clone()
    };
    store
        .commit(Batch::new().write(Write::PutAgent(ended.clone())))
        .expect("put");
    assert_eq!(store.agent(public.id).expect("reads"), Some(ended));
    store.close().await;
}

mod grouped;

#[tokio::test]
async fn only_an_archived_agent_is_deleted_and_its_name_is_free_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
    let delete = |record: &AgentRecord| Batch::new().write(Write::DeleteAgent(record.clone()));
    let mut ops = agent("ops");
    store.commit(created(&ops)).expect("create");
    let refused = store.commit(delete(&ops));
    assert!(
        matches!(refused, Err(StoreError::Precondition(_))),
        "{refused:?}"
    );
    assert!(store.agent(ops.id).expect("reads").is_some());

    ops.state = holarchy_supervision::LifecycleState::Archived;
    store
        .commit(Batch::new().write(Write::PutAgent(ops.clone())))
        .expect("archived");
    store.commit(delete(&ops)).expect("deleted");
    assert_eq!(store.agent(ops.id).expect("reads"), None);
    assert_eq!(store.agent_id_by_name("ops").expect("reads"), None);
    store
        .commit(created(&agent("ops")))
        .expect("the name is free");
    // Gone, so not archived: a second delete changes nothing.
    assert!(matches!(
        store.commit(delete(&ops)),
        Err(StoreError::Precondition(_))
    ));
    assert!(store.agent_id_by_name("ops").expect("reads").is_some());
}

/// Each slot's numbers, from the store's log.
fn slot_numbers(store: &SledStore) -> std::collections::BTreeMap<u16, Vec<u64>> {
    let mut by_slot = std::collections::BTreeMap::<u16, Vec<u64>>::new();
    for event in store.events_after(0, 100_000).expect("events") {
        by_slot
            .entry(event.slot().get())
            .or_default()
            .push(event.seq);
    }
    by_slot
}

#[tokio::test]
async fn slot_numbers_go_on_from_the_last_note_and_the_log_after_it() {
    use crate::store::slots::{decode_note, NOTE_EVERY, NOTE_KEY, NOTE_TREE};
    let dir = tempfile::tempdir().expect("tempdir");
    let agents: Vec<AgentRecord> = (0..7).map(|i| agent(&format!("n{i}"))).collect();
    let note = |dir: &std::path::Path| {
        let db = sled::open(dir).expect("opens");
        let bytes = db
            .open_tree(NOTE_TREE)
            .expect("tree")
            .get(NOTE_KEY)
            .expect("reads")
            .expect("a note");
        decode_note(&bytes).expect("decodes")
    };
    {
        let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
        for round in 0..NOTE_EVERY / 4 {
            for agent in &agents {
                let batch = if round == 0 {
                    created(agent)
                } else {
                    Batch::new().event(
                        agent.id,
                        EventKind::AgentRestarted {
                            reason: "test".into(),
                        },
                    )
                };
                store.commit(batch).expect("commits");
            }
        }
        store.durable().await.expect("flushes");
        store.close().await;
    }
    // A note was written on the way, in the commit that reached it.
    let (noted, _) = note(dir.path());
    assert!(
        (NOTE_EVERY..NOTE_EVERY / 4 * 7).contains(&noted),
        "noted through {noted}"
    );
    // And once more at the reopen.
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("reopens");
    let before = slot_numbers(&store);
    for agent in &agents {
        store
            .commit(Batch::new().event(
                agent.id,
                EventKind::AgentRestarted {
                    reason: "test".into(),
                },
            ))
            .expect("commits");
    }
    store.durable().await.expect("flushes");
    let after = slot_numbers(&store);
    for (slot, numbers) in &after {
        assert_eq!(
            numbers,
            &(1..=numbers.len() as u64).collect::<Vec<_>>(),
            "slot {slot}"
        );
        let had = before.get(slot).map_or(0, Vec::len);
        assert!(numbers.len() > had, "slot {slot} went on after the reopen");
    }
    store.close().await;
    drop(store);
    let (through, seqs) = note(dir.path());
    assert_eq!(
        through,
        NOTE_EVERY / 4 * 7,
        "noted through the log's end at the reopen"
    );
    for agent in &agents {
        let slot = agent.id.slot();
        assert_eq!(seqs.last(slot), before[&slot.get()].len() as u64);
    }
    // A start trusts the note and reads only the log after it.
    let mut bumped = seqs.clone();
    let slot = agents[0].id.slot();
    bumped.saw(slot, seqs.last(slot) + 1_000);
    {
        let db = sled::open(dir.path()).expect("opens");
        let value = crate::store::slots::encode_note(through + 7, &bumped).expect("encodes");
        db.open_tree(NOTE_TREE)
            .expect("tree")
            .insert(NOTE_KEY, value)
            .expect("writes");
        db.flush().expect("flushes");
    }
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("reopens");
    store
        .commit(Batch::new().event(
            agents[0].id,
            EventKind::AgentRestarted {
                reason: "test".into(),
            },
        ))
        .expect("commits");
    store.durable().await.expect("flushes");
    let newest = store.events_after(through + 7, 10).expect("events");
    assert_eq!(
        newest.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [seqs.last(slot) + 1_001]
    );
}
