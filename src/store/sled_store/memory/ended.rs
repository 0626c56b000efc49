//! What becomes of an agent's notes when the agent ends.

use holarchy_actors::{Store, Write};
use holarchy_supervision::LifecycleState;

use super::super::tests::{agent, created};
use super::super::StoreConfig;
use super::*;

#[tokio::test]
async fn no_note_is_kept_for_an_agent_that_has_ended_or_never_was() {
    let dir = tempfile::tempdir().expect("tmp");
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
    let mut record = agent("gone");
    store.commit(created(&record)).expect("created");
    record.state = LifecycleState::Archived;
    store
        .commit(holarchy_actors::Batch::new().write(Write::PutAgent(record.clone())))
        .expect("archived");
    for agent_id in [record.id, AgentId::generate()] {
        let draft = NoteDraft {
            agent_id,
            key: None,
            text: "too late".into(),
            tags: Vec::new(),
        };
        assert!(matches!(
            store.put_note(&draft, 1),
            Err(StoreError::Precondition(_))
        ));
        assert_eq!(store.note_count(agent_id).expect("count"), 0);
    }
}
