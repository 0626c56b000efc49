//! The runtime in-process over the real sled store: supervision of agent
//! actors (one-for-one restarts within an intensity), of private children
//! under their parents (`runtime/subtree.rs`), and recovery of a turn that
//! a crash cut short.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::until;
use holarchy::store::sled_store::StoreConfig;
use holarchy::store::SledStore;
use holarchy_actors::brain::{BrainFuture, TurnInput, TurnPlan};
use holarchy_actors::plane::spawn::{spawn_agent, SpawnRequest};
use holarchy_actors::protocol::NotRunning;
use holarchy_actors::{
    Batch, Brain, DeliverError, Reads, Runtime, RuntimeConfig, ScriptedBrain, Store, Write,
};
use holarchy_supervision::restart::RestartPolicy;
use holarchy_supervision::{
    AgentId, AgentRecord, EventKind, LifecycleState, MessageId, MessageRecord, MessageStatus,
    Preset, Provenance, RunId, RunOutcome,
};

#[path = "runtime/shutdown.rs"]
mod shutdown;
#[path = "runtime/subtree.rs"]
mod subtree;

async fn start(store: Arc<SledStore>, policy: RestartPolicy) -> Runtime {
    let config = RuntimeConfig {
        restart_policy: policy,
        ..RuntimeConfig::default()
    };
    Runtime::start(store, Arc::new(ScriptedBrain), config)
        .await
        .expect("runtime starts")
}

/// A runtime on a fresh store whose supervisors restart a child twice a
/// minute at most: the third failure is given up on.
async fn start_allowing_two_restarts() -> (tempfile::TempDir, Arc<SledStore>, Runtime) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SledStore::open(dir.path(), &StoreConfig::default()).expect("store"));
    let policy = RestartPolicy {
        max_restarts: 2,
        period_ms: 60_000,
    };
    let runtime = start(store.clone(), policy).await;
    (dir, store, runtime)
}

