//! One turn, whichever brain: build what the brain sees (the agent, the
//! message, the tool catalog, bounded context), ask it for a decision, run
//! its tool calls through the runtime, give the results back, and repeat
//! until it calls no tool or the step limit is reached. A brain that
//! streams writes each step's text to the agent's reply watchers as it
//! comes, and adds what its model calls spend to the turn's meter.

use std::sync::Arc;

use holarchy_composition::constraint::Policy;
use holarchy_supervision::bounds::{head, MAX_MESSAGE_LEN};
use holarchy_supervision::{AgentId, AgentRecord, BrainConfig, MessageRecord, Profile, RunId};
use serde_json::{json, Value};
use tracing::Instrument;

use crate::brain::anthropic::AnthropicBrain;
use crate::brain::command::CommandBrain;
use crate::brain::openai::OpenAiBrain;
use crate::brain::{Brain, ResultView, ToolCall, UsageMeter};
use crate::limits::json_len;
use crate::protocol::{CallInput, ToolResult, TurnOutcome};
use crate::tools::{self, ErrorKind, ToolError};
use crate::Ctx;
use crate::{compose, context};
use budget::ResultBudget;
use steps::{Fixed, Progress};

pub mod budget;
mod compaction;
mod record;
mod steps;

pub use record::SharedWritten;

/// How much of a refused call's input the turn keeps: the call did not
/// run, so a hint of what it was is enough.
pub(crate) const REFUSED_INPUT_BYTES: usize = 1024;

/// The brain for a configuration. `scripted` is the runtime's built-in
/// brain (tests may give their own).
pub fn brain_for(ctx: &Ctx, config: &BrainConfig) -> Arc<dyn Brain> {
    brain_with(ctx, config, ctx.brain_processes.clone())
}

/// The brain for a configuration, a command brain's processes taking
/// `slots` (a replay's own, apart from the live agents').
pub fn brain_with(
    ctx: &Ctx,
    config: &BrainConfig,
    slots: Arc<tokio::sync::Semaphore>,
) -> Arc<dyn Brain> {
    match config {
        BrainConfig::Scripted => ctx.brain.clone(),
        BrainConfig::Command {
            program,
            args,
            env,
            timeout_ms,
        } => Arc::new(CommandBrain {
            program: program.clone(),
            args: args.clone(),
            env: env.clone(),
            timeout: std::time::Duration::from_millis(*timeout_ms),
            sandbox: ctx.config.sandbox.clone(),
            slots,
        }),
        BrainConfig::OpenAi {
            base_url,
            model,
            api_key_env,
            temperature,
            ..
        } => Arc::new(OpenAiBrain {
            client: ctx.http.clone(),
            base_url: base_url.clone(),
            model: model.clone(),
            api_key_env: api_key_env.clone(),
            temperature: *temperature,
            retry: ctx.config.model_retry,
            secrets: ctx.config.secrets.clone(),
        }),
        BrainConfig::Anthropic {
            base_url,
            model,
            api_key_env,
            max_tokens,
            temperature,
            ..
        } => Arc::new(AnthropicBrain {
            client: ctx.http.clone(),
            base_url: base_url.clone(),
            model: model.clone(),
            api_key_env: api_key_env.clone(),
            max_tokens: *max_tokens,
            temperature: *temperature,
            retry: ctx.config.model_retry,
            secrets: ctx.config.secrets.clone(),
        }),
    }
}

/// A result as the brain sees it; a cut input is no JSON, so it sees none.
pub(crate) fn result_view(result: &ToolResult) -> ResultView {
    ResultView {
        tool: result.tool.clone(),
        input: result.input.value().cloned().unwrap_or(Value::Null),
        output: result.output.clone(),
        is_error: result.is_error,
    }
}

/// Runs one turn on `message` to its end.
pub async fn run(
    ctx: Arc<Ctx>,
    profile: Profile,
    agent_id: AgentId,
    run_id: RunId,
    message: MessageRecord,
    usage: UsageMeter,
) -> TurnOutcome {
    let record = match ctx.reads().agent(agent_id) {
        Ok(Some(record)) => record,
        Ok(None) => return TurnOutcome::BrainFailed("agent record not found".into()),
        Err(err) => return TurnOutcome::BrainFailed(err.to_string()),
    };
    let mut meter = TurnMeter::start(ctx.clone(), record.brain.kind(), agent_id);
    let outcome = run_on(ctx, profile, agent_id, run_id, message, record, usage).await;
    meter.finish(if matches!(outcome, TurnOutcome::Decided { .. }) {
        "handled"
    } else {
        "failed"
    });
    outcome
}

