//! `GetTree` of a subtree (`agent_id` set): that agent and its descendants,
//! never its parent, its siblings or other trees.

use std::collections::HashSet;

use holarchy::api::pb;
use serde_json::json;

use crate::common::{create, data_dir, handled, script, tool_output, Daemon};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_tree_of_an_agent_holds_its_subtree_only() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let ops = create(&mut c, "ops", None).await;
    let other = create(&mut c, "other", None).await;
    // ops -> lead -> worker, and ops -> sibling: the subtree of `lead` is
    // lead, its task on worker, and worker.
    let spawn_worker =
        script(json!([{ "name": "SpawnAgent", "input": { "initial_message": "build it" } }]));
    let (lead, lead_task) = crate::spawn(
        &mut c,
        &ops,
        json!({ "preset": "private_delegator", "initial_message": spawn_worker }),
    )
    .await;
    let (sibling, sibling_task) =
        crate::spawn(&mut c, &ops, json!({ "initial_message": "stay aside" })).await;
    handled(&c, &lead, 1).await;
    let spawned = tool_output(&mut c, &lead, "SpawnAgent").await;
    let worker = spawned["agent_id"].as_str().expect("worker").to_owned();
    let worker_task = spawned["task_handle"]["task_id"]
        .as_str()
        .expect("task")
        .to_owned();
    // The whole tree holds every one of them, so leaving them out below is
    // the filter's doing.
    let whole = crate::common::workspaces::tree(&mut c).await;
    let everything: HashSet<&str> = whole.nodes.iter().map(|n| n.id.as_str()).collect();
    for id in [
        &ops,
        &other,
        &lead,
        &sibling,
        &worker,
        &lead_task,
        &sibling_task,
        &worker_task,
    ] {
        assert!(
            everything.contains(id.as_str()),
            "{id} missing from the whole tree"
        );
    }

    let sub = c
        .supervision
        .get_tree(pb::GetTreeRequest {
            agent_id: lead.clone(),
            ..Default::default()
        })
        .await
        .expect("subtree")
        .into_inner();
    assert!(sub.next_page_token.is_empty(), "one page");
    let ids: HashSet<&str> = sub.nodes.iter().map(|n| n.id.as_str()).collect();
    let expected: HashSet<&str> = [lead.as_str(), worker_task.as_str(), worker.as_str()].into();
    assert_eq!(ids, expected, "{:#?}", sub.nodes);
    let first = &sub.nodes[0];
    assert_eq!((first.id.as_str(), first.depth), (lead.as_str(), 0));
    assert!(
        sub.nodes[1..].iter().all(|n| n.depth > 0),
        "{:#?}",
        sub.nodes
    );
    assert_eq!((sub.agents, sub.tasks), (2, 1));
    assert!(sub.mismatches.is_empty(), "{:?}", sub.mismatches);
}
