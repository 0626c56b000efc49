//! The runtime in-process over the real sled store: supervision of agent
//! actors (one-for-one restarts within an intensity) and recovery of a turn
//! that a crash cut short.

use std::sync::Arc;
use std::time::{Duration, Instant};

use holarchy::store::sled_store::StoreConfig;
use holarchy::store::SledStore;
use holarchy_actors::{Batch, DeliverError, Runtime, RuntimeConfig, ScriptedBrain, Store, Write};
use holarchy_supervision::restart::RestartPolicy;
use holarchy_supervision::{
    AgentId, AgentRecord, EventKind, LifecycleState, MessageId, MessageRecord, MessageStatus,
    Preset, Provenance, RunId, RunOutcome,
};

async fn start(store: Arc<SledStore>, policy: RestartPolicy) -> Runtime {
    let config = RuntimeConfig {
        restart_policy: policy,
        ..RuntimeConfig::default()
    };
    Runtime::start(store, Arc::new(ScriptedBrain), config)
        .await
        .expect("runtime starts")
}

async fn until<F: FnMut() -> bool>(what: &str, mut check: F) {
    let started = Instant::now();
    while !check() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_agent_actor_is_restarted_and_keeps_working() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SledStore::open(dir.path(), &StoreConfig::default()).expect("store"));
    let runtime = start(store.clone(), RestartPolicy::default()).await;
    let id = runtime
        .create_agent("phoenix".into(), None)
        .await
        .expect("created");
    let first = runtime.ctx().directory.get(id).expect("running").actor;
    first.kill();
    until("a new actor", || {
        runtime
            .ctx()
            .directory
            .get(id)
            .is_some_and(|e| e.actor.get_id() != first.get_id())
    })
    .await;
    let snapshot = runtime.snapshot().await.expect("snapshot");
    assert_eq!(snapshot.restarts, 1);
    assert_eq!(snapshot.public_agents, 1);
    let delivered = runtime
        .send_message(id, "still there?".into(), None)
        .await
        .expect("delivered");
    until("the reply", || {
        store
            .message(id, delivered.message_id)
            .ok()
            .flatten()
            .is_some_and(|m| m.reply.as_deref() == Some("ack: still there?"))
    })
    .await;
    let events = store.events_after(0, 100).expect("events");
    assert!(events
        .iter()
        .any(|e| matches!(e.kind, EventKind::AgentRestarted { .. })));
    runtime.shutdown(Duration::from_secs(5)).await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_failing_past_the_restart_intensity_is_marked_failed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SledStore::open(dir.path(), &StoreConfig::default()).expect("store"));
    let policy = RestartPolicy {
        max_restarts: 2,
        period_ms: 60_000,
    };
    let runtime = start(store.clone(), policy).await;
    let id = runtime
        .create_agent("fragile".into(), None)
        .await
        .expect("created");
    for round in 0..3 {
        let actor = runtime.ctx().directory.get(id).expect("running").actor;
        actor.kill();
        if round < 2 {
            until("a restart", || {
                runtime
                    .ctx()
                    .directory
                    .get(id)
                    .is_some_and(|e| e.actor.get_id() != actor.get_id())
            })
            .await;
        }
    }
    until("the agent marked failed", || {
        store
            .agent(id)
            .ok()
            .flatten()
            .is_some_and(|a| a.state == LifecycleState::Failed)
    })
    .await;
    assert!(runtime.ctx().directory.get(id).is_none());
    let snapshot = runtime.snapshot().await.expect("snapshot");
    assert_eq!((snapshot.restarts, snapshot.given_up), (2, 1));
    let refused = runtime.send_message(id, "hello?".into(), None).await;
    assert!(
        matches!(
            refused,
            Err(DeliverError::NotRunning {
                state: "failed",
                ..
            })
        ),
        "{refused:?}"
    );
    runtime.shutdown(Duration::from_secs(5)).await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_cut_short_by_a_crash_is_run_again_on_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let agent_id = AgentId::generate();
    let message_id = MessageId::generate();
    let lost_run = RunId::generate();
    {
        // The store as a crash mid-turn leaves it: the message is Handling.
        let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("store");
        let record = AgentRecord {
            id: agent_id,
            name: Some("interrupted".into()),
            profile: Preset::PublicNamed.profile(),
            lineage_parent_agent_id: None,
            supervisor_agent_id: None,
            state: LifecycleState::Active,
            created_at_ms: 1,
            updated_at_ms: 1,
        };
        let message = MessageRecord {
            id: message_id,
            agent_id,
            provenance: Provenance::Operator,
            body: "again".into(),
            dedupe_key: None,
            status: MessageStatus::Handling { run_id: lost_run },
            reply: None,
            attempts: 1,
            created_at_ms: 1,
        };
        store
            .commit(
                Batch::new()
                    .write(Write::CreateAgent(record))
                    .write(Write::PutMessage(message)),
            )
            .expect("commit");
        store.durable().await.expect("durable");
        store.close().await;
    }
    let store = Arc::new(SledStore::open(dir.path(), &StoreConfig::default()).expect("store"));
    let runtime = start(store.clone(), RestartPolicy::default()).await;
    until("the message handled again", || {
        store
            .message(agent_id, message_id)
            .ok()
            .flatten()
            .is_some_and(|m| matches!(m.status, MessageStatus::Handled { .. }))
    })
    .await;
    let message = store
        .message(agent_id, message_id)
        .expect("read")
        .expect("present");
    assert_eq!(message.attempts, 2);
    assert_eq!(message.reply.as_deref(), Some("ack: again"));
    assert_ne!(message.status.run_id(), Some(lost_run));
    let snapshot = runtime.snapshot().await.expect("snapshot");
    assert_eq!(
        (snapshot.recovered_agents, snapshot.interrupted_runs),
        (1, 1)
    );
    store.durable().await.expect("durable");
    let events = store.events_after(0, 100).expect("events");
    assert!(events.iter().any(|e| matches!(
        e.kind,
        EventKind::RunFinished { run_id, outcome: RunOutcome::Interrupted, .. } if run_id == lost_run
    )));
    runtime.shutdown(Duration::from_secs(5)).await;
    store.close().await;
}
