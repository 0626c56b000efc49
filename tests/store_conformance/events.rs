//! The event log: dense cursors in commit order, read by page, visible
//! once durable.

use std::sync::Arc;

use holarchy::api::read_model::ReadModel;
use holarchy_actors::{Batch, Store};
use holarchy_supervision::{AgentId, AgentRecord, EventKind};

use crate::fixtures::*;
use crate::harness::Harness;

fn cursors(events: &[holarchy_supervision::Event]) -> Vec<u64> {
    events.iter().map(|e| e.cursor).collect()
}

pub async fn cursors_are_dense_and_in_commit_order<H: Harness>() {
    let (_place, store) = H::create().await;
    let agent = public("a");
    store.commit(created(&agent)).expect("creates");
    for n in 0..20 {
        store.commit(noted(agent.id, n)).expect("commits");
    }
    ReadModel::durable(&*store).await.expect("flushes");
    let events = store.events_after(0, 1000).expect("events");
    assert_eq!(cursors(&events), (1..=21).collect::<Vec<_>>());
    assert!(matches!(events[0].kind, EventKind::AgentCreated { .. }));
    for (n, event) in events[1..].iter().enumerate() {
        assert_eq!(event.agent_id, Some(agent.id));
        match &event.kind {
            EventKind::MessageQueued { message_id, .. } => {
                assert_eq!(message_id.as_u128(), n as u128 + 1, "in commit order");
            }
            other => panic!("unexpected event {other:?}"),
        }
    }
}

pub async fn a_page_starts_after_its_cursor<H: Harness>() {
    let (_place, store) = H::create().await;
    let agent = public("a");
    let mut batch = created(&agent);
    for n in 0..9 {
        batch.events.extend(noted(agent.id, n).events);
    }
    store
        .commit(batch)
        .expect("commits one batch of ten events");
    ReadModel::durable(&*store).await.expect("flushes");
    assert_eq!(
        cursors(&store.events_after(3, 4).expect("events")),
        [4, 5, 6, 7]
    );
    assert_eq!(
        cursors(&store.events_after(8, 100).expect("events")),
        [9, 10]
    );
    assert!(store.events_after(10, 100).expect("events").is_empty());
    assert!(store.events_after(1_000, 100).expect("events").is_empty());
}

pub async fn the_watermark_follows_durable_events<H: Harness>() {
    let (_place, store) = H::create().await;
    let mut watermark = store.event_watermark();
    let before = *watermark.borrow_and_update();
    assert_eq!(before, 0, "an empty log");
    let agent = public("a");
    store.commit(created(&agent)).expect("creates");
    store.commit(noted(agent.id, 0)).expect("commits");
    ReadModel::durable(&*store).await.expect("flushes");
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while *watermark.borrow_and_update() < 2 {
            watermark.changed().await.expect("the store is open");
        }
    })
    .await
    .expect("the watermark reaches the newest durable event");
    let newest = store.events_after(1, 10).expect("events");
    assert_eq!(cursors(&newest), [2]);
}

