//! A guarded write that finds the wrong state refuses its whole batch:
//! no record of it and no event of it lands.

use holarchy::api::read_model::ReadModel;
use holarchy_actors::{Batch, Reads, Store, StoreError, Write};
use holarchy_supervision::{LifecycleState, MessageStatus, TaskStatus};

use crate::fixtures::*;
use crate::harness::Harness;

/// How many durable events the store holds.
async fn events<S: Store + ReadModel>(store: &S) -> usize {
    ReadModel::durable(store).await.expect("flushes");
    store.events_after(0, 10_000).expect("events").len()
}

pub async fn a_taken_name_refuses_the_whole_batch<H: Harness>() {
    let (_place, store) = H::create().await;
    let first = public("ops");
    store.commit(created(&first)).expect("creates");
    let second = public("ops");
    let bystander = public("other");
    let batch = created(&bystander)
        .write(Write::CreateAgent(second.clone()))
        .event(
            second.id,
            holarchy_supervision::EventKind::AgentStateChanged {
                state: LifecycleState::Archived,
                reason: "refused with its batch".into(),
            },
        );
    let refused = store.commit(batch);
    assert!(
        matches!(refused, Err(StoreError::NameTaken(ref n)) if n == "ops"),
        "{refused:?}"
    );
    assert_eq!(Reads::agent(&*store, second.id).expect("reads"), None);
    assert_eq!(
        Reads::agent(&*store, bystander.id).expect("reads"),
        None,
        "nothing of the batch lands"
    );
    assert_eq!(
        Reads::agent_id_by_name(&*store, "other").expect("reads"),
        None
    );
    assert_eq!(events(&*store).await, 1, "only the first creation's event");
}

pub async fn a_child_needs_a_live_supervisor<H: Harness>() {
    let (_place, store) = H::create().await;
    let parent = public("lead");
    store.commit(created(&parent)).expect("creates");
    let archived = in_state(&parent, LifecycleState::Archived);
    store
        .commit(Batch::new().write(Write::PutAgent(archived)))
        .expect("archives");
    let child = child_of(parent.id);
    let refused = store.commit(created(&child));
    assert!(
        matches!(refused, Err(StoreError::SupervisorGone(id)) if id == parent.id),
        "{refused:?}"
    );
    assert_eq!(Reads::agent(&*store, child.id).expect("reads"), None);
    assert!(store.children_of(parent.id).expect("children").is_empty());

    let orphan = child_of(public("never-created").id);
    assert!(matches!(
        store.commit(created(&orphan)),
        Err(StoreError::SupervisorGone(_))
    ));
}

pub async fn a_live_update_never_revives_an_ended_agent<H: Harness>() {
    let (_place, store) = H::create().await;
    let agent = public("a");
    store.commit(created(&agent)).expect("creates");
    let paused = in_state(&agent, LifecycleState::Paused);
    store
        .commit(Batch::new().write(Write::PutLiveAgent(paused.clone())))
        .expect("a live agent takes a live update");
    let archived = in_state(&agent, LifecycleState::Archived);
    store
        .commit(Batch::new().write(Write::PutAgent(archived.clone())))
        .expect("archives");
    let revived = in_state(&agent, LifecycleState::Active);
    let refused = store.commit(Batch::new().write(Write::PutLiveAgent(revived)).write(
        Write::PutMessage(message(agent.id, MessageStatus::Queued, None)),
    ));
    assert!(
        matches!(refused, Err(StoreError::Precondition(_))),
        "{refused:?}"
    );
    assert_eq!(
        Reads::agent(&*store, agent.id).expect("reads"),
        Some(archived)
    );
    assert!(store.pending_messages(agent.id).expect("reads").is_empty());
}

