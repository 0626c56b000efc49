//! Helpers for workspace tests: git repositories made with the real git,
//! and an agent `lead` working in one.

use std::path::{Path, PathBuf};
use std::process::Command;

use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::{json, Value};

use super::{create, handled, messages, script, send};

/// Runs git in `dir`; panics unless it succeeds. Returns stdout, trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A repository with one commit on `main`, at its canonical path.
pub fn repository(root: &Path) -> PathBuf {
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).expect("mkdir");
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("README.md"), "the project\n").expect("write");
    commit_all(&repo, "init");
    std::fs::canonicalize(repo).expect("canonical")
}

/// The agent's attached workspaces, as `ListWorkspaces` gives them.
pub async fn list_workspaces(c: &mut Clients, agent_id: &str) -> pb::Workspaces {
    c.workspaces
        .list_workspaces(pb::ListWorkspacesRequest {
            agent_id: agent_id.into(),
            ..Default::default()
        })
        .await
        .expect("listed")
        .into_inner()
}

/// Commits everything in the working tree of `repo`.
pub fn commit_all(repo: &Path, message: &str) {
    git(repo, &["add", "."]);
    git(
        repo,
        &[
            "-c",
            "user.name=test",
            "-c",
            "user.email=test@example.com",
            "commit",
            "-qm",
            message,
        ],
    );
}

pub fn branches(repo: &Path) -> String {
    git(
        repo,
        &[
            "branch",
            "--list",
            "--format=%(refname:short)",
            "holarchy/*",
        ],
    )
}

/// Sends a script to a public agent and waits until it has been handled.
pub async fn run(c: &mut Clients, agent_id: &str, calls: Value) {
    let before = messages(c, agent_id).await.len();
    send(c, agent_id, &script(calls)).await;
    handled(c, agent_id, before + 1).await;
}

pub async fn attach(c: &mut Clients, agent_id: &str, path: &Path, id: &str) -> pb::Workspaces {
    c.workspaces
        .attach_workspace(pb::AttachWorkspaceRequest {
            agent_id: agent_id.into(),
            path: path.display().to_string(),
            workspace_id: id.into(),
        })
        .await
        .expect("attached")
        .into_inner()
}

/// `lead` with the repository attached and active; returns its id.
pub async fn lead_in(c: &mut Clients, repo: &Path) -> String {
    let lead = create(c, "lead", None).await;
    let listed = attach(c, &lead, repo, "repo").await;
    assert_eq!(listed.active_workspace_id, "agent_home");
    run(
        c,
        &lead,
        json!([{ "name": "UseWorkspace", "input": { "workspace_id": "repo" } }]),
    )
    .await;
    lead
}

/// Has `lead` spawn a worktree child running `command` first; returns the
/// child, its task and the worktree path.
pub async fn worktree_child(c: &mut Clients, lead: &str, first: &str) -> (String, String, PathBuf) {
    run(
        c,
        lead,
        json!([{ "name": "SpawnAgent", "input": {
            "preset": "private_child",
            "workspace_mode": "worktree",
            "initial_message": first,
        } }]),
    )
    .await;
    let (failed, out) = super::tool_call(c, lead, "SpawnAgent").await;
    assert!(!failed, "spawn failed: {out}");
    let child = out["agent_id"].as_str().expect("child").to_owned();
    let task = out["task_handle"]["task_id"]
        .as_str()
        .expect("task")
        .to_owned();
    let path = PathBuf::from(
        out["task_handle"]["worktree"]["path"]
            .as_str()
            .expect("worktree path"),
    );
    (child, task, path)
}

/// The task `task_id` in the (flat) tree.
pub fn tree_task<'a>(tree: &'a pb::GetTreeResponse, task_id: &str) -> Option<&'a pb::TreeNode> {
    tree.nodes.iter().find(|n| n.id == task_id)
}

/// The whole tree, its pages joined; the counts are the last page's, which
/// cover the whole walk.
pub async fn tree(c: &mut Clients) -> pb::GetTreeResponse {
    let mut tree = pb::GetTreeResponse::default();
    loop {
        let page = c
            .supervision
            .get_tree(pb::GetTreeRequest {
                page_token: std::mem::take(&mut tree.next_page_token),
                ..Default::default()
            })
            .await
            .expect("tree")
            .into_inner();
        tree.nodes.extend(page.nodes);
        tree.mismatches.extend(page.mismatches);
        (tree.agents, tree.tasks, tree.waits) = (page.agents, page.tasks, page.waits);
        tree.partitions = page.partitions;
        if page.next_page_token.is_empty() {
            return tree;
        }
        tree.next_page_token = page.next_page_token;
    }
}
