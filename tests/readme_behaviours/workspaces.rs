//! `AttachWorkspace` and `DetachWorkspace` as an agent's own tools: what it
//! attaches is listed and usable, what it detaches is gone for good, and
//! the directory itself is never touched.

use holarchy::client::Clients;
use serde_json::{json, Value};

use crate::common::workspaces::run;
use crate::common::{create, data_dir, tool_call, tool_output, Daemon};

async fn listed_ids(c: &mut Clients, agent_id: &str) -> Vec<String> {
    crate::common::workspaces::list_workspaces(c, agent_id)
        .await
        .workspaces
        .into_iter()
        .map(|w| w.workspace_id)
        .collect()
}

/// The workspace ids in a workspace tool's result.
fn tool_ids(out: &Value) -> Vec<&str> {
    out["workspaces"]
        .as_array()
        .expect("workspaces")
        .iter()
        .map(|w| w["workspace_id"].as_str().expect("id"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_attaches_works_in_and_detaches_a_workspace_through_its_tools() {
    let root = tempfile::tempdir().expect("tempdir");
    let project = root.path().join("project");
    std::fs::create_dir_all(&project).expect("mkdir");
    let project = std::fs::canonicalize(project).expect("canonical");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "builder", None).await;
    assert!(!listed_ids(&mut c, &id).await.contains(&"project".into()));

    run(
        &mut c,
        &id,
        json!([{ "name": "AttachWorkspace", "input": {
            "path": project.display().to_string(), "workspace_id": "project"
        } }]),
    )
    .await;
    let attached = tool_output(&mut c, &id, "AttachWorkspace").await;
    assert_eq!(attached["attached"]["workspace_id"], "project");
    assert_eq!(attached["attached"]["root"], project.display().to_string());
    assert!(tool_ids(&attached).contains(&"project"), "{attached}");
    assert!(listed_ids(&mut c, &id).await.contains(&"project".into()));

    // Usable: the agent switches to it and a command runs (and writes) there.
    run(
        &mut c,
        &id,
        json!([
            { "name": "UseWorkspace", "input": { "workspace_id": "project" } },
            { "name": "ExecCommand", "input": { "command": "pwd > made-here && pwd", "yield_ms": 10_000 } }
        ]),
    )
    .await;
    let ran = tool_output(&mut c, &id, "ExecCommand").await;
    assert_eq!(ran["exit"], "exit code 0", "{ran}");
    assert_eq!(ran["ran_in"]["workspace_id"], "project", "{ran}");
    let made = std::fs::read_to_string(project.join("made-here")).expect("written in project");
    assert_eq!(made.trim(), project.display().to_string());

    run(
        &mut c,
        &id,
        json!([{ "name": "DetachWorkspace", "input": { "workspace_id": "project" } }]),
    )
    .await;
    let detached = tool_output(&mut c, &id, "DetachWorkspace").await;
    assert_eq!(detached["detached"]["workspace_id"], "project");
    assert!(!tool_ids(&detached).contains(&"project"), "{detached}");
    assert_eq!(
        detached["active"]["workspace_id"], "agent_home",
        "{detached}"
    );
    assert!(!listed_ids(&mut c, &id).await.contains(&"project".into()));

    // Gone for good: the agent cannot switch back to it by id.
    run(
        &mut c,
        &id,
        json!([{ "name": "UseWorkspace", "input": { "workspace_id": "project" } }]),
    )
    .await;
    let (refused, out) = tool_call(&mut c, &id, "UseWorkspace").await;
    assert!(refused, "{out}");
    assert!(
        out["error"]
            .as_str()
            .is_some_and(|e| e.contains("no workspace")),
        "{out}"
    );
    // Detaching never touches the directory.
    assert!(project.join("made-here").exists());
}