pub async fn grouped_commits_keep_each_batch_s_events_together<H: Harness>() {
    let (_place, store) = H::create().await;
    let agents: Vec<_> = (0..16).map(|i| public(&format!("g{i}"))).collect();
    for agent in &agents {
        store.commit(created(agent)).expect("creates");
    }
    let mut tasks = tokio::task::JoinSet::new();
    for agent in agents.clone() {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            for round in 0..8 {
                let mut batch = Batch::new();
                for n in 0..3 {
                    batch.events.extend(noted(agent.id, round * 3 + n).events);
                }
                let durable = store.commit_grouped(batch).await.expect("applies");
                durable.await.expect("flushes");
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("a committer");
    }
    let events = store.events_after(16, 10_000).expect("events");
    assert_eq!(events.len(), 16 * 8 * 3);
    assert_eq!(
        cursors(&events),
        (17..=16 + 16 * 8 * 3).collect::<Vec<u64>>()
    );
    // Each batch's three events are consecutive and in its own order:
    // they are one agent's, so one slot's (a group orders its events by
    // slot, each slot's as made).
    for run in events.chunks(3) {
        let agent = run[0].agent_id;
        let ids: Vec<u128> = run
            .iter()
            .map(|e| {
                assert_eq!(e.agent_id, agent, "a batch's events stay together");
                match &e.kind {
                    EventKind::MessageQueued { message_id, .. } => message_id.as_u128(),
                    other => panic!("unexpected event {other:?}"),
                }
            })
            .collect();
        assert_eq!(ids[1], ids[0] + 1);
        assert_eq!(ids[2], ids[0] + 2);
        assert_eq!((ids[0] - 1) % 3, 0, "a batch starts at its first event");
    }
    // A page may start anywhere, inside whatever the store kept together.
    for after in (16..16 + 16 * 8 * 3).step_by(7) {
        let page = store.events_after(after, 5).expect("events");
        let end = (after + 5).min(16 + 16 * 8 * 3);
        assert_eq!(cursors(&page), (after + 1..=end).collect::<Vec<u64>>());
    }
}

/// Each slot's numbers as the log gives them, in cursor order.
fn numbers_by_slot(
    events: &[holarchy_supervision::Event],
) -> std::collections::BTreeMap<holarchy_supervision::Slot, Vec<u64>> {
    let mut by_slot = std::collections::BTreeMap::<_, Vec<u64>>::new();
    for event in events {
        by_slot.entry(event.slot()).or_default().push(event.seq);
    }
    by_slot
}

pub async fn each_slot_numbers_its_events_densely_in_commit_order<H: Harness>() {
    let (_place, store) = H::create().await;
    // Two roots in different slots, a child in its root's, and events of
    // no agent (the first slot's).
    let slot = |n| holarchy_supervision::Slot::new(n).expect("a slot");
    let roots = [
        AgentRecord {
            id: AgentId::generate_in(slot(5)),
            ..public("r5")
        },
        AgentRecord {
            id: AgentId::generate_in(slot(900)),
            ..public("r900")
        },
    ];
    let child = AgentRecord {
        id: AgentId::generate_in(roots[0].id.slot()),
        ..child_of(roots[0].id)
    };
    for agent in roots.iter().chain([&child]) {
        store.commit(created(agent)).expect("creates");
    }
    // Grouped commits from several callers at once, so groups mix slots.
    let mut tasks = tokio::task::JoinSet::new();
    for agent in [roots[0].id, roots[1].id, child.id] {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            for n in 0..20 {
                let mut batch = noted(agent, n);
                batch
                    .events
                    .push((None, noted(agent, n).events[0].1.clone()));
                let durable = store.commit_grouped(batch).await.expect("applies");
                durable.await.expect("flushes");
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("a committer");
    }
    let events = store.events_after(0, 10_000).expect("events");
    assert_eq!(events.len(), 3 + 3 * 20 * 2);
    assert_eq!(
        cursors(&events),
        (1..=events.len() as u64).collect::<Vec<_>>()
    );
    let by_slot = numbers_by_slot(&events);
    assert_eq!(
        by_slot.keys().map(|s| s.get()).collect::<Vec<_>>(),
        [0, 5, 900],
        "a child is numbered in its root's slot"
    );
    for (slot, numbers) in &by_slot {
        assert_eq!(
            numbers,
            &(1..=numbers.len() as u64).collect::<Vec<_>>(),
            "slot {slot}: dense from 1, in cursor order"
        );
    }
    assert_eq!(by_slot[&slot(5)].len(), 2 + 40, "root and child together");
    // Each agent's own events stay in the order it committed them.
    for agent in [roots[0].id, roots[1].id, child.id] {
        let ids: Vec<u128> = events
            .iter()
            .filter(|e| e.agent_id == Some(agent))
            .filter_map(|e| match &e.kind {
                EventKind::MessageQueued { message_id, .. } => Some(message_id.as_u128()),
                _ => None,
            })
            .collect();
        assert_eq!(ids, (1..=20).collect::<Vec<u128>>());
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

pub async fn the_retention_removes_old_events_and_no_number_is_given_twice<H: Harness>() {
    let (mut place, store) = H::create().await;
    let slot = |n| holarchy_supervision::Slot::new(n).expect("a slot");
    let old = AgentRecord {
        id: AgentId::generate_in(slot(11)),
        ..public("old")
    };
    let new = AgentRecord {
        id: AgentId::generate_in(slot(12)),
        ..public("new")
    };
    store.commit(created(&old)).expect("creates");
    for n in 0..5 {
        store.commit(noted(old.id, n)).expect("commits");
    }
    ReadModel::durable(&*store).await.expect("flushes");
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let cutoff = now_ms();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    store.commit(created(&new)).expect("creates");
    store.commit(noted(new.id, 0)).expect("commits");
    ReadModel::durable(&*store).await.expect("flushes");

    let removed = H::trim_events(&store, cutoff, 1_000).expect("trims");
    assert_eq!(
        removed, 6,
        "the old agent's six events, made before the cutoff"
    );
    assert_eq!(
        cursors(&store.events_after(0, 100).expect("events")),
        [7, 8]
    );
    assert_eq!(
        H::trim_events(&store, cutoff, 1_000).expect("trims"),
        0,
        "nothing newer than the cutoff goes"
    );
    // Past every event: the newest run always stays.
    H::trim_events(&store, now_ms() + 60_000, 1_000).expect("trims");
    let kept = store.events_after(0, 100).expect("events");
    assert_eq!(kept.last().map(|e| e.cursor), Some(8));

    // After a crash, the cursor and the old agent's slot go on from where
    // they were, though none of the old agent's events is left.
    H::crash(&mut place, store).await;
    let store = H::reopen(&place).await;
    store.commit(noted(old.id, 9)).expect("commits");
    ReadModel::durable(&*store).await.expect("flushes");
    let newest = store.events_after(8, 10).expect("events");
    assert_eq!(
        newest.iter().map(|e| (e.cursor, e.seq)).collect::<Vec<_>>(),
        [(9, 7)],
        "cursor 9; the old slot's seventh number"
    );
    H::close(store).await;
}
