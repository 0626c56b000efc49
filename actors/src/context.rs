//! What a brain sees of its agent beside the message, assembled to fit
//! the brain's context budget in priority order: the role and the work
//! focus with its plan (and armed waits, skills, what a forked child
//! inherited) first, then the agent's running summary, then as many of
//! its newest turns as fit, then memory hits for the message. Also the
//! JSON views of tasks, waits and work items that tools return too.
//!
//! # Layout
//! - [`tokens`]: counting tokens (a real BPE for OpenAI models) and budgets.
//! - [`assemble`]: fitting items in priority order (pure).
//! - [`compact`]: compacting a long turn's oldest steps (pure).

use holarchy_supervision::{
    AgentId, AgentRecord, MessageId, MessageRecord, MessageStatus, Provenance, WaitStatus,
};
use serde_json::{json, Value};

use crate::compose::RoleView;
use crate::step::MessageView;
use crate::store::{Recalled, RecalledToolCall, StoreError};
use crate::views::work_json;
use crate::Ctx;
use assemble::Assembler;
use tokens::Tokenizer;

pub mod assemble;
pub mod compact;
pub mod tokens;

/// The share of the budget the assembled context may take; the rest is
/// the turn's own steps'.
const CONTEXT_SHARE: usize = 2;
/// Tokens charged up front for the context object's keys and the budget
/// note: what the assembler does not see as items.
const FRAME_TOKENS: usize = 64;
/// Required items of the context (work item, waits, skills, inherited,
/// summary): each keeps a marker's reserve.
const REQUIRED_SLOTS: usize = 5;
/// How many of the newest settled messages are read to find the turns
/// that fit, widening only while all read so far fit: a turn start reads no
/// more than the last of these (each message at most 64 KiB).
const TURN_WINDOWS: [usize; 3] = [32, 128, 512];
/// Longest running summary kept per agent, in characters (the oldest part
/// goes first).
pub const MAX_RUNNING_SUMMARY_CHARS: usize = 8000;

