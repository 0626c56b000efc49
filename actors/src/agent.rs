//! The agent actor: one per live agent. It owns the agent's queue and runs
//! one turn at a time. A turn (brain call plus tool calls) runs as its own
//! task and reports back with [`AgentMsg::TurnDone`], so `handle` never
//! awaits it and stop or supervision signals are never held up.
//!
//! In RAM an idle agent is its [`Target`] view, its profile, an empty queue
//! and a counter; its history lives in the store.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use holarchy_supervision::{AgentId, MessageId, MessageRecord, Profile, RunId, Target, TaskStatus};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use tokio::task::AbortHandle;
use tracing::{warn, Instrument};

use crate::in_flight::InFlightGuard;
use crate::limits::TurnPace;
use crate::protocol::{AgentArgs, AgentMsg};
use crate::store::StoreError;
use crate::supervisor;
use crate::Ctx;
use hourly::Hourly;
use run::AbortOnDrop;

mod control;
mod finish;
pub(crate) use finish::decided;
mod hourly;
mod queue;
mod run;
mod start;

/// The turn in flight. Dropping it (turn done, or the actor killed with its
/// state) cancels the turn task, so no turn outlives its agent.
#[derive(Debug)]
struct ActiveRun {
    run_id: RunId,
    message_id: MessageId,
    /// The message as its start wrote it. Only this actor changes its
    /// messages, so the turn's end (or abort) needs no read of it: on
    /// PostgreSQL that read was a round trip per turn. Taken by the end.
    /// Boxed: every idle agent's state has room for a run.
    message: Option<Box<MessageRecord>>,
    /// What the turn's model calls spent so far: read at its end, or when
    /// it is aborted.
    usage: crate::brain::UsageMeter,
    task: AbortHandle,
    busy: Arc<AtomicUsize>,
    /// Keeps the turn listed for a graceful shutdown until it ends.
    _in_flight: InFlightGuard,
}

impl Drop for ActiveRun {
    fn drop(&mut self) {
        self.task.abort();
        self.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

#[derive(Debug)]
pub struct AgentState {
    target: Target,
    profile: Profile,
    queue: queue::Queue,
    /// The spans of the calls that queued messages still waiting, when
    /// spans are exported: each becomes its turn's parent. Boxed and empty
    /// otherwise, so an idle agent pays one pointer.
    #[allow(clippy::box_collection)] // 8 bytes on every agent, not 48
    causes: Option<Box<std::collections::HashMap<MessageId, tracing::Span>>>,
    run: Option<ActiveRun>,
    held: bool,
    /// When this agent may start turns (`--max-turns-per-minute`): one
    /// instant, so an idle agent keeps no timer and no history.
    pace: TurnPace,
    /// The wake-up set while a queued message waits for the pace; only
    /// ever set while the agent has work, cancelled with the agent.
    pace_wake: Option<AbortOnDrop>,
    /// The instance's `max_turns_per_hour`, and the turns that count
    /// against it, read back from the store after a restart.
    hourly: Option<Box<Hourly>>,
    /// Restart budgets of its private children: a pointer until one fails.
    budgets: supervisor::Budgets,
    /// Its namespace, whose turn quota it starts turns under.
    namespace: Arc<crate::namespaces::NamespaceUse>,
}

impl AgentState {
    fn id(&self) -> AgentId {
        self.target.id
    }

    /// Sets (a turn was put off by a turn limit) or clears the pace
    /// wake-up, and publishes which, so readers see a deferral without
    /// the debug log.
    fn set_pace_wake(&mut self, wake: Option<AbortOnDrop>) {
        self.queue.live().turn_deferred(wake.is_some());
        self.pace_wake = wake;
    }
}

/// The actor. Holds only shared, read-only context.
#[derive(Debug, Clone)]
pub struct AgentActor {
    ctx: Arc<Ctx>,
}

impl AgentActor {
    pub fn new(ctx: Arc<Ctx>) -> Self {
        Self { ctx }
    }
}

impl AgentActor {
    /// [`Self::handle_message`] under the right span. A delivery and a
    /// turn's end, two per turn, get no span of their own: every line they
    /// log names the agent itself, and creating a span (formatting its
    /// fields) per message was a few percent of a turn's CPU. When spans
    /// are exported and one came with them (an operator's call, the turn
    /// itself) they run under it; ractor does not pass a sender's span on.
    /// The rest get one that puts `agent_id` on everything they log, a
    /// root of its own in exported traces.
    async fn handle_traced(
        &self,
        myself: &ActorRef<AgentMsg>,
        message: AgentMsg,
        state: &mut AgentState,
    ) -> Result<(), ActorProcessingErr> {
        let span = match &message {
            AgentMsg::Deliver { message, .. } => message.cause.clone(),
            AgentMsg::TurnDone(done) => done.span.clone(),
            _ => Some(tracing::info_span!("agent", agent_id = %state.id())),
        };
        match span {
            Some(span) => {
                self.handle_message(myself, message, state)
                    .instrument(span)
                    .await
            }
            None => self.handle_message(myself, message, state).await,
        }
    }

    /// What `handle` does with each message. A delivery and a turn's end
    /// await their grouped commit here: the agent handles nothing else
    /// until its writes are applied (not flushed), which keeps its queue
    /// and the store in step.
    async fn handle_message(
        &self,
        myself: &ActorRef<AgentMsg>,
        message: AgentMsg,
        state: &mut AgentState,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            AgentMsg::Deliver {
                message,
                ack,
                reply,
            } => self.deliver(myself, state, message, ack, reply).await?,
            AgentMsg::TurnDone(done) => self.turn_done(myself, state, *done).await?,
            AgentMsg::Control { action, reply } => {
                match self.control(state, action) {
                    Ok(outcome) => self.answer_when_durable(outcome, reply),
                    Err(err) => {
                        let _ = reply.send(Err(err));
                    }
                }
                self.maybe_start_turn(myself, state).await?;
            }
            AgentMsg::Release { pending } => {
                let current = state.run.as_ref().map(|r| r.message_id);
                for message_id in pending {
                    if Some(message_id) != current && !state.queue.contains(&message_id) {
                        state.queue.push_back(message_id);
                    }
                }
                state.held = false;
                self.maybe_start_turn(myself, state).await?;
            }
            AgentMsg::PaceElapsed => {
                state.set_pace_wake(None);
                self.maybe_start_turn(myself, state).await?;
            }
            AgentMsg::Recomposed { max_turns_per_hour } => {
                state.hourly = Hourly::recomposed(state.hourly.take(), max_turns_per_hour);
                // A lifted or raised limit may let a deferred turn start.
                state.set_pace_wake(None);
                self.maybe_start_turn(myself, state).await?;
            }
            AgentMsg::Wake(message_id) => {
                if !state.queue.contains(&message_id) {
                    state.queue.push_back(message_id);
                }
                self.maybe_start_turn(myself, state).await?;
            }
        }
        Ok(())
    }

    /// Answers `reply` with `answer` once every write made so far is on
    /// disk (or with the store's error); the wait runs beside the actor,
    /// not inside `handle`.
    fn answer_when_durable<T, E>(&self, answer: T, reply: RpcReplyPort<Result<T, E>>)
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let durable = crate::apply::durable(&self.ctx);
        let tasks = self.ctx.lifecycle.tasks.clone();
        tasks.spawn(async move {
            let _ = reply.send(durable.await.map(|()| answer).map_err(E::from));
        });
    }

