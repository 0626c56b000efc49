//! The agent actor: one per live agent. It owns the agent's queue and runs
//! one turn at a time. A turn (brain call plus tool calls) runs as its own
//! task and reports back with [`AgentMsg::TurnDone`], so `handle` never
//! awaits it and stop or supervision signals are never held up.
//!
//! In RAM an idle agent is its [`Target`] view, its profile, an empty queue
//! and a counter; its history lives in the store.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use holarchy_supervision::restart::RestartBudgets;
use holarchy_supervision::{
    admit, AgentId, EventKind, LifecycleState, MessageEvent, MessageId, MessageRecord, Profile,
    RunId, Target, TaskStatus,
};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use tokio::task::AbortHandle;
use tracing::{debug, warn, Instrument};

use crate::in_flight::{InFlightGuard, InFlightTurn};
use crate::limits::TurnPace;
use crate::protocol::{
    Ack, AgentArgs, AgentMsg, AgentSnapshot, DeliverError, Delivered, NewMessage,
};
use crate::store::{Batch, StoreError, Write};
use crate::supervisor;
use crate::{now_ms, Ctx};
use finish::Finished;
use run::{run_turn, AbortOnDrop};

mod control;
mod finish;
mod run;

/// The turn in flight. Dropping it (turn done, or the actor killed with its
/// state) cancels the turn task, so no turn outlives its agent.
#[derive(Debug)]
struct ActiveRun {
    run_id: RunId,
    message_id: MessageId,
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
    queue: VecDeque<MessageId>,
    run: Option<ActiveRun>,
    turns_completed: u64,
    held: bool,
    /// When this agent may start turns (`--max-turns-per-minute`): one
    /// instant, so an idle agent keeps no timer and no history.
    pace: TurnPace,
    /// The wake-up set while a queued message waits for the pace; only
    /// ever set while the agent has work, cancelled with the agent.
    pace_wake: Option<AbortOnDrop>,
    /// Restart budgets of its private children: a pointer until one fails.
    budgets: RestartBudgets<AgentId>,
}

impl AgentState {
    fn id(&self) -> AgentId {
        self.target.id
    }

    fn snapshot(&self) -> AgentSnapshot {
        AgentSnapshot {
            agent_id: self.id(),
            state: self.target.state,
            queue_len: self.queue.len(),
            current_run: self.run.as_ref().map(|r| r.run_id),
            current_message: self.run.as_ref().map(|r| r.message_id),
            turns_completed: self.turns_completed,
        }
    }
}

/// A message taken onto the queue.
struct Enqueued {
    delivered: Delivered,
    /// The new record, when it starts a turn at once.
    fresh: Option<MessageRecord>,
    /// Its write, when it starts a turn at once: committed with the start.
    unwritten: Batch,
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

    /// The synchronous part of a delivery: admission, dedupe, bound, write.
    /// A message that starts a turn at once is not written here: its record
    /// and its write come back, to share one commit with the turn's start
    /// (and so nobody reads it back from the store). The caller commits the
    /// batch before it answers anyone.
    fn enqueue(
        &self,
        state: &mut AgentState,
        message: NewMessage,
    ) -> Result<Enqueued, DeliverError> {
        admit(&message.provenance, None, state.target)?;
        let agent_id = state.id();
        if let Some(key) = &message.dedupe_key {
            if let Some(message_id) = self.ctx.store.message_id_by_dedupe_key(agent_id, key)? {
                let delivered = Delivered {
                    message_id,
                    duplicate: true,
                };
                return Ok(Enqueued {
                    delivered,
                    fresh: None,
                    unwritten: Batch::new(),
                });
            }
        }
        let limit = self.ctx.config.max_queue_len;
        if state.queue.len() >= limit {
            return Err(DeliverError::QueueFull { limit });
        }
        let record = MessageRecord::queued(
            agent_id,
            message.provenance,
            message.body,
            message.dedupe_key,
            now_ms(),
        );
        let events = message.events;
        let message_id = record.id;
        // Kept only when it can start a turn right away: the queue holds ids.
        let starts_now = state.queue.is_empty()
            && state.run.is_none()
            && !state.held
            && state.pace_wake.is_none()
            && state.target.state == LifecycleState::Active;
        let delivered = Delivered {
            message_id,
            duplicate: false,
        };
        state.queue.push_back(message_id);
        if starts_now {
            let unwritten = Batch::new()
                .put_queued(record.clone())
                .events(agent_id, events);
            return Ok(Enqueued {
                delivered,
                fresh: Some(record),
                unwritten,
            });
        }
        let batch = Batch::new().put_queued(record).events(agent_id, events);
        if let Err(err) = self.ctx.store.commit(batch) {
            state.queue.pop_back();
            return Err(err.into());
        }
        Ok(Enqueued {
            delivered,
            fresh: None,
            unwritten: Batch::new(),
        })
    }

