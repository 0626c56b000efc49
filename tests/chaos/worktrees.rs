//! Worktree children under chaos: a lead agent working in a git
//! repository spawns private children in `worktree` mode, each of which
//! patches a file of its own into its worktree, and the load stops some of
//! them. After every restart no worktree or branch is left that no task
//! holds, and every task that holds one has it on disk.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::json;

use crate::check::Checks;
use crate::fixtures::Fixtures;
use crate::load::{answered, Driver};

/// Running worktree children the lead keeps at most: past it, the load
/// stops one rather than spawning another.
const MOST: usize = 4;

/// The lead's child-agent tasks that own a worktree.
async fn worktree_tasks(c: &mut Clients, lead: &str) -> Result<Vec<pb::TaskHandle>, tonic::Status> {
    let mut out = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = c
            .tasks
            .list_tasks(pb::ListTasksRequest {
                agent_id: lead.to_owned(),
                page_size: 1000,
                page_token,
            })
            .await?
            .into_inner();
        out.extend(
            page.tasks
                .into_iter()
                .filter(|t| t.task_kind == "child_agent_task" && t.worktree.is_some()),
        );
        if page.next_page_token.is_empty() {
            return Ok(out);
        }
        page_token = page.next_page_token;
    }
}

impl Driver {
    /// A worktree child spawned by the lead, or one stopped when the lead
    /// has enough.
    pub(crate) async fn worktree_work(&mut self) {
        let lead = self.fixtures.lead.clone();
        let listed =
            tokio::time::timeout(crate::load::CALL, worktree_tasks(&mut self.c, &lead)).await;
        let running: Vec<String> = match listed {
            Ok(Ok(tasks)) => tasks
                .into_iter()
                .filter(|t| t.status == "running")
                .map(|t| t.task_id)
                .collect(),
            _ => return,
        };
        if running.len() >= MOST {
            let task = running[self.rng.below(running.len())].clone();
            let stopped = answered(self.c.tasks.stop_task(pb::StopTaskRequest {
                task_id: task.clone(),
            }))
            .await;
            let mut ledger = self.ledger();
            match stopped {
                Some(_) => {
                    ledger.ack("worktree_stop");
                    ledger.stopped.insert(task);
                }
                None => ledger.unknown("worktree_stop"),
            }
            return;
        }
        let n = self.n();
        let patch = format!("--- /dev/null\n+++ b/chaos-{n}.md\n@@ -0,0 +1 @@\n+{n}\n");
        let first =
            json!({ "tool_calls": [{ "name": "ApplyPatch", "input": { "patch": patch } }] });
        let spawn = json!([{ "name": "SpawnAgent", "input": {
            "preset": "private_child",
            "workspace_mode": "worktree",
            "initial_message": first.to_string(),
        } }]);
        self.send_calls(&lead, spawn, "worktree_spawn").await;
    }
}

/// How long after a restart the worktrees may take to match their tasks:
/// removals finish beside the serving daemon, and a spawn the kill cut
/// runs again.
const SETTLED: Duration = Duration::from_secs(20);

/// No worktree or branch outlives the task that held it, and each task
/// that holds one has it.
pub async fn none_stray(c: &mut Clients, fixtures: &Fixtures, kill: usize, checks: &mut Checks) {
    checks.run += 1;
    let started = Instant::now();
    loop {
        let problems = match worktree_tasks(c, &fixtures.lead).await {
            Ok(tasks) => stray(&fixtures.repo, &tasks),
            Err(status) => vec![format!("ListTasks of the lead: {status}")],
        };
        if problems.is_empty() {
            return;
        }
        if started.elapsed() > SETTLED {
            return checks.fail(kill, format!("worktrees: {problems:?}"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn stray(repo: &Path, tasks: &[pb::TaskHandle]) -> Vec<String> {
    // The lead is never archived, so a completed task holds its worktree
    // as a running one does.
    let held: Vec<&pb::Worktree> = tasks
        .iter()
        .filter(|t| matches!(t.status.as_str(), "running" | "completed"))
        .filter_map(|t| t.worktree.as_ref())
        .collect();
    let held_paths: BTreeSet<&str> = held.iter().map(|w| w.path.as_str()).collect();
    let held_branches: BTreeSet<&str> = held.iter().map(|w| w.branch.as_str()).collect();
    let mut problems = Vec::new();
    let listed = git(repo, &["worktree", "list", "--porcelain"]);
    for path in listed.lines().filter_map(|l| l.strip_prefix("worktree ")) {
        if Path::new(path) != repo && !held_paths.contains(path) {
            problems.push(format!("worktree {path} is held by no task"));
        }
    }
    let branches = git(repo, &["branch", "--format=%(refname:short)"]);
    for branch in branches.lines().filter(|b| *b != "main") {
        if !held_branches.contains(branch) {
            problems.push(format!("branch {branch} is held by no task"));
        }
    }
    for worktree in held {
        if !Path::new(&worktree.path).exists() {
            problems.push(format!(
                "task {} holds worktree {}, which is not there",
                worktree.owner_task_id, worktree.path
            ));
        }
    }
    problems
}

/// Git's answer, or what went wrong (as a line a check would report).
fn git(repo: &Path, args: &[&str]) -> String {
    match std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
    {
        Ok(out) => String::from_utf8_lossy(&out.stdout).into_owned(),
        Err(err) => format!("git {args:?}: {err}"),
    }
}
