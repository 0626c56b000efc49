//! Operator control of a running agent: pause, resume, abort. Control
//! actions are not queued messages; the actor applies them at once.

use holarchy_supervision::effect::Plan;
use holarchy_supervision::plan::{self, agent::NotLive};
use holarchy_supervision::{LifecycleState, RunOutcome};

use super::{AgentActor, AgentState};
use crate::now_ms;
use crate::protocol::{Control, ControlError, ControlOutcome};
use crate::store::{Batch, StoreError};

impl AgentActor {
    /// Applies an operator control action; synchronous, like all of `handle`.
    pub(super) fn control(
        &self,
        state: &mut AgentState,
        action: Control,
    ) -> Result<ControlOutcome, ControlError> {
        let agent_id = state.id();
        match action {
            Control::Pause => self.set_lifecycle(
                state,
                LifecycleState::Paused,
                "paused by an operator",
                Batch::new(),
            )?,
            Control::Resume => self.set_lifecycle(
                state,
                LifecycleState::Active,
                "resumed by an operator",
                Batch::new(),
            )?,
            Control::Abort { run_id } => {
                let current = state.run.as_ref().map(|r| r.run_id);
                let run = match (current, run_id) {
                    (None, _) => return Err(ControlError::NoRun),
                    (Some(current), Some(given)) if given != current => {
                        return Err(ControlError::StaleRun {
                            given,
                            current: Some(current),
                        })
                    }
                    (Some(_), _) => state.run.take(),
                };
                let Some(mut run) = run else {
                    return Err(ControlError::NoRun);
                };
                state.queue.live().turn_ended();
                // What the turn spent until now is recorded with its end.
                let message = super::finish::kept_message(&self.ctx, state, &mut run)?;
                let run_end = super::finish::run_of(&run);
                let batch = plan::turn::abort(agent_id, message.as_ref(), run_end);
                let aborted = run.run_id;
                // Cancels its brain and tool future now; the run itself is
                // dropped below, once its end is written.
                run.task.abort();
                self.set_lifecycle(state, LifecycleState::Paused, "operator_aborted", batch)?;
                let ended = super::finish::Ended {
                    outcome: RunOutcome::Aborted,
                    reply: None,
                    detail: "operator_aborted".into(),
                };
                self.tell_end(
                    agent_id,
                    &run,
                    ended,
                    Some(crate::apply::durable(&self.ctx)),
                );
                drop(run);
                return Ok(ControlOutcome {
                    state: state.target.state,
                    aborted_run: Some(aborted),
                });
            }
        }
        Ok(ControlOutcome {
            state: state.target.state,
            aborted_run: None,
        })
    }

    fn set_lifecycle(
        &self,
        state: &mut AgentState,
        to: LifecycleState,
        reason: &str,
        batch: Batch,
    ) -> Result<(), StoreError> {
        let agent_id = state.id();
        let plan = match self.ctx.reads().agent(agent_id)? {
            // An archive or a give-up that landed first wins: never bring
            // an ended agent back to life from a queued control message.
            Some(record) => plan::agent::set_state(&record, to, reason, batch, now_ms()).map_err(
                |NotLive(state)| {
                    StoreError::Precondition(format!("agent {agent_id} is {}", state.name()))
                },
            )?,
            None => Plan::writes(batch),
        };
        crate::apply::apply(&self.ctx, plan)?;
        state.target.state = to;
        self.ctx
            .directory
            .set_paused(agent_id, to == LifecycleState::Paused);
        Ok(())
    }
}
