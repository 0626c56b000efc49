//! Reads of an agent's history past its queue.

use holarchy_actors::{Batch, Reads, Store, Write};
use holarchy_supervision::{MessageStatus, RunId};

use super::super::tests::{agent, created, message};
use super::super::{SledStore, StoreConfig};

/// `count` messages with `status`, bodies `prefix-0`.. in id order.
fn messages(
    store: &SledStore,
    agent_id: holarchy_supervision::AgentId,
    prefix: &str,
    count: usize,
    status: impl Fn() -> MessageStatus,
) {
    let mut batch = Batch::new();
    for n in 0..count {
        let mut m = message(agent_id, status(), None);
        m.body = format!("{prefix}-{n}");
        batch = batch.write(Write::PutMessage(m));
    }
    store.commit(batch).expect("commit");
}

fn bodies(store: &SledStore, agent_id: holarchy_supervision::AgentId, limit: usize) -> Vec<String> {
    store
        .last_settled_messages(agent_id, limit)
        .expect("read")
        .into_iter()
        .map(|m| m.body)
        .collect()
}

#[tokio::test]
async fn the_newest_settled_messages_are_found_behind_a_deep_queue() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
    let veteran = agent("veteran");
    store.commit(created(&veteran)).expect("create");
    let handled = || MessageStatus::Handled {
        run_id: RunId::generate(),
    };
    messages(&store, veteran.id, "old", 40, handled);
    // A queue deeper than any window a turn or a fork reads, newer than
    // every handled message, and one being handled at its head.
    messages(&store, veteran.id, "queued", 600, || MessageStatus::Queued);
    messages(&store, veteran.id, "handling", 1, || {
        MessageStatus::Handling {
            run_id: RunId::generate(),
        }
    });

    assert_eq!(
        bodies(&store, veteran.id, 3),
        ["old-37", "old-38", "old-39"]
    );
    let all = bodies(&store, veteran.id, 32);
    assert_eq!(all.len(), 32);
    assert_eq!(all.first().map(String::as_str), Some("old-8"));
    assert_eq!(all.last().map(String::as_str), Some("old-39"));
    // Fewer settled than asked: every one of them, oldest first.
    assert_eq!(bodies(&store, veteran.id, 512).len(), 40);
    assert_eq!(bodies(&store, veteran.id, 512)[0], "old-0");
}

#[tokio::test]
async fn a_message_settles_out_of_the_queue_into_the_history() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
    let agent_record = agent("worker");
    store.commit(created(&agent_record)).expect("create");
    let mut queued = message(agent_record.id, MessageStatus::Queued, None);
    queued.body = "later".into();
    store
        .commit(Batch::new().write(Write::PutMessage(queued.clone())))
        .expect("queue");
    assert!(bodies(&store, agent_record.id, 5).is_empty());
    queued.status = MessageStatus::Handled {
        run_id: RunId::generate(),
    };
    store
        .commit(Batch::new().write(Write::PutMessage(queued)))
        .expect("handled");
    assert_eq!(bodies(&store, agent_record.id, 5), ["later"]);
}
