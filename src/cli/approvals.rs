//! `holarchy approvals`, `approve` and `deny`: operators decide the tool
//! calls instances' constraints hold for them.

use serde_json::{json, Value};

use super::output::{emit, Output};
use super::resolve;
use crate::api::pb;
use crate::client::Clients;

pub(super) async fn list(
    mut clients: Clients,
    agent: Option<&str>,
    all: bool,
    out: &Output,
) -> anyhow::Result<()> {
    let agent_id = match agent {
        Some(agent) => resolve(&mut clients, agent).await?,
        None => String::new(),
    };
    let list = clients
        .approvals
        .list_approvals(pb::ListApprovalsRequest {
            agent_id,
            include_decided: all,
        })
        .await?
        .into_inner();
    if out.json {
        list.approvals.iter().for_each(|a| emit(approval_json(a)));
        return Ok(());
    }
    emit(format_args!(
        "{:<30} {:<10} {:<16} {:<30} INPUT",
        "APPROVAL", "STATUS", "TOOL", "AGENT"
    ));
    for a in &list.approvals {
        let input: String = a.input_json.chars().take(60).collect();
        emit(format_args!(
            "{:<30} {:<10} {:<16} {:<30} {input}",
            a.approval_id, a.status, a.tool, a.agent_id
        ));
    }
    Ok(())
}

pub(super) async fn approve(mut clients: Clients, id: &str, out: &Output) -> anyhow::Result<()> {
    let request = pb::ApproveRequest {
        approval_id: id.to_owned(),
    };
    let done = clients.approvals.approve(request).await?.into_inner();
    if out.json {
        emit(approval_json(&done));
    } else {
        let outcome = if done.is_error { "failed" } else { "ran" };
        emit(format_args!(
            "approved {}: {} {outcome}: {}",
            done.approval_id, done.tool, done.output_json
        ));
    }
    Ok(())
}

pub(super) async fn deny(
    mut clients: Clients,
    id: &str,
    reason: &str,
    out: &Output,
) -> anyhow::Result<()> {
    let request = pb::DenyRequest {
        approval_id: id.to_owned(),
        reason: reason.to_owned(),
    };
    let done = clients.approvals.deny(request).await?.into_inner();
    if out.json {
        emit(approval_json(&done));
    } else {
        emit(format_args!("denied {}: {}", done.approval_id, done.tool));
    }
    Ok(())
}

fn approval_json(a: &pb::Approval) -> Value {
    let parse = |text: &str| serde_json::from_str::<Value>(text).unwrap_or(Value::Null);
    json!({
        "approval_id": a.approval_id,
        "agent_id": a.agent_id,
        "instance": a.instance,
        "run_id": a.run_id,
        "tool": a.tool,
        "input": parse(&a.input_json),
        "layer": a.layer,
        "status": a.status,
        "output": parse(&a.output_json),
        "is_error": a.is_error,
        "reason": a.reason,
        "delivered": a.delivered,
        "created_at_ms": a.created_at_ms,
        "decided_at_ms": a.decided_at_ms,
    })
}
