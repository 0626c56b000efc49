//! The runtime's [`Factory`]: the one place that knows which actor runs an
//! agent, a task handle or a wait. Supervisors start children through it.

use std::sync::Arc;

use holarchy_supervision::WaitRecord;
use ractor::{Actor, ActorCell};

use crate::agent::AgentActor;
use crate::plane::task::TaskActor;
use crate::plane::wait::WaitActor;
use crate::protocol::{AgentArgs, AgentMsg, TaskMsg, TaskSnapshot, WaitMsg};
use crate::shared::{Factory, Starting};
use crate::Ctx;

/// Starts holarchy's own actors, linked under the supervisor given.
#[derive(Debug, Clone, Copy, Default)]
pub struct ActorFactory;

impl Factory for ActorFactory {
    fn agent<'a>(
        &'a self,
        ctx: &'a Arc<Ctx>,
        args: AgentArgs,
        supervisor: ActorCell,
    ) -> Starting<'a, AgentMsg> {
        Box::pin(async move {
            let (actor, _) =
                Actor::spawn_linked(None, AgentActor::new(ctx.clone()), args, supervisor).await?;
            Ok(actor)
        })
    }

    fn task<'a>(
        &'a self,
        _ctx: &'a Arc<Ctx>,
        task: TaskSnapshot,
        owner: ActorCell,
    ) -> Starting<'a, TaskMsg> {
        Box::pin(async move {
            let (actor, _) = Actor::spawn_linked(None, TaskActor, task, owner).await?;
            Ok(actor)
        })
    }

    fn wait<'a>(
        &'a self,
        ctx: &'a Arc<Ctx>,
        wait: WaitRecord,
        owner: ActorCell,
    ) -> Starting<'a, WaitMsg> {
        Box::pin(async move {
            let (actor, _) =
                Actor::spawn_linked(None, WaitActor::new(ctx.clone()), wait, owner).await?;
            Ok(actor)
        })
    }
}
