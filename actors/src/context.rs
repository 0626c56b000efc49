//! What a brain sees of its agent beside the message: the work focus and
//! its plan, armed waits, a short tail of recent turns, what a forked child
//! inherited, and the JSON views of tasks, waits and work items that tools
//! return too. Every part is bounded, however long the agent's history.

use holarchy_supervision::{
    AgentId, AgentRecord, MessageId, MessageRecord, MessageStatus, Provenance, WaitStatus,
};
use serde_json::{json, Value};

use crate::brain::MessageView;
use crate::plane::work;
use crate::views::work_json;
use crate::Ctx;

/// Earlier turns shown to the brain, and how much of each.
const RECENT_TURNS: usize = 5;
const RECENT_CHARS: usize = 500;
/// The newest messages read to find them: a turn start reads no more than
/// this many (each at most a message's 64 KiB), however long the agent's
/// history. Messages queued behind the current one are newer and take
/// room in it, so an agent with a deep queue may see fewer earlier turns.
const RECENT_WINDOW: usize = 32;

fn cut(text: &str) -> String {
    if text.chars().count() <= RECENT_CHARS {
        text.to_owned()
    } else {
        let mut short: String = text.chars().take(RECENT_CHARS).collect();
        short.push('…');
        short
    }
}

pub fn message_view(message: &MessageRecord) -> MessageView {
    let from = match message.provenance {
        Provenance::Parent { agent_id }
        | Provenance::ChildResult { agent_id }
        | Provenance::Creator { agent_id } => Some(agent_id.to_string()),
        Provenance::Operator
        | Provenance::Trigger { .. }
        | Provenance::Timer { .. }
        | Provenance::SelfQueued
        | Provenance::TaskResult { .. }
        | Provenance::Runtime
        | Provenance::Event { .. } => None,
    };
    MessageView {
        message_id: message.id.to_string(),
        provenance: message.provenance.kind().to_owned(),
        from_agent_id: from,
        text: message.body.clone(),
    }
}

/// The newest handled turns of an agent, cut short, oldest first.
fn recent_turns(
    ctx: &Ctx,
    agent_id: AgentId,
    except: Option<MessageId>,
) -> Result<Vec<Value>, String> {
    // The newest messages only: an agent's history grows without bound.
    let messages = ctx
        .store
        .last_messages(agent_id, RECENT_WINDOW)
        .map_err(|e| e.to_string())?;
    let handled: Vec<&MessageRecord> = messages
        .iter()
        .filter(|m| Some(m.id) != except && matches!(m.status, MessageStatus::Handled { .. }))
        .collect();
    Ok(handled[handled.len().saturating_sub(RECENT_TURNS)..]
        .iter()
        .map(|m| json!({ "provenance": m.provenance.kind(), "text": cut(&m.body), "reply": m.reply.as_deref().map(cut) }))
        .collect())
}

/// What a child spawned with `context: "fork"` inherits from its parent:
/// the parent's work focus with its plan, and its recent turns. The handoff
/// itself is the child's initial message.
pub fn inherited_view(ctx: &Ctx, parent: AgentId) -> Result<Value, String> {
    let focus = work::focus(ctx, parent).map_err(|e| e.to_string())?;
    Ok(json!({
        "from_agent_id": parent.to_string(),
        "work_item": focus.map(|w| work_json(&w)),
        "recent_turns": recent_turns(ctx, parent, None)?,
    }))
}

/// Bounded context from structured state: the work focus and its plan,
/// armed waits, a short tail of recent turns, and, for a forked child, what
/// it inherited from its parent.
pub fn bounded(ctx: &Ctx, record: &AgentRecord, current: &MessageRecord) -> Result<Value, String> {
    let agent_id = record.id;
    let focus = work::focus(ctx, agent_id).map_err(|e| e.to_string())?;
    let waits: Vec<String> = ctx
        .store
        .waits_of(agent_id)
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|w| w.status == WaitStatus::Armed)
        .map(|w| w.describe())
        .collect();
    let inherited = record
        .forked_context
        .as_deref()
        .and_then(|text| serde_json::from_str::<Value>(text).ok());
    let mut context = json!({
        "work_item": focus.map(|w| work_json(&w)),
        "waiting_on": waits,
        "recent_turns": recent_turns(ctx, agent_id, Some(current.id))?,
        "inherited": inherited,
    });
    if let Some(composition) = record.composition.as_deref() {
        context["skills"] = skills(ctx, &composition.skills);
    }
    Ok(context)
}

/// The agent's skills as the context lists them: name, description and
/// the tools each says it needs. `LoadSkill` gives the whole text.
fn skills(ctx: &Ctx, names: &[String]) -> Value {
    let catalog = ctx.skills.current();
    Value::Array(
        catalog
            .some(names)
            .map(|skill| {
                json!({
                    "name": skill.name,
                    "description": skill.description,
                    "tools": skill.tools,
                })
            })
            .collect(),
    )
}
