//! The scheduler actor: fires the schedule ingress of every instance.
//!
//! It keeps one timer, for the earliest next slot of all schedules. Each
//! time it wakes (that timer, a start, an apply or a delete), it fires every
//! schedule that has a slot due, with [`Schedule::due_on_start`]: the
//! latest slot after the one it last fired (and after the instance was
//! applied). So a schedule missed while the daemon was down fires once, for
//! its latest slot, and one already fired never fires again.
//!
//! A firing is an event whose dedupe key names the slot, published like
//! any other ([`super::publish`]); its slot is then written as the
//! schedule's `last_fired_ms`. A crash between the two fires the slot
//! again on start, and the event store and the message dedupe absorb it.
//! Firings run beside the actor, never inside `handle`.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use holarchy_composition::event;
use holarchy_composition::manifest::Ingress;
use holarchy_composition::schedule::Schedule;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::task::AbortHandle;
use tracing::{debug, info, warn};

use super::{publish, InboundError};
use crate::protocol::{SchedulerMsg, SchedulerSnapshot};
use crate::{now_ms, Ctx};

/// The longest sleep: a wall clock set forward is noticed within it.
const MAX_SLEEP: Duration = Duration::from_secs(600);
/// How long a firing the agent could not take waits before its retry.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// One schedule's slot on its way to its agent.
/// (instance, schedule id, slot).
type Firing = (String, String, u64);

#[derive(Debug)]
pub struct SchedulerState {
    /// The wake-up for the next slot; replaced at every scan.
    timer: Option<AbortHandle>,
    /// Firings under way, so a scan meanwhile does not start them twice.
    in_flight: HashSet<Firing>,
    /// Scans so far; the first (what a start fires) is logged.
    scans: u64,
    snapshot: SchedulerSnapshot,
}

impl Drop for SchedulerState {
    fn drop(&mut self) {
        if let Some(timer) = self.timer.take() {
            timer.abort();
        }
    }
}

#[derive(Debug, Clone)]
pub struct SchedulerActor {
    ctx: Arc<Ctx>,
}

impl SchedulerActor {
    pub fn new(ctx: Arc<Ctx>) -> Self {
        Self { ctx }
    }

    /// Fires what is due and sets the timer for the next slot.
    fn scan(&self, myself: &ActorRef<SchedulerMsg>, state: &mut SchedulerState) {
        let now = now_ms();
        let instances = match self.ctx.instances().instances() {
            Ok(instances) => instances,
            Err(err) => {
                warn!(error = %err, "scheduler could not read the instances; retrying");
                self.wake_after(myself, state, RETRY_AFTER);
                return;
            }
        };
        let mut schedules = 0;
        let mut due = 0;
        let mut next: Option<u64> = None;
        for record in &instances {
            let name = record.name();
            for ingress in &record.spec.ingress {
                let Ingress::Schedule {
                    cron,
                    timezone,
                    payload,
                } = ingress
                else {
                    continue;
                };
                // Named by what it is, not where it stands in the manifest:
                // reordering a manifest keeps each schedule's progress.
                let Some(index) = ingress.schedule_id() else {
                    continue;
                };
                // Checked at apply; a record that no longer parses (a
                // newer build's syntax) is skipped, not fatal.
                let schedule = match Schedule::parse(cron, timezone.as_deref()) {
                    Ok(schedule) => schedule,
                    Err(err) => {
                        warn!(instance = name, schedule = %index, error = %err, "schedule skipped");
                        continue;
                    }
                };
                schedules += 1;
                let last = match self.ctx.inbound().schedule_state(name, &index) {
                    Ok(last) => last.last_fired_ms,
                    Err(err) => {
                        warn!(instance = name, schedule = %index, error = %err, "schedule state unreadable");
                        continue;
                    }
                };
                if let Some(slot) = schedule.due_on_start(last, record.updated_at_ms, now) {
                    let firing = (name.to_owned(), index, slot);
                    due += 1;
                    if state.in_flight.insert(firing.clone()) {
                        self.fire(myself, firing, payload.clone());
                    }
                }
                if let Some(slot) = schedule.next_after(now) {
                    next = Some(next.map_or(slot, |n| n.min(slot)));
                }
            }
        }
        if state.scans == 0 {
            info!(schedules, due, "schedules loaded");
        }
        state.scans += 1;
        state.snapshot.schedules = schedules;
        state.snapshot.next_slot_ms = next;
        // A few ms late, never early: the slot must be in the past when
        // the next scan reads the clock.
        let sleep = next.map_or(MAX_SLEEP, |slot| {
            Duration::from_millis(slot.saturating_sub(now) + 5).min(MAX_SLEEP)
        });
        self.wake_after(myself, state, sleep);
    }

