//! `holarchy approvals`, `approve` and `deny`: operators decide the tool
//! calls instances' constraints hold for them.

use serde_json::{json, Value};

use super::output::escape::one_line;
use super::output::table::{self, Table};
use super::output::{emit, Output};
use super::resolve;
use crate::api::pb;
use crate::client::Clients;

/// Characters of an input the listing shows before it marks the cut.
const PREVIEW: usize = 60;

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
    let tail = table::tail_len(list.approvals.iter().map(|a| a.agent_id.as_str()));
    let mut rows = Table::new(&["APPROVAL", "STATUS", "TOOL", "AGENT", "INPUT"]);
    for a in &list.approvals {
        rows.row(vec![
            a.approval_id.clone(),
            a.status.clone(),
            one_line(&a.tool).into_owned(),
            table::tail(&a.agent_id, tail).to_owned(),
            preview(a),
        ]);
    }
    rows.print();
    if list.more {
        emit("(more: decide these to see the rest)");
    }
    Ok(())
}

/// The start of a call's input for the listing, escaped, with a mark
/// saying how much more there is and where to read it whole: a brain
/// must not hide a payload past the edge of a column.
fn preview(a: &pb::Approval) -> String {
    let input = one_line(&a.input_json);
    let shown: String = input.chars().take(PREVIEW).collect();
    if shown.len() == input.len() {
        return shown;
    }
    format!(
        "{shown}… [cut: {} bytes in all; holarchy approvals show {}]",
        a.input_json.len(),
        a.approval_id
    )
}

/// `holarchy approvals show ID`: one approval, whole: where it runs and
/// its whole input, escaped and laid out.
pub(super) async fn show(mut clients: Clients, id: &str, out: &Output) -> anyhow::Result<()> {
    let a = clients
        .approvals
        .get_approval(pb::GetApprovalRequest {
            approval_id: id.to_owned(),
        })
        .await?
        .into_inner();
    if out.json {
        emit(approval_json(&a));
        return Ok(());
    }
    emit(format_args!("approval   {}", a.approval_id));
    emit(format_args!("status     {}", a.status));
    emit(format_args!("agent      {}", a.agent_id));
    if !a.instance.is_empty() {
        emit(format_args!("instance   {}", one_line(&a.instance)));
    }
    emit(format_args!("run        {}", a.run_id));
    emit(format_args!("tool       {}", one_line(&a.tool)));
    emit(format_args!(
        "asked by   {} constraints",
        one_line(&a.layer)
    ));
    match a.dir.is_empty() {
        true => emit(
            "runs in    the agent's active workspace when approved (parked by an earlier release)",
        ),
        false => emit(format_args!(
            "runs in    {} (workspace {})",
            one_line(&a.dir),
            one_line(&a.workspace_id)
        )),
    }
    emit(format_args!("input      {} bytes:", a.input_json.len()));
    // Pretty JSON: every string escaped by the JSON writer, each field on
    // a line of its own, nothing cut.
    let input = serde_json::from_str::<Value>(&a.input_json)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| one_line(&a.input_json).into_owned());
    for line in input.lines() {
        emit(format_args!("  {line}"));
    }
    if !a.reason.is_empty() {
        emit(format_args!("reason     {}", one_line(&a.reason)));
    }
    if !a.output_json.is_empty() {
        emit(format_args!("output     {}", one_line(&a.output_json)));
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
            done.approval_id,
            one_line(&done.tool),
            one_line(&done.output_json)
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
        emit(format_args!(
            "denied {}: {}",
            done.approval_id,
            one_line(&done.tool)
        ));
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
        "workspace_id": a.workspace_id,
        "dir": a.dir,
    })
}
