//! Each `Write` kind lands where its reads find it.

use holarchy::api::read_model::ReadModel;
use holarchy_actors::{Batch, Reads, Store, Write};
use holarchy_supervision::cleanup::{CleanupIntent, CleanupReason};
use holarchy_supervision::workspace::{Projection, Worktree};
use holarchy_supervision::{
    CleanupId, LifecycleState, MessageRecord, MessageStatus, OutputChunk, PlanStep, StepStatus,
    Stream, TaskStatus, TokenUsage, WaitStatus, WorkItemId, WorkItemRecord, WorkStatus,
};

use crate::fixtures::*;
use crate::harness::Harness;

pub async fn an_agent_is_found_by_id_and_name_and_listed<H: Harness>() {
    let (_place, store) = H::create().await;
    let ops = public("ops");
    let other = public("opal");
    store.commit(created(&ops)).expect("creates");
    store.commit(created(&other)).expect("creates");

    assert_eq!(
        Reads::agent(&*store, ops.id).expect("reads"),
        Some(ops.clone())
    );
    assert_eq!(
        Reads::agent_id_by_name(&*store, "ops").expect("reads"),
        Some(ops.id)
    );
    assert_eq!(
        Reads::agent_id_by_name(&*store, "nobody").expect("reads"),
        None
    );
    let named = store.names_from("op", 10).expect("names");
    assert_eq!(
        named,
        [("opal".to_owned(), other.id), ("ops".to_owned(), ops.id)],
        "names in name order"
    );
    let listed: Vec<_> = store
        .list_agents(None, 10, false)
        .expect("lists")
        .into_iter()
        .map(|a| a.id)
        .collect();
    assert_eq!(listed, [ops.id, other.id], "in id (creation) order");
    let after_first = store.list_agents(Some(ops.id), 10, false).expect("lists");
    assert_eq!(after_first.len(), 1);
    assert_eq!(store.public_agent_ids().expect("ids"), [ops.id, other.id]);
}

pub async fn a_private_child_is_indexed_under_its_supervisor_while_live<H: Harness>() {
    let (_place, store) = H::create().await;
    let parent = public("lead");
    let child = child_of(parent.id);
    store.commit(created(&parent)).expect("creates");
    store.commit(created(&child)).expect("creates the child");

    assert_eq!(store.children_of(parent.id).expect("children"), [child.id]);
    let public_only = store.list_agents(None, 10, false).expect("lists");
    assert_eq!(
        public_only.len(),
        1,
        "a private child is not listed as public"
    );
    let all = store.list_agents(None, 10, true).expect("lists");
    assert_eq!(all.len(), 2);
    assert_eq!(store.public_agent_ids().expect("ids"), [parent.id]);

    let ended = in_state(&child, LifecycleState::Archived);
    store
        .commit(Batch::new().write(Write::PutAgent(ended.clone())))
        .expect("archives");
    assert!(store.children_of(parent.id).expect("children").is_empty());
    assert_eq!(Reads::agent(&*store, child.id).expect("reads"), Some(ended));
}

pub async fn messages_keep_their_pending_and_dedupe_indexes<H: Harness>() {
    let (_place, store) = H::create().await;
    let owner = public("a");
    store.commit(created(&owner)).expect("creates");
    let mut m = message(owner.id, MessageStatus::Queued, Some("k1"));
    store
        .commit(Batch::new().write(Write::PutMessage(m.clone())))
        .expect("puts");
    assert_eq!(
        store.pending_messages(owner.id).expect("pending"),
        [m.clone()]
    );
    assert_eq!(
        store
            .message_id_by_dedupe_key(owner.id, "k1")
            .expect("dedupe"),
        Some(m.id)
    );
    assert_eq!(
        store.message(owner.id, m.id).expect("reads"),
        Some(m.clone())
    );

    m.status = MessageStatus::Handled { run_id: run_at(7) };
    store
        .commit(Batch::new().write(Write::PutMessage(m.clone())))
        .expect("puts");
    assert!(store
        .pending_messages(owner.id)
        .expect("pending")
        .is_empty());
    assert_eq!(
        store
            .message_id_by_dedupe_key(owner.id, "k1")
            .expect("dedupe"),
        Some(m.id),
        "a dedupe key outlives the message's turn"
    );
    let second = message(owner.id, MessageStatus::Queued, None);
    store
        .commit(Batch::new().write(Write::PutMessage(second.clone())))
        .expect("puts");
    assert_eq!(
        Reads::list_messages(&*store, owner.id, None, 10).expect("lists"),
        [m.clone(), second.clone()]
    );
    assert_eq!(
        Reads::list_messages(&*store, owner.id, Some(m.id), 10).expect("lists"),
        [second]
    );
    assert_eq!(
        Reads::list_messages(&*store, owner.id, None, 1)
            .expect("lists")
            .len(),
        1
    );
}