    fn wake_after(
        &self,
        myself: &ActorRef<SchedulerMsg>,
        state: &mut SchedulerState,
        after: Duration,
    ) {
        if let Some(timer) = state.timer.take() {
            timer.abort();
        }
        state.timer = Some(
            myself
                .send_after(after, || SchedulerMsg::Scan)
                .abort_handle(),
        );
    }

    /// Publishes one slot's event beside the actor, then records the slot.
    fn fire(&self, myself: &ActorRef<SchedulerMsg>, firing: Firing, payload: String) {
        let ctx = self.ctx.clone();
        let myself = myself.clone();
        let tasks = ctx.lifecycle.tasks.clone();
        tasks.spawn(async move {
            let (instance, index, slot) = &firing;
            let fired = fire_slot(&ctx, instance, index, *slot, &payload).await;
            let retry = match &fired {
                Ok(()) => false,
                // Gone or changed meanwhile: the next scan sees the change.
                Err(InboundError::NotFound(_) | InboundError::NotDeclared { .. }) => false,
                Err(InboundError::NoAgent(why)) => {
                    debug!(instance, why, "schedule not fired: no agent");
                    false
                }
                Err(err) => {
                    warn!(instance, schedule = %index, slot, error = %err, "schedule firing failed; retrying");
                    true
                }
            };
            let _ = myself.cast(SchedulerMsg::Fired {
                firing,
                ok: fired.is_ok(),
                retry,
            });
        });
    }
}

async fn fire_slot(
    ctx: &Arc<Ctx>,
    instance: &str,
    index: &str,
    slot: u64,
    payload: &str,
) -> Result<(), InboundError> {
    let event = event::from_schedule(instance, index, slot, payload)?;
    let published = publish(ctx, instance, event).await?;
    let mut state = ctx.inbound().schedule_state(instance, index)?;
    state.fired(slot);
    ctx.inbound().put_schedule_state(instance, index, state)?;
    crate::apply::durable(ctx).await?;
    info!(
        instance,
        schedule = %index,
        slot,
        event_id = %published.event_id,
        duplicate = published.duplicate,
        "schedule fired"
    );
    Ok(())
}

impl Actor for SchedulerActor {
    type Msg = SchedulerMsg;
    type State = SchedulerState;
    type Arguments = ();

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        _args: (),
    ) -> Result<Self::State, ActorProcessingErr> {
        // The first scan (which fires what was missed while the daemon was
        // down) runs as the first message, not in the start.
        myself.cast(SchedulerMsg::Scan)?;
        Ok(SchedulerState {
            timer: None,
            in_flight: HashSet::new(),
            scans: 0,
            snapshot: SchedulerSnapshot::default(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SchedulerMsg::Scan => self.scan(&myself, state),
            SchedulerMsg::Fired { firing, ok, retry } => {
                state.in_flight.remove(&firing);
                if ok {
                    state.snapshot.fired += 1;
                }
                if retry {
                    self.wake_after(&myself, state, RETRY_AFTER);
                }
            }
            SchedulerMsg::Snapshot(reply) => {
                let _ = reply.send(state.snapshot.clone());
            }
        }
        Ok(())
    }
}
