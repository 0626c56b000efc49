//! Approvals and the disk: a parked call is on disk before its turn goes
//! on, and an approved call runs only once `running` is on disk (else a
//! crash could lose the record of a call that did run, and run it again).
//! With the daemon's flushes held by its latch, neither step may pass; a
//! `kill -9` in that state runs nothing twice and loses nothing answered.
//! Each call leaves a mark outside the store (a file in the agent's
//! home), which no held flush can hide.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::json;

use super::held_flushes::{held_writes, Latched};
use crate::common::{self, handled, send, Daemon};

/// Commands wait for an operator; patches do not.
const GUARDED: &str =
    "name = \"guarded\"\n[brain.scripted]\n[constraints]\nrequire_approval = [\"ExecCommand\"]\n";

/// How long a held step is watched once its write was seen applied: a
/// step that did not wait for the flush goes on within milliseconds.
const WATCHED: Duration = Duration::from_millis(300);

async fn pending(c: &mut Clients, agent: &str) -> Vec<pb::Approval> {
    c.approvals
        .list_approvals(pb::ListApprovalsRequest {
            agent_id: agent.into(),
            include_decided: false,
        })
        .await
        .expect("listed")
        .into_inner()
        .approvals
        .into_iter()
        .filter(|a| a.status == "pending")
        .collect()
}

fn home(dir: &Path, agent: &str) -> PathBuf {
    dir.join("workspaces").join(agent)
}

/// Waits until the latch holds a write, failing if `done` finishes first.
async fn until_held<T>(latch: &Path, done: &tokio::task::JoinHandle<T>, what: &str) {
    let seen = Instant::now();
    while held_writes(latch) == 0 {
        assert!(
            !done.is_finished(),
            "{what} answered before its write was flushed"
        );
        assert!(
            seen.elapsed() < Duration::from_secs(30),
            "{what}'s write never applied"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_call_does_not_run_while_its_running_is_held_nor_twice_after_a_kill() {
    let latched = Latched::new();
    let (dir, latch) = (latched.dir.clone(), latched.latch.clone());
    let mut daemon = latched.start(&[]).await;
    let mut c = daemon.clients().await;
    let agent = common::apply_instance(&mut c, GUARDED).await;
    let call = json!([{ "name": "ExecCommand", "input": { "command": "echo ran >> ran.txt", "yield_ms": 2000 } }]);
    send(&mut c, &agent, &common::script(call)).await;
    handled(&c, &agent, 1).await;
    let id = pending(&mut c, &agent).await[0].approval_id.clone();
    let ran = home(&dir, &agent).join("ran.txt");

    std::fs::write(&latch, b"").expect("flushes held");
    let mut approver = c.clone();
    let request = pb::ApproveRequest {
        approval_id: id.clone(),
    };
    let approve = tokio::spawn(async move { approver.approvals.approve(request).await });
    until_held(&latch, &approve, "Approve").await;
    tokio::time::sleep(WATCHED).await;
    assert!(
        !ran.exists(),
        "the approved call ran before `running` was on disk"
    );
    assert!(
        !approve.is_finished(),
        "Approve answered while its flush was held"
    );

    daemon.kill9();
    assert!(approve.await.expect("approver").is_err(), "never answered");
    std::fs::remove_file(&latch).expect("flushes let go");
    drop(c);
    let daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    assert!(
        !ran.exists(),
        "the call never ran, so nothing may say it did"
    );
    // Whether `running` reached the disk before the kill is sled's to
    // say (its log may be written without a flush): if not, the call
    // still waits and runs once when approved; if so, it is closed as cut
    // short and never runs. Either way it never runs twice.
    let record = c
        .approvals
        .get_approval(pb::GetApprovalRequest {
            approval_id: id.clone(),
        })
        .await
        .expect("the approval")
        .into_inner();
    match record.status.as_str() {
        "pending" => {
            let done = c
                .approvals
                .approve(pb::ApproveRequest { approval_id: id })
                .await
                .expect("approved")
                .into_inner();
            assert!(!done.is_error, "{}", done.output_json);
            assert_eq!(std::fs::read_to_string(&ran).expect("ran"), "ran\n");
        }
        "approved" => {
            assert!(record.is_error, "{}", record.output_json);
            assert!(
                record.output_json.contains("not run again"),
                "{}",
                record.output_json
            );
            assert!(!ran.exists());
        }
        other => panic!("approval {id} is {other} after the kill: {record:?}"),
    }
}

/// A command brain whose first step marks that it began, waits a second
/// (time for the test to hold the flushes) and asks for a command, which
/// parks, and a patch, which writes a file at once (no write of its own to
/// wait for), so it shows the turn went on; its next step ends the turn.
const SLOW_BRAIN: &str = r#"#!/bin/sh
cat >/dev/null
if [ -e stepped ]; then printf '%s\n' '{"reply":"done","done":true}'; exit 0; fi
: > stepped
sleep 1
printf '%s\n' '{"tool_calls":[{"name":"ExecCommand","input":{"command":"echo ran >> ran.txt"}},{"name":"ApplyPatch","input":{"patch":"--- /dev/null\n+++ b/after.md\n@@ -0,0 +1 @@\n+after\n"}}]}'
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_goes_on_past_a_parked_call_only_once_the_parking_is_on_disk() {
    let latched = Latched::new();
    let (dir, latch) = (latched.dir.clone(), latched.latch.clone());
    let brain = dir.with_extension("brain.sh");
    std::fs::write(&brain, SLOW_BRAIN).expect("brain written");
    std::fs::set_permissions(&brain, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let daemon = latched.start(&[]).await;
    let mut c = daemon.clients().await;
    let manifest = GUARDED.replace(
        "[brain.scripted]",
        &format!("[brain.command]\nprogram = \"{}\"", brain.display()),
    );
    let agent = common::apply_instance(&mut c, &manifest).await;
    send(&mut c, &agent, "go").await;
    let stepped = dir.join("tmp").join(&agent).join("stepped");
    common::eventually("the brain's first step", || {
        let began = stepped.exists();
        async move { began.then_some(()) }
    })
    .await;

    std::fs::write(&latch, b"").expect("flushes held");
    common::eventually("the call parked", || {
        let mut c = c.clone();
        let agent = agent.clone();
        async move { (!pending(&mut c, &agent).await.is_empty()).then_some(()) }
    })
    .await;
    let after = home(&dir, &agent).join("after.md");
    tokio::time::sleep(WATCHED).await;
    assert!(
        !after.exists(),
        "the turn went on past a parked call before the parking was on disk"
    );

    std::fs::remove_file(&latch).expect("flushes let go");
    handled(&c, &agent, 1).await;
    assert_eq!(std::fs::read_to_string(&after).expect("patched"), "after\n");
    assert!(
        !home(&dir, &agent).join("ran.txt").exists(),
        "parked, not run"
    );
}
