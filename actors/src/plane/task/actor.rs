//! The task actor: a parent's live handle on managed execution, linked
//! under the parent's actor. For a `child_agent_task` it stands beside the
//! child agent's actor, so the actor tree shows both the child and the
//! parent's handle on it. Its state lives in the store; the actor holds
//! only ids.

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};

use crate::protocol::{TaskMsg, TaskSnapshot};

#[derive(Debug, Clone, Copy)]
pub struct TaskActor;

impl Actor for TaskActor {
    type Msg = TaskMsg;
    type State = TaskSnapshot;
    type Arguments = TaskSnapshot;

    async fn pre_start(
        &self,
        _myself: ActorRef<TaskMsg>,
        args: TaskSnapshot,
    ) -> Result<TaskSnapshot, ActorProcessingErr> {
        Ok(args)
    }

    async fn handle(
        &self,
        _myself: ActorRef<TaskMsg>,
        message: TaskMsg,
        state: &mut TaskSnapshot,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            TaskMsg::Snapshot(reply) => {
                let _ = reply.send(*state);
            }
        }
        Ok(())
    }

    /// A child-agent handle supervises nothing itself; never stop on a
    /// child's exit (ractor's default).
    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<TaskMsg>,
        _event: SupervisionEvent,
        _state: &mut TaskSnapshot,
    ) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}
