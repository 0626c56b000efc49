//! Private children under their parents: restarted there within the
//! restart intensity, given up and reported past it, and brought back
//! whole when their parent's actor dies.

use std::sync::Arc;
use std::time::Duration;

use holarchy::store::sled_store::StoreConfig;
use holarchy::store::SledStore;
use holarchy_actors::plane::spawn::{spawn_agent, SpawnRequest};
use holarchy_actors::protocol::{AgentMsg, Control};
use holarchy_actors::{Batch, Reads, Runtime, Store, Write};
use holarchy_supervision::restart::RestartPolicy;
use holarchy_supervision::{
    AgentId, LifecycleState, MessageStatus, Preset, Provenance, TaskStatus,
};

use super::common::until;
use super::{start, start_allowing_two_restarts};

async fn spawn_child(
    runtime: &Runtime,
    parent: AgentId,
    preset: Preset,
) -> (AgentId, holarchy_supervision::TaskId) {
    let profile = runtime
        .ctx()
        .reads()
        .agent(parent)
        .expect("read")
        .expect("parent")
        .profile;
    let request = SpawnRequest {
        fork: false,
        preset,
        initial_message: Some("do it".into()),
        name: None,
        workspace_mode: Default::default(),
        root: None,
        role: None,
    };
    let spawned = spawn_agent(runtime.ctx(), parent, profile, request)
        .await
        .expect("spawned");
    (
        spawned.agent_id,
        spawned.task.expect("a private child has a handle").id,
    )
}

fn linked_under(runtime: &Runtime, child: AgentId, parent: AgentId) -> bool {
    let (Some(child), Some(parent)) = (
        runtime.ctx().directory.get(child),
        runtime.ctx().directory.get(parent),
    ) else {
        return false;
    };
    parent
        .actor
        .get_children()
        .iter()
        .any(|c| c.get_id() == child.actor.get_id())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_private_child_is_restarted_under_its_parent_then_given_up_and_reported() {
    let (_dir, store, runtime) = start_allowing_two_restarts().await;
    let parent = runtime
        .create_agent("parent".into(), None)
        .await
        .expect("created");
    let (child, task) = spawn_child(&runtime, parent, Preset::PrivateChild).await;
    assert!(linked_under(&runtime, child, parent));

    for round in 0..3 {
        let actor = runtime
            .ctx()
            .directory
            .get(child)
            .expect("child running")
            .actor;
        actor.kill();
        if round < 2 {
            until("the child restarted under its parent", || {
                runtime
                    .ctx()
                    .directory
                    .get(child)
                    .is_some_and(|e| e.actor.get_id() != actor.get_id())
                    && linked_under(&runtime, child, parent)
            })
            .await;
        }
    }
    until("the handle reports the failure", || {
        store
            .task(task)
            .ok()
            .flatten()
            .is_some_and(|t| t.status == TaskStatus::Failed)
    })
    .await;
    let handle = store.task(task).expect("read").expect("task");
    assert!(
        handle
            .output
            .as_deref()
            .is_some_and(|o| o.contains("restart intensity exceeded")),
        "{handle:?}"
    );
    assert_eq!(
        store.agent(child).expect("read").expect("child").state,
        LifecycleState::Failed
    );
    until("the parent told", || {
        store
            .list_messages(parent, None, 10)
            .expect("messages")
            .iter()
            .any(|m| {
                m.provenance == Provenance::ChildResult { agent_id: child }
                    && matches!(m.status, MessageStatus::Handled { .. })
            })
    })
    .await;
    assert!(runtime.ctx().directory.get(child).is_none());
    assert!(
        runtime.ctx().directory.get(parent).is_some(),
        "the parent lives on"
    );
    let snapshot = runtime.snapshot().await.expect("snapshot");
    assert_eq!((snapshot.restarts, snapshot.given_up), (2, 1));
    runtime.shutdown(Duration::from_secs(5)).await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_parent_brings_back_its_whole_subtree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SledStore::open(dir.path(), &StoreConfig::default()).expect("store"));
    let runtime = start(store.clone(), RestartPolicy::default()).await;
    let top = runtime
        .create_agent("top".into(), None)
        .await
        .expect("created");
    let (mid, _) = spawn_child(&runtime, top, Preset::PrivateDelegator).await;
    let (leaf, leaf_task) = spawn_child(&runtime, mid, Preset::PrivateChild).await;
    let before = runtime
        .ctx()
        .directory
        .get(leaf)
        .expect("leaf")
        .actor
        .get_id();

    // Killing the top takes its linked subtree down with it.
    runtime.ctx().directory.get(top).expect("top").actor.kill();
    until("the subtree back, each under its supervisor", || {
        runtime
            .ctx()
            .directory
            .get(leaf)
            .is_some_and(|e| e.actor.get_id() != before)
            && linked_under(&runtime, mid, top)
            && linked_under(&runtime, leaf, mid)
            && runtime.ctx().directory.task(leaf_task).is_some()
    })
    .await;
    let live: Vec<_> = [top, mid, leaf]
        .iter()
        .map(|id| store.agent(*id).expect("read").expect("record").state)
        .collect();
    assert_eq!(live, [LifecycleState::Active; 3]);
    let report = holarchy_actors::tree::inspect(
        runtime.ctx(),
        vec![store.agent(top).expect("read").expect("top")],
        true,
    )
    .expect("inspect");
    assert!(report.mismatches.is_empty(), "{:?}", report.mismatches);
    assert_eq!((report.agents, report.tasks), (3, 2));
    runtime.shutdown(Duration::from_secs(5)).await;
    store.close().await;
}

