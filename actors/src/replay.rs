//! Replays one recorded turn through a candidate brain, without side
//! effects: the candidate is shown what the recorded brain was shown (the
//! message, and for brains that read context the recorded agent view,
//! context, role and catalog), and each tool call it makes is answered
//! from the recorded turn's results when the same call (tool and input)
//! was made there, or with a "not recorded" tool error. Nothing is
//! written: no record, event, memory or workspace. What the daemon's job
//! reads (the log, the stored input) and keeps (the report) is its own.
//!
//! A candidate may change the brain, the role's prompt, the skills (a
//! folder whose skills the context lists and `LoadSkill` answers from)
//! and the constraints its calls are checked against.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use holarchy_composition::constraint::Policy;
use holarchy_composition::skill::SkillCatalog;
use holarchy_supervision::{AgentId, BrainConfig, EventKind, RunId, TokenUsage};
use serde_json::{json, Value};

use crate::brain::{Brain, MessageView, StepRecord, ToolCall, TurnInput, UsageMeter};
use crate::compose::RoleView;
use crate::protocol::{CallInput, ToolResult, TurnDecision};
use crate::store::{SharedInput, TurnInputRecord};
use crate::tools::{self, ErrorKind};
use crate::Ctx;

/// One recorded call and what it returned, as the event log keeps them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedCall {
    pub tool: String,
    /// The input as JSON text (or the head of one cut at its bound).
    pub input: String,
    /// The output as JSON text.
    pub output: String,
    pub is_error: bool,
}

/// One recorded step: what the brain said and the calls it made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordedStep {
    pub reply: Option<String>,
    pub calls: Vec<RecordedCall>,
}

/// What the recorded brain was shown besides the message and its steps.
#[derive(Debug, Clone)]
pub struct RecordedInput {
    pub record: TurnInputRecord,
    pub shared: SharedInput,
}

/// A recorded turn, as the log and the stored input give it back.
#[derive(Debug, Clone)]
pub struct RecordedTurn {
    pub agent_id: AgentId,
    pub run_id: RunId,
    pub message: MessageView,
    /// None for a brain that reads no context (the message is all it saw),
    /// or a record dropped since.
    pub input: Option<RecordedInput>,
    pub steps: Vec<RecordedStep>,
    /// `run_finished`'s outcome (`completed`, `failed`...) and detail.
    pub outcome: String,
    pub detail: String,
    /// The turn's logged decision, as [`decision_text`] writes it.
    pub decision: Option<String>,
    pub usage: Option<TokenUsage>,
}

/// What a candidate changes.
#[derive(Debug, Clone, Default)]
pub struct Candidate {
    /// The brain; the agent's own when unset.
    pub brain: Option<BrainConfig>,
    /// The role (its prompt checked as an instance's is).
    pub role: Option<holarchy_supervision::Role>,
    /// The skills, read from a folder.
    pub skills: Option<Arc<SkillCatalog>>,
    /// The constraints calls are checked against; the agent's when unset.
    pub policy: Option<Policy>,
}

/// What the candidate decided over one turn.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Decided {
    pub steps: Vec<DecidedStep>,
    /// The last reply of the turn.
    pub reply: Option<String>,
    /// Unknown for a recorded turn whose input was not recorded.
    pub done: Option<bool>,
    /// The decision its turn would log (instances' agents), as
    /// [`decision_text`] writes it.
    pub decision: Option<String>,
    /// Why the brain failed, if it did.
    pub failed: Option<String>,
}

/// One step's reply and calls, the calls as `(tool, input text)`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DecidedStep {
    pub reply: Option<String>,
    pub calls: Vec<(String, String)>,
}

/// A candidate's turn and what it cost.
#[derive(Debug, Clone, Default)]
pub struct Replayed {
    pub decided: Decided,
    /// Calls answered with "not recorded".
    pub unrecorded_calls: u32,
    pub usage: Option<TokenUsage>,
}

/// Why a turn could not be replayed at all.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReplayError {
    #[error("the candidate reads the agent's context, and this turn's was not recorded (its brain read none, or the record was dropped: `serve --replay-keep-turns`)")]
    InputNotRecorded,
    #[error("the recorded input names a shared part ({0}) the store no longer holds")]
    SharedGone(String),
}

