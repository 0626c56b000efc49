//! End-to-end: supervision trees of private agents built with SpawnAgent,
//! their task handles, completion, archive and restart.

mod common;

use common::{create, data_dir, eventually, handled, messages, send, Daemon};
use holarchy::api::pb;
use holarchy::client::Clients;
use holarchy::store::sled_store::StoreConfig;
use holarchy::store::SledStore;
use holarchy_actors::Reads as _;
use holarchy_supervision::{AgentId, LifecycleState};
use serde_json::{json, Value};

/// Asks `agent_id` to spawn a child; returns (child id, task id).
async fn spawn(c: &mut Clients, agent_id: &str, preset: &str, initial: &str) -> (String, String) {
    let before = messages(c, agent_id).await.len();
    let script = json!({ "tool_calls": [{ "name": "SpawnAgent", "input": { "preset": preset, "initial_message": initial } }] });
    send_any(c, agent_id, &script.to_string()).await;
    handled(c, agent_id, before + 1).await;
    let out = common::tool_output(c, agent_id, "SpawnAgent").await;
    let child = out["agent_id"].as_str().expect("agent id").to_owned();
    let task = out["task_handle"]["task_id"]
        .as_str()
        .expect("task id")
        .to_owned();
    assert_eq!(out["task_handle"]["task_kind"], "child_agent_task");
    (child, task)
}

/// Delivers a message to any agent: operators through SendMessage for
/// public ones, through the parent's task handle for private ones.
async fn send_any(c: &mut Clients, agent_id: &str, text: &str) {
    let summary = common::get_agent(c, agent_id).await;
    if summary.visibility == pb::Visibility::Public as i32 {
        send(c, agent_id, text).await;
    } else {
        let parent = summary.supervisor_agent_id;
        let tasks = c
            .tasks
            .list_tasks(pb::ListTasksRequest {
                agent_id: parent,
                ..Default::default()
            })
            .await
            .expect("tasks")
            .into_inner();
        let task = tasks
            .tasks
            .iter()
            .find(|t| t.child_agent_id == agent_id)
            .expect("handle of the child");
        c.tasks
            .send_task_input(pb::SendTaskInputRequest {
                task_id: task.task_id.clone(),
                text: text.into(),
            })
            .await
            .expect("task input");
    }
}

async fn tree(c: &mut Clients) -> pb::GetTreeResponse {
    common::workspaces::tree(c).await
}

/// Nodes of `kind` in the whole (flat) tree.
fn count(shape: &pb::GetTreeResponse, kind: &str) -> usize {
    shape.nodes.iter().filter(|n| n.node_type == kind).count()
}

/// Every agent the daemon knows, private ones too, following pages.
async fn all_agents(c: &mut Clients) -> Vec<pb::AgentSummary> {
    let mut all = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = c
            .agents
            .list_agents(pb::ListAgentsRequest {
                page_size: 1000,
                page_token,
                include_private: true,
            })
            .await
            .expect("list")
            .into_inner();
        all.extend(page.agents);
        page_token = page.next_page_token;
        if page_token.is_empty() {
            return all;
        }
    }
}

