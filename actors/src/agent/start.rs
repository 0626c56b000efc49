//! Taking a message onto the queue and starting turns. A delivered
//! message, a finished turn's writes and the next turn's start go to the
//! store as one batch, through its grouped commit, so many agents' turns
//! share one transaction.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use holarchy_supervision::effect::Plan;
use holarchy_supervision::plan;
use holarchy_supervision::{admit, LifecycleState, MessageEvent, MessageId, MessageRecord, RunId};
use ractor::{ActorProcessingErr, ActorRef, RpcReplyPort};
use tracing::{debug, warn, Instrument};

use super::run::{run_turn, AbortOnDrop};
use super::{ActiveRun, AgentActor, AgentState};
use crate::in_flight::InFlightTurn;
use crate::now_ms;
use crate::protocol::{Ack, AgentMsg, DeliverError, Delivered, NewMessage};
use crate::store::{Batch, DurableFuture, StoreError};

/// A message taken onto the queue, not yet written.
struct Enqueued {
    delivered: Delivered,
    /// The new record, when it may start a turn at once (so the start
    /// need not read it back).
    fresh: Option<MessageRecord>,
    /// Its write; empty for a duplicate, which writes nothing.
    unwritten: Batch,
}

/// What committing writes carried into [`AgentActor::start_turns`] came to.
pub(super) struct Committed {
    /// The flush that makes the carried writes durable (None when there
    /// were none), or why they were not applied.
    pub(super) carried: Result<Option<DurableFuture>, StoreError>,
    /// Starting a turn failed: the agent's queue and the store may no
    /// longer agree, so the agent fails and its supervisor restarts it
    /// from the store.
    pub(super) start_failed: Option<String>,
}

impl Committed {
    /// The carried writes' flush, or the error the agent fails with.
    pub(super) fn into_result(self) -> Result<Option<DurableFuture>, ActorProcessingErr> {
        if let Some(why) = self.start_failed {
            return Err(why.into());
        }
        Ok(self.carried?)
    }
}

impl AgentActor {
    /// A delivery: queued, written with the turn it starts (if any) and
    /// answered once durable, or once applied for [`Ack::Applied`].
    pub(super) async fn deliver(
        &self,
        myself: &ActorRef<AgentMsg>,
        state: &mut AgentState,
        message: NewMessage,
        ack: Ack,
        reply: RpcReplyPort<Result<Delivered, DeliverError>>,
    ) -> Result<(), ActorProcessingErr> {
        let Enqueued {
            delivered,
            fresh,
            unwritten,
        } = match self.enqueue(state, message) {
            Ok(enqueued) => enqueued,
            Err(err) => {
                let _ = reply.send(Err(err));
                return self.maybe_start_turn(myself, state).await;
            }
        };
        let committed = self.start_turns(myself, state, fresh, unwritten).await;
        match committed.carried {
            // Not stored: the caller hears so, and the id leaves the queue.
            Err(err) => {
                state.queue.retain(|queued| *queued != delivered.message_id);
                let _ = reply.send(Err(DeliverError::Store(err)));
            }
            Ok(flushed) => self.acknowledge(ack, delivered, flushed, reply),
        }
        match committed.start_failed {
            Some(why) => Err(why.into()),
            None => Ok(()),
        }
    }

    /// Answers a delivery whose message is applied: at once (`Applied`),
    /// or once `flushed` (the flush of its write; a duplicate wrote
    /// nothing, so whatever is pending) is on disk, waited for beside the
    /// actor, not inside `handle`.
    fn acknowledge(
        &self,
        ack: Ack,
        delivered: Delivered,
        flushed: Option<DurableFuture>,
        reply: RpcReplyPort<Result<Delivered, DeliverError>>,
    ) {
        if ack == Ack::Applied {
            let _ = reply.send(Ok(delivered));
            return;
        }
        let durable = flushed.unwrap_or_else(|| crate::apply::durable(&self.ctx));
        let tasks = self.ctx.lifecycle.tasks.clone();
        tasks.spawn(async move {
            let _ = reply.send(
                durable
                    .await
                    .map(|()| delivered)
                    .map_err(DeliverError::from),
            );
        });
    }