/// The decision of an `EventKind::Decided` as one line.
pub fn decision_text(decided: &EventKind) -> Option<String> {
    let EventKind::Decided {
        kind,
        reason,
        target,
        ..
    } = decided
    else {
        return None;
    };
    Some(match target {
        Some(target) => format!("{kind} {target}: {reason}"),
        None => format!("{kind}: {reason}"),
    })
}

impl Decided {
    /// The decision as a report keeps it: at most `max_steps` steps of at
    /// most `max_calls` calls each (a candidate may ask for any number),
    /// each text passed through `redact` and cut to `max` bytes.
    pub fn bounded(
        mut self,
        max: usize,
        max_steps: usize,
        max_calls: usize,
        redact: impl Fn(&mut String),
    ) -> Self {
        let cut = |text: &mut String| {
            redact(text);
            if text.len() > max {
                let note = format!("… ({} bytes, cut)", text.len());
                holarchy_supervision::bounds::truncate(text, max);
                text.push_str(&note);
            }
        };
        self.steps.truncate(max_steps);
        for step in &mut self.steps {
            step.reply.iter_mut().for_each(cut);
            step.calls.truncate(max_calls);
            for (tool, input) in &mut step.calls {
                cut(tool);
                cut(input);
            }
        }
        self.reply.iter_mut().for_each(cut);
        self.decision.iter_mut().for_each(cut);
        self.failed.iter_mut().for_each(cut);
        self
    }
}

impl RecordedTurn {
    /// The recorded turn's decisions, in the shape a candidate's are.
    pub fn decided(&self) -> Decided {
        Decided {
            steps: self
                .steps
                .iter()
                .map(|step| DecidedStep {
                    reply: step.reply.clone(),
                    calls: step
                        .calls
                        .iter()
                        .map(|c| (c.tool.clone(), c.input.clone()))
                        .collect(),
                })
                .collect(),
            reply: self.steps.iter().rev().find_map(|s| s.reply.clone()),
            done: self.input.as_ref().map(|i| i.record.done),
            decision: self.decision.clone(),
            failed: (self.outcome == "failed").then(|| self.detail.clone()),
        }
    }
}

/// The recorded answers of one turn, by call.
struct Answers(HashMap<(String, String), Vec<RecordedCall>>);

impl Answers {
    fn of(turn: &RecordedTurn) -> Self {
        let mut by_call: HashMap<(String, String), Vec<RecordedCall>> = HashMap::new();
        for call in turn.steps.iter().flat_map(|s| &s.calls) {
            by_call
                .entry((call.tool.clone(), call.input.clone()))
                .or_default()
                .push(call.clone());
        }
        Answers(by_call)
    }

    /// The recorded answer to `(tool, input)`: the calls made the same way
    /// answer in the order they were made, the last one any further time.
    fn answer(&mut self, tool: &str, inputs: &[String]) -> Option<RecordedCall> {
        for input in inputs {
            if let Some(calls) = self.0.get_mut(&(tool.to_owned(), input.clone())) {
                return Some(if calls.len() > 1 {
                    calls.remove(0)
                } else {
                    calls[0].clone()
                });
            }
        }
        None
    }
}

/// The error a call the recorded turn did not make gets.
fn not_recorded() -> Value {
    tools::error_json(
        ErrorKind::Failed,
        "not recorded: the replayed turn made no such call (this tool with this input), so a replay cannot answer it without running it",
    )
}

/// Everything a replay shares across its turns.
#[derive(Debug)]
pub struct Replayer {
    pub ctx: Arc<Ctx>,
    pub candidate: Candidate,
    /// Slots for candidate command-brain processes, the replay's own: a
    /// replay never takes the live agents'.
    pub processes: Arc<tokio::sync::Semaphore>,
    /// Stands for the agent where a brain needs an owner (a command
    /// brain's private directory), so nothing of the agent's is touched.
    pub owner: AgentId,
    /// How long one candidate step may take.
    pub step_timeout: Duration,
}

