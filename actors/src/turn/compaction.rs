//! Keeps a turn's own steps within the room its brain's budget leaves
//! them: before each decision, when the steps (and the summary so far)
//! outgrow it, the oldest are compacted by the brain
//! ([`crate::brain::Brain::compact`]) and the summary is stored as the
//! agent's running summary, durably, so it survives a crash.

use holarchy_supervision::{AgentId, RunId};
use tracing::warn;

use crate::brain::{Brain, StepRecord, UsageMeter};
use crate::context::compact::{self, CompactRequest, Compaction};
use crate::context::tokens::Tokenizer;
use crate::context::{Assembled, MAX_RUNNING_SUMMARY_CHARS};
use crate::store::ContextRecord;
use crate::{now_ms, Ctx};

/// What a turn's steps may take, and what stands for those compacted.
#[derive(Debug)]
pub(super) struct StepRoom {
    tokenizer: Tokenizer,
    budget: usize,
    room: usize,
    pub compacted: Option<Compaction>,
    /// The agent's running summary as it was before this turn compacted
    /// anything: the turn's newest summary replaces its own earlier ones.
    base: Option<ContextRecord>,
}

impl StepRoom {
    /// The budget less what the context, the role and everything else
    /// sent at every step (`fixed`: the message, the catalog, the agent's
    /// view) take; at least a quarter of it, whatever they take.
    pub fn new(assembled: &Assembled, fixed: usize) -> Self {
        let budget = assembled.budget;
        let room = budget
            .saturating_sub(assembled.used + fixed)
            .max(budget / 4);
        Self {
            tokenizer: assembled.tokenizer,
            budget,
            room,
            compacted: None,
            base: None,
        }
    }

    /// Compacts the oldest of `steps` if they no longer fit.
    pub async fn fit(
        &mut self,
        ctx: &Ctx,
        brain: &dyn Brain,
        agent_id: AgentId,
        run_id: RunId,
        steps: &mut Vec<StepRecord>,
        usage: &UsageMeter,
    ) {
        let Some(n) = compact::overflow(self.tokenizer, self.room, steps, self.compacted.as_ref())
        else {
            return;
        };
        let request = CompactRequest {
            earlier: self.compacted.take(),
            steps: steps.drain(..n).collect(),
            max_tokens: self.room / 4,
            budget: self.budget,
            usage: usage.clone(),
        };
        let folded = brain.compact(self.tokenizer, request).await;
        if let Err(err) = self.remember(ctx, agent_id, run_id, &folded).await {
            // The turn goes on: the summary is in its steps; only the
            // agent's later turns miss it.
            warn!(%agent_id, %err, "the running summary could not be stored");
        }
        self.compacted = Some(folded);
    }

    async fn remember(
        &mut self,
        ctx: &Ctx,
        agent_id: AgentId,
        run_id: RunId,
        folded: &Compaction,
    ) -> Result<(), crate::StoreError> {
        if self.base.is_none() {
            self.base = Some(
                ctx.context_records()
                    .context_record(agent_id)?
                    .unwrap_or_default(),
            );
        }
        let base = self.base.clone().unwrap_or_default();
        let entry = format!("[{run_id}] {}", folded.summary);
        let joined = if base.summary.is_empty() {
            entry
        } else {
            format!("{}\n{entry}", base.summary)
        };
        let chars = joined.chars().count();
        let record = ContextRecord {
            summary: joined
                .chars()
                .skip(chars.saturating_sub(MAX_RUNNING_SUMMARY_CHARS))
                .collect(),
            compactions: base.compactions + 1,
            run_id: run_id.to_string(),
            updated_at_ms: now_ms(),
        };
        ctx.context_records()
            .put_context_record(agent_id, &record)?;
        crate::apply::durable(ctx).await
    }
}
