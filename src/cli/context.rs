//! `holarchy agent context AGENT`: prints what the agent's brain would see
//! now (its context within its budget), pretty-printed, or as one JSON
//! object with `--json`.

use serde_json::{json, Value};

use super::output::{emit, Output};
use crate::api::pb;
use crate::client::Clients;

pub async fn print(mut clients: Clients, agent_id: String, out: &Output) -> anyhow::Result<()> {
    let answer = clients
        .agents
        .get_agent_context(pb::GetAgentContextRequest { agent_id })
        .await?
        .into_inner();
    // A cut answer is no JSON any more: shown as text.
    let seen: Value =
        serde_json::from_str(&answer.context_json).unwrap_or(Value::String(answer.context_json));
    if out.json {
        emit(json!({
                "budget_tokens": answer.budget_tokens,
                "used_tokens": answer.used_tokens,
                "tokenizer": answer.tokenizer,
                "compactions": answer.compactions,
                "last_compacted_run_id": answer.last_compacted_run_id,
                "truncated_from_bytes": answer.truncated_from_bytes,
                "seen": seen,
        }));
        return Ok(());
    }
    emit(format_args!(
        "budget: {} tokens ({}), context and role use {}; compactions: {}",
        answer.budget_tokens, answer.tokenizer, answer.used_tokens, answer.compactions
    ));
    if answer.truncated_from_bytes > 0 {
        emit(format_args!(
            "(cut: {} bytes in all)",
            answer.truncated_from_bytes
        ));
    }
    emit(serde_json::to_string_pretty(&seen)?);
    Ok(())
}