impl Replayer {
    /// The candidate's turn on `turn`; its brain the candidate's or
    /// `agent_brain`.
    pub async fn replay(
        &self,
        turn: &RecordedTurn,
        agent_brain: &BrainConfig,
        agent_policy: Option<&Policy>,
    ) -> Result<Replayed, ReplayError> {
        let config = self.candidate.brain.as_ref().unwrap_or(agent_brain);
        let brain = crate::turn::brain_with(&self.ctx, config, self.processes.clone());
        let limits = &self.ctx.config.limits;
        let shown = self.shown(brain.as_ref(), turn)?;
        let max_steps = turn
            .input
            .as_ref()
            .map_or(config.max_steps(), |i| i.record.max_steps)
            .min(config.max_steps())
            .min(limits.max_steps_per_turn)
            .max(1);
        let logs_decision =
            turn.decision.is_some() || turn.input.as_ref().is_some_and(|i| i.record.logs_decision);
        let policy = self.candidate.policy.as_ref().or(agent_policy);
        let usage = UsageMeter::default();
        let mut answers = Answers::of(turn);
        let mut replayed = Replayed::default();
        let mut steps: Vec<StepRecord> = Vec::new();
        let mut ran: Vec<(Option<String>, Vec<ToolResult>)> = Vec::new();
        let mut explicit = None;
        let mut done = false;
        for step in 1..=max_steps {
            let input = TurnInput {
                agent_id: self.owner,
                run_id: turn.run_id,
                agent: shown.agent.clone(),
                role: shown.role.clone(),
                message: turn.message.clone(),
                tools: shown.catalog.clone(),
                context: shown.context.clone(),
                step,
                max_steps,
                previous_results: steps.last().map(|s| s.results.clone()).unwrap_or_default(),
                steps: steps.clone(),
                compacted: None,
                logs_decision,
                replies: None,
                usage: usage.clone(),
            };
            let plan = match tokio::time::timeout(self.step_timeout, brain.decide(input)).await {
                Ok(Ok(plan)) => plan,
                Ok(Err(err)) => {
                    replayed.decided.failed = Some(err.to_string());
                    break;
                }
                Err(_) => {
                    replayed.decided.failed =
                        Some(format!("the step took longer than {:?}", self.step_timeout));
                    break;
                }
            };
            let reply = crate::turn::bounded_reply(plan.reply);
            if reply.is_some() {
                replayed.decided.reply.clone_from(&reply);
            }
            if let Some(decision) = plan.decision {
                explicit = Some(decision.to_string());
            }
            done |= plan.done;
            let calls = plan.tool_calls;
            let results = self.answer(&calls, policy, &mut answers, &mut replayed);
            replayed.decided.steps.push(DecidedStep {
                reply: reply.clone(),
                calls: calls
                    .iter()
                    .map(|c| (c.name.clone(), recorded_text(&self.ctx, c, false)))
                    .collect(),
            });
            if calls.is_empty() {
                ran.push((reply, Vec::new()));
                break;
            }
            steps.push(StepRecord {
                reply: reply.clone(),
                tool_calls: calls,
                results: results.iter().map(crate::turn::result_view).collect(),
            });
            ran.push((reply, results));
        }
        replayed.decided.done = Some(done);
        if logs_decision && replayed.decided.failed.is_none() {
            let source = TurnDecision {
                instance: String::new(),
                explicit,
            };
            let reply = replayed.decided.reply.clone();
            let event = crate::agent::decided(turn.run_id, reply.as_deref(), &ran, source);
            replayed.decided.decision = decision_text(&event);
        }
        replayed.usage = usage.take();
        Ok(replayed)
    }

