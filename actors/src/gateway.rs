//! The gateway actor: the one door for operator ingress. It looks the target
//! up, refuses private or archived agents, and forwards the rest to the
//! agent's actor with the caller's reply port, so it never waits on an agent.

use std::sync::Arc;

use holarchy_supervision::{admit, AgentId, Provenance, Target, Visibility};
use ractor::{Actor, ActorProcessingErr, ActorRef, MessagingErr};

use crate::protocol::{AgentMsg, DeliverError, GatewayMsg, NewMessage, NotRunning};
use crate::Ctx;

#[derive(Debug, Clone)]
pub struct GatewayActor {
    ctx: Arc<Ctx>,
}

impl GatewayActor {
    pub fn new(ctx: Arc<Ctx>) -> Self {
        Self { ctx }
    }

    fn route(&self, agent_id: AgentId) -> Result<ActorRef<AgentMsg>, DeliverError> {
        // A running public agent needs no store read here: the agent admits
        // the message again against its own state before it queues it.
        if let Some(entry) = self.ctx.directory.get(agent_id) {
            if entry.visibility == Visibility::Public {
                // An operator's message grows the store: none into a
                // namespace over its store quota (gRPC or console alike).
                if let Some(refused) = entry.namespace.store_refusal() {
                    return Err(refused.into());
                }
                return Ok(entry.actor);
            }
        }
        // Anything else reads the record, for the exact refusal.
        let record = self
            .ctx
            .reads()
            .agent(agent_id)?
            .ok_or(DeliverError::NotFound(agent_id))?;
        admit(&Provenance::Operator, None, Target::from(&record))?;
        match self.ctx.directory.get(agent_id) {
            Some(entry) => match entry.namespace.store_refusal() {
                Some(refused) => Err(refused.into()),
                None => Ok(entry.actor),
            },
            None => Err(DeliverError::NotRunning {
                agent_id,
                why: if record.state.is_live() {
                    NotRunning::Restarting
                } else {
                    NotRunning::Ended(record.state)
                },
            }),
        }
    }
}

impl Actor for GatewayActor {
    type Msg = GatewayMsg;
    type State = ();
    type Arguments = ();

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        _args: (),
    ) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        _state: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        match message {
            GatewayMsg::Ingress {
                agent_id,
                body,
                dedupe_key,
                ack,
                reply,
                cause,
                events,
            } => match self.route(agent_id) {
                Ok(actor) => {
                    let message = NewMessage {
                        provenance: Provenance::Operator,
                        body,
                        dedupe_key,
                        events,
                        cause,
                    };
                    if let Err(MessagingErr::SendErr(AgentMsg::Deliver { reply, .. })) =
                        actor.cast(AgentMsg::Deliver {
                            message,
                            ack,
                            reply,
                        })
                    {
                        let _ = reply.send(Err(DeliverError::NotRunning {
                            agent_id,
                            why: NotRunning::Stopping,
                        }));
                    }
                }
                Err(err) => {
                    let _ = reply.send(Err(err));
                }
            },
        }
        Ok(())
    }
}
