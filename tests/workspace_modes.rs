//! End-to-end: what children start with in each `workspace_mode`, what a
//! public agent inherits, how long a completed child's worktree lives, and
//! the operator CLI.

mod common;

use std::path::Path;

use common::workspaces::{
    branches, git, lead_in, list_workspaces, repository, run, tree, tree_task, worktree_child,
};
use common::{data_dir, eventually, handled, script, tool_call, tool_output, Daemon};
use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::json;

/// Spawns a child of `lead` with `input` (plus a `pwd` as its first
/// message); returns where the child's command ran.
async fn child_ran_in(c: &mut Clients, lead: &str, input: serde_json::Value) -> (String, String) {
    let mut input = input;
    input["initial_message"] = json!(script(
        json!([{ "name": "ExecCommand", "input": { "command": "pwd" } }])
    ));
    run(c, lead, json!([{ "name": "SpawnAgent", "input": input }])).await;
    let child = tool_output(c, lead, "SpawnAgent").await["agent_id"]
        .as_str()
        .expect("child")
        .to_owned();
    handled(c, &child, 1).await;
    let out = tool_output(c, &child, "ExecCommand").await;
    let dir = out["ran_in"]["dir"].as_str().expect("dir").to_owned();
    assert_eq!(
        out["task_handle"]["initial_output"].as_str().map(str::trim),
        Some(dir.as_str()),
        "the command's own pwd"
    );
    (
        out["ran_in"]["workspace_id"]
            .as_str()
            .expect("id")
            .to_owned(),
        child,
    )
}

