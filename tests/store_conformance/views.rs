//! The reads an operator's `GetAgent` and a page of `ListAgents` make in
//! one go: they answer what the single reads answer, in the order asked.

use holarchy::api::read_model::ReadModel;
use holarchy_actors::{Batch, MemoryStore, Reads, Store, Write};
use holarchy_supervision::{AgentId, TokenUsage, WorkItemId, WorkItemRecord, WorkStatus};

use crate::fixtures::*;
use crate::harness::Harness;

fn item(owner: AgentId, status: WorkStatus) -> WorkItemRecord {
    WorkItemRecord {
        id: WorkItemId::generate(),
        owner_agent_id: owner,
        objective: "ship it".into(),
        status,
        plan: Vec::new(),
        created_at_ms: 1,
        updated_at_ms: 1,
    }
}

pub async fn an_agent_view_and_a_page_read_what_the_single_reads_do<H: Harness>() {
    let (_place, store) = H::create().await;
    let (a, b, c) = (public("a"), public("b"), public("c"));
    for agent in [&a, &b, &c] {
        store.commit(created(agent)).expect("creates");
    }
    let usage = TokenUsage {
        prompt_tokens: 7,
        completion_tokens: 3,
        cached_tokens: 1,
    };
    store
        .commit(
            Batch::new()
                .write(Write::PutWait(timer(a.id, 50)))
                .write(Write::PutWait(trigger(a.id, [3; 32])))
                .write(Write::PutWorkItem(item(a.id, WorkStatus::Active)))
                .write(Write::PutWorkItem(item(b.id, WorkStatus::Done)))
                .write(Write::AddUsage {
                    agent_id: a.id,
                    usage,
                }),
        )
        .expect("puts");

    let view = ReadModel::agent_view(&*store, a.id)
        .expect("reads")
        .expect("a is there");
    assert_eq!(
        view.record,
        Reads::agent(&*store, a.id).expect("reads").expect("a")
    );
    assert_eq!(view.usage, store.usage_of(a.id).expect("reads"));
    assert_eq!(view.usage.map(|u| u.turns), Some(1));
    assert_eq!(
        view.memory.expect("counted"),
        store.memory_size(a.id).expect("counted")
    );
    assert_eq!(view.waits, Reads::waits_of(&*store, a.id).expect("reads"));
    assert_eq!(view.waits.len(), 2);
    assert_eq!(
        view.work_items,
        Reads::work_items_of(&*store, a.id).expect("reads")
    );
    // An agent that never took a turn has no usage, and nothing of a's.
    let quiet = ReadModel::agent_view(&*store, b.id)
        .expect("reads")
        .expect("b is there");
    assert_eq!(quiet.usage, None);
    assert_eq!(quiet.usage, store.usage_of(b.id).expect("reads"));
    assert!(quiet.waits.is_empty());
    assert_eq!(
        quiet.work_items,
        Reads::work_items_of(&*store, b.id).expect("reads")
    );
    assert_eq!(quiet.work_items.len(), 1);
    assert!(ReadModel::agent_view(&*store, AgentId::generate())
        .expect("reads")
        .is_none());

    let page = ReadModel::beside(&*store, &[c.id, a.id, b.id]).expect("reads");
    let single = |id| {
        (
            Reads::waits_of(&*store, id).expect("reads"),
            Reads::work_items_of(&*store, id).expect("reads"),
        )
    };
    assert_eq!(page, vec![single(c.id), single(a.id), single(b.id)]);
    assert_eq!(page[1].0.len(), 2, "a's waits, in the place a was asked");
    assert_eq!(page[2].1.len(), 1, "b's work item");
    assert!(ReadModel::beside(&*store, &[]).expect("reads").is_empty());
}
