//! The tour's workspace part: `workspace attach|list|detach`, an agent
//! working in the attached project, and a worktree-isolated child that
//! `tree` shows and `task stop` removes.

use serde_json::json;

use crate::cli::{handled, text, until, Holarchy};
use crate::common::workspaces::{branches, repository};
use crate::common::{self, data_dir, Daemon};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builder_works_in_an_attached_project_and_a_worktree_child() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    let project = repository(root.path());
    let project_dir = project.to_str().expect("utf-8");
    cli.ok(&["agent", "create", "builder"]);

    // Attaching binds the directory without making it active.
    let attached = cli.ok(&[
        "workspace",
        "attach",
        "builder",
        project_dir,
        "--id",
        "project",
    ]);
    assert!(
        attached
            .lines()
            .any(|l| l.starts_with("  project") && l.ends_with(project_dir)),
        "{attached}"
    );
    assert!(
        attached.lines().any(|l| l.starts_with("* agent_home")),
        "{attached}"
    );

    let enter =
        common::script(json!([{ "name": "UseWorkspace", "input": { "workspace_id": "project" } }]));
    cli.ok(&["agent", "send", "builder", &enter]);
    handled(&cli, "builder", 1);
    let listed = cli.ok(&["workspace", "list", "builder"]);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("* project") && l.ends_with(project_dir)),
        "{listed}"
    );
    assert!(
        listed.contains(&format!("active: {project_dir} (project)")),
        "{listed}"
    );
    let shown = cli.json_one(&["workspace", "list", "builder"]);
    assert_eq!(shown["active_workspace_id"], "project");
    assert_eq!(shown["active_dir"], project_dir);

    // A child in its own worktree: the tree shows it on its task, and
    // stopping the task removes the worktree and its branch.
    let spawn = common::script(json!([{ "name": "SpawnAgent", "input": {
        "workspace_mode": "worktree", "initial_message": "fix the flaky test" } }]));
    cli.ok(&["agent", "send", "builder", &spawn]);
    let task = until("the worktree child's task", || {
        cli.json(&["task", "list", "builder"])
            .into_iter()
            .find(|t| t["label"] == "fix the flaky test" && !t["worktree"].is_null())
    });
    let task_id = text(&task, "task_id").to_owned();
    let worktree = text(&task["worktree"], "path").to_owned();
    let branch = text(&task["worktree"], "branch").to_owned();
    assert_eq!(branch, format!("holarchy/{task_id}"));
    // The handle names the worktree as soon as it is planned; git checks
    // it out just after.
    until("the worktree checked out", || {
        std::path::Path::new(&worktree)
            .join("README.md")
            .is_file()
            .then_some(())
    });
    let tree = cli.ok(&["tree"]);
    assert!(
        tree.lines()
            .any(|l| l.contains(&task_id[task_id.len() - 6..])
                && l.contains(&format!("[worktree {worktree} on {branch}]"))),
        "{tree}"
    );
    assert!(branches(&project).contains(&branch));

    let stopped = cli.json_one(&["task", "stop", &task_id]);
    assert_eq!(stopped["status"], "stopped");
    until("the worktree removed", || {
        let handle = cli.json_one(&["task", "get", &task_id]);
        (handle["worktree"]["removed"] == true).then_some(())
    });
    assert!(
        !std::path::Path::new(&worktree).exists(),
        "{worktree} left behind"
    );
    assert!(!branches(&project).contains(&branch));
    assert!(!cli.ok(&["tree"]).contains(&worktree));

    // Detaching removes the binding, never the directory; the agent goes
    // back home.
    let detached = cli.json_one(&["workspace", "detach", "builder", "project"]);
    let ids: Vec<&str> = detached["workspaces"]
        .as_array()
        .expect("workspaces")
        .iter()
        .map(|w| text(w, "workspace_id"))
        .collect();
    assert_eq!(ids, ["agent_home"]);
    assert_eq!(detached["active_workspace_id"], "agent_home");
    assert!(project.join("README.md").is_file());
    let listed = cli.ok(&["workspace", "list", "builder"]);
    assert!(!listed.contains("project"), "{listed}");
    let again = cli.fails(&["workspace", "detach", "builder", "project"]);
    assert!(again.contains("not found"), "{again}");
}