/// Opens a store the previous runtime of this process just let go of; its
/// last handles (aborted turn tasks) drop a moment after its shutdown.
async fn reopen(dir: &std::path::Path) -> Arc<SledStore> {
    let started = Instant::now();
    loop {
        match SledStore::open(dir, &StoreConfig::default()) {
            Ok(store) => return Arc::new(store),
            Err(err) => {
                assert!(started.elapsed() < Duration::from_secs(10), "store: {err}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
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
    let (_dir, store, runtime) = start_allowing_two_restarts().await;
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
                why: NotRunning::Ended(LifecycleState::Failed),
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
            ..public_record("interrupted")
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
    // sled lets go of its file lock from a background thread, a moment
    // after the last handle above dropped.
    let store = reopen(dir.path()).await;
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

/// Panics on "panic", never answers "hang", acknowledges anything else.
struct Unruly;

impl Brain for Unruly {
    fn name(&self) -> &'static str {
        "unruly"
    }

    fn decide(&self, input: TurnInput) -> BrainFuture {
        Box::pin(async move {
            match input.message.text.as_str() {
                "panic" => panic!("brain panicked on purpose"),
                "hang" => std::future::pending().await,
                other => Ok(TurnPlan {
                    reply: Some(format!("ok: {other}")),
                    ..TurnPlan::default()
                }),
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_or_hanging_turn_fails_and_the_agent_moves_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SledStore::open(dir.path(), &StoreConfig::default()).expect("store"));
    // Long enough that the panic hook can print a symbolized backtrace
    // (RUST_BACKTRACE=1, debug build, busy machine) before the deadline
    // would misreport the panicking turn as a hung one.
    let config = RuntimeConfig {
        turn_timeout: Duration::from_millis(2000),
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::start(store.clone(), Arc::new(Unruly), config)
        .await
        .expect("starts");
    let id = runtime
        .create_agent("unruly".into(), None)
        .await
        .expect("created");
    let mut sent = Vec::new();
    for body in ["panic", "hang", "fine"] {
        sent.push(
            runtime
                .send_message(id, body.into(), None)
                .await
                .expect("delivered")
                .message_id,
        );
    }
    until("every message finished", || {
        sent.iter().all(|m| {
            store
                .message(id, *m)
                .ok()
                .flatten()
                .is_some_and(|m| !m.status.is_pending())
        })
    })
    .await;
    let status = |m: MessageId| store.message(id, m).expect("read").expect("present").status;
    assert!(matches!(status(sent[0]), MessageStatus::Failed { .. }));
    assert!(matches!(status(sent[1]), MessageStatus::Failed { .. }));
    assert!(matches!(status(sent[2]), MessageStatus::Handled { .. }));
    store.durable().await.expect("durable");
    let details: Vec<String> = store
        .events_after(0, 100)
        .expect("events")
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::RunFinished {
                outcome: RunOutcome::Failed,
                detail,
                ..
            } => Some(detail),
            _ => None,
        })
        .collect();
    assert_eq!(details.len(), 2);
    assert!(details[0].contains("panicked"), "{details:?}");
    assert!(details[1].contains("deadline"), "{details:?}");
    assert_eq!(runtime.snapshot().await.expect("snapshot").busy_runs, 0);
    runtime.shutdown(Duration::from_secs(5)).await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_cancels_only_the_current_run_and_pauses_the_agent_across_a_restart() {
    use holarchy_actors::protocol::{Control, ControlError};
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SledStore::open(dir.path(), &StoreConfig::default()).expect("store"));
    let runtime = Runtime::start(store.clone(), Arc::new(Unruly), RuntimeConfig::default())
        .await
        .expect("starts");
    let id = runtime
        .create_agent("busy".into(), None)
        .await
        .expect("created");
    let hung = runtime
        .send_message(id, "hang".into(), None)
        .await
        .expect("delivered")
        .message_id;
    let mut run = None;
    until("the turn running", || {
        run = store
            .message(id, hung)
            .ok()
            .flatten()
            .and_then(|m| match m.status {
                MessageStatus::Handling { run_id } => Some(run_id),
                _ => None,
            });
        run.is_some()
    })
    .await;
    let run = run.expect("a run");
    let queued = runtime
        .send_message(id, "fine".into(), None)
        .await
        .expect("delivered")
        .message_id;

    let stale = runtime
        .control(
            id,
            Control::Abort {
                run_id: Some(RunId::generate()),
            },
        )
        .await;
    assert!(
        matches!(stale, Err(ControlError::StaleRun { .. })),
        "{stale:?}"
    );
    let done = runtime
        .control(id, Control::Abort { run_id: Some(run) })
        .await
        .expect("aborted");
    assert_eq!(
        (done.state, done.aborted_run),
        (LifecycleState::Paused, Some(run))
    );
    assert_eq!(
        store.message(id, hung).expect("read").expect("msg").status,
        MessageStatus::Aborted { run_id: run }
    );
    assert!(matches!(
        runtime.control(id, Control::Abort { run_id: None }).await,
        Err(ControlError::NoRun)
    ));
    let snapshot = runtime.agent_snapshot(id).expect("live");
    assert_eq!(
        (snapshot.current_run, snapshot.queue_len),
        (None, 1),
        "paused: the next message waits"
    );

    // Pause survives a restart, with the queue intact.
    runtime.shutdown(Duration::from_secs(5)).await;
    store.close().await;
    drop(runtime);
    drop(store);
    let store = reopen(dir.path()).await;
    let runtime = Runtime::start(store.clone(), Arc::new(Unruly), RuntimeConfig::default())
        .await
        .expect("starts");
    assert_eq!(
        store.agent(id).expect("read").expect("agent").state,
        LifecycleState::Paused
    );
    let snapshot = runtime.agent_snapshot(id).expect("live");
    assert_eq!(
        (snapshot.state, snapshot.queue_len),
        (LifecycleState::Paused, 1)
    );
    assert_eq!(
        store.message(id, hung).expect("read").expect("msg").status,
        MessageStatus::Aborted { run_id: run }
    );

    runtime.control(id, Control::Resume).await.expect("resumed");
    until("the queued message handled", || {
        store
            .message(id, queued)
            .ok()
            .flatten()
            .is_some_and(|m| m.reply.as_deref() == Some("ok: fine"))
    })
    .await;
    store.durable().await.expect("durable");
    let aborted = store.events_after(0, 100).expect("events").into_iter().any(|e| {
        matches!(e.kind, EventKind::RunFinished { run_id, outcome: RunOutcome::Aborted, ref detail, .. } if run_id == run && detail == "operator_aborted")
    });
    assert!(aborted);
    runtime.shutdown(Duration::from_secs(5)).await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forked_child_inherits_its_parents_work_and_recent_turns_and_a_fresh_one_does_not() {
    use holarchy_actors::plane::work;
    use holarchy_supervision::work::WorkUpdate;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SledStore::open(dir.path(), &StoreConfig::default()).expect("store"));
    let runtime = start(store.clone(), RestartPolicy::default()).await;
    let parent = runtime
        .create_agent("planner".into(), Some("we ship on friday".into()))
        .await
        .expect("created");
    let change = WorkUpdate {
        objective: Some("ship 1.0".into()),
        ..WorkUpdate::default()
    };
    work::update(runtime.ctx(), parent, change)
        .await
        .expect("work item");
    until("the first turn handled", || {
        store.list_messages(parent, None, 10).is_ok_and(|m| {
            m.iter()
                .any(|m| matches!(m.status, MessageStatus::Handled { .. }))
        })
    })
    .await;
    let profile = store.agent(parent).expect("read").expect("parent").profile;
    let spawn = |fork| SpawnRequest {
        fork,
        preset: Preset::PrivateChild,
        initial_message: Some("write the notes".into()),
        name: None,
        workspace_mode: Default::default(),
        root: None,
        role: None,
    };
    let forked = spawn_agent(runtime.ctx(), parent, profile, spawn(true))
        .await
        .expect("forked")
        .agent_id;
    let fresh = spawn_agent(runtime.ctx(), parent, profile, spawn(false))
        .await
        .expect("fresh")
        .agent_id;
    let inherited = store
        .agent(forked)
        .expect("read")
        .expect("child")
        .forked_context
        .expect("a forked view");
    let view: serde_json::Value = serde_json::from_str(&inherited).expect("json");
    assert_eq!(view["work_item"]["objective"], "ship 1.0");
    assert_eq!(view["recent_turns"][0]["text"], "we ship on friday");
    assert_eq!(view["from_agent_id"], parent.to_string());
    assert_eq!(
        store
            .agent(fresh)
            .expect("read")
            .expect("child")
            .forked_context,
        None
    );
    runtime.shutdown(Duration::from_secs(5)).await;
    store.close().await;
}

/// A record committed the way `CreateAgent` commits one.
fn public_record(name: &str) -> AgentRecord {
    AgentRecord::public(name, 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_ended_between_its_creation_and_its_start_keeps_no_actor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SledStore::open(dir.path(), &StoreConfig::default()).expect("store"));
    let runtime = start(store.clone(), RestartPolicy::default()).await;
    let ctx = runtime.ctx();

    // Nothing ends in between: the new agent runs, and a commit that ends
    // no agent leaves the count alone.
    let kept = public_record("kept");
    let ends_before = store.agent_ends();
    store
        .commit(Batch::new().write(Write::CreateAgent(kept.clone())))
        .expect("created");
    let mut paused = kept.clone();
    paused.state = LifecycleState::Paused;
    store
        .commit(Batch::new().write(Write::PutAgent(paused)))
        .expect("paused");
    assert_eq!(store.agent_ends(), ends_before);
    let partition = ctx.topology.partition_for(kept.id).expect("a partition");
    let (mut slots, _) = ctx.stats.usage.reserve_agents(1);
    let started = holarchy_actors::supervisor::spawn_created(
        ctx,
        kept.clone(),
        Vec::new(),
        partition,
        ends_before,
        &mut slots,
    )
    .await
    .expect("started");
    assert!(started.is_some());
    assert_eq!(slots.remaining(), 0, "its slot went back as it registered");
    assert!(ctx.directory.get(kept.id).is_some(), "the agent runs");

    // Archived after its commit and before its actor is registered (as an
    // operator who listed it could): the start sees the end and stops it.
    let ended = public_record("ended");
    let ends_before = store.agent_ends();
    store
        .commit(Batch::new().write(Write::CreateAgent(ended.clone())))
        .expect("created");
    let mut archived = ended.clone();
    archived.state = LifecycleState::Archived;
    store
        .commit(Batch::new().write(Write::PutLiveAgent(archived)))
        .expect("archived");
    assert!(store.agent_ends() > ends_before);
    let partition = ctx.topology.partition_for(ended.id).expect("a partition");
    let started = holarchy_actors::supervisor::spawn_created(
        ctx,
        ended.clone(),
        Vec::new(),
        partition,
        ends_before,
        &mut ctx.stats.usage.reserve_agents(1).0,
    )
    .await
    .expect("started");
    assert!(started.is_none(), "an archived agent's actor is stopped");
    assert!(ctx.directory.get(ended.id).is_none());

    runtime.shutdown(Duration::from_secs(5)).await;
    store.close().await;
}