/// A message queued and started in one commit (a delivery to an idle
/// agent) reads as its last write; a requeue between two writes still
/// sees the first.
pub async fn a_message_written_twice_in_one_batch_reads_as_its_last_write<H: Harness>() {
    let (_place, store) = H::create().await;
    let owner = public("a");
    store.commit(created(&owner)).expect("creates");
    let queued = message(owner.id, MessageStatus::Queued, Some("k1"));
    let started = MessageRecord {
        status: MessageStatus::Handling { run_id: run_at(9) },
        attempts: 1,
        ..queued.clone()
    };
    store
        .commit(
            Batch::new()
                .write(Write::PutMessage(queued.clone()))
                .write(Write::PutMessage(started.clone())),
        )
        .expect("puts");
    assert_eq!(
        store.message(owner.id, queued.id).expect("reads"),
        Some(started.clone())
    );
    assert_eq!(
        store.pending_messages(owner.id).expect("pending"),
        std::slice::from_ref(&started),
        "in its turn, once"
    );
    assert_eq!(
        store
            .message_id_by_dedupe_key(owner.id, "k1")
            .expect("dedupe"),
        Some(queued.id),
        "the first write's dedupe key is kept"
    );

    // Put in its turn, requeued, and put again: the requeue applied to
    // the first write, the last write stands.
    let other = message(owner.id, MessageStatus::Queued, None);
    let in_turn = MessageRecord {
        status: MessageStatus::Handling { run_id: run_at(10) },
        ..other.clone()
    };
    let requeued = MessageRecord {
        attempts: 1,
        ..other.clone()
    };
    store
        .commit(
            Batch::new()
                .write(Write::PutMessage(in_turn))
                .write(Write::Requeue(requeued.clone())),
        )
        .expect("puts and requeues");
    assert_eq!(
        store.message(owner.id, other.id).expect("reads"),
        Some(requeued.clone()),
        "a requeue reads the write before it in its batch"
    );
    assert_eq!(
        store.pending_messages(owner.id).expect("pending"),
        [started, requeued]
    );
}

pub async fn the_newest_settled_messages_pass_over_pending_ones<H: Harness>() {
    let (_place, store) = H::create().await;
    let owner = public("a");
    store.commit(created(&owner)).expect("creates");
    let statuses = [
        MessageStatus::Handled { run_id: run_at(10) },
        MessageStatus::Failed { run_id: run_at(20) },
        MessageStatus::Cancelled,
        MessageStatus::Aborted { run_id: run_at(30) },
        MessageStatus::Handling { run_id: run_at(40) },
        MessageStatus::Queued,
    ];
    let messages: Vec<_> = statuses
        .into_iter()
        .map(|status| message(owner.id, status, None))
        .collect();
    let mut batch = Batch::new();
    for m in &messages {
        batch = batch.write(Write::PutMessage(m.clone()));
    }
    store.commit(batch).expect("puts");

    let settled = store.last_settled_messages(owner.id, 2).expect("reads");
    assert_eq!(
        settled,
        [messages[2].clone(), messages[3].clone()],
        "oldest of them first"
    );
    assert_eq!(
        store
            .last_settled_messages(owner.id, 100)
            .expect("reads")
            .len(),
        4
    );
    assert_eq!(
        store.last_run_starts(owner.id, 100).expect("reads"),
        [40, 30, 20, 10],
        "newest first"
    );
    assert_eq!(store.last_run_starts(owner.id, 3).expect("reads"), [40, 30]);
}