    /// The results of one step's `calls`, each from the recording.
    fn answer(
        &self,
        calls: &[ToolCall],
        policy: Option<&Policy>,
        answers: &mut Answers,
        replayed: &mut Replayed,
    ) -> Vec<ToolResult> {
        let limits = &self.ctx.config.limits;
        if calls.len() > limits.max_tool_calls_per_step {
            let error = format!(
                "this step asked for {} tool calls; the limit is {} per step (--max-tool-calls-per-step), so none ran",
                calls.len(),
                limits.max_tool_calls_per_step
            );
            return vec![ToolResult {
                tool: "tool_calls".into(),
                input: CallInput::Whole(json!({ "count": calls.len() })),
                output: tools::error_json(ErrorKind::Refused, &error),
                is_error: true,
            }];
        }
        calls
            .iter()
            .map(|call| {
                let check = policy.map_or(crate::compose::Check::Allow, |p| {
                    crate::compose::check(p, &call.name)
                });
                let input = CallInput::Whole(call.input.clone());
                if let crate::compose::Check::Refuse(reason) = check {
                    return ToolResult {
                        tool: call.name.clone(),
                        input,
                        output: tools::error_json(ErrorKind::Refused, &reason),
                        is_error: true,
                    };
                }
                if let Some(output) = self.skill(call) {
                    return ToolResult {
                        tool: call.name.clone(),
                        input,
                        output,
                        is_error: false,
                    };
                }
                let texts = [
                    recorded_text(&self.ctx, call, false),
                    recorded_text(&self.ctx, call, true),
                ];
                match answers.answer(&call.name, &texts) {
                    Some(recorded) => ToolResult {
                        tool: call.name.clone(),
                        input,
                        output: serde_json::from_str(&recorded.output)
                            .unwrap_or(Value::String(recorded.output)),
                        is_error: recorded.is_error,
                    },
                    None => {
                        replayed.unrecorded_calls += 1;
                        ToolResult {
                            tool: call.name.clone(),
                            input,
                            output: not_recorded(),
                            is_error: true,
                        }
                    }
                }
            })
            .collect()
    }

    /// `LoadSkill` of one of the candidate's skills, answered from its
    /// folder (reading a skill has no effect).
    fn skill(&self, call: &ToolCall) -> Option<Value> {
        let catalog = self.candidate.skills.as_ref()?;
        if call.name != "LoadSkill" {
            return None;
        }
        let name = call.input.get("name")?.as_str()?;
        let loaded = catalog.get(name)?.load().ok()?;
        Some(tools::loaded_skill_json(&loaded))
    }

    /// What the candidate brain is shown besides the message and steps.
    fn shown(&self, brain: &dyn Brain, turn: &RecordedTurn) -> Result<Shown, ReplayError> {
        if !brain.reads_context() {
            return Ok(Shown::default());
        }
        let Some(input) = &turn.input else {
            return Err(ReplayError::InputNotRecorded);
        };
        let parse = |text: &str| serde_json::from_str::<Value>(text).unwrap_or(Value::Null);
        let mut context = parse(&input.record.context);
        if let (Some(catalog), Some(listed)) = (&self.candidate.skills, context.get("skills")) {
            let names: Vec<String> = listed
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.get("name")?.as_str().map(str::to_owned))
                .collect();
            context["skills"] = crate::context::skills_view(catalog, &names);
        }
        let role = match &self.candidate.role {
            Some(role) => Some(RoleView {
                version: role.version(),
                prompt: role.text.clone(),
            }),
            None => input.shared.role.as_ref().map(|role| RoleView {
                version: role.version.clone(),
                prompt: role.prompt.clone(),
            }),
        };
        let catalog = match parse(&input.shared.catalog) {
            Value::Array(entries) => entries,
            _ => Vec::new(),
        };
        Ok(Shown {
            agent: parse(&input.record.agent),
            role,
            catalog,
            context,
        })
    }
}

/// What a brain that reads context is shown of a recorded turn.
#[derive(Debug, Default)]
struct Shown {
    agent: Value,
    role: Option<RoleView>,
    catalog: Vec<Value>,
    context: Value,
}

/// A call's input as the event log would keep it: as written, what is
/// never stored left out, cut at its bound (or at a refusal's, `refused`).
pub fn recorded_text(ctx: &Ctx, call: &ToolCall, refused: bool) -> String {
    let limit = if refused {
        crate::turn::REFUSED_INPUT_BYTES
    } else {
        ctx.config
            .limits
            .input_bytes(tools::input_bound(&call.name))
    };
    crate::secrets::redact_trigger_tokens(&crate::turn::written(call, limit).text())
}

/// Whether two decisions are the same, and if not how they differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Same,
    /// The same calls with the same inputs, but other text (a reply, the
    /// logged decision, `done`).
    SameToolsDifferentText,
    DifferentTools,
    /// The candidate (or the replay) failed where the recorded turn did not,
    /// or could not be replayed.
    Error,
}

