//! End-to-end: workspaces through the real daemon. Operators attach a git
//! repository; the agent works in it; a child in `worktree` mode works on
//! its own branch in its own checkout, which its task handle owns and
//! removes, across a `kill -9` too; the authority rules and `ApplyPatch`'s
//! refusals hold.

mod common;

use common::workspaces::{
    branches, git, lead_in, repository, run, tree, tree_task, worktree_child,
};
use common::{data_dir, eventually, handled, script, tool_call, Daemon};
use holarchy::api::pb;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worktree_child_works_on_its_own_branch_and_task_stop_removes_it() {
    let root = tempfile::tempdir().expect("tempdir");
    let repo = repository(root.path());
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let lead = lead_in(&mut c, &repo).await;

    let commit = "echo from-child > child.txt && git add child.txt && git -c user.name=child -c user.email=child@example.com commit -qm child && pwd";
    let first = script(json!([{ "name": "ExecCommand", "input": { "command": commit } }]));
    let (child, task, path) = worktree_child(&mut c, &lead, &first).await;
    let work = eventually("the child's command", || {
        let mut c = c.clone();
        let child = child.clone();
        async move {
            let done = handled(&c, &child, 1).await;
            (!done.is_empty()).then_some(())?;
            Some(tool_call(&mut c, &child, "ExecCommand").await)
        }
    })
    .await;
    let (failed, out) = work;
    assert!(!failed, "{out}");
    assert_eq!(out["exit"], "exit code 0", "{out}");
    assert_eq!(out["ran_in"]["workspace_id"], "worktree");
    assert_eq!(out["ran_in"]["dir"], path.display().to_string());
    assert!(out["task_handle"]["initial_output"]
        .as_str()
        .is_some_and(|o| o.contains(&path.display().to_string())));

    // The child's change is on its branch, in its checkout, not the parent's.
    assert!(path.join("child.txt").exists());
    assert!(!repo.join("child.txt").exists());
    assert_eq!(git(&repo, &["log", "--format=%s", "main"]), "init");
    let branch = format!("holarchy/{task}");
    assert_eq!(git(&repo, &["log", "--format=%s", "-1", &branch]), "child");

    // The parent's own commands still run in the repository, as it sees.
    run(&mut c, &lead, json!([{ "name": "AgentGet", "input": {} }])).await;
    let me = tool_call(&mut c, &lead, "AgentGet").await.1;
    assert_eq!(
        me["agent"]["active_workspace"]["dir"],
        repo.display().to_string()
    );
    run(
        &mut c,
        &lead,
        json!([{ "name": "ExecCommand", "input": { "command": "ls" } }]),
    )
    .await;
    let (_, ls) = tool_call(&mut c, &lead, "ExecCommand").await;
    assert_eq!(ls["ran_in"]["dir"], repo.display().to_string());
    assert!(!ls["task_handle"]["initial_output"]
        .as_str()
        .unwrap_or_default()
        .contains("child.txt"));

    // Operators see the worktree on the task and in the tree.
    let handle = common::get_task(&mut c, &task).await;
    let worktree = handle.worktree.expect("the task owns a worktree");
    assert_eq!(
        (worktree.path.as_str(), worktree.branch.as_str()),
        (path.to_str().expect("utf-8"), branch.as_str())
    );
    assert_eq!(worktree.owner_task_id, task);
    let shown = tree(&mut c).await;
    let node = tree_task(&shown, &task).expect("task in the tree");
    assert_eq!(
        node.worktree.as_ref().map(|w| w.branch.as_str()),
        Some(branch.as_str())
    );
    assert!(shown.mismatches.is_empty(), "{:?}", shown.mismatches);

    let stopped = c
        .tasks
        .stop_task(pb::StopTaskRequest {
            task_id: task.clone(),
        })
        .await
        .expect("stopped")
        .into_inner();
    assert_eq!(stopped.status, "stopped");
    assert!(stopped.worktree.is_some_and(|w| w.removed));
    assert!(!path.exists(), "the worktree is gone");
    assert_eq!(branches(&repo), "", "the branch is gone");
    assert!(!git(&repo, &["worktree", "list"]).contains(&path.display().to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_9_between_worktree_creation_and_cleanup_leaves_no_stray_worktree() {
    let root = tempfile::tempdir().expect("tempdir");
    let repo = repository(root.path());
    let mut daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let lead = lead_in(&mut c, &repo).await;
    let (_, first_task, first) = worktree_child(&mut c, &lead, "hold this checkout").await;
    let (_, second_task, second) = worktree_child(&mut c, &lead, "and this one").await;
    assert!(first.exists() && second.exists());

    // Killed with both worktrees made and their tasks running: they are
    // the children's, kept across the restart.
    daemon.kill9();
    let mut daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    assert!(first.exists() && second.exists());
    assert_eq!(
        common::get_task(&mut c, &first_task).await.status,
        "running"
    );

    // Killed again just as the first task is being stopped: whether the
    // stop landed or not, nothing may be left half done after the restart.
    let mut stopping = c.clone();
    let task = first_task.clone();
    let stop = tokio::spawn(async move {
        let _ = stopping
            .tasks
            .stop_task(pb::StopTaskRequest { task_id: task })
            .await;
    });
    eventually("the stop to begin", || {
        let mut c = c.clone();
        let task = first_task.clone();
        let first = first.clone();
        async move {
            let t = common::get_task(&mut c, &task).await;
            (t.status != "running" || !first.exists()).then_some(())
        }
    })
    .await;
    daemon.kill9();
    let _ = stop.await;
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let status = common::get_task(&mut c, &first_task).await.status;
    if status == "running" {
        c.tasks
            .stop_task(pb::StopTaskRequest {
                task_id: first_task.clone(),
            })
            .await
            .expect("stopped after the restart");
    }
    c.tasks
        .stop_task(pb::StopTaskRequest {
            task_id: second_task.clone(),
        })
        .await
        .expect("stopped");
    eventually("every worktree and branch removed", || {
        let repo = repo.clone();
        async move {
            let list = git(&repo, &["worktree", "list", "--porcelain"]);
            let trees = list.lines().filter(|l| l.starts_with("worktree ")).count();
            (trees == 1 && branches(&repo).is_empty()).then_some(())
        }
    })
    .await;
    assert!(!second.exists());
    for task in [&first_task, &second_task] {
        let handle = common::get_task(&mut c, task).await;
        assert_ne!(handle.status, "running");
        assert!(handle.worktree.is_some_and(|w| w.removed), "{task}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_child_cannot_attach_a_new_root_and_nothing_changes() {
    let root = tempfile::tempdir().expect("tempdir");
    let repo = repository(root.path());
    let elsewhere = root.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let lead = lead_in(&mut c, &repo).await;
    let attempt = script(json!([
        { "name": "UseWorkspace", "input": { "path": elsewhere.display().to_string() } },
        { "name": "UseWorkspace", "input": { "path": "../elsewhere" } },
        { "name": "AttachWorkspace", "input": { "path": elsewhere.display().to_string() } },
    ]));
    run(
        &mut c,
        &lead,
        json!([{ "name": "SpawnAgent", "input": { "initial_message": attempt } }]),
    )
    .await;
    let (_, spawned) = tool_call(&mut c, &lead, "SpawnAgent").await;
    let child = spawned["agent_id"].as_str().expect("child").to_owned();
    handled(&c, &child, 1).await;
    let (refused, out) = tool_call(&mut c, &child, "UseWorkspace").await;
    assert!(refused, "{out}");
    assert!(
        out["error"]
            .as_str()
            .is_some_and(|e| e.contains("authority_expansion")),
        "{out}"
    );
    let (refused, out) = tool_call(&mut c, &child, "AttachWorkspace").await;
    assert!(
        refused && out["error"].as_str().is_some_and(|e| e.contains("catalog")),
        "{out}"
    );

    // The child kept what it inherited: the repository, active.
    let listed = c
        .workspaces
        .list_workspaces(pb::ListWorkspacesRequest {
            agent_id: child.clone(),
            ..Default::default()
        })
        .await
        .expect("listed")
        .into_inner();
    let ids: Vec<_> = listed
        .workspaces
        .iter()
        .map(|w| w.workspace_id.as_str())
        .collect();
    assert_eq!(ids, ["agent_home", "repo"]);
    assert_eq!(listed.active_dir, repo.display().to_string());

    // Operators may not widen a private agent either.
    let denied = c
        .workspaces
        .attach_workspace(pb::AttachWorkspaceRequest {
            agent_id: child,
            path: elsewhere.display().to_string(),
            workspace_id: String::new(),
        })
        .await
        .expect_err("private");
    assert_eq!(denied.code(), tonic::Code::PermissionDenied, "{denied:?}");
    assert!(denied.message().contains("private"), "{denied:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_patch_refuses_escapes_and_failing_hunks_and_changes_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let repo = repository(root.path());
    std::fs::write(root.path().join("outside.txt"), "keep\n").expect("write");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let lead = lead_in(&mut c, &repo).await;
    let outside = root.path().join("outside.txt");
    let patches = [
        "--- a/../outside.txt\n+++ b/../outside.txt\n@@ -1 +1 @@\n-keep\n+lost\n".to_owned(),
        format!(
            "--- {0}\n+++ {0}\n@@ -1 +1 @@\n-keep\n+lost\n",
            outside.display()
        ),
        "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-the project\n+changed\n--- a/missing.md\n+++ b/missing.md\n@@ -1 +1 @@\n-x\n+y\n".to_owned(),
        "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-not what is there\n+changed\n".to_owned(),
    ];
    for patch in &patches {
        run(
            &mut c,
            &lead,
            json!([{ "name": "ApplyPatch", "input": { "patch": patch } }]),
        )
        .await;
        let (refused, out) = tool_call(&mut c, &lead, "ApplyPatch").await;
        assert!(refused, "{patch}: {out}");
        assert_eq!(std::fs::read_to_string(&outside).expect("read"), "keep\n");
        assert_eq!(
            std::fs::read_to_string(repo.join("README.md")).expect("read"),
            "the project\n"
        );
        assert!(!repo.join("missing.md").exists());
    }

    let good = "--- a/README.md\n+++ b/README.md\n@@ -1 +1,2 @@\n the project\n+patched\n--- /dev/null\n+++ b/docs/new.md\n@@ -0,0 +1 @@\n+new\n";
    run(
        &mut c,
        &lead,
        json!([{ "name": "ApplyPatch", "input": { "patch": good } }]),
    )
    .await;
    let (refused, out) = tool_call(&mut c, &lead, "ApplyPatch").await;
    assert!(!refused, "{out}");
    assert_eq!(
        out["files"],
        json!([
            { "path": "README.md", "change": "modified" },
            { "path": "docs/new.md", "change": "created" },
        ])
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("README.md")).expect("read"),
        "the project\npatched\n"
    );
}
