//! The wait actor: one per armed wait, linked under the agent that owns
//! it. A timer's actor fires at its deadline; a trigger's actor is the live
//! sign of a deliverable token (deliveries go straight to the owner).

use std::sync::Arc;
use std::time::Duration;

use holarchy_supervision::plan;
use holarchy_supervision::WaitRecord;
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};

use crate::protocol::{WaitMsg, WaitSnapshot};
use crate::store::StoreError;
use crate::{now_ms, Ctx};

#[derive(Debug, Clone)]
pub struct WaitActor {
    ctx: Arc<Ctx>,
}

impl WaitActor {
    pub fn new(ctx: Arc<Ctx>) -> Self {
        Self { ctx }
    }

    /// Fires the timer once: the wait's `fired` record and the owner's wake
    /// message land together, and only if the wait is still armed.
    fn fire(&self, wait: &WaitRecord) -> Result<bool, StoreError> {
        let Some(current) = self.ctx.reads().wait(wait.id)? else {
            return Ok(false);
        };
        let Some(plan) = plan::wait::fire(&current, now_ms()) else {
            return Ok(false);
        };
        match crate::apply::apply(&self.ctx, plan) {
            Ok(()) => Ok(true),
            Err(StoreError::Precondition(_)) => Ok(false),
            Err(err) => Err(err),
        }
    }
}

impl Actor for WaitActor {
    type Msg = WaitMsg;
    type State = WaitRecord;
    type Arguments = WaitRecord;

    async fn pre_start(
        &self,
        _myself: ActorRef<WaitMsg>,
        wait: WaitRecord,
    ) -> Result<WaitRecord, ActorProcessingErr> {
        Ok(wait)
    }

    async fn post_start(
        &self,
        myself: ActorRef<WaitMsg>,
        wait: &mut WaitRecord,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(remaining) = wait.remaining_ms(now_ms()) {
            // One timer task per armed timer, none for idle agents.
            myself.send_after(Duration::from_millis(remaining), || WaitMsg::Fire);
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<WaitMsg>,
        message: WaitMsg,
        wait: &mut WaitRecord,
    ) -> Result<(), ActorProcessingErr> {
        // Synchronous throughout, so its span stays entered.
        let _span = tracing::info_span!(
            "wait",
            wait_id = %wait.id,
            agent_id = %wait.owner_agent_id
        )
        .entered();
        match message {
            WaitMsg::Fire => {
                match self.fire(wait) {
                    Ok(_) => myself.stop(Some("fired".into())),
                    // Stay armed: the owner restarts this actor, which
                    // retries the fire, within its restart budget; past it
                    // the wait is cancelled and the owner told.
                    Err(err) => return Err(err.into()),
                }
            }
            WaitMsg::Snapshot(reply) => {
                let _ = reply.send(WaitSnapshot {
                    wait_id: wait.id,
                    owner_agent_id: wait.owner_agent_id,
                });
            }
        }
        Ok(())
    }

    /// A wait supervises nothing; never stop on a child's exit.
    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<WaitMsg>,
        _event: SupervisionEvent,
        _wait: &mut WaitRecord,
    ) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}
