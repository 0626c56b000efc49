//! Approvals through the real daemon: a call an instance's constraints
//! hold is parked (it does not run), survives `kill -9`, runs exactly once
//! when an operator approves it, and its outcome reaches the agent; a
//! denied call never runs and the agent reads the reason.

mod common;

use common::{handled, send, tool_call, Daemon};
use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::{json, Value};
use tonic::Code;

const GUARDED: &str =
    "name = \"release\"\n[brain.scripted]\n[constraints]\nrequire_approval = [\"ExecCommand\"]\n";

/// Asks the agent to run `command`; the approval it was parked under.
async fn park(c: &mut Clients, agent: &str, command: &str, nth: usize) -> String {
    let call =
        json!([{ "name": "ExecCommand", "input": { "command": command, "yield_ms": 5000 } }]);
    send(c, agent, &common::script(call)).await;
    handled(c, agent, nth).await;
    let (failed, output) = tool_call(c, agent, "ExecCommand").await;
    assert!(!failed, "{output}");
    assert_eq!(output["status"], "pending_approval", "{output}");
    output["approval_id"]
        .as_str()
        .expect("approval id")
        .to_owned()
}

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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_call_survives_kill_9_and_runs_once_when_approved() {
    let root = tempfile::tempdir().expect("tmp");
    let data = common::data_dir(&root);
    let mut daemon = Daemon::start(&data).await;
    let mut c = daemon.clients().await;
    let agent = common::apply_instance(&mut c, GUARDED).await;
    let id = park(&mut c, &agent, "echo shipped", 1).await;
    assert_eq!(
        common::command_tasks(&mut c, &agent).await,
        0,
        "parked, not run"
    );
    let summary = common::get_agent(&mut c, &agent).await;
    assert!(
        summary.waiting_on.iter().any(|w| w.contains(&id)),
        "{:?}",
        summary.waiting_on
    );
    let tree = c
        .supervision
        .get_tree(pb::GetTreeRequest {
            agent_id: agent.clone(),
            ..Default::default()
        })
        .await
        .expect("tree")
        .into_inner();
    let node = tree
        .nodes
        .iter()
        .find(|n| n.id == id)
        .expect("the approval in the tree");
    assert_eq!(
        (node.node_type.as_str(), node.kind.as_str()),
        ("wait", "approval")
    );
    assert_eq!(node.parent_id, agent);
    assert_eq!(tree.waits, 1);

    daemon.kill9();
    let daemon = Daemon::start(&data).await;
    let mut c = daemon.clients().await;
    let waiting = pending(&mut c, &agent).await;
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].approval_id, id);
    assert_eq!(waiting[0].status, "pending");
    assert_eq!(
        serde_json::from_str::<Value>(&waiting[0].input_json).expect("json")["command"],
        "echo shipped"
    );

    let done = c
        .approvals
        .approve(pb::ApproveRequest {
            approval_id: id.clone(),
        })
        .await
        .expect("approved")
        .into_inner();
    assert_eq!(done.status, "approved");
    assert!(!done.is_error, "{}", done.output_json);
    assert!(done.output_json.contains("shipped"), "{}", done.output_json);
    assert_eq!(common::command_tasks(&mut c, &agent).await, 1);

    // The agent hears the outcome as a message of its own.
    let all = handled(&c, &agent, 2).await;
    let told = &all[1];
    assert!(
        told.text.contains(&id) && told.text.contains("approved"),
        "{}",
        told.text
    );

    // Approving again runs nothing.
    let again = c
        .approvals
        .approve(pb::ApproveRequest { approval_id: id })
        .await
        .expect_err("already decided");
    assert_eq!(again.code(), Code::FailedPrecondition);
    assert_eq!(common::command_tasks(&mut c, &agent).await, 1);
    assert!(pending(&mut c, &agent).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_call_never_runs_and_the_agent_reads_why() {
    let root = tempfile::tempdir().expect("tmp");
    let daemon = Daemon::start(&common::data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let agent = common::apply_instance(&mut c, GUARDED).await;
    let id = park(&mut c, &agent, "echo never", 1).await;

    let no_reason = c
        .approvals
        .deny(pb::DenyRequest {
            approval_id: id.clone(),
            reason: " ".into(),
        })
        .await
        .expect_err("a reason is needed");
    assert_eq!(no_reason.code(), Code::InvalidArgument);
    let denied = c
        .approvals
        .deny(pb::DenyRequest {
            approval_id: id.clone(),
            reason: "freeze until Monday".into(),
        })
        .await
        .expect("denied")
        .into_inner();
    assert_eq!(denied.status, "denied");
    let all = handled(&c, &agent, 2).await;
    assert!(
        all[1].text.contains("freeze until Monday"),
        "{}",
        all[1].text
    );
    let late = c
        .approvals
        .approve(pb::ApproveRequest { approval_id: id })
        .await
        .expect_err("denied stays denied");
    assert_eq!(late.code(), Code::FailedPrecondition);
    assert_eq!(common::command_tasks(&mut c, &agent).await, 0, "never ran");

    let unknown = c
        .approvals
        .approve(pb::ApproveRequest {
            approval_id: "apr_01KQZZZZZZZZZZZZZZZZZZZZZZ".into(),
        })
        .await
        .expect_err("unknown");
    assert_eq!(unknown.code(), Code::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_short_by_kill_9_is_never_run_again_and_the_agent_is_told() {
    let root = tempfile::tempdir().expect("tmp");
    let data = common::data_dir(&root);
    let mut daemon = Daemon::start(&data).await;
    let mut c = daemon.clients().await;
    let agent = common::apply_instance(&mut c, GUARDED).await;
    // The approved call holds its approval `running` while it waits
    // (up to its yield) for a command that takes longer.
    let call =
        json!([{ "name": "ExecCommand", "input": { "command": "sleep 30", "yield_ms": 20000 } }]);
    send(&mut c, &agent, &common::script(call)).await;
    handled(&c, &agent, 1).await;
    let (_, parked) = tool_call(&mut c, &agent, "ExecCommand").await;
    let id = parked["approval_id"].as_str().expect("parked").to_owned();
    let mut approving = c.clone();
    let request = pb::ApproveRequest {
        approval_id: id.clone(),
    };
    let approve = tokio::spawn(async move { approving.approvals.approve(request).await });
    // Its command has started: the call runs only once `running` is on
    // disk, so the kill lands after that.
    common::eventually("the approved call running", || {
        let mut c = c.clone();
        let agent = agent.clone();
        async move { (common::command_tasks(&mut c, &agent).await > 0).then_some(()) }
    })
    .await;
    daemon.kill9();
    let _ = approve.await;

    let daemon = Daemon::start(&data).await;
    let mut c = daemon.clients().await;
    let all = c
        .approvals
        .list_approvals(pb::ListApprovalsRequest {
            agent_id: agent.clone(),
            include_decided: true,
        })
        .await
        .expect("listed")
        .into_inner()
        .approvals;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].status, "approved");
    assert!(all[0].is_error);
    assert!(
        all[0].output_json.contains("not run again"),
        "{}",
        all[0].output_json
    );
    // The agent hears it after the restart, once (beside the runtime's
    // notice that its command was cut short).
    let told = common::eventually("the outcome told", || {
        let mut c = c.clone();
        let agent = agent.clone();
        let id = id.clone();
        async move {
            let all = common::messages(&mut c, &agent).await;
            let told: Vec<_> = all.into_iter().filter(|m| m.text.contains(&id)).collect();
            (!told.is_empty()).then_some(told)
        }
    })
    .await;
    assert_eq!(told.len(), 1);
    assert!(told[0].text.contains("not run again"), "{}", told[0].text);
    let again = c
        .approvals
        .approve(pb::ApproveRequest { approval_id: id })
        .await
        .expect_err("closed");
    assert_eq!(again.code(), Code::FailedPrecondition);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brain_that_asks_for_approval_has_its_calls_parked() {
    let root = tempfile::tempdir().expect("tmp");
    let daemon = Daemon::start(&common::data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let agent = common::apply_instance(&mut c, GUARDED).await;
    // AgentGet needs no approval by the manifest; the brain asks anyway.
    let script = json!({
        "tool_calls": [{ "name": "AgentGet", "input": {} }],
        "decision": { "kind": "escalate", "reason": "check with a human first", "requires_approval": true },
    });
    send(&mut c, &agent, &script.to_string()).await;
    handled(&c, &agent, 1).await;
    let (failed, output) = tool_call(&mut c, &agent, "AgentGet").await;
    assert!(!failed, "{output}");
    assert_eq!(output["status"], "pending_approval", "{output}");
    let waiting = pending(&mut c, &agent).await;
    assert_eq!(waiting.len(), 1);
    assert_eq!(
        (waiting[0].tool.as_str(), waiting[0].layer.as_str()),
        ("AgentGet", "prompt")
    );
}

/// Two operators deciding one call at the same moment: exactly one wins,
/// for approve against approve and approve against deny, every time, and
/// an approved call runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_decisions_of_one_call_take_effect_once() {
    const CALLS: usize = 12;
    let root = tempfile::tempdir().expect("tmp");
    let daemon = Daemon::start(&common::data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let agent = common::apply_instance(&mut c, GUARDED).await;
    let mut ids = Vec::new();
    for n in 0..CALLS {
        ids.push(park(&mut c, &agent, &format!("echo once-{n}"), n + 1).await);
    }
    let mut approved_runs = 0;
    for (n, id) in ids.iter().enumerate() {
        let approve = |c: &Clients| {
            let (mut c, id) = (c.clone(), id.clone());
            async move {
                c.approvals
                    .approve(pb::ApproveRequest { approval_id: id })
                    .await
                    .map(|a| a.into_inner().status)
            }
        };
        let other = {
            let (mut c, id) = (c.clone(), id.clone());
            async move {
                if n % 2 == 0 {
                    c.approvals
                        .approve(pb::ApproveRequest { approval_id: id })
                        .await
                        .map(|a| a.into_inner().status)
                } else {
                    c.approvals
                        .deny(pb::DenyRequest {
                            approval_id: id,
                            reason: "the other operator said no".into(),
                        })
                        .await
                        .map(|a| a.into_inner().status)
                }
            }
        };
        let (first, second) = tokio::join!(approve(&c), other);
        let won: Vec<&String> = [&first, &second].into_iter().flatten().collect();
        assert_eq!(won.len(), 1, "call {n}: {first:?} and {second:?}");
        for lost in [&first, &second]
            .into_iter()
            .filter_map(|r| r.as_ref().err())
        {
            assert_eq!(lost.code(), Code::FailedPrecondition, "call {n}: {lost}");
        }
        if won[0] == "approved" {
            approved_runs += 1;
        }
    }
    assert!(
        approved_runs >= CALLS / 2,
        "every approve/approve pair runs one"
    );
    assert_eq!(
        common::command_tasks(&mut c, &agent).await,
        approved_runs,
        "an approved call ran other than once"
    );
}

/// A kill that cuts the turn which parked a call: the turn runs again
/// from its start and parks the call anew, so the first parking is
/// withdrawn at start (denied, saying why) rather than left pending
/// beside the second; approving runs the call once (found by the chaos
/// run, where both were approved and the call ran twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_parked_by_a_turn_a_kill_cut_is_withdrawn_and_parked_once_again() {
    const PATCHES: &str =
        "name = \"patcher\"\n[brain.scripted]\n[constraints]\nrequire_approval = [\"ApplyPatch\"]\n";
    let root = tempfile::tempdir().expect("tmp");
    let data = common::data_dir(&root);
    let mut daemon = Daemon::start(&data).await;
    let mut c = daemon.clients().await;
    let agent = common::apply_instance(&mut c, PATCHES).await;
    // The patch parks; the command after it keeps the turn open, so the
    // kill cuts it with its call parked.
    let patch = "--- /dev/null\n+++ b/patched.md\n@@ -0,0 +1 @@\n+once\n";
    let calls = json!([
        { "name": "ApplyPatch", "input": { "patch": patch } },
        { "name": "ExecCommand", "input": { "command": "sleep 30", "yield_ms": 30000 } },
    ]);
    send(&mut c, &agent, &common::script(calls)).await;
    let first = common::eventually("the call parked", || {
        let mut c = c.clone();
        let agent = agent.clone();
        async move { pending(&mut c, &agent).await.pop() }
    })
    .await;
    assert_eq!(common::get_agent(&mut c, &agent).await.queue_length, 0);
    assert!(
        !common::get_agent(&mut c, &agent)
            .await
            .current_run_id
            .is_empty(),
        "the turn is still open"
    );
    drop(c);
    daemon.kill9();

    let daemon = Daemon::start(&data).await;
    let mut c = daemon.clients().await;
    let second = common::eventually("the call parked again", || {
        let mut c = c.clone();
        let agent = agent.clone();
        let first = first.approval_id.clone();
        async move {
            let waiting = pending(&mut c, &agent).await;
            waiting
                .iter()
                .any(|a| a.approval_id != first)
                .then_some(waiting)
        }
    })
    .await;
    assert_eq!(second.len(), 1, "one call, one approval: {second:?}");
    let withdrawn = c
        .approvals
        .get_approval(pb::GetApprovalRequest {
            approval_id: first.approval_id.clone(),
        })
        .await
        .expect("the first parking")
        .into_inner();
    assert_eq!(withdrawn.status, "denied");
    assert!(
        withdrawn.reason.contains("withdrawn"),
        "{}",
        withdrawn.reason
    );
    let late = c
        .approvals
        .approve(pb::ApproveRequest {
            approval_id: first.approval_id,
        })
        .await
        .expect_err("withdrawn, not approvable");
    assert_eq!(late.code(), Code::FailedPrecondition);
    assert!(late.message().contains("asks anew"), "{}", late.message());

    let done = c
        .approvals
        .approve(pb::ApproveRequest {
            approval_id: second[0].approval_id.clone(),
        })
        .await
        .expect("approved")
        .into_inner();
    assert!(!done.is_error, "{}", done.output_json);
    let home = data.join("workspaces").join(&agent);
    assert_eq!(
        std::fs::read_to_string(home.join("patched.md")).expect("patched"),
        "once\n"
    );
}