/// Counts a turn started, and finished with the outcome it is given; a
/// turn dropped before that (an operator's abort, a deadline, a shutdown
/// cancels its future) is counted finished as `aborted`, so started and
/// finished always add up.
struct TurnMeter {
    ctx: Arc<Ctx>,
    brain: &'static str,
    started: std::time::Instant,
    outcome: Option<&'static str>,
}

impl TurnMeter {
    fn start(ctx: Arc<Ctx>, brain: &'static str, agent_id: AgentId) -> Self {
        ctx.stats.metrics.turn_started(brain, agent_id);
        Self {
            ctx,
            brain,
            started: std::time::Instant::now(),
            outcome: None,
        }
    }

    fn finish(&mut self, outcome: &'static str) {
        self.outcome = Some(outcome);
    }
}

impl Drop for TurnMeter {
    fn drop(&mut self) {
        let outcome = self.outcome.unwrap_or("aborted");
        self.ctx
            .stats
            .metrics
            .turn_finished(self.brain, outcome, self.started.elapsed());
    }
}

/// The turn of `record`'s agent, once its record is read.
async fn run_on(
    ctx: Arc<Ctx>,
    profile: Profile,
    agent_id: AgentId,
    run_id: RunId,
    message: MessageRecord,
    record: AgentRecord,
    usage: UsageMeter,
) -> TurnOutcome {
    let brain = brain_for(&ctx, &record.brain);
    let limits = &ctx.config.limits;
    let max_steps = record
        .brain
        .max_steps()
        .min(limits.max_steps_per_turn)
        .max(1);
    let view = context::message_view(&message);
    let composition = record
        .composition
        .as_deref()
        .map(|stored| compose::current(ctx.instances(), stored));
    let role = composition.as_ref().and_then(compose::role);
    let policy = composition.as_ref().map(compose::policy);
    let mut fixed = Fixed {
        agent_id,
        run_id,
        message_id: message.id,
        agent: Value::Null,
        role,
        view,
        catalog: Vec::new(),
        context: Value::Null,
        max_steps,
    };
    let mut room = match fixed
        .see(&ctx, brain.as_ref(), profile, &record, &message)
        .await
    {
        Ok(room) => room,
        Err(err) => return TurnOutcome::BrainFailed(err.to_string()),
    };
    // Only an instance's agents log decisions; the brain's last one wins.
    let instance = composition.and_then(|c| c.instance.clone());
    let logs = instance.is_some();
    let caller = TurnCaller {
        agent_id,
        profile,
        run_id,
        policy: policy.as_ref(),
    };
    let outcome = steps_of(
        &ctx,
        brain.as_ref(),
        &fixed,
        &mut room,
        &caller,
        instance,
        &usage,
        &record,
    )
    .await;
    if brain.reads_context() {
        record::record(&ctx, brain.name(), &fixed, &outcome, logs).await;
    }
    outcome
}

/// The steps of the turn `fixed` describes, to its outcome.
#[allow(clippy::too_many_arguments)]
async fn steps_of(
    ctx: &Arc<Ctx>,
    brain: &dyn Brain,
    fixed: &Fixed,
    room: &mut Option<compaction::StepRoom>,
    caller: &TurnCaller<'_>,
    logs_decision: Option<String>,
    usage: &UsageMeter,
    record: &AgentRecord,
) -> TurnOutcome {
    let (agent_id, run_id, max_steps) = (fixed.agent_id, fixed.run_id, fixed.max_steps);
    let mut progress = Progress::new(&ctx.config.limits);
    for step in 1..=max_steps {
        // Before the brain sees them: the turn's steps within its budget.
        if let Some(room) = room.as_mut() {
            let steps = &mut progress.steps;
            room.fit(ctx, brain, agent_id, run_id, steps, usage).await;
        }
        // Taken after the fit: a step compacted away is in the summary, not
        // sent again whole.
        let compacted = room.as_ref().and_then(|r| r.compacted.clone());
        let logs = logs_decision.is_some();
        let input = fixed.input(ctx, step, &progress.steps, compacted, logs, usage);
        let decided = brain.decide(input).instrument(tracing::info_span!(
            "brain_step",
            brain = brain.name(),
            step
        ));
        let plan = match decided.await {
            Ok(plan) => plan,
            Err(err) => return TurnOutcome::BrainFailed(err.to_string()),
        };
        if !progress.take(ctx, caller, plan).await {
            break;
        }
        if step == max_steps && max_steps < record.brain.max_steps() {
            progress.step_limit = Some(max_steps);
        }
    }
    progress.outcome(logs_decision)
}

