//! `GetAgentContext`: what an agent's brain would see now beside the next
//! message, assembled exactly as a turn assembles it, bounded in bytes.

use holarchy_actors::runtime::inspect::ContextPreview;
use holarchy_actors::Runtime;
use holarchy_supervision::AgentRecord;
use serde_json::json;

use super::super::convert::ApiError;
use super::super::pb;

/// Bytes of context JSON one answer holds at most.
const MAX_CONTEXT_BYTES: usize = 1024 * 1024;

pub async fn preview(
    runtime: &Runtime,
    record: AgentRecord,
) -> Result<pb::GetAgentContextResponse, ApiError> {
    let ContextPreview {
        role,
        assembled,
        stored,
    } = runtime.context_preview(record).await?;
    let mut context_json = json!({ "role": role, "context": assembled.context }).to_string();
    let mut truncated_from_bytes = 0;
    if context_json.len() > MAX_CONTEXT_BYTES {
        truncated_from_bytes = context_json.len() as u64;
        holarchy_supervision::bounds::truncate(&mut context_json, MAX_CONTEXT_BYTES);
    }
    Ok(pb::GetAgentContextResponse {
        context_json,
        budget_tokens: assembled.budget as u64,
        used_tokens: assembled.used as u64,
        tokenizer: assembled.tokenizer.name().to_owned(),
        compactions: stored.compactions,
        last_compacted_run_id: stored.run_id,
        truncated_from_bytes,
    })
}
