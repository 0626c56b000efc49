//! End-to-end: one agent's slow structural change never stalls another's.
//! A worktree spawn stuck in a slow git checkout (a smudge filter that
//! sleeps) holds only its caller's structure; meanwhile another agent runs
//! commands, arms timers, spawns children and changes workspaces. The
//! filter, a program the agent could have configured, runs confined.

mod common;

use std::path::{Path, PathBuf};
use std::time::Instant;

use common::workspaces::{commit_all, git, lead_in, run};
use common::{create, data_dir, eventually, exec, tool_output, Daemon};
use serde_json::json;

/// Where the slow checkout marks its start and its end, and the file that
/// lets it go on.
struct Checkout {
    started: PathBuf,
    finished: PathBuf,
    release: PathBuf,
}

/// A repository whose checkout runs a smudge filter that marks its start
/// (in the git directory, which the confined checkout may write), tries to
/// write outside what it may, waits until the test lets it go (an hour at
/// most), then marks its end.
fn slow_repository(root: &Path) -> (PathBuf, Checkout) {
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).expect("mkdir");
    let git_dir = repo.join(".git");
    let checkout = Checkout {
        started: git_dir.join("checkout-started"),
        finished: git_dir.join("checkout-finished"),
        release: git_dir.join("checkout-release"),
    };
    git(&repo, &["init", "-q", "-b", "main"]);
    let smudge = format!(
        "touch {}; touch {}; i=0; while [ ! -e {} ] && [ $i -lt 72000 ]; do sleep 0.05; i=$((i+1)); done; cat; touch {}",
        checkout.started.display(),
        root.join("escaped").display(),
        checkout.release.display(),
        checkout.finished.display()
    );
    git(&repo, &["config", "filter.slow.smudge", &smudge]);
    git(&repo, &["config", "filter.slow.clean", "cat"]);
    std::fs::write(repo.join(".gitattributes"), "*.slow filter=slow\n").expect("write");
    std::fs::write(repo.join("data.slow"), "slow to check out\n").expect("write");
    commit_all(&repo, "init");
    // The commit's own checkout ran no smudge; only the spawn's will.
    let _ = std::fs::remove_file(&checkout.started);
    let repo = std::fs::canonicalize(repo).expect("canonical");
    (repo, checkout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worktree_spawn_stuck_in_git_stalls_no_other_agent() {
    let root = tempfile::tempdir().expect("tempdir");
    let (repo, checkout) = slow_repository(root.path());
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let lead = lead_in(&mut c, &repo).await;
    let other = create(&mut c, "other", None).await;

    // The lead's spawn goes into git and stays there.
    common::send(
        &mut c,
        &lead,
        &common::script(json!([{ "name": "SpawnAgent", "input": {
            "preset": "private_child",
            "workspace_mode": "worktree",
            "initial_message": "work on your branch",
        } }])),
    )
    .await;
    eventually("the checkout to start", || {
        let started = checkout.started.clone();
        async move { started.exists().then_some(()) }
    })
    .await;

    // Meanwhile the other agent's structural changes go through at once.
    let scratch = root.path().join("scratch");
    std::fs::create_dir_all(&scratch).expect("mkdir");
    let mut latencies = Vec::new();
    for i in 0..20 {
        let sent = Instant::now();
        let out = exec(&mut c, &other, &format!("echo run-{i}"), 5_000).await;
        latencies.push(sent.elapsed());
        assert_eq!(out["exit"], "exit code 0", "{out}");
    }
    run(
        &mut c,
        &other,
        json!([
            { "name": "Sleep", "input": { "duration_ms": 600_000, "reason": "later" } },
            { "name": "SpawnAgent", "input": { "preset": "private_child", "initial_message": "help" } },
            { "name": "AttachWorkspace", "input": { "path": scratch.display().to_string(), "workspace_id": "scratch" } },
        ]),
    )
    .await;
    let spawned = tool_output(&mut c, &other, "SpawnAgent").await;
    assert!(spawned["agent_id"].is_string(), "{spawned}");
    tool_output(&mut c, &other, "Sleep").await;
    tool_output(&mut c, &other, "AttachWorkspace").await;
    assert!(
        !checkout.finished.exists(),
        "the checkout ended before it was let go"
    );
    latencies.sort();
    let p50 = latencies[latencies.len() / 2];
    let worst = latencies[latencies.len() - 1];
    eprintln!(
        "ExecCommand echo round trips while a spawn was stuck in git: p50 {p50:?}, max {worst:?}"
    );

    // The stuck spawn itself finishes once git does.
    std::fs::write(&checkout.release, "").expect("release the checkout");
    eventually("the lead's spawn", || {
        let mut c = c.clone();
        let lead = lead.clone();
        async move {
            let handled = common::messages(&mut c, &lead)
                .await
                .iter()
                .all(|m| m.status == holarchy::api::pb::MessageStatus::Handled as i32);
            handled.then_some(())
        }
    })
    .await;
    let child = tool_output(&mut c, &lead, "SpawnAgent").await;
    assert!(
        checkout.finished.exists(),
        "the spawn returned before its checkout"
    );
    // The repository's filter ran confined, as an agent's command does.
    assert!(
        !root.path().join("escaped").exists(),
        "the checkout's filter wrote outside the repository and the worktrees"
    );
    assert!(
        child["task_handle"]["worktree"]["path"].is_string(),
        "{child}"
    );
}
