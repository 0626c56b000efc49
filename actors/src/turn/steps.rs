//! A turn's steps: what its brain is sent at every step besides the steps
//! ([`Fixed`]), and the steps taken so far with what they ran
//! ([`Progress`]).

use std::sync::Arc;

use holarchy_supervision::{AgentId, AgentRecord, MessageId, MessageRecord, Profile, RunId};
use serde_json::Value;

use super::budget::ResultBudget;
use super::compaction::StepRoom;
use super::{bounded_reply, result_view, run_calls, TurnCaller};
use crate::brain::{Brain, StepRecord, TurnInput, TurnPlan, UsageMeter};
use crate::protocol::{ToolResult, TurnDecision, TurnOutcome};
use crate::replies::ReplySink;
use crate::store::StoreError;
use crate::{compose, context, tools, Ctx};

/// What a turn sends its brain at every step besides the steps.
pub(super) struct Fixed {
    pub(super) agent_id: AgentId,
    pub(super) run_id: RunId,
    pub(super) message_id: MessageId,
    pub(super) agent: Value,
    pub(super) role: Option<compose::RoleView>,
    pub(super) view: crate::step::MessageView,
    pub(super) catalog: Vec<Value>,
    pub(super) context: Value,
    pub(super) max_steps: u32,
}

impl Fixed {
    /// Reads what `brain` sees of `record`'s turn on `message` besides the
    /// message: nothing for a brain that reads no context; otherwise the
    /// agent's view, its bounded context (the role cut to fit), its tool
    /// catalog. Returns the room left for the turn's steps once those and
    /// the message take their share of the budget.
    pub(super) async fn see(
        &mut self,
        ctx: &Arc<Ctx>,
        brain: &dyn Brain,
        profile: Profile,
        record: &AgentRecord,
        message: &MessageRecord,
    ) -> Result<Option<StepRoom>, StoreError> {
        if !brain.reads_context() {
            return Ok(None);
        }
        self.agent = tools::agent_view(ctx, record)?;
        let assembled = context::bounded(ctx, record, Some(message), self.role.as_mut())?;
        self.catalog = tools::catalog(ctx, profile, &record.mcp_servers)
            .await
            .tools
            .iter()
            .map(tools::CatalogEntry::view)
            .collect();
        let tokenizer = assembled.tokenizer;
        let fixed = tokenizer.count_json(&self.view)
            + tokenizer.count_json(&self.catalog)
            + tokenizer.count_json(&self.agent);
        let room = StepRoom::new(&assembled, fixed);
        self.context = assembled.context;
        Ok(Some(room))
    }

    /// The input of step `step`, after `steps` (as fitted to the room;
    /// `compacted` is the summary of those compacted away).
    pub(super) fn input(
        &self,
        ctx: &Ctx,
        step: u32,
        steps: &[StepRecord],
        compacted: Option<context::compact::Compaction>,
        logs_decision: bool,
        usage: &UsageMeter,
    ) -> TurnInput {
        // Taken after the fit: a step compacted away is in the summary, not
        // sent again whole.
        let previous_results = steps.last().map(|s| s.results.clone()).unwrap_or_default();
        TurnInput {
            agent_id: self.agent_id,
            run_id: self.run_id,
            agent: self.agent.clone(),
            role: self.role.clone(),
            message: self.view.clone(),
            tools: self.catalog.clone(),
            context: self.context.clone(),
            step,
            max_steps: self.max_steps,
            previous_results,
            steps: steps.to_vec(),
            compacted,
            logs_decision,
            replies: Some(ReplySink::new(
                ctx.replies.clone(),
                ctx.config.secrets.clone(),
                self.agent_id,
                self.run_id,
                self.message_id,
                step,
            )),
            usage: usage.clone(),
        }
    }
}

/// A turn's steps so far. Every result stays in `all_results`, `recorded`
/// and `steps` until the turn ends, and `steps` goes to the brain at each
/// step: `budget` bounds them.
pub(super) struct Progress {
    pub(super) steps: Vec<StepRecord>,
    pub(super) all_results: Vec<ToolResult>,
    pub(super) recorded: Vec<(Option<String>, Vec<ToolResult>)>,
    pub(super) reply: Option<String>,
    pub(super) done: bool,
    pub(super) step_limit: Option<u32>,
    pub(super) explicit_decision: Option<String>,
    pub(super) budget: ResultBudget,
}

impl Progress {
    pub(super) fn new(limits: &crate::limits::Limits) -> Self {
        Progress {
            steps: Vec::new(),
            all_results: Vec::new(),
            recorded: Vec::new(),
            reply: None,
            done: false,
            step_limit: None,
            explicit_decision: None,
            budget: ResultBudget::new(limits),
        }
    }

    /// How the turn ended, its decision logged for `instance`'s agents.
    pub(super) fn outcome(self, instance: Option<String>) -> TurnOutcome {
        TurnOutcome::Decided {
            reply: self.reply,
            steps: self.recorded,
            done: self.done,
            step_limit: self.step_limit,
            decision: instance.map(|instance| TurnDecision {
                instance,
                explicit: self.explicit_decision,
            }),
        }
    }
    /// Takes the brain's `plan` for one step: its reply, its decision, and
    /// its calls run for `caller`. False when it asked for no call: the
    /// turn ends.
    pub(super) async fn take(
        &mut self,
        ctx: &Arc<Ctx>,
        caller: &TurnCaller<'_>,
        mut plan: TurnPlan,
    ) -> bool {
        plan.reply = bounded_reply(plan.reply);
        // A brain may hold its own calls for an operator: a decision with
        // `requires_approval` parks this step's calls (the prompt layer,
        // which can only narrow what the instance allows).
        let asks_approval = plan
            .decision
            .as_ref()
            .is_some_and(holarchy_composition::decision::asks_approval);
        if let Some(decision) = plan.decision.take() {
            self.explicit_decision = Some(decision.to_string());
        }
        if plan.reply.is_some() {
            self.reply.clone_from(&plan.reply);
        }
        self.done |= plan.done;
        if plan.tool_calls.is_empty() {
            self.recorded.push((plan.reply, Vec::new()));
            return false;
        }
        let step_policy = caller
            .policy
            .filter(|_| asks_approval)
            .map(|p| compose::asking_approval(p, &plan.tool_calls));
        let caller = TurnCaller {
            policy: step_policy.as_ref().or(caller.policy),
            ..*caller
        };
        let ran = run_calls(
            ctx,
            &caller,
            &plan.tool_calls,
            &mut self.all_results,
            &mut self.budget,
        )
        .await;
        let results = ran.iter().map(result_view).collect();
        self.recorded.push((plan.reply.clone(), ran));
        self.steps.push(StepRecord {
            reply: plan.reply,
            tool_calls: plan.tool_calls,
            results,
        });
        true
    }
}