pub async fn a_task_and_a_wait_end_once<H: Harness>() {
    let (_place, store) = H::create().await;
    let owner = public("a");
    let task = command(owner.id);
    let alarm = timer(owner.id, 10);
    store
        .commit(
            created(&owner)
                .write(Write::PutTask(task.clone()))
                .write(Write::PutWait(alarm.clone())),
        )
        .expect("puts");

    let mut stopped = task.clone();
    stopped.status = TaskStatus::Stopped;
    store
        .commit(Batch::new().write(Write::EndTask(stopped.clone())))
        .expect("the first end lands");
    let mut completed = task.clone();
    completed.status = TaskStatus::Completed;
    let refused = store.commit(Batch::new().write(Write::EndTask(completed)));
    assert!(
        matches!(refused, Err(StoreError::Precondition(_))),
        "{refused:?}"
    );
    assert_eq!(
        store.task(task.id).expect("reads"),
        Some(stopped),
        "the first end stays"
    );

    let fired = alarm.fire(20).expect("fires");
    store
        .commit(Batch::new().write(Write::EndWait(fired.clone())))
        .expect("the first end lands");
    let refused = store.commit(Batch::new().write(Write::EndWait(fired)));
    assert!(
        matches!(refused, Err(StoreError::Precondition(_))),
        "{refused:?}"
    );

    let never = command(owner.id);
    let refused = store.commit(Batch::new().write(Write::EndTask(never.clone())));
    assert!(
        matches!(refused, Err(StoreError::Precondition(_))),
        "a task never stored has not been running: {refused:?}"
    );
    assert_eq!(store.task(never.id).expect("reads"), None);
}

pub async fn a_requeue_applies_only_to_a_message_still_in_its_turn<H: Harness>() {
    let (_place, store) = H::create().await;
    let agent = public("a");
    let in_turn = handling(agent.id);
    let mut cancelled = handling(agent.id);
    cancelled.status = MessageStatus::Cancelled;
    store
        .commit(
            created(&agent)
                .write(Write::PutMessage(in_turn.clone()))
                .write(Write::PutMessage(cancelled.clone())),
        )
        .expect("puts");
    let requeued = |m: &holarchy_supervision::MessageRecord| {
        let mut m = m.clone();
        m.status = MessageStatus::Queued;
        m.attempts += 1;
        m
    };
    store
        .commit(
            Batch::new()
                .write(Write::Requeue(requeued(&in_turn)))
                .write(Write::Requeue(requeued(&cancelled))),
        )
        .expect("a requeue that does not apply is skipped, not refused");
    assert_eq!(
        store.message(agent.id, in_turn.id).expect("reads"),
        Some(requeued(&in_turn))
    );
    assert_eq!(
        store.message(agent.id, cancelled.id).expect("reads"),
        Some(cancelled.clone()),
        "a cleanup's cancel wins"
    );
    assert_eq!(
        store.pending_messages(agent.id).expect("reads"),
        [requeued(&in_turn)]
    );

    // An agent that ended keeps its message as it was.
    let other = public("b");
    let stuck = handling(other.id);
    store
        .commit(created(&other).write(Write::PutMessage(stuck.clone())))
        .expect("puts");
    store
        .commit(Batch::new().write(Write::PutAgent(in_state(&other, LifecycleState::Failed))))
        .expect("fails the agent");
    store
        .commit(Batch::new().write(Write::Requeue(requeued(&stuck))))
        .expect("skipped");
    assert_eq!(
        store.message(other.id, stuck.id).expect("reads"),
        Some(stuck)
    );
}

pub async fn only_an_archived_agent_is_deleted_and_its_name_freed<H: Harness>() {
    let (_place, store) = H::create().await;
    let agent = public("ops");
    store.commit(created(&agent)).expect("creates");
    let refused = store.commit(Batch::new().write(Write::DeleteAgent(agent.clone())));
    assert!(
        matches!(refused, Err(StoreError::Precondition(_))),
        "{refused:?}"
    );
    assert!(Reads::agent(&*store, agent.id).expect("reads").is_some());

    let archived = in_state(&agent, LifecycleState::Archived);
    store
        .commit(Batch::new().write(Write::PutAgent(archived.clone())))
        .expect("archives");
    store
        .commit(Batch::new().write(Write::DeleteAgent(archived)))
        .expect("deletes");
    assert_eq!(Reads::agent(&*store, agent.id).expect("reads"), None);
    assert_eq!(
        Reads::agent_id_by_name(&*store, "ops").expect("reads"),
        None
    );
    let again = public("ops");
    store
        .commit(created(&again))
        .expect("the name is free again");
    assert_eq!(
        Reads::agent_id_by_name(&*store, "ops").expect("reads"),
        Some(again.id)
    );
}