/// Whether the actor `child` runs linked under `owner`'s actor.
fn actor_under(runtime: &Runtime, owner: AgentId, child: ractor::ActorId) -> bool {
    runtime
        .ctx()
        .directory
        .get(owner)
        .is_some_and(|e| e.actor.get_children().iter().any(|c| c.get_id() == child))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_task_or_wait_actor_comes_back_under_its_owner_and_not_after_it_ended() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SledStore::open(dir.path(), &StoreConfig::default()).expect("store"));
    let runtime = start(store.clone(), RestartPolicy::default()).await;
    let ctx = runtime.ctx().clone();
    let owner = runtime
        .create_agent("keeper".into(), None)
        .await
        .expect("created");
    let (_child, task_id) = spawn_child(&runtime, owner, Preset::PrivateChild).await;
    let wait = holarchy_actors::plane::wait::sleep(&ctx, owner, 3_600_000, "later".into(), None)
        .await
        .expect("armed");

    // Killed while its task runs (its wait armed): back, linked under the
    // owner, with a new actor.
    let old_task = ctx.directory.task(task_id).expect("task actor").get_id();
    let old_wait = ctx.directory.wait(wait.id).expect("wait actor").get_id();
    ctx.directory.task(task_id).expect("task actor").kill();
    ctx.directory.wait(wait.id).expect("wait actor").kill();
    until("the task's and the wait's actors to come back", || {
        let task = ctx.directory.task(task_id).map(|a| a.get_id());
        let waiting = ctx.directory.wait(wait.id).map(|a| a.get_id());
        matches!((task, waiting), (Some(t), Some(w))
            if t != old_task && w != old_wait
                && actor_under(&runtime, owner, t)
                && actor_under(&runtime, owner, w))
    })
    .await;

    // A cleanup commits its end before it stops the actors: an actor that
    // exits in between must not come back under an owner that has ended.
    let mut record = store.agent(owner).expect("read").expect("owner");
    record.state = LifecycleState::Archived;
    store
        .commit(Batch::new().write(Write::PutAgent(record)))
        .expect("owner ended");
    ctx.directory.wait(wait.id).expect("wait actor").kill();
    ctx.directory.task(task_id).expect("task actor").kill();
    until("the killed actors to be forgotten", || {
        ctx.directory.wait(wait.id).is_none() && ctx.directory.task(task_id).is_none()
    })
    .await;
    // The owner forgot them in the `handle` of their exits, which also
    // starts a restart if it decides on one. A call through its mailbox
    // comes after those handles, and then every task the runtime started
    // (a restart among them) has to end before an absence means anything.
    owner_has_handled_its_exits(&runtime, owner).await;
    until("every restart the owner started to end", || {
        ctx.lifecycle.tasks.is_empty()
    })
    .await;
    assert!(
        ctx.directory.wait(wait.id).is_none(),
        "a wait actor came back under an ended owner"
    );
    assert!(
        ctx.directory.task(task_id).is_none(),
        "a task actor came back under an ended owner"
    );
    runtime.shutdown(Duration::from_secs(5)).await;
}