    /// Starts the next turn if the agent is active and idle.
    fn maybe_start_turn(
        &self,
        myself: &ActorRef<AgentMsg>,
        state: &mut AgentState,
    ) -> Result<(), StoreError> {
        self.start_turns(myself, state, None, Batch::new())
    }

    /// [`Self::maybe_start_turn`], given the record of a message queued in
    /// this same `handle` (nothing can have changed it since) and writes
    /// not yet committed (a finished turn's): they go in the same commit
    /// as the next turn's start, or alone if no turn starts.
    fn start_turns(
        &self,
        myself: &ActorRef<AgentMsg>,
        state: &mut AgentState,
        fresh: Option<MessageRecord>,
        carry: Batch,
    ) -> Result<(), StoreError> {
        let mut carry = Some(carry);
        let started = self.start_turns_with(myself, state, fresh, &mut carry);
        match carry {
            Some(batch) if !batch.is_empty() => self.ctx.store.commit(batch).and(started),
            _ => started,
        }
    }

    fn start_turns_with(
        &self,
        myself: &ActorRef<AgentMsg>,
        state: &mut AgentState,
        mut fresh: Option<MessageRecord>,
        carry: &mut Option<Batch>,
    ) -> Result<(), StoreError> {
        // A turn deferred by the pace starts when its wake-up comes; until
        // then a delivery need not read the head message again.
        if state.pace_wake.is_some() {
            return Ok(());
        }
        while state.run.is_none() && !state.held && state.target.state == LifecycleState::Active {
            let Some(message_id) = state.queue.pop_front() else {
                return Ok(());
            };
            let agent_id = state.id();
            let known = fresh.take_if(|m| m.id == message_id);
            let Some(mut message) = known.map_or_else(
                || self.ctx.store.message(agent_id, message_id),
                |m| Ok(Some(m)),
            )?
            else {
                warn!(agent_id = %agent_id, message_id = %message_id, "queued message missing from store");
                continue;
            };
            let run_id = RunId::generate();
            // Only a queued message starts a turn; one handled meanwhile
            // (a duplicate queue entry) is skipped.
            let Some(handling) = message.status.next(MessageEvent::Start { run_id }) else {
                continue;
            };
            let per_minute = self.ctx.config.limits.max_turns_per_minute;
            if let Err(wait) = state.pace.take(Instant::now(), per_minute) {
                // Deferred, not failed: the message keeps its place.
                state.queue.push_front(message_id);
                if state.pace_wake.is_none() {
                    debug!(agent_id = %agent_id, wait_ms = wait.as_millis() as u64, "turn deferred by the turn pace");
                    let wake = myself.send_after(wait, || AgentMsg::PaceElapsed);
                    state.pace_wake = Some(AbortOnDrop(wake.abort_handle()));
                }
                return Ok(());
            }
            // A shutdown under way starts no turn: the message stays queued
            // and the next start runs it.
            let turn = InFlightTurn {
                agent_id,
                message_id,
                run_id,
            };
            let Some(in_flight) = self.ctx.in_flight.begin(turn) else {
                state.queue.push_front(message_id);
                return Ok(());
            };
            message.status = handling;
            message.attempts += 1;
            self.ctx.store.commit(
                carry
                    .take()
                    .unwrap_or_default()
                    .write(Write::PutMessage(message.clone()))
                    .event(agent_id, EventKind::RunStarted { run_id, message_id }),
            )?;
            let span = tracing::info_span!("turn", agent_id = %agent_id, run_id = %run_id);
            let task = tokio::spawn(
                run_turn(
                    self.ctx.clone(),
                    state.profile,
                    agent_id,
                    run_id,
                    message,
                    myself.clone(),
                )
                .instrument(span),
            );
            self.ctx.stats.busy.fetch_add(1, Ordering::Relaxed);
            state.run = Some(ActiveRun {
                run_id,
                message_id,
                task: task.abort_handle(),
                busy: self.ctx.stats.busy.clone(),
                _in_flight: in_flight,
            });
        }
        Ok(())
    }
}