    /// Hands a done child's result to its parent and cleans the child up,
    /// in a task of its own (a cleanup never runs inside a `handle`).
    fn hand_over(&self, agent_id: AgentId, output: String) {
        let ctx = self.ctx.clone();
        let tasks = ctx.lifecycle.tasks.clone();
        tasks.spawn(async move {
            let ended = supervisor::end_child(&ctx, agent_id, TaskStatus::Completed, output, true);
            if let Err(err) = ended.await {
                warn!(agent_id = %agent_id, error = %err, "could not hand the result to the parent");
            }
        });
    }
}

impl Actor for AgentActor {
    type Msg = AgentMsg;
    type State = AgentState;
    type Arguments = AgentArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: AgentArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(AgentState {
            target: Target::from(&args.record),
            profile: args.record.profile,
            queue: queue::Queue::new(args.queue, self.ctx.stats.metrics.queues(), args.live),
            causes: None,
            run: None,
            held: args.held,
            pace: TurnPace::default(),
            pace_wake: None,
            hourly: Hourly::of(
                args.record
                    .composition
                    .as_deref()
                    .and_then(|c| c.limits.max_turns_per_hour),
            ),
            budgets: supervisor::Budgets::default(),
            namespace: args.namespace,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        Box::pin(self.maybe_start_turn(&myself, state)).await
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Boxed, like anything large an agent awaits: inline, the future
        // would size every idle agent's task (the span's choice too: one
        // pointer is all `handle` keeps across its await).
        Box::pin(self.handle_traced(&myself, message, state)).await
    }

    /// Overrides ractor's default, which would stop this agent whenever any
    /// linked child exits: private children and task handles are restarted
    /// one-for-one instead.
    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let Some((child, reason)) = supervisor::exit_of(event) else {
            return Ok(());
        };
        // Boxed: every agent's actor task is sized for the largest future
        // its loop can await, and a restart's future is several KB. Boxing
        // keeps that cost on the rare restart instead of on every idle agent.
        Box::pin(supervisor::on_child_exit(
            &self.ctx,
            myself.get_cell(),
            &mut state.budgets,
            child,
            reason,
        ))
        .await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    /// Every idle agent holds an `AgentState`, room for a run included: a
    /// field added inline costs a million agents its size each.
    #[test]
    fn an_idle_agent_s_state_stays_small() {
        let size = std::mem::size_of::<super::AgentState>();
        assert!(size <= 256, "AgentState is {size} bytes");
    }
}