    /// The synchronous part of a delivery: admission, dedupe and the
    /// queue's bound. The message is not written here: its write comes
    /// back, to share one commit with the turn it may start, and the
    /// caller commits it before answering anyone.
    fn enqueue(
        &self,
        state: &mut AgentState,
        message: NewMessage,
    ) -> Result<Enqueued, DeliverError> {
        admit(&message.provenance, None, state.target)?;
        let agent_id = state.id();
        if let Some(key) = &message.dedupe_key {
            if let Some(message_id) = self.ctx.reads().message_id_by_dedupe_key(agent_id, key)? {
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
        // Logged only with a message that is really queued, never with a
        // duplicate (an inbound event's `event_received`).
        let events = message.events;
        let message_id = record.id;
        if let Some(cause) = message.cause {
            state
                .causes
                .get_or_insert_with(Box::default)
                .insert(message_id, cause);
        }
        // Kept only when it can start a turn right away: the queue holds ids.
        let starts_now = state.queue.is_empty()
            && state.run.is_none()
            && !state.held
            && state.pace_wake.is_none()
            && state.target.state == LifecycleState::Active;
        state.queue.push_back(message_id);
        let unwritten = Batch::new()
            .put_queued(record.clone())
            .events(agent_id, events);
        Ok(Enqueued {
            delivered: Delivered {
                message_id,
                duplicate: false,
            },
            fresh: starts_now.then_some(record),
            unwritten,
        })
    }

    /// Whether turns wait: the agent is held by its supervisor, or the
    /// daemon is still recovering, in which case it parks at the gate and
    /// is held until the gate's [`AgentMsg::Release`]. Asked only with work
    /// queued, so idle agents never park.
    fn held(&self, myself: &ActorRef<AgentMsg>, state: &mut AgentState) -> bool {
        if !state.held
            && !self.ctx.lifecycle.turns.is_open()
            && self.ctx.lifecycle.turns.park(myself)
        {
            state.held = true;
        }
        state.held
    }

    /// Starts the next turn if the agent is active and idle.
    pub(super) async fn maybe_start_turn(
        &self,
        myself: &ActorRef<AgentMsg>,
        state: &mut AgentState,
    ) -> Result<(), ActorProcessingErr> {
        let committed = self.start_turns(myself, state, None, Batch::new()).await;
        committed.into_result().map(drop)
    }

    /// Starts the next turn if the agent is active and idle, given the
    /// record of a message queued in this same `handle` (nothing can have
    /// changed it since) and writes not yet committed (a delivered
    /// message's, a finished turn's): they go in the same commit as the
    /// turn's start, or alone if no turn starts.
    pub(super) async fn start_turns(
        &self,
        myself: &ActorRef<AgentMsg>,
        state: &mut AgentState,
        fresh: Option<MessageRecord>,
        carry: Batch,
    ) -> Committed {
        let mut carry = Some(carry);
        let started = self
            .start_turns_with(myself, state, fresh, &mut carry)
            .await;
        match (started, carry) {
            // The start took the carried writes: they share its answer.
            (Ok(flushed), None) => Committed {
                carried: Ok(flushed),
                start_failed: None,
            },
            (Err(err), None) => Committed {
                start_failed: Some(err.to_string()),
                carried: Err(err),
            },
            // No turn took them: alone (the start's failure, if any, came
            // before its commit).
            (started, Some(batch)) => {
                let carried = match batch.is_empty() {
                    true => Ok(None),
                    false => self.apply(Plan::writes(batch)).await.map(Some),
                };
                Committed {
                    carried,
                    start_failed: started.err().map(|err| err.to_string()),
                }
            }
        }
    }

    /// Applies `plan` in a grouped commit; resolves, once applied, to the
    /// flush that will make it durable.
    pub(super) async fn apply(&self, plan: Plan) -> Result<DurableFuture, StoreError> {
        crate::apply::apply_grouped(&self.ctx, plan).await
    }

    /// Starts turns while the agent can; takes `carry` into the commit of
    /// the turn it starts and returns that commit's flush.
    async fn start_turns_with(
        &self,
        myself: &ActorRef<AgentMsg>,
        state: &mut AgentState,
        mut fresh: Option<MessageRecord>,
        carry: &mut Option<Batch>,
    ) -> Result<Option<DurableFuture>, StoreError> {
        // A turn deferred by the pace starts when its wake-up comes; until
        // then a delivery need not read the head message again.
        if state.pace_wake.is_some() {
            return Ok(None);
        }
        while state.run.is_none()
            && state.target.state == LifecycleState::Active
            && !state.queue.is_empty()
            && !self.held(myself, state)
        {
            let Some(message_id) = state.queue.pop_front() else {
                return Ok(None);
            };
            let agent_id = state.id();
            let known = fresh.take_if(|m| m.id == message_id);
            let Some(message) = known.map_or_else(
                || self.ctx.reads().message(agent_id, message_id),
                |m| Ok(Some(m)),
            )?
            else {
                warn!(agent_id = %agent_id, message_id = %message_id, "queued message missing from store");
                continue;
            };
            let run_id = RunId::generate();
            // Only a queued message starts a turn; one handled meanwhile
            // (a duplicate queue entry) is skipped.
            if message
                .status
                .next(MessageEvent::Start { run_id })
                .is_none()
            {
                continue;
            }
            if self.deferred(myself, state, message_id)? {
                return Ok(None);
            }
            // A shutdown under way starts no turn: the message stays queued
            // and the next start runs it.
            let turn = InFlightTurn {
                agent_id,
                message_id,
                run_id,
            };
            let Some(in_flight) = self.ctx.lifecycle.in_flight.begin(turn) else {
                state.queue.push_front(message_id);
                return Ok(None);
            };
            let carried = carry.take().unwrap_or_default();
            let Some((batch, message)) = plan::turn::start(message, run_id, carried) else {
                continue;
            };
            let flushed = self.apply(Plan::writes(batch)).await?;
            self.launch(myself, state, message, run_id, in_flight);
            return Ok(Some(flushed));
        }
        Ok(None)
    }

    /// Whether the turn pace (per minute, and the instance's per hour)
    /// defers the head message `message_id`: it is put back, keeping its
    /// place, and a wake-up is set for when the pace allows it.
    fn deferred(
        &self,
        myself: &ActorRef<AgentMsg>,
        state: &mut AgentState,
        message_id: MessageId,
    ) -> Result<bool, StoreError> {
        let agent_id = state.id();
        let per_minute = self.ctx.config.limits.max_turns_per_minute;
        let now_ms = now_ms();
        let backlog = self.ctx.config.max_queue_len;
        let hourly = match state.hourly.as_mut() {
            Some(h) => Some(h.admits(self.ctx.reads(), agent_id, backlog, now_ms)?),
            None => None,
        };
        let now = Instant::now();
        let paced = match hourly {
            Some(Err(free_at)) => Err(Duration::from_millis(free_at.saturating_sub(now_ms))),
            _ => {
                // The agent's own pace is taken only once its namespace's
                // is: a turn its namespace holds back costs the agent
                // nothing, and retries cannot drain its own bucket.
                let mut own = state.pace;
                own.take(now, per_minute)
                    .and_then(|()| state.namespace.take_turn(now))
                    .map(|()| state.pace = own)
            }
        };
        if let Err(wait) = paced {
            state.queue.push_front(message_id);
            if state.pace_wake.is_none() {
                debug!(agent_id = %agent_id, wait_ms = wait.as_millis() as u64, "turn deferred by the turn pace");
                let wake = myself.send_after(wait, || AgentMsg::PaceElapsed);
                state.set_pace_wake(Some(AbortOnDrop(wake.abort_handle())));
            }
            return Ok(true);
        }
        if let Some(hourly) = state.hourly.as_mut() {
            hourly.record(now_ms);
        }
        Ok(false)
    }

    /// Runs the started turn in a task of its own, under a span of its own,
    /// and makes it the agent's active run.
    fn launch(
        &self,
        myself: &ActorRef<AgentMsg>,
        state: &mut AgentState,
        message: MessageRecord,
        run_id: RunId,
        in_flight: crate::in_flight::InFlightGuard,
    ) {
        let agent_id = state.id();
        let message_id = message.id;
        let started = message.clone();
        // A root, never a child of whatever span is current here: a turn
        // started from the previous one's end would otherwise hang
        // under it, and a long run of turns becomes a chain of spans
        // whose drop recurses until the worker's stack overflows.
        // Under the call that sent its message, when spans are exported
        // and one did (a W3C traceparent on it continues here).
        let cause = state.causes.as_mut().and_then(|c| c.remove(&message_id));
        if state.causes.as_ref().is_some_and(|c| c.is_empty()) {
            state.causes = None;
        }
        let span = match &cause {
            Some(cause) => {
                tracing::info_span!(parent: cause, "turn", agent_id = %agent_id, run_id = %run_id)
            }
            None => {
                tracing::info_span!(parent: None, "turn", agent_id = %agent_id, run_id = %run_id)
            }
        };
        let usage = crate::brain::UsageMeter::default();
        // Published before the turn can run, so the turn's own view of
        // its agent already shows it.
        state.queue.live().turn_started(run_id);
        let tasks = self.ctx.lifecycle.tasks.clone();
        let task = tasks.spawn(
            run_turn(
                self.ctx.clone(),
                state.profile,
                agent_id,
                run_id,
                message,
                usage.clone(),
                myself.clone(),
            )
            .instrument(span),
        );
        self.ctx.stats.busy.fetch_add(1, Ordering::Relaxed);
        state.run = Some(ActiveRun {
            run_id,
            message_id,
            message: Some(Box::new(started)),
            usage,
            task: task.abort_handle(),
            busy: self.ctx.stats.busy.clone(),
            _in_flight: in_flight,
        });
    }
}