/// Who a turn's calls run for, and under which constraints.
#[derive(Debug, Clone, Copy)]
struct TurnCaller<'a> {
    agent_id: AgentId,
    profile: Profile,
    run_id: RunId,
    policy: Option<&'a Policy>,
}

/// Runs one step's tool calls in order. A step asking for more calls than
/// `--max-tool-calls-per-step` runs none of them and gets one tool error;
/// a call whose input (placeholders filled) is over its bound gets a tool
/// error of its own, and the record keeps the call as written. Each output
/// is cut to `--max-tool-result-bytes` and charged to the turn's budget;
/// once that is spent, calls get a tool error instead of running.
async fn run_calls(
    ctx: &Arc<Ctx>,
    caller: &TurnCaller<'_>,
    calls: &[ToolCall],
    all_results: &mut Vec<ToolResult>,
    budget: &mut ResultBudget,
) -> Vec<ToolResult> {
    let policy = caller.policy;
    let limits = &ctx.config.limits;
    if calls.len() > limits.max_tool_calls_per_step {
        let error = format!(
            "this step asked for {} tool calls; the limit is {} per step (--max-tool-calls-per-step), so none ran",
            calls.len(),
            limits.max_tool_calls_per_step
        );
        let refused = ToolResult {
            tool: "tool_calls".into(),
            input: CallInput::Whole(json!({ "count": calls.len() })),
            output: tools::error_json(ErrorKind::Refused, &error),
            is_error: true,
        };
        all_results.push(refused.clone());
        return vec![refused];
    }
    let mut results: Vec<ToolResult> = Vec::with_capacity(calls.len());
    for call in calls {
        if let Err(spent) = budget.check() {
            let refused = refused(call, ToolError::from(spent).to_json());
            all_results.push(refused.clone());
            results.push(refused);
            continue;
        }
        let limit = limits.input_bytes(tools::input_bound(&call.name));
        // The instance's constraints come before the tool runs at all: a
        // denied call is a tool error, never a side effect; one that needs
        // approval is parked with its input filled in, as it would run.
        let check = policy.map_or(compose::Check::Allow, |p| compose::check(p, &call.name));
        let approval = match check {
            compose::Check::Allow => None,
            compose::Check::Approve(layer) => Some(layer),
            compose::Check::Refuse(reason) => {
                let refused = refused(call, tools::error_json(ErrorKind::Refused, &reason));
                all_results.push(refused.clone());
                results.push(refused);
                continue;
            }
        };
        // Later calls may use earlier results ({{results[0].token}}), of
        // earlier steps and of this one.
        let mut result = match tools::fill_placeholders(&call.input, all_results, limit) {
            Ok(input) => {
                let filled = ToolCall {
                    name: call.name.clone(),
                    input,
                };
                run_one(ctx, caller, &filled, approval).await
            }
            Err(err) => refused(call, ToolError::from(err).to_json()),
        };
        // The record keeps the call as written, not as filled in, and no
        // more of it than the bound allows; a call that failed (refused,
        // over a bound, a memory already full) had no effect worth its
        // whole input, so a brain cannot grow the store by failing.
        let kept = if result.is_error {
            REFUSED_INPUT_BYTES
        } else {
            limit
        };
        result.input = written(call, kept);
        budget.charge(&mut result);
        all_results.push(result.clone());
        results.push(result);
    }
    results
}

/// A call refused before it ran: its input kept only up to the bound of a
/// refusal, and `error` as its output.
fn refused(call: &ToolCall, error: Value) -> ToolResult {
    ToolResult {
        tool: call.name.clone(),
        input: written(call, REFUSED_INPUT_BYTES),
        output: error,
        is_error: true,
    }
}