/// Returns once `owner`'s actor has handled everything queued before this
/// call, supervision events (which ractor takes before messages) included:
/// an abort with no run in flight changes nothing and answers at once.
async fn owner_has_handled_its_exits(runtime: &Runtime, owner: AgentId) {
    let actor = runtime
        .ctx()
        .directory
        .get(owner)
        .expect("the owner's actor")
        .actor;
    let answered = ractor::call!(actor, |reply| AgentMsg::Control {
        action: Control::Abort { run_id: None },
        reply,
    });
    assert!(answered.is_ok(), "the owner did not answer: {answered:?}");
}

/// Kills the actor `find` names, then waits for a new one unless `last`.
async fn kill_and_see_back(what: &str, find: impl Fn() -> Option<ractor::ActorCell>, last: bool) {
    let actor = find().unwrap_or_else(|| panic!("{what} running"));
    actor.kill();
    if !last {
        until(what, || {
            find().is_some_and(|a| a.get_id() != actor.get_id())
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_and_wait_actors_that_keep_dying_are_given_up_past_the_budget() {
    let (_dir, store, runtime) = start_allowing_two_restarts().await;
    let ctx = runtime.ctx().clone();
    let owner = runtime
        .create_agent("keeper".into(), None)
        .await
        .expect("created");
    let (child, task_id) = spawn_child(&runtime, owner, Preset::PrivateChild).await;
    let wait = holarchy_actors::plane::wait::sleep(&ctx, owner, 3_600_000, "later".into(), None)
        .await
        .expect("armed");

    // Two restarts each, then the third death is one too many.
    for round in 0..3 {
        let last = round == 2;
        kill_and_see_back(
            "the wait actor back",
            || ctx.directory.wait(wait.id).map(|a| a.get_cell()),
            last,
        )
        .await;
        kill_and_see_back(
            "the task actor back",
            || ctx.directory.task(task_id).map(|a| a.get_cell()),
            last,
        )
        .await;
    }

    until("the wait cancelled", || {
        store
            .wait(wait.id)
            .ok()
            .flatten()
            .is_some_and(|w| w.status == holarchy_supervision::WaitStatus::Cancelled)
    })
    .await;
    until("the owner told its wait is gone", || {
        store
            .list_messages(owner, None, 20)
            .expect("messages")
            .iter()
            .any(|m| {
                m.provenance == Provenance::Runtime
                    && m.body.contains(&wait.id.to_string())
                    && m.body.contains("cancelled")
            })
    })
    .await;
    // A handle that cannot live fails its child, as the child's own
    // failures past the budget would.
    until("the child failed", || {
        store
            .task(task_id)
            .ok()
            .flatten()
            .is_some_and(|t| t.status == TaskStatus::Failed)
    })
    .await;
    assert_eq!(
        store.agent(child).expect("read").expect("child").state,
        LifecycleState::Failed
    );
    let handle = store.task(task_id).expect("read").expect("task");
    assert!(
        handle
            .output
            .as_deref()
            .is_some_and(|o| o.contains("kept failing")),
        "{handle:?}"
    );
    assert!(ctx.directory.wait(wait.id).is_none());
    assert!(ctx.directory.task(task_id).is_none());
    assert!(ctx.directory.get(owner).is_some(), "the owner lives on");
    runtime.shutdown(Duration::from_secs(5)).await;
    store.close().await;
}