async fn task_count(c: &mut Clients, agent_id: &str) -> usize {
    let request = pb::ListTasksRequest {
        agent_id: agent_id.into(),
        ..Default::default()
    };
    let listed = c.tasks.list_tasks(request).await.expect("tasks");
    listed.into_inner().tasks.len()
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_start_where_their_mode_says_and_public_ones_get_the_set_only() {
    let root = tempfile::tempdir().expect("tempdir");
    let repo = repository(root.path());
    std::fs::create_dir_all(repo.join("sub")).expect("mkdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let lead = lead_in(&mut c, &repo).await;
    run(
        &mut c,
        &lead,
        json!([{ "name": "UseWorkspace", "input": { "path": "sub" } }]),
    )
    .await;
    assert_eq!(
        list_workspaces(&mut c, &lead).await.active_dir,
        shown(&repo.join("sub"))
    );

    // inherit: the parent's set and active directory.
    let (id, child) = child_ran_in(&mut c, &lead, json!({})).await;
    assert_eq!(id, "repo");
    let inherited = list_workspaces(&mut c, &child).await;
    assert_eq!(inherited.active_dir, shown(&repo.join("sub")));

    // explicit_root: only that directory, relative to the parent's.
    let (id, child) = child_ran_in(
        &mut c,
        &lead,
        json!({ "workspace_mode": "explicit_root", "root": "." }),
    )
    .await;
    assert_eq!(id, "repo");
    let confined = list_workspaces(&mut c, &child).await;
    let roots: Vec<_> = confined.workspaces.iter().map(|w| w.root.clone()).collect();
    assert_eq!(roots[1..], [shown(&repo.join("sub"))]);

    // explicit_root outside the parent's set: refused, no child made.
    let before = task_count(&mut c, &lead).await;
    run(
        &mut c,
        &lead,
        json!([{ "name": "SpawnAgent", "input": { "workspace_mode": "explicit_root", "root": "../..", "initial_message": "x" } }]),
    )
    .await;
    let (refused, out) = tool_call(&mut c, &lead, "SpawnAgent").await;
    assert!(refused, "{out}");
    let after = task_count(&mut c, &lead).await;
    assert_eq!(before, after);

    // A public agent: the attached set, never the active workspace.
    run(
        &mut c,
        &lead,
        json!([{ "name": "SpawnAgent", "input": { "preset": "public_named", "name": "helper" } }]),
    )
    .await;
    let helper = tool_output(&mut c, &lead, "SpawnAgent").await["agent_id"]
        .as_str()
        .expect("helper")
        .to_owned();
    let public = list_workspaces(&mut c, &helper).await;
    let ids: Vec<_> = public
        .workspaces
        .iter()
        .map(|w| w.workspace_id.as_str())
        .collect();
    assert_eq!(ids, ["agent_home", "repo"]);
    assert_eq!(public.active_workspace_id, "agent_home");

    // worktree mode needs a repository where the parent stands.
    run(
        &mut c,
        &lead,
        json!([
            { "name": "UseWorkspace", "input": { "workspace_id": "agent_home" } },
            { "name": "SpawnAgent", "input": { "workspace_mode": "worktree", "initial_message": "x" } },
        ]),
    )
    .await;
    let (refused, out) = tool_call(&mut c, &lead, "SpawnAgent").await;
    assert!(refused, "{out}");
    assert!(
        out["error"]
            .as_str()
            .is_some_and(|e| e.contains("git repository")),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_childs_worktree_stays_for_its_owner_until_stopped_or_archived() {
    let root = tempfile::tempdir().expect("tempdir");
    let repo = repository(root.path());
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let lead = lead_in(&mut c, &repo).await;
    let finish = json!({ "reply": "done", "done": true }).to_string();

    let (_, task, path) = worktree_child(&mut c, &lead, &finish).await;
    eventually("the child to complete", || {
        let mut c = c.clone();
        let task = task.clone();
        async move { (common::get_task(&mut c, &task).await.status == "completed").then_some(()) }
    })
    .await;
    assert!(path.exists(), "kept for the owner to take the branch");
    assert!(!branches(&repo).is_empty());
    // Operators still see who holds it: the ended task stays in the tree.
    let shown = tree(&mut c).await;
    let node =
        tree_task(&shown, &task).expect("the completed task holding a worktree is in the tree");
    assert_eq!(node.state, "completed");
    assert_eq!(
        node.worktree.as_ref().map(|w| w.path.as_str()),
        path.to_str()
    );
    c.tasks
        .stop_task(pb::StopTaskRequest {
            task_id: task.clone(),
        })
        .await
        .expect("stopping an ended task lets its worktree go");
    assert!(!path.exists());
    assert_eq!(branches(&repo), "");
    let again = c
        .tasks
        .stop_task(pb::StopTaskRequest { task_id: task })
        .await
        .expect_err("nothing left to stop");
    assert_eq!(again.code(), tonic::Code::FailedPrecondition, "{again:?}");
    assert!(again.message().contains("not running"), "{again:?}");

    let (_, task, path) = worktree_child(&mut c, &lead, &finish).await;
    eventually("the second child to complete", || {
        let mut c = c.clone();
        let task = task.clone();
        async move { (common::get_task(&mut c, &task).await.status == "completed").then_some(()) }
    })
    .await;
    c.agents
        .archive_agent(pb::ArchiveAgentRequest {
            agent_id: lead.clone(),
        })
        .await
        .expect("archived");
    assert!(!path.exists(), "the owner's cleanup takes it");
    assert_eq!(branches(&repo), "");
    assert_eq!(
        git(&repo, &["worktree", "list", "--porcelain"])
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_attach_list_and_detach_with_the_cli() {
    let root = tempfile::tempdir().expect("tempdir");
    let repo = repository(root.path());
    let dir = data_dir(&root);
    let daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    common::create(&mut c, "ops", None).await;
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_holarchy"))
            .arg("--data-dir")
            .arg(&dir)
            .args(args)
            .output()
            .expect("cli runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, out, err) = cli(&[
        "workspace",
        "attach",
        "ops",
        &shown(&repo),
        "--id",
        "project",
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains("project") && out.contains(&shown(&repo)),
        "{out}"
    );
    let (ok, out, err) = cli(&["--json", "workspace", "list", "ops"]);
    assert!(ok, "{err}");
    let listed: serde_json::Value = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(listed["workspaces"][1]["workspace_id"], "project");
    assert_eq!(listed["active_workspace_id"], "agent_home");
    let (ok, _, err) = cli(&["workspace", "attach", "ops", &shown(&repo)]);
    assert!(!ok && err.contains("already attached"), "{err}");
    let (ok, out, err) = cli(&["workspace", "detach", "ops", "project"]);
    assert!(ok, "{err}");
    // It prints what is left: the home, without the detached workspace.
    assert!(out.contains("agent_home"), "{out}");
    assert!(!out.contains("project"), "{out}");
    let (ok, out, err) = cli(&["--json", "workspace", "list", "ops"]);
    assert!(ok, "{err}");
    let listed: serde_json::Value = serde_json::from_str(out.trim()).expect("json");
    let ids: Vec<_> = listed["workspaces"]
        .as_array()
        .expect("workspaces")
        .iter()
        .map(|w| w["workspace_id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["agent_home"], "{out}");
    assert!(repo.exists(), "detaching never touches the directory");
    let (ok, _, err) = cli(&["workspace", "detach", "ops", "agent_home"]);
    assert!(!ok && err.contains("built in"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worktrees_of_worktrees_belong_to_the_repository_and_reach_no_further_than_the_parent() {
    let root = tempfile::tempdir().expect("tempdir");
    let repo = repository(root.path());
    std::fs::create_dir_all(repo.join("svc")).expect("mkdir");
    std::fs::write(repo.join("svc/main.rs"), "fn main() {}\n").expect("write");
    git(&repo, &["add", "."]);
    git(
        &repo,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-qm",
            "svc",
        ],
    );
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    // The lead may touch only svc/ of the repository.
    let lead = lead_in(&mut c, &repo.join("svc")).await;
    let grandchild = script(json!([{ "name": "SpawnAgent", "input": {
        "workspace_mode": "worktree", "initial_message": "hold the nested checkout",
    } }]));
    run(
        &mut c,
        &lead,
        json!([{ "name": "SpawnAgent", "input": {
            "preset": "private_delegator", "workspace_mode": "worktree", "initial_message": grandchild,
        } }]),
    )
    .await;
    let out = tool_output(&mut c, &lead, "SpawnAgent").await;
    let child = out["agent_id"].as_str().expect("child").to_owned();
    let task = out["task_handle"]["task_id"]
        .as_str()
        .expect("task")
        .to_owned();
    let outer = out["task_handle"]["worktree"]["path"]
        .as_str()
        .expect("path")
        .to_owned();
    let confined = list_workspaces(&mut c, &child).await;
    assert_eq!(confined.workspaces[1].root, format!("{outer}/svc"));
    handled(&c, &child, 1).await;
    let inner = tool_output(&mut c, &child, "SpawnAgent").await["task_handle"]["worktree"].clone();
    let inner_path = inner["path"].as_str().expect("path").to_owned();
    assert_eq!(inner["repository"], shown(&repo.join(".git")));
    assert!(Path::new(&inner_path).join("svc/main.rs").exists());
    assert_eq!(branches(&repo).lines().count(), 2);

    // Stopping the child takes its subtree, and both worktrees with it,
    // whichever of them goes first.
    c.tasks
        .stop_task(pb::StopTaskRequest { task_id: task })
        .await
        .expect("stopped");
    assert!(!Path::new(&outer).exists() && !Path::new(&inner_path).exists());
    assert_eq!(branches(&repo), "");
    let listed = git(&repo, &["worktree", "list", "--porcelain"]);
    assert_eq!(
        listed
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        1,
        "{listed}"
    );
}