/// Runs one call its checks let through (`filled`: its placeholders filled
/// in): parked for an operator when a layer asks for `approval`, otherwise
/// run and counted in the metrics.
async fn run_one(
    ctx: &Arc<Ctx>,
    caller: &TurnCaller<'_>,
    filled: &ToolCall,
    approval: Option<holarchy_composition::constraint::Layer>,
) -> ToolResult {
    let TurnCaller {
        agent_id,
        profile,
        run_id,
        ..
    } = *caller;
    match approval {
        Some(layer) => parked(ctx, agent_id, run_id, filled, layer).await,
        None => {
            let started = std::time::Instant::now();
            let span = tracing::info_span!("tool_call", tool = %filled.name);
            let result = tools::call(ctx, agent_id, profile, filled)
                .instrument(span)
                .await;
            ctx.stats.metrics.tool_called(
                tools::family_name(&result.tool),
                result.is_error,
                started.elapsed(),
            );
            result
        }
    }
}

/// A call parked for an operator's approval, as the brain sees it.
async fn parked(
    ctx: &Ctx,
    agent_id: AgentId,
    run_id: RunId,
    call: &ToolCall,
    layer: holarchy_composition::constraint::Layer,
) -> ToolResult {
    let (output, is_error) = match crate::approval::park(ctx, agent_id, run_id, call, layer).await {
        Ok(output) => (output, false),
        Err(err) => (err.to_json(), true),
    };
    ToolResult {
        tool: call.name.clone(),
        input: CallInput::Whole(call.input.clone()),
        output,
        is_error,
    }
}

/// A call's input as written, what is never stored left out (see
/// [`tools::recorded_input`]), cut to `limit` bytes of its text if it is
/// longer.
pub(crate) fn written(call: &ToolCall, limit: usize) -> CallInput {
    let kept = tools::recorded_input(&call.name, &call.input).unwrap_or_else(|| call.input.clone());
    let len = json_len(&kept);
    if len <= limit {
        return CallInput::Whole(kept);
    }
    let text = kept.to_string();
    CallInput::Cut(format!(
        "{}… ({len} bytes, over the limit)",
        head(&text, limit)
    ))
}

/// A brain's reply, cut to a message's bound: it is stored with every step,
/// and a child's reply becomes its parent's message.
pub(crate) fn bounded_reply(reply: Option<String>) -> Option<String> {
    reply.map(|text| {
        if text.len() <= MAX_MESSAGE_LEN {
            return text;
        }
        let note = format!(
            "… (reply cut: {} bytes, over {MAX_MESSAGE_LEN})",
            text.len()
        );
        format!("{}{note}", head(&text, MAX_MESSAGE_LEN - note.len()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(input: Value) -> ToolCall {
        ToolCall {
            name: "MemoryWrite".into(),
            input,
        }
    }

    #[test]
    fn an_input_within_its_bound_is_kept_whole_and_seen_as_written() {
        let input = json!({ "key": "k", "text": "a \"quoted\" line\n" });
        let kept = written(&call(input.clone()), 1024);
        assert_eq!(kept, CallInput::Whole(input.clone()));
        assert_eq!(kept.text(), input.to_string());
        assert_eq!(kept.text_len(), input.to_string().len());
        let result = ToolResult {
            tool: "MemoryWrite".into(),
            input: kept,
            output: json!({ "ok": true }),
            is_error: false,
        };
        let view = result_view(&result);
        assert_eq!((view.input, view.output), (input, json!({ "ok": true })));
    }

    #[test]
    fn an_input_over_its_bound_keeps_its_head_as_text_and_brains_see_none() {
        let input = json!({ "text": "x".repeat(5000) });
        let kept = written(&call(input), 1024);
        let text = kept.text();
        assert!(text.starts_with("{\"text\":\"xxx"), "{text}");
        assert!(text.ends_with("… (5011 bytes, over the limit)"), "{text}");
        assert_eq!(kept.value(), None);
        let result = ToolResult {
            tool: "MemoryWrite".into(),
            input: kept,
            output: json!({ "ok": true }),
            is_error: false,
        };
        assert_eq!(result_view(&result).input, Value::Null);
    }
}
