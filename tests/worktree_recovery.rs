//! The runtime in-process over the real sled store: worktrees that a crash
//! left behind are found and removed when the runtime starts, and those a
//! task still holds are kept.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::workspaces::{branches, git, repository};
use holarchy::store::sled_store::StoreConfig;
use holarchy::store::SledStore;
use holarchy_actors::{Batch, Reads, Runtime, RuntimeConfig, ScriptedBrain, Store, Write};
use holarchy_supervision::workspace::{Projection, Worktree};
use holarchy_supervision::{
    AgentId, AgentRecord, LifecycleState, Preset, TaskId, TaskKind, TaskRecord, TaskStatus,
};

fn agent(name: &str, state: LifecycleState) -> AgentRecord {
    AgentRecord {
        state,
        ..AgentRecord::public(name, 1)
    }
}

/// An ended child task of `owner` owning a worktree of `repo`, made on disk
/// when `made`.
fn task(owner: AgentId, status: TaskStatus, repo: &Path, root: &Path, made: bool) -> TaskRecord {
    let id = TaskId::generate();
    let base = git(repo, &["rev-parse", "HEAD"]);
    let worktree = Worktree::for_task(repo.join(".git"), base, root, id);
    if made {
        let path = worktree.path.to_string_lossy().into_owned();
        git(
            repo,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                &worktree.branch,
                &path,
                "HEAD",
            ],
        );
    }
    let kind = TaskKind::ChildAgent {
        child_agent_id: AgentId::generate(),
    };
    TaskRecord {
        status,
        output: Some("ended".into()),
        worktree: Some(worktree),
        ..TaskRecord::running(id, owner, kind, "work".into(), 1)
    }
}

fn removed(store: &SledStore, id: TaskId) -> bool {
    store
        .task(id)
        .expect("read")
        .and_then(|t| t.worktree)
        .is_some_and(|w| w.removed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worktrees_a_crash_left_behind_are_removed_at_start_and_held_ones_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = repository(dir.path());
    let root = dir.path().join("worktrees");
    std::fs::create_dir_all(&root).expect("mkdir");
    let root = std::fs::canonicalize(root).expect("canonical");
    let store =
        Arc::new(SledStore::open(&dir.path().join("db"), &StoreConfig::default()).expect("store"));

    // What a kill -9 between a task's end and its worktree's removal leaves,
    // in each of its shapes.
    let lead = agent("lead", LifecycleState::Active);
    let gone = agent("gone", LifecycleState::Archived);
    let stopped = task(lead.id, TaskStatus::Stopped, &repo, &root, true);
    let never_made = task(lead.id, TaskStatus::Failed, &repo, &root, false);
    let orphaned = task(gone.id, TaskStatus::Completed, &repo, &root, true);
    let held = task(lead.id, TaskStatus::Completed, &repo, &root, true);
    // A running child whose worktree `git worktree add` never finished.
    let mut running = task(lead.id, TaskStatus::Running, &repo, &root, false);
    let child = AgentRecord {
        name: None,
        profile: Preset::PrivateChild.profile(),
        lineage_parent_agent_id: Some(lead.id),
        supervisor_agent_id: Some(lead.id),
        ..agent("child", LifecycleState::Active)
    };
    running.kind = TaskKind::ChildAgent {
        child_agent_id: child.id,
    };
    running.output = None;
    let unmade = running.worktree.clone().expect("worktree");
    let start = unmade.path.join("sub");
    let projection = Projection::confined(
        child.id,
        "worktree".into(),
        unmade.path.clone(),
        start.clone(),
        1,
    );
    let mut batch = Batch::new()
        .write(Write::CreateAgent(lead.clone()))
        .write(Write::CreateAgent(gone.clone()))
        .write(Write::CreateAgent(child))
        .write(Write::PutWorkspaces(projection));
    for t in [&stopped, &never_made, &orphaned, &held, &running] {
        batch = batch.write(Write::PutTask(t.clone()));
    }
    store.commit(batch).expect("commit");
    store.durable().await.expect("flush");
    assert_eq!(store.worktree_tasks().expect("index").len(), 5);

    let mut config = RuntimeConfig {
        worktree_root: root.clone(),
        workspace_root: dir.path().join("homes"),
        ..RuntimeConfig::default()
    };
    // Checkouts run confined, in units of the real binary.
    config.sandbox.unit_program = env!("CARGO_BIN_EXE_holarchy").into();
    let runtime = Runtime::start(store.clone(), Arc::new(ScriptedBrain), config)
        .await
        .expect("runtime starts");
    let started = Instant::now();
    while !(removed(&store, stopped.id)
        && removed(&store, never_made.id)
        && removed(&store, orphaned.id))
    {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "sweep never finished"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for t in [&stopped, &orphaned] {
        let w = t.worktree.as_ref().expect("worktree");
        assert!(!w.path.exists(), "{} still on disk", w.path.display());
    }
    while !start.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "never made again"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!removed(&store, running.id));
    // The completed child's work stays for its live owner to take.
    let kept = held.worktree.as_ref().expect("worktree");
    assert!(kept.path.exists() && !removed(&store, held.id));
    let mut expected = [kept.branch.clone(), unmade.branch.clone()];
    expected.sort();
    assert_eq!(branches(&repo), expected.join("\n"));
    let listed = git(&repo, &["worktree", "list", "--porcelain"]);
    let trees = listed.lines().filter(|l| l.starts_with("worktree "));
    assert_eq!(trees.count(), 3);
    let mut index: Vec<_> = store.worktree_tasks().expect("index");
    index.sort_by_key(|t| t.id);
    let index: Vec<_> = index.iter().map(|t| t.id).collect();
    assert_eq!(index, [held.id, running.id]);
    runtime.shutdown(Duration::from_secs(10)).await;
}
