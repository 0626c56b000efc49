//! What was durable before a crash is there after it; a clean close keeps
//! everything committed; grouped commits refuse one batch, not its group.

use std::sync::Arc;

use holarchy::api::read_model::ReadModel;
use holarchy_actors::{Batch, Reads, Store, StoreError, Write};
use holarchy_supervision::{LifecycleState, MessageStatus};

use crate::fixtures::*;
use crate::harness::Harness;

pub async fn durable_writes_survive_a_crash<H: Harness>() {
    let (mut place, store) = H::create().await;
    let agents: Vec<_> = (0..50).map(|i| public(&format!("d{i}"))).collect();
    let mut queued = Vec::new();
    for agent in &agents {
        let m = message(agent.id, MessageStatus::Queued, Some("once"));
        store
            .commit(created(agent).put_queued(m.clone()))
            .expect("commits");
        queued.push(m);
    }
    Store::durable(&*store).await.expect("flushes");
    H::crash(&mut place, store).await;

    let store = H::reopen(&place).await;
    for (agent, m) in agents.iter().zip(&queued) {
        assert_eq!(
            Reads::agent(&*store, agent.id).expect("reads"),
            Some(agent.clone())
        );
        assert_eq!(
            store.pending_messages(agent.id).expect("reads"),
            std::slice::from_ref(m)
        );
        assert_eq!(
            store
                .message_id_by_dedupe_key(agent.id, "once")
                .expect("reads"),
            Some(m.id)
        );
    }
    assert_eq!(store.events_after(0, 1000).expect("events").len(), 100);
    store
        .commit(noted(agents[0].id, 0))
        .expect("commits after the crash");
    ReadModel::durable(&*store).await.expect("flushes");
    let newest = store.events_after(100, 10).expect("events");
    assert_eq!(newest.len(), 1);
    assert_eq!(
        newest[0].cursor, 101,
        "the log goes on densely after a crash"
    );
    // So do the slot's numbers: one more than its last before the crash.
    let slot = agents[0].id.slot();
    let before = store
        .events_after(0, 100)
        .expect("events")
        .iter()
        .filter(|e| e.slot() == slot)
        .map(|e| e.seq)
        .max();
    assert_eq!(Some(newest[0].seq), before.map(|n| n + 1));
    H::close(store).await;
}

pub async fn a_clean_close_keeps_everything_committed<H: Harness>() {
    let (place, store) = H::create().await;
    let agent = public("kept");
    store
        .commit(created(&agent))
        .expect("commits, no flush asked");
    H::close(store).await;
    let store = H::reopen(&place).await;
    assert_eq!(Reads::agent(&*store, agent.id).expect("reads"), Some(agent));
    assert_eq!(store.events_after(0, 10).expect("events").len(), 1);
    H::close(store).await;
}

pub async fn a_refused_batch_in_a_group_leaves_the_others_applied<H: Harness>() {
    let (_place, store) = H::create().await;
    let taken = public("taken");
    store.commit(created(&taken)).expect("creates");
    let mut commits = tokio::task::JoinSet::new();
    for i in 0..32 {
        let store = Arc::clone(&store);
        // Every fourth asks for the taken name.
        let agent = if i % 4 == 0 {
            public("taken")
        } else {
            public(&format!("free{i}"))
        };
        commits.spawn(async move {
            let outcome = match store.commit_grouped(created(&agent)).await {
                Ok(durable) => durable.await,
                Err(err) => Err(err),
            };
            (agent, outcome)
        });
    }
    let mut landed = 0;
    while let Some(done) = commits.join_next().await {
        let (agent, outcome) = done.expect("a committer");
        if agent.name.as_deref() == Some("taken") {
            assert!(
                matches!(outcome, Err(StoreError::NameTaken(_))),
                "{outcome:?}"
            );
            assert_eq!(Reads::agent(&*store, agent.id).expect("reads"), None);
        } else {
            outcome.expect("a free name lands");
            assert_eq!(Reads::agent(&*store, agent.id).expect("reads"), Some(agent));
            landed += 1;
        }
    }
    assert_eq!(landed, 24);
    let events = store.events_after(0, 1000).expect("events");
    assert_eq!(events.len(), 25, "no event of a refused batch");
}

pub async fn a_batch_that_may_end_an_agent_moves_the_count<H: Harness>() {
    let (_place, store) = H::create().await;
    let agent = public("a");
    store.commit(created(&agent)).expect("creates");
    let before = store.agent_ends();
    store
        .commit(Batch::new().write(Write::PutAgent(in_state(&agent, LifecycleState::Paused))))
        .expect("pauses");
    assert_eq!(store.agent_ends(), before, "pausing ends no agent");
    store
        .commit(Batch::new().write(Write::PutAgent(in_state(&agent, LifecycleState::Archived))))
        .expect("archives");
    assert!(store.agent_ends() > before);
}