pub async fn tasks_are_found_by_owner_and_worktree_until_removed<H: Harness>() {
    let (_place, store) = H::create().await;
    let owner = public("a");
    store.commit(created(&owner)).expect("creates");
    let plain = command(owner.id);
    let mut in_worktree = command(owner.id);
    in_worktree.worktree = Some(Worktree::for_task(
        "/repo".into(),
        "abc".into(),
        std::path::Path::new("/trees"),
        in_worktree.id,
    ));
    store
        .commit(
            Batch::new()
                .write(Write::PutTask(plain.clone()))
                .write(Write::PutTask(in_worktree.clone())),
        )
        .expect("puts");
    assert_eq!(store.task(plain.id).expect("reads"), Some(plain.clone()));
    assert_eq!(
        store.tasks_of(owner.id).expect("reads").len(),
        2,
        "both tasks under their owner"
    );
    assert_eq!(
        store.worktree_tasks().expect("reads"),
        [in_worktree.clone()]
    );

    let mut ended = in_worktree.clone();
    ended.status = TaskStatus::Completed;
    store
        .commit(Batch::new().write(Write::EndTask(ended.clone())))
        .expect("ends");
    assert_eq!(
        store.worktree_tasks().expect("reads"),
        [ended.clone()],
        "an ended task keeps its worktree until it is removed"
    );
    let mut removed = ended;
    if let Some(tree) = removed.worktree.as_mut() {
        tree.removed = true;
    }
    store
        .commit(Batch::new().write(Write::PutTask(removed.clone())))
        .expect("puts");
    assert!(store.worktree_tasks().expect("reads").is_empty());
    assert_eq!(store.task(removed.id).expect("reads"), Some(removed));
}

pub async fn waits_are_found_by_owner_and_trigger_token<H: Harness>() {
    let (_place, store) = H::create().await;
    let owner = public("a");
    store.commit(created(&owner)).expect("creates");
    let alarm = timer(owner.id, 50);
    let hook = trigger(owner.id, [7; 32]);
    store
        .commit(
            Batch::new()
                .write(Write::PutWait(alarm.clone()))
                .write(Write::PutWait(hook.clone())),
        )
        .expect("arms");
    assert_eq!(store.wait(alarm.id).expect("reads"), Some(alarm.clone()));
    assert_eq!(Reads::waits_of(&*store, owner.id).expect("reads").len(), 2);
    assert_eq!(
        store.wait_by_token_hash(&[7; 32]).expect("reads"),
        Some(hook.id)
    );
    assert_eq!(store.wait_by_token_hash(&[8; 32]).expect("reads"), None);

    let fired = alarm.fire(60).expect("an armed timer fires");
    store
        .commit(Batch::new().write(Write::EndWait(fired.clone())))
        .expect("fires");
    assert_eq!(
        store.wait(alarm.id).expect("reads").map(|w| w.status),
        Some(WaitStatus::Fired)
    );
}

pub async fn work_items_give_the_agent_its_focus<H: Harness>() {
    let (_place, store) = H::create().await;
    let owner = public("a");
    store.commit(created(&owner)).expect("creates");
    let item = |status| WorkItemRecord {
        id: WorkItemId::generate(),
        owner_agent_id: owner.id,
        objective: "ship it".into(),
        status,
        plan: vec![PlanStep {
            title: "build".into(),
            status: StepStatus::Pending,
        }],
        created_at_ms: 1,
        updated_at_ms: 1,
    };
    let done = item(WorkStatus::Done);
    let active = item(WorkStatus::Active);
    store
        .commit(
            Batch::new()
                .write(Write::PutWorkItem(done.clone()))
                .write(Write::PutWorkItem(active.clone())),
        )
        .expect("puts");
    assert_eq!(
        Reads::work_item(&*store, done.id).expect("reads"),
        Some(done.clone())
    );
    assert_eq!(
        Reads::work_items_of(&*store, owner.id).expect("reads"),
        [done, active.clone()]
    );
    assert_eq!(store.work_focus(owner.id).expect("reads"), Some(active));
}

pub async fn command_output_is_read_from_an_offset_and_dropped_from_the_front<H: Harness>() {
    let (_place, store) = H::create().await;
    let owner = public("a");
    let task = command(owner.id);
    let chunk = |offset: u64, text: &str| OutputChunk {
        offset,
        stream: Stream::Stdout,
        data: text.as_bytes().to_vec(),
    };
    let mut batch = created(&owner).write(Write::PutTask(task.clone()));
    for (offset, text) in [(0, "0123456789"), (10, "abcdefghij"), (20, "KLMNO")] {
        batch = batch.write(Write::PutOutput {
            task_id: task.id,
            chunk: chunk(offset, text),
        });
    }
    store.commit(batch).expect("puts");

    let from_inside = store.output_after(task.id, 15, 1 << 20).expect("reads");
    assert_eq!(
        from_inside,
        [chunk(15, "fghij"), chunk(20, "KLMNO")],
        "starts exactly at 15"
    );
    let bounded = store.output_after(task.id, 0, 1).expect("reads");
    assert_eq!(
        bounded,
        [chunk(0, "0123456789")],
        "whole chunks, at least one"
    );
    assert!(store
        .output_after(task.id, 25, 100)
        .expect("reads")
        .is_empty());

    store
        .commit(Batch::new().write(Write::DropOutput {
            task_id: task.id,
            offset: 0,
        }))
        .expect("drops");
    let first = store.output_after(task.id, 0, 1).expect("reads");
    assert_eq!(
        first,
        [chunk(10, "abcdefghij")],
        "what is left starts after the dropped chunk"
    );
}

