//! `CancelExternalTrigger` as a tool: once an agent cancels its trigger,
//! the token is refused and wakes nobody.

use holarchy::api::pb;
use serde_json::json;

use crate::common::workspaces::run;
use crate::common::{create, data_dir, messages, tool_output, Daemon};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_trigger_refuses_its_token_and_wakes_nobody() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "hooked", None).await;
    // The token appears only in the tool's result; the agent hands it to
    // its webhook setup (a file in its home) the way a brain would.
    run(
        &mut c,
        &id,
        json!([
            { "name": "CreateExternalTrigger", "input": { "reason": "deploy hook" } },
            { "name": "ExecCommand", "input": {
                "command": "printf %s \"$TOKEN\" > hook-token",
                "env": { "TOKEN": "{{results[0].token}}" }
            } }
        ]),
    )
    .await;
    let created = tool_output(&mut c, &id, "CreateExternalTrigger").await;
    let wait_id = created["wait_id"].as_str().expect("wait id").to_owned();
    let token_file = daemon
        .data_dir
        .join("workspaces")
        .join(&id)
        .join("hook-token");
    let token = std::fs::read_to_string(token_file).expect("token handed over");
    let deliver = |key: &str| pb::DeliverTriggerRequest {
        token: token.clone(),
        payload: format!("deploy {key}"),
        dedupe_key: key.into(),
    };

    // The token works before the cancel, so a refusal later is the cancel's.
    c.triggers
        .deliver_trigger(deliver("first"))
        .await
        .expect("a live trigger delivers");
    crate::common::handled(&c, &id, 2).await;

    run(
        &mut c,
        &id,
        json!([{ "name": "CancelExternalTrigger", "input": { "wait_id": wait_id } }]),
    )
    .await;
    let cancelled = tool_output(&mut c, &id, "CancelExternalTrigger").await;
    assert_eq!(cancelled["wait_id"], wait_id.as_str());
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    let before = messages(&mut c, &id).await;

    let refused = c
        .triggers
        .deliver_trigger(deliver("second"))
        .await
        .expect_err("a cancelled trigger is refused");
    assert_eq!(refused.code(), tonic::Code::NotFound, "{refused:?}");
    assert!(refused.message().contains("cancelled"), "{refused:?}");
    assert!(!refused.message().contains("agt_"), "names no agent");

    // Refused means never queued: the agent has exactly the messages it had,
    // and no second trigger message ever turned up.
    let after = messages(&mut c, &id).await;
    assert_eq!(
        after.iter().map(|m| &m.message_id).collect::<Vec<_>>(),
        before.iter().map(|m| &m.message_id).collect::<Vec<_>>()
    );
    let woken: Vec<_> = after.iter().filter(|m| m.provenance == "trigger").collect();
    assert_eq!(woken.len(), 1, "{after:?}");
    assert_eq!(woken[0].text, "deploy first");
    let summary = crate::common::get_agent(&mut c, &id).await;
    assert!(summary.waiting_on.is_empty(), "{:?}", summary.waiting_on);
}