impl Class {
    pub const fn name(self) -> &'static str {
        match self {
            Class::Same => "same",
            Class::SameToolsDifferentText => "same_tools_different_text",
            Class::DifferentTools => "different_tools",
            Class::Error => "error",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        [
            Class::Same,
            Class::SameToolsDifferentText,
            Class::DifferentTools,
            Class::Error,
        ]
        .into_iter()
        .find(|c| c.name() == name)
    }
}

/// How `candidate` compares with `recorded`.
pub fn classify(recorded: &Decided, candidate: &Decided) -> Class {
    if candidate.failed.is_some() && recorded.failed.is_none() {
        return Class::Error;
    }
    let calls = |d: &Decided| -> Vec<(String, String)> {
        d.steps.iter().flat_map(|s| s.calls.clone()).collect()
    };
    if calls(recorded) != calls(candidate) {
        return Class::DifferentTools;
    }
    let replies =
        |d: &Decided| -> Vec<Option<String>> { d.steps.iter().map(|s| s.reply.clone()).collect() };
    let done_differs = matches!((recorded.done, candidate.done), (Some(a), Some(b)) if a != b);
    if replies(recorded) != replies(candidate)
        || recorded.decision != candidate.decision
        || done_differs
        || recorded.failed != candidate.failed
    {
        return Class::SameToolsDifferentText;
    }
    Class::Same
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(reply: &str, calls: &[(&str, &str)]) -> DecidedStep {
        DecidedStep {
            reply: Some(reply.into()),
            calls: calls
                .iter()
                .map(|(t, i)| ((*t).to_owned(), (*i).to_owned()))
                .collect(),
        }
    }

    fn decided(steps: Vec<DecidedStep>) -> Decided {
        Decided {
            steps,
            done: Some(false),
            ..Decided::default()
        }
    }

    #[test]
    fn decisions_are_classed_by_calls_first_then_text() {
        let a = decided(vec![step("x", &[("MemoryGet", "{}")]), step("y", &[])]);
        assert_eq!(classify(&a, &a.clone()), Class::Same);
        let other_text = decided(vec![step("x", &[("MemoryGet", "{}")]), step("z", &[])]);
        assert_eq!(classify(&a, &other_text), Class::SameToolsDifferentText);
        let other_input = decided(vec![
            step("x", &[("MemoryGet", "{\"k\":1}")]),
            step("y", &[]),
        ]);
        assert_eq!(classify(&a, &other_input), Class::DifferentTools);
        let failed = Decided {
            failed: Some("boom".into()),
            ..a.clone()
        };
        assert_eq!(classify(&a, &failed), Class::Error);
        let done = Decided {
            done: Some(true),
            ..a.clone()
        };
        assert_eq!(classify(&a, &done), Class::SameToolsDifferentText);
        // A recorded turn whose `done` is unknown is not held against it.
        let unknown = Decided { done: None, ..a };
        assert_eq!(classify(&unknown, &done), Class::Same);
    }

    #[test]
    fn a_call_made_twice_is_answered_in_order_then_by_its_last() {
        let call = |output: &str| RecordedCall {
            tool: "T".into(),
            input: "{}".into(),
            output: output.into(),
            is_error: false,
        };
        let turn = RecordedTurn {
            agent_id: AgentId::generate(),
            run_id: RunId::generate(),
            message: MessageView {
                message_id: String::new(),
                provenance: "operator".into(),
                from_agent_id: None,
                text: String::new(),
            },
            input: None,
            steps: vec![RecordedStep {
                reply: None,
                calls: vec![call("1"), call("2")],
            }],
            outcome: "completed".into(),
            detail: String::new(),
            decision: None,
            usage: None,
        };
        let mut answers = Answers::of(&turn);
        let texts = ["{}".to_owned()];
        let outputs: Vec<_> = (0..3)
            .map(|_| answers.answer("T", &texts).map(|c| c.output))
            .collect();
        assert_eq!(
            outputs,
            [Some("1".into()), Some("2".into()), Some("2".into())]
        );
        assert!(answers.answer("U", &texts).is_none());
    }
}