impl AgentActor {
    /// Answers a delivery whose message is applied: at once (`Applied`), or
    /// once it is on disk, waited for beside the actor, not inside `handle`.
    fn acknowledge(
        &self,
        ack: Ack,
        delivered: Delivered,
        reply: RpcReplyPort<Result<Delivered, DeliverError>>,
    ) {
        if ack == Ack::Applied {
            let _ = reply.send(Ok(delivered));
            return;
        }
        self.answer_when_durable(delivered, reply);
    }

    /// Answers `reply` with `answer` once every write made so far is on
    /// disk (or with the store's error); the wait runs beside the actor,
    /// not inside `handle`.
    fn answer_when_durable<T, E>(&self, answer: T, reply: RpcReplyPort<Result<T, E>>)
    where
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let durable = self.ctx.store.durable();
        tokio::spawn(async move {
            let _ = reply.send(durable.await.map(|()| answer).map_err(E::from));
        });
    }

    /// Hands a done child's result to its parent and cleans the child up,
    /// in a task of its own (a cleanup never runs inside a `handle`).
    fn hand_over(&self, agent_id: AgentId, output: String) {
        let ctx = self.ctx.clone();
        tokio::spawn(async move {
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
            queue: args.queue.into(),
            run: None,
            turns_completed: 0,
            held: args.held,
            pace: TurnPace::default(),
            pace_wake: None,
            budgets: RestartBudgets::default(),
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        self.maybe_start_turn(&myself, state)?;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Nothing below awaits, so holding the span guard is safe; it puts
        // `agent_id` on everything this message logs.
        let _span = tracing::info_span!("agent", agent_id = %state.id()).entered();
        match message {
            AgentMsg::Deliver {
                message,
                ack,
                reply,
            } => {
                let enqueued = match self.enqueue(state, message) {
                    Ok(enqueued) => enqueued,
                    Err(err) => {
                        let _ = reply.send(Err(err));
                        self.maybe_start_turn(&myself, state)?;
                        return Ok(());
                    }
                };
                // The message's write goes with the turn it starts, if any;
                // either way it is applied before anyone is answered.
                let delivered = enqueued.delivered;
                let fresh_id = enqueued.fresh.as_ref().map(|m| m.id);
                let started = self.start_turns(&myself, state, enqueued.fresh, enqueued.unwritten);
                match (started, fresh_id) {
                    // Its write went with the failed commit: the caller
                    // hears so, and the id leaves the queue with it.
                    (Err(err), Some(id)) => {
                        state.queue.retain(|queued| *queued != id);
                        let not_stored = DeliverError::Unavailable(format!("not stored: {err}"));
                        let _ = reply.send(Err(not_stored));
                        return Err(err.into());
                    }
                    // The message itself was written; a later step failed.
                    (Err(err), None) => {
                        self.acknowledge(ack, delivered, reply);
                        return Err(err.into());
                    }
                    (Ok(()), _) => self.acknowledge(ack, delivered, reply),
                }
            }
            AgentMsg::TurnDone(done) => {
                let Finished { batch, run, result } = self.finish_turn(state, *done)?;
                match result {
                    // A child that is done starts no other turn: it ends.
                    Some(output) => {
                        self.ctx.store.commit(batch)?;
                        self.hand_over(state.id(), output);
                    }
                    None => self.start_turns(&myself, state, None, batch)?,
                }
                // Only now, with the turn written, may a shutdown count it
                // as ended.
                drop(run);
            }
            AgentMsg::Snapshot(reply) => {
                let _ = reply.send(state.snapshot());
            }
            AgentMsg::Control { action, reply } => {
                match self.control(state, action) {
                    Ok(outcome) => self.answer_when_durable(outcome, reply),
                    Err(err) => {
                        let _ = reply.send(Err(err));
                    }
                }
                self.maybe_start_turn(&myself, state)?;
            }
            AgentMsg::Release { pending } => {
                let current = state.run.as_ref().map(|r| r.message_id);
                for message_id in pending {
                    if Some(message_id) != current && !state.queue.contains(&message_id) {
                        state.queue.push_back(message_id);
                    }
                }
                state.held = false;
                self.maybe_start_turn(&myself, state)?;
            }
            AgentMsg::PaceElapsed => {
                state.pace_wake = None;
                self.maybe_start_turn(&myself, state)?;
            }
            AgentMsg::Wake(message_id) => {
                if !state.queue.contains(&message_id) {
                    state.queue.push_back(message_id);
                }
                self.maybe_start_turn(&myself, state)?;
            }
        }
        Ok(())
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