pub async fn cleanup_intents_are_read_by_recovery_until_deleted<H: Harness>() {
    let (_place, store) = H::create().await;
    let root = public("a");
    store.commit(created(&root)).expect("creates");
    let intent = CleanupIntent {
        id: CleanupId::generate(),
        root_agent_id: root.id,
        reason: CleanupReason::Archived,
        agents: vec![root.id],
        created_at_ms: 3,
    };
    store
        .commit(Batch::new().write(Write::PutIntent(intent.clone())))
        .expect("puts");
    assert_eq!(
        store.recovery_input().expect("reads").intents,
        std::slice::from_ref(&intent)
    );
    store
        .commit(Batch::new().write(Write::DeleteIntent(intent.id)))
        .expect("deletes");
    assert!(store.recovery_input().expect("reads").intents.is_empty());
}

pub async fn workspaces_and_usage_are_kept_per_agent<H: Harness>() {
    let (_place, store) = H::create().await;
    let (a, b) = (public("a"), public("b"));
    store.commit(created(&a)).expect("creates");
    store.commit(created(&b)).expect("creates");
    assert_eq!(
        store.workspaces(a.id).expect("reads"),
        None,
        "only agent_home, active"
    );
    let projection = Projection::home_only(a.id, 9);
    store
        .commit(Batch::new().write(Write::PutWorkspaces(projection.clone())))
        .expect("puts");
    assert_eq!(store.workspaces(a.id).expect("reads"), Some(projection));
    assert_eq!(store.workspaces(b.id).expect("reads"), None);

    assert_eq!(
        store.usage_of(a.id).expect("reads"),
        None,
        "no turn reported usage yet"
    );
    let turn = TokenUsage {
        prompt_tokens: 100,
        completion_tokens: 20,
        cached_tokens: 50,
    };
    for _ in 0..2 {
        store
            .commit(Batch::new().write(Write::AddUsage {
                agent_id: a.id,
                usage: turn,
            }))
            .expect("adds");
    }
    let totals = store.usage_of(a.id).expect("reads").expect("totals");
    assert_eq!(totals.turns, 2);
    assert_eq!(totals.tokens.prompt_tokens, 200);
    assert_eq!(totals.tokens.completion_tokens, 40);
    assert_eq!(totals.tokens.cached_tokens, 100);
    assert_eq!(store.usage_of(b.id).expect("reads"), None);
}

pub async fn recovery_reads_what_is_unfinished<H: Harness>() {
    let (_place, store) = H::create().await;
    let live = public("live");
    let gone = in_state(&public("gone"), LifecycleState::Archived);
    let queued = message(live.id, MessageStatus::Queued, None);
    let settled = message(live.id, MessageStatus::Handled { run_id: run_at(1) }, None);
    let running = command(live.id);
    let mut finished = command(live.id);
    finished.status = TaskStatus::Completed;
    let armed = timer(live.id, 100);
    let mut cancelled = timer(live.id, 100);
    cancelled.status = WaitStatus::Cancelled;
    let batch = created(&live)
        .write(Write::CreateAgent(gone.clone()))
        .write(Write::PutMessage(queued.clone()))
        .write(Write::PutMessage(settled))
        .write(Write::PutTask(running.clone()))
        .write(Write::PutTask(finished))
        .write(Write::PutWait(armed.clone()))
        .write(Write::PutWait(cancelled));
    store.commit(batch).expect("puts");

    let input = store.recovery_input().expect("reads");
    let mut agents: Vec<_> = input.agents.iter().map(|a| a.id).collect();
    agents.sort();
    let mut expected = vec![live.id, gone.id];
    expected.sort();
    assert_eq!(agents, expected, "every agent's record, live or not");
    assert_eq!(input.pending, [queued]);
    assert_eq!(input.running_tasks, [running]);
    assert_eq!(input.armed_waits, [armed]);
    assert!(input.intents.is_empty());
    assert!(input.damaged.is_empty());
}