/// The roots of the walk.
fn roots(shape: &pb::GetTreeResponse) -> usize {
    shape.nodes.iter().filter(|n| n.depth == 0).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_four_level_private_tree_mirrors_the_store_and_archive_takes_it_all() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let ops = create(&mut c, "ops", None).await;
    let (d1, _) = spawn(&mut c, &ops, "private_delegator", "coordinate the release").await;
    let (d2, _) = spawn(&mut c, &d1, "private_delegator", "split the work").await;
    let (leaf, _) = spawn(&mut c, &d2, "private_child", "run the checks").await;

    let leaf_summary = common::get_agent(&mut c, &leaf).await;
    assert_eq!(leaf_summary.visibility, pb::Visibility::Private as i32);
    assert_eq!(
        leaf_summary.ownership,
        pb::Ownership::ParentSupervised as i32
    );
    assert_eq!(leaf_summary.supervisor_agent_id, d2);
    assert_eq!(leaf_summary.lineage_parent_agent_id, d2);

    // Operators cannot talk to private agents directly.
    let refused = c
        .agents
        .send_message(pb::SendMessageRequest {
            agent_id: leaf.clone(),
            text: "hi".into(),
            dedupe_key: String::new(),
        })
        .await
        .expect_err("private agent");
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(refused.message().contains("private"), "{refused:?}");

    // A private_child may not spawn, and a delegator may not spawn public agents.
    send_any(
        &mut c,
        &leaf,
        r#"{"tool_calls":[{"name":"SpawnAgent","input":{"initial_message":"x"}}]}"#,
    )
    .await;
    send_any(&mut c, &d2, r#"{"tool_calls":[{"name":"SpawnAgent","input":{"preset":"public_named","name":"sneaky"}}]}"#).await;
    eventually("both refusals recorded", || {
        let mut c = c.clone();
        let (leaf, d2) = (leaf.clone(), d2.clone());
        async move {
            let refusals: Vec<_> = common::events(&mut c, 0)
                .await
                .into_iter()
                .filter(|e| {
                    e.kind == "tool_called"
                        && e.text == "SpawnAgent"
                        && e.detail_json.contains("\"is_error\":true")
                })
                .collect();
            let refused = |agent: &str, reason: &str| {
                refusals
                    .iter()
                    .any(|e| e.agent_id == agent && e.detail_json.contains(reason))
            };
            // The child has no spawning tool at all; the delegator's tool
            // says why it may not make a public agent.
            (refused(&leaf, "tool catalog") && refused(&d2, "private children")).then_some(())
        }
    })
    .await;

    let shape = tree(&mut c).await;
    assert!(shape.mismatches.is_empty(), "{:?}", shape.mismatches);
    assert_eq!(roots(&shape), 1);
    assert_eq!(count(&shape, "agent"), 4);
    assert_eq!(count(&shape, "task"), 3);
    assert_eq!(shape.agents, 4);
    let status = common::status(&mut c).await;
    assert_eq!((status.public_agents, status.private_agents), (1, 3));

    let archived = c
        .agents
        .archive_agent(pb::ArchiveAgentRequest {
            agent_id: ops.clone(),
        })
        .await
        .expect("archive")
        .into_inner();
    assert_eq!((archived.agents, archived.tasks), (4, 3));
    for id in [&ops, &d1, &d2, &leaf] {
        assert_eq!(
            common::get_agent(&mut c, id).await.state,
            pb::LifecycleState::Archived as i32
        );
        assert_eq!(
            common::get_agent(&mut c, id).await.activity,
            pb::Activity::Stopped as i32
        );
    }
    let shape = tree(&mut c).await;
    assert!(
        shape.nodes.is_empty() && shape.mismatches.is_empty(),
        "{shape:?}"
    );
    let status = common::status(&mut c).await;
    assert_eq!((status.public_agents, status.private_agents), (0, 0));
    let again = c
        .agents
        .archive_agent(pb::ArchiveAgentRequest { agent_id: ops })
        .await
        .expect_err("twice");
    assert_eq!(again.code(), tonic::Code::FailedPrecondition, "{again:?}");
    assert!(again.message().contains("archived"), "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_finishes_reports_to_its_parent_and_is_cleaned_up() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let ops = create(&mut c, "ops", None).await;
    let (child, task) = spawn(&mut c, &ops, "private_child", "count the widgets").await;
    let handle = common::get_task(&mut c, &task).await;
    assert_eq!(
        (handle.status.as_str(), handle.label.as_str()),
        ("running", "count the widgets")
    );
    assert_eq!(handle.owner_agent_id, ops);

    send_any(&mut c, &child, r#"{"reply":"42 widgets","done":true}"#).await;
    let done = eventually("the handle completes", || {
        let mut c = c.clone();
        let task = task.clone();
        async move {
            let t = common::get_task(&mut c, &task).await;
            (t.status == "completed").then_some(t)
        }
    })
    .await;
    assert_eq!(done.output, "42 widgets");
    // The parent got the result as a child-result message and handled it.
    let all = handled(&c, &ops, 2).await;
    let result = all
        .iter()
        .find(|m| m.provenance == "child_result")
        .expect("child result message");
    assert_eq!(result.text, "42 widgets");
    assert_eq!(result.provenance_agent_id, child);
    assert_eq!(
        common::get_agent(&mut c, &child).await.state,
        pb::LifecycleState::Archived as i32
    );
    let shape = tree(&mut c).await;
    assert!(shape.mismatches.is_empty(), "{:?}", shape.mismatches);
    assert_eq!(count(&shape, "agent"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_task_takes_the_subtree_and_kill_9_respawns_the_rest_under_its_supervisors() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let ops = create(&mut c, "ops", None).await;
    let (keep, _) = spawn(&mut c, &ops, "private_delegator", "keep me").await;
    let (keep_leaf, _) = spawn(&mut c, &keep, "private_child", "and me").await;
    let (gone, gone_task) = spawn(&mut c, &ops, "private_delegator", "stop me").await;
    let (gone_leaf, _) = spawn(&mut c, &gone, "private_child", "and me too").await;

    let stopped = c
        .tasks
        .stop_task(pb::StopTaskRequest { task_id: gone_task })
        .await
        .expect("stop")
        .into_inner();
    assert_eq!(stopped.status, "stopped");
    for id in [&gone, &gone_leaf] {
        assert_eq!(
            common::get_agent(&mut c, id).await.state,
            pb::LifecycleState::Archived as i32
        );
    }

    daemon.kill9();
    drop(c);
    let daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let shape = tree(&mut c).await;
    assert!(shape.mismatches.is_empty(), "{:?}", shape.mismatches);
    assert_eq!((shape.agents, shape.tasks), (3, 2));
    for id in [&ops, &keep, &keep_leaf] {
        let summary = common::get_agent(&mut c, id).await;
        assert_eq!(summary.state, pb::LifecycleState::Active as i32);
        assert_eq!(
            summary.activity,
            pb::Activity::Idle as i32,
            "{id} runs again"
        );
    }
    // The respawned leaf still works through its parent's handle.
    send_any(&mut c, &keep_leaf, "still here").await;
    let all = handled(&c, &keep_leaf, 2).await;
    assert_eq!(
        all.last().map(|m| m.reply.as_str()),
        Some("ack: still here")
    );
}

/// The end state alone cannot tell a cleanup that archived the whole
/// subtree from one that skipped part of it: the start-up orphan sweep
/// archives whatever a skipped supervisor left. So the store is read right
/// after the kill (every descendant archived by the cleanup's own batch,
/// the intent naming all of them), each descendant's archive reason is
/// checked after restart, and no intent may be left once recovery ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_the_archive_of_a_thousand_descendants_finishes_it_after_restart() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let ops = create(&mut c, "big", None).await;

    // 10 delegators, each with 99 children: 1,000 private descendants.
    let calls: Vec<Value> = (0..10)
        .map(|i| json!({ "name": "SpawnAgent", "input": { "preset": "private_delegator", "initial_message": format!("team {i}") } }))
        .collect();
    send(&mut c, &ops, &json!({ "tool_calls": calls }).to_string()).await;
    handled(&c, &ops, 1).await;
    let teams = c
        .tasks
        .list_tasks(pb::ListTasksRequest {
            agent_id: ops.clone(),
            ..Default::default()
        })
        .await
        .expect("tasks")
        .into_inner();
    assert_eq!(teams.tasks.len(), 10);
    let calls: Vec<Value> = (0..99)
        .map(
            |i| json!({ "name": "SpawnAgent", "input": { "initial_message": format!("job {i}") } }),
        )
        .collect();
    let script = json!({ "tool_calls": calls }).to_string();
    for team in &teams.tasks {
        c.tasks
            .send_task_input(pb::SendTaskInputRequest {
                task_id: team.task_id.clone(),
                text: script.clone(),
            })
            .await
            .expect("team input");
    }
    for team in &teams.tasks {
        handled(&c, &team.child_agent_id, 2).await;
    }
    let shape = tree(&mut c).await;
    assert_eq!(shape.agents, 1001);
    assert!(
        shape.mismatches.is_empty(),
        "{:?}",
        &shape.mismatches[..shape.mismatches.len().min(5)]
    );
    let descendants: Vec<AgentId> = all_agents(&mut c)
        .await
        .iter()
        .map(|a| a.agent_id.parse().expect("an agent id"))
        .filter(|id: &AgentId| id.to_string() != ops)
        .collect();
    assert_eq!(descendants.len(), 1000);

    // Archive, and kill the daemon as soon as the archive is on disk,
    // while the actors may still be going down.
    let mut archiver = c.clone();
    let archive_ops = ops.clone();
    let archive = tokio::spawn(async move {
        archiver
            .agents
            .archive_agent(pb::ArchiveAgentRequest {
                agent_id: archive_ops,
            })
            .await
    });
    eventually("the archive on disk", || {
        let mut c = c.clone();
        let ops = ops.clone();
        async move {
            (common::get_agent(&mut c, &ops).await.state == pb::LifecycleState::Archived as i32)
                .then_some(())
        }
    })
    .await;
    daemon.kill9();
    let _ = archive.await;
    drop(c);

    // What the cleanup left on disk, read before any restart can mend it
    // (the start-up sweep archives orphans too): the batch that recorded
    // the intent archived every descendant, and the intent, if the kill
    // came before it was done, names every one of them.
    let store = SledStore::open(&dir.join("db"), &StoreConfig::default()).expect("store opens");
    let live: Vec<&AgentId> = descendants
        .iter()
        .filter(|id| {
            store
                .agent(**id)
                .expect("readable")
                .is_none_or(|a| a.state != LifecycleState::Archived)
        })
        .collect();
    assert!(
        live.is_empty(),
        "{} descendants not archived by the cleanup's batch, e.g. {:?}",
        live.len(),
        live.first()
    );
    let intents = store.recovery_input().expect("readable").intents;
    assert!(intents.len() <= 1, "{intents:?}");
    for intent in &intents {
        assert_eq!(intent.root_agent_id.to_string(), ops);
        assert_eq!(intent.agents.len(), 1001, "the intent's plan");
    }
    store.close().await;
    drop(store);

    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let log = common::events(&mut c, 0).await;
    let started: Vec<Value> = log
        .iter()
        .filter(|e| e.kind == "cleanup_started" && e.agent_id == ops)
        .map(|e| serde_json::from_str(&e.detail_json).expect("detail"))
        .collect();
    assert_eq!(started.len(), 1, "{started:?}");
    assert_eq!(started[0]["reason"], "archived");
    assert_eq!(started[0]["agents"], 1001);
    // Each descendant was archived once, by the archive's own batch: not
    // by the intent's finish at start, nor by the orphan sweep.
    let mut reasons: std::collections::HashMap<String, Vec<String>> = Default::default();
    for event in log.iter().filter(|e| e.kind == "agent_state_changed") {
        let detail: Value = serde_json::from_str(&event.detail_json).expect("detail");
        if detail["state"] == "archived" {
            reasons
                .entry(event.agent_id.clone())
                .or_default()
                .push(detail["reason"].as_str().unwrap_or_default().to_owned());
        }
    }
    for id in &descendants {
        let got = reasons.get(&id.to_string());
        assert_eq!(
            got.map(Vec::as_slice),
            Some(&["archived".to_owned()][..]),
            "descendant {id}"
        );
    }
    let shape = tree(&mut c).await;
    assert!(shape.nodes.is_empty(), "nothing of the subtree runs again");
    assert!(shape.mismatches.is_empty(), "{:?}", shape.mismatches);
    let status = common::status(&mut c).await;
    assert_eq!(
        (
            status.public_agents,
            status.private_agents,
            status.recovered_agents
        ),
        (0, 0, 0)
    );
    for team in &teams.tasks {
        assert_eq!(
            common::get_agent(&mut c, &team.child_agent_id).await.state,
            pb::LifecycleState::Archived as i32
        );
    }
    let all = all_agents(&mut c).await;
    assert_eq!(all.len(), 1001);
    assert!(
        all.iter()
            .all(|a| a.state == pb::LifecycleState::Archived as i32),
        "no live record is left"
    );

    // The intent is finished, and gone from the store.
    drop(c);
    daemon.kill9();
    let store = SledStore::open(&dir.join("db"), &StoreConfig::default()).expect("store opens");
    let intents = store.recovery_input().expect("readable").intents;
    assert!(intents.is_empty(), "a cleanup never finished: {intents:?}");
    store.close().await;
    drop(store);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_public_agent_spawned_by_another_keeps_only_lineage_and_outlives_it() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let ops = create(&mut c, "ops", None).await;
    send(&mut c, &ops, r#"{"tool_calls":[{"name":"SpawnAgent","input":{"preset":"public_named","name":"helper","initial_message":"hello helper"}}]}"#).await;
    handled(&c, &ops, 1).await;
    let out = common::tool_output(&mut c, &ops, "SpawnAgent").await;
    assert!(
        out["task_handle"].is_null(),
        "a public agent comes without a task handle"
    );
    let helper = out["agent_id"].as_str().expect("id").to_owned();

    let summary = common::get_agent(&mut c, &helper).await;
    assert_eq!(summary.name, "helper");
    assert_eq!(summary.visibility, pb::Visibility::Public as i32);
    assert_eq!(summary.ownership, pb::Ownership::SelfOwned as i32);
    assert_eq!(summary.lineage_parent_agent_id, ops);
    assert!(summary.supervisor_agent_id.is_empty());
    let first = handled(&c, &helper, 1).await;
    assert_eq!(first[0].provenance, "creator");
    assert_eq!(first[0].provenance_agent_id, ops);
    // Operators may talk to it directly: it is public.
    send(&mut c, &helper, "direct").await;

    let shape = tree(&mut c).await;
    assert_eq!(
        roots(&shape),
        2,
        "the helper runs under the runtime, not under ops"
    );
    c.agents
        .archive_agent(pb::ArchiveAgentRequest { agent_id: ops })
        .await
        .expect("archive");
    let summary = common::get_agent(&mut c, &helper).await;
    assert_eq!(
        summary.state,
        pb::LifecycleState::Active as i32,
        "lineage is not supervision"
    );
    handled(&c, &helper, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_supervises_its_child_through_task_tools() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let ops = create(&mut c, "ops", None).await;
    let (child, task) = spawn(&mut c, &ops, "private_child", "summarise the logs").await;
    handled(&c, &child, 1).await;

    let tools = |calls: Value| json!({ "tool_calls": calls }).to_string();
    send(
        &mut c,
        &ops,
        &tools(json!([
            { "name": "TaskList", "input": {} },
            { "name": "TaskInput", "input": { "task_id": task, "text": "also count errors" } },
        ])),
    )
    .await;
    handled(&c, &ops, 2).await;
    let listed = common::tool_output(&mut c, &ops, "TaskList").await;
    assert_eq!(listed[0]["task_id"], task.as_str());
    assert_eq!(listed[0]["label"], "summarise the logs");
    assert_eq!(listed[0]["status"], "running");
    let child_messages = handled(&c, &child, 2).await;
    assert_eq!(child_messages[1].provenance, "parent");
    assert_eq!(child_messages[1].provenance_agent_id, ops);

    send(
        &mut c,
        &ops,
        &tools(json!([{ "name": "TaskOutput", "input": { "task_id": task } }])),
    )
    .await;
    handled(&c, &ops, 3).await;
    let progress = common::tool_output(&mut c, &ops, "TaskOutput").await;
    assert_eq!(progress["status"], "running");
    assert!(
        progress["output"]
            .as_str()
            .is_some_and(|o| o.contains("ack: also count errors")),
        "{progress}"
    );

    // Another agent can neither see nor stop this task: tasks are per
    // owner, and to anyone else it does not exist. The child runs on.
    let other = create(&mut c, "other", None).await;
    send(
        &mut c,
        &other,
        &tools(json!([
            { "name": "TaskStop", "input": { "task_id": task } },
            { "name": "TaskStatus", "input": { "task_id": task } },
        ])),
    )
    .await;
    handled(&c, &other, 1).await;
    for tool in ["TaskStop", "TaskStatus"] {
        let (failed, output) = common::tool_call(&mut c, &other, tool).await;
        assert!(failed, "{tool} by a non-owner succeeded: {output}");
        assert!(output.to_string().contains("not found"), "{tool}: {output}");
    }
    assert_eq!(common::get_task(&mut c, &task).await.status, "running");
    assert_eq!(
        common::get_agent(&mut c, &child).await.state,
        pb::LifecycleState::Active as i32
    );

    send(
        &mut c,
        &ops,
        &tools(json!([
            { "name": "TaskStop", "input": { "task_id": task } },
            { "name": "TaskStatus", "input": { "task_id": task } },
        ])),
    )
    .await;
    handled(&c, &ops, 4).await;
    let status = common::tool_output(&mut c, &ops, "TaskStatus").await;
    assert_eq!(status["status"], "stopped");
    assert_eq!(
        common::get_agent(&mut c, &child).await.state,
        pb::LifecycleState::Archived as i32
    );
}