/// Earlier turns a forked child inherits, and how much of each (stored
/// with the child, so kept short whatever the budget).
const RECENT_TURNS: usize = 5;
const RECENT_CHARS: usize = 500;
/// The newest settled messages read to find them: a fork reads no more
/// than this many (each at most a message's 64 KiB), however long the
/// parent's history or deep its queue.
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
) -> Result<Vec<Value>, StoreError> {
    // The newest messages only: an agent's history grows without bound.
    let messages = ctx.reads().last_settled_messages(agent_id, RECENT_WINDOW)?;
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
pub fn inherited_view(ctx: &Ctx, parent: AgentId) -> Result<Value, StoreError> {
    let focus = ctx.reads().work_focus(parent)?;
    Ok(json!({
        "from_agent_id": parent.to_string(),
        "work_item": focus.map(|w| work_json(&w)),
        "recent_turns": recent_turns(ctx, parent, None)?,
    }))
}

/// An agent's tokenizer and budget: its own when set, else the daemon's
/// `--context-tokens` when set, else its brain kind's default.
pub fn budget_of(ctx: &Ctx, record: &AgentRecord) -> (Tokenizer, usize) {
    (
        Tokenizer::for_brain(&record.brain),
        tokens::budget_for(
            &record.brain,
            record.context_tokens,
            ctx.config.context_tokens,
        ),
    )
}

/// A context assembled to fit, with what it took.
#[derive(Debug, Clone)]
pub struct Assembled {
    pub context: Value,
    pub tokenizer: Tokenizer,
    /// The brain's whole budget (context and the turn's steps).
    pub budget: usize,
    /// Tokens the context and the role take.
    pub used: usize,
}

/// The context for a turn on `current` (`None`: for the next message, as
/// an operator previews it), within half the brain's budget. A role too
/// long for it is cut, and says so.
pub fn bounded(
    ctx: &Ctx,
    record: &AgentRecord,
    current: Option<&MessageRecord>,
    role: Option<&mut RoleView>,
) -> Result<Assembled, StoreError> {
    let agent_id = record.id;
    let (tokenizer, budget) = budget_of(ctx, record);
    let mut fit = Assembler::new(tokenizer, budget / CONTEXT_SHARE, REQUIRED_SLOTS);
    fit.charge(FRAME_TOKENS);
    if let Some(role) = role {
        let room = fit.room();
        if tokenizer.count(&role.prompt) > room {
            let note = format!(
                " … (role cut to fit the context budget, from {} bytes)",
                role.prompt.len()
            );
            let keep = room.saturating_sub(tokenizer.count(&note) + 1);
            role.prompt = format!("{}{note}", tokenizer.head(&role.prompt, keep));
        }
        let _ = fit.charge_text(&role.prompt);
    }
    let focus = ctx.reads().work_focus(agent_id)?;
    let waits: Vec<String> = ctx
        .reads()
        .waits_of(agent_id)?
        .into_iter()
        .filter(|w| w.status == WaitStatus::Armed)
        .map(|w| w.describe())
        .collect();
    let inherited = record
        .forked_context
        .as_deref()
        .and_then(|text| serde_json::from_str::<Value>(text).ok());
    let work_item = fit.required(focus.map_or(Value::Null, |w| work_json(&w)));
    let waiting_on = fit.required(json!(waits));
    let skills = record
        .composition
        .as_deref()
        .map(|composition| fit.required(skills(ctx, &composition.skills)));
    let inherited = fit.required(inherited.unwrap_or(Value::Null));
    let stored = ctx.context_records().context_record(agent_id)?;
    let summary = match stored.as_ref().filter(|r| !r.summary.is_empty()) {
        Some(stored) => fit.required_text(&stored.summary),
        None => fit.required(Value::Null),
    };
    let candidates = turn_candidates(ctx, agent_id, current.map(|m| m.id), &fit)?;
    let (recent_turns, turns_left_out) = fit.newest(candidates);
    let memory_hits: Vec<Value> = memory_hits(ctx, record, current)
        .into_iter()
        .filter(|hit| fit.optional(hit))
        .collect();
    let mut context = json!({
        "work_item": work_item,
        "waiting_on": waiting_on,
        "summary": summary,
        "recent_turns": recent_turns,
        "memory_hits": memory_hits,
        "inherited": inherited,
        "budget": {
            "tokens": budget,
            "used": fit.used(),
            "tokenizer": tokenizer.name(),
            // Turns read that did not fit; older ones are not even read.
            "turns_left_out": turns_left_out,
        },
    });
    if let Some(skills) = skills {
        context["skills"] = skills;
    }
    Ok(Assembled {
        context,
        tokenizer,
        budget,
        used: fit.used(),
    })
}

/// Memory hits for the message, best first: what the agent's memory (its
/// notes and handled turns) holds for `current`'s text, at most
/// [`MEMORY_HITS`], each as its kind, id and the passage that matched. None
/// without a message (an operator's preview). A search that fails leaves
/// the context without hits, never the turn without a context.
pub fn memory_hits(ctx: &Ctx, record: &AgentRecord, current: Option<&MessageRecord>) -> Vec<Value> {
    let Some(message) = current else {
        return Vec::new();
    };
    let query = holarchy_supervision::bounds::head(&message.body, MEMORY_QUERY_BYTES);
    if query.trim().is_empty() {
        return Vec::new();
    }
    match ctx
        .memory()
        .search_memory(record.id, query, &[], MEMORY_HITS)
    {
        Ok(hits) => hits
            .iter()
            .filter(|hit| !matches!(&hit.item, Recalled::Message(m) if m.id == message.id))
            .map(|hit| {
                let id = match &hit.item {
                    Recalled::Note(note) => note.id.to_string(),
                    Recalled::Message(found) => found.id.to_string(),
                    Recalled::ToolCall(call) => RecalledToolCall::memory_id(call.cursor),
                };
                json!({ "kind": hit.item.kind().name(), "id": id, "snippet": hit.snippet })
            })
            .collect(),
        Err(err) => {
            tracing::warn!(agent_id = %record.id, error = %err, "memory search for the context failed");
            Vec::new()
        }
    }
}

/// Most memory hits a context holds, and how much of the message is the
/// query (a message may be 64 KiB; its start says what it is about).
pub const MEMORY_HITS: usize = 5;
const MEMORY_QUERY_BYTES: usize = 512;

/// The agent's handled turns, newest first, read in widening windows
/// until the turns read are more than the room left or the history ends.
fn turn_candidates(
    ctx: &Ctx,
    agent_id: AgentId,
    except: Option<MessageId>,
    fit: &Assembler,
) -> Result<Vec<Value>, StoreError> {
    let tokenizer = fit.tokenizer();
    let mut turns = Vec::new();
    for window in TURN_WINDOWS {
        let messages = ctx.reads().last_settled_messages(agent_id, window)?;
        turns = messages
            .iter()
            .rev()
            .filter(|m| Some(m.id) != except && matches!(m.status, MessageStatus::Handled { .. }))
            .map(|m| json!({ "provenance": m.provenance.kind(), "text": m.body, "reply": m.reply }))
            .collect();
        let mut total = 0;
        let over = turns.iter().any(|turn| {
            total += tokenizer.count_json(turn);
            total > fit.room()
        });
        if over || messages.len() < window {
            break;
        }
    }
    Ok(turns)
}

/// The agent's skills as the context lists them: name, description and
/// the tools each says it needs. `LoadSkill` gives the whole text.
fn skills(ctx: &Ctx, names: &[String]) -> Value {
    skills_view(&ctx.skills.current(), names)
}

/// The skills of `names` in `catalog`, as the context lists them.
pub fn skills_view(catalog: &holarchy_composition::skill::SkillCatalog, names: &[String]) -> Value {
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
