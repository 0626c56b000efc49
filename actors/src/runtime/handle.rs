//! [`Runtime`]: the handle the daemon, benchmarks and tests drive a running
//! runtime through. Every call has a timeout; none blocks an actor.

use std::sync::Arc;
use std::time::{Duration, Instant};

use holarchy_supervision::bounds;
use holarchy_supervision::plan;
use holarchy_supervision::AgentId;
use ractor::rpc::CallResult;
use ractor::{Actor, ActorRef};
use tokio::sync::watch;
use tracing::{error, info, warn};

use holarchy_supervision::cleanup::CleanupReason;
use holarchy_supervision::{AgentRecord, BrainConfig, LifecycleState, Visibility};

use super::bounded::{bounded, Bounded};
use super::factory::ActorFactory;
use super::{
    CreateError, NewAgent, Outgoing, RuntimeActor, RuntimeError, RuntimeMsg, RuntimeSnapshot,
};
use crate::in_flight::InFlightTurn;
use crate::live::AgentSnapshot;
use crate::protocol::GatewayMsg;
use crate::protocol::{
    Ack, AgentMsg, Control, ControlError, ControlOutcome, DeliverError, Delivered, NotRunning,
};
use crate::store::StoreError;
use crate::supervisor::cleanup::{self, CleanupOutcome};
use crate::{Brain, Ctx, RuntimeConfig, Store};

/// The reason a turn cut short by a graceful stop is recorded with, first
/// in its run's detail.
pub const STOPPED_GRACEFULLY: &str = "stopped_gracefully";

/// Why an archive was refused.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("agent {0} not found")]
    NotFound(AgentId),
    #[error("agent {0} is private: stop its supervisor's task handle instead")]
    Private(AgentId),
    #[error("agent {agent_id} is already {}", state.name())]
    NotLive {
        agent_id: AgentId,
        state: LifecycleState,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a brain change was refused.
#[derive(Debug, thiserror::Error)]
pub enum BrainError {
    #[error("agent {0} not found")]
    NotFound(AgentId),
    #[error("agent {0} has ended")]
    NotLive(AgentId),
    #[error(transparent)]
    Invalid(#[from] holarchy_supervision::brain::BrainConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The handle to a running runtime.
#[derive(Debug)]
pub struct Runtime {
    ctx: Arc<Ctx>,
    root: ActorRef<RuntimeMsg>,
    /// Turns `true` once the root actor has stopped, for whatever reason.
    stopped: watch::Receiver<bool>,
    started: Instant,
}

/// Why an actor called through the handle gave no answer; each caller's
/// error says so as `Unavailable`.
#[derive(Debug, thiserror::Error)]
enum Unanswered {
    #[error("timed out")]
    Timeout,
    /// The actor dropped the reply port without answering.
    #[error("request dropped")]
    Dropped,
    /// The message was not sent (the actor is gone): ractor's reason.
    #[error("{0}")]
    NotSent(String),
}

fn unanswered<T>(result: Result<CallResult<T>, impl std::fmt::Display>) -> Result<T, Unanswered> {
    match result {
        Ok(CallResult::Success(answer)) => Ok(answer),
        Ok(CallResult::Timeout) => Err(Unanswered::Timeout),
        Ok(CallResult::SenderError) => Err(Unanswered::Dropped),
        Err(err) => Err(Unanswered::NotSent(err.to_string())),
    }
}

impl Runtime {
    /// The namespaces' quotas and what each uses now.
    pub fn namespaces(&self) -> &crate::namespaces::Namespaces {
        &self.ctx.namespaces
    }

    /// Lets the agents of `namespaces` whose turns wait for a turn limit
    /// look again at once (a quota was lifted or raised), rather than at
    /// the wake-up the old bound set.
    pub fn wake_deferred(&self, namespaces: &[Arc<crate::namespaces::NamespaceUse>]) {
        for namespace in namespaces {
            for agent in self.ctx.directory.deferred_in(namespace) {
                let _ = agent.cast(crate::protocol::AgentMsg::PaceElapsed);
            }
        }
    }

    /// The namespace of a running agent, from the directory: no store
    /// read. `None` for one that is not running (archived, failed, or
    /// none at all).
    pub fn namespace_of_running(&self, id: AgentId) -> Option<Arc<str>> {
        self.ctx
            .directory
            .namespace_of(id)
            .map(|namespace| namespace.name_shared())
    }

    /// Recovers from the store and starts every live agent. Returns once
    /// all of them run, so a caller can report SERVING right after.
    pub async fn start(
        store: Arc<dyn Store>,
        brain: Arc<dyn Brain>,
        config: RuntimeConfig,
    ) -> Result<Self, RuntimeError> {
        // The disk work of a start (its roots, the skill folders) before
        // the context, which touches none, is built over it.
        let config = tokio::task::spawn_blocking(move || config.settled())
            .await
            .map_err(|join| RuntimeError::Spawn(format!("settling the configuration: {join}")))?;
        let ctx = Arc::new(Ctx::new(store, brain, Arc::new(ActorFactory), config));
        let reading = ctx.clone();
        tokio::task::spawn_blocking(move || reading.skills.reload())
            .await
            .map_err(|join| RuntimeError::Spawn(format!("reading the skills: {join}")))?;
        let (root, join) = Actor::spawn(None, RuntimeActor { ctx: ctx.clone() }, ())
            .await
            .map_err(|err| RuntimeError::Spawn(err.to_string()))?;
        let (mark_stopped, stopped) = watch::channel(false);
        let watched = ctx.clone();
        tokio::spawn(async move {
            let _ = join.await;
            if !watched.lifecycle.is_shutting_down() {
                error!("runtime root actor stopped unexpectedly");
            }
            let _ = mark_stopped.send(true);
        });
        Ok(Self {
            ctx,
            root,
            stopped,
            started: Instant::now(),
        })
    }

    /// The runtime's shared context, for in-process tests and benchmarks
    /// that drive a plane directly (a tool's spawn, a wait, a command).
    /// The daemon's edges (`src/api`, metrics, webhooks) go through the
    /// methods instead, which bound their waits.
    pub fn ctx(&self) -> &Arc<Ctx> {
        &self.ctx
    }

    pub fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    /// What would stop an agent on `brain` (`None`: the default brain)
    /// from running any turn, as far as the daemon can tell before one:
    /// the variable its key is read from is not set here. Said when the
    /// agent is made, so the operator does not learn it from a failed
    /// turn.
    pub fn brain_warning(&self, brain: Option<&BrainConfig>) -> Option<String> {
        let brain = brain.unwrap_or(&self.ctx.config.default_brain);
        let env = match brain {
            BrainConfig::OpenAi { api_key_env, .. }
            | BrainConfig::Anthropic { api_key_env, .. } => api_key_env,
            BrainConfig::Scripted | BrainConfig::Command { .. } => return None,
        };
        self.ctx.config.secrets.var(env).is_none().then(|| {
            format!(
                "{env} is not set in the daemon's environment: this agent's {} brain reads its \
                 key from it, so its turns fail until the daemon is started with {env} set",
                brain.kind()
            )
        })
    }

    /// Resolves when the root actor has stopped: after [`Runtime::shutdown`],
    /// or on its own, which the daemon treats as fatal.
    pub async fn stopped(&self) {
        let mut stopped = self.stopped.clone();
        let _ = stopped.wait_for(|s| *s).await;
    }

    /// Creates a `public_named` agent as an operator would. Resolves once the
    /// agent is durable.
    pub async fn create_agent(
        &self,
        name: String,
        initial_message: Option<String>,
    ) -> Result<AgentId, CreateError> {
        self.create_agent_with_brain(name, initial_message, None)
            .await
    }

    /// Creates a `public_named` agent on `brain` (the daemon's default when
    /// `None`).
    pub async fn create_agent_with_brain(
        &self,
        name: String,
        initial_message: Option<String>,
        brain: Option<BrainConfig>,
    ) -> Result<AgentId, CreateError> {
        self.create_one(NewAgent {
            name,
            initial_message,
            brain,
            context_tokens: None,
            mcp_servers: Vec::new(),
            network: Default::default(),
            namespace: holarchy_supervision::namespace::DEFAULT.to_owned(),
            labels: Default::default(),
            created_by: None,
        })
        .await
    }

    /// Creates one `public_named` agent as `spec` says.
    pub async fn create_one(&self, spec: NewAgent) -> Result<AgentId, CreateError> {
        let ids = self.create_agents(vec![spec]).await?;
        ids.into_iter()
            .next()
            .ok_or_else(|| CreateError::Unavailable("no agent created".into()))
    }

    /// Creates many `public_named` agents in one durable batch (one flush):
    /// all or none. Resolves once they are on disk and running.
    pub async fn create_agents(&self, specs: Vec<NewAgent>) -> Result<Vec<AgentId>, CreateError> {
        // A batch takes longer than a single call; scale the wait with it.
        let timeout = self
            .ctx
            .config
            .call_timeout
            .saturating_mul(1 + (specs.len() / 1000) as u32);
        // The creation goes on if this wait gives up: it is all or none.
        tokio::time::timeout(timeout, super::create::create_agents(&self.ctx, specs))
            .await
            .map_err(|_| CreateError::Unavailable("timed out".into()))?
    }

    /// Operator ingress: through the gateway, to public agents only.
    /// Resolves once the message is durable.
    pub async fn send_message(
        &self,
        agent_id: AgentId,
        body: String,
        dedupe_key: Option<String>,
    ) -> Result<Delivered, DeliverError> {
        self.send_message_logged(agent_id, body, dedupe_key, Vec::new())
            .await
    }

    /// [`Self::send_message`], with `events` logged for the agent in the
    /// message's commit if it is queued (an operator's who-sent-it).
    pub async fn send_message_logged(
        &self,
        agent_id: AgentId,
        body: String,
        dedupe_key: Option<String>,
        events: Vec<holarchy_supervision::EventKind>,
    ) -> Result<Delivered, DeliverError> {
        bounds::check_message(&body)?;
        if let Some(key) = &dedupe_key {
            bounds::check_dedupe_key(key)?;
        }
        let gateway = self
            .ctx
            .topology
            .gateway()
            .ok_or_else(|| DeliverError::Unavailable("gateway not running".into()))?;
        let timeout = Some(self.ctx.config.call_timeout);
        let cause = self.ctx.config.trace_causes.then(tracing::Span::current);
        let result = gateway
            .call(
                |reply| GatewayMsg::Ingress {
                    agent_id,
                    body,
                    dedupe_key,
                    ack: Ack::Durable,
                    reply,
                    cause,
                    events,
                },
                timeout,
            )
            .await;
        unanswered(result).map_err(|err| DeliverError::Unavailable(err.to_string()))?
    }

    /// Operator ingress of many messages at once, each with its own dedupe
    /// key and its own answer, in order: one refused message does not
    /// refuse the others. Every message is put on its queue first; one
    /// flush then covers them all, and no message is answered before it.
    pub async fn send_messages(
        &self,
        messages: Vec<Outgoing>,
    ) -> Vec<Result<Delivered, DeliverError>> {
        let Some(gateway) = self.ctx.topology.gateway() else {
            let down = || Err(DeliverError::Unavailable("gateway not running".into()));
            return messages.iter().map(|_| down()).collect();
        };
        let mut pending = Vec::with_capacity(messages.len());
        for message in messages {
            let checked = bounds::check_message(&message.body).and_then(|()| {
                message
                    .dedupe_key
                    .as_deref()
                    .map_or(Ok(()), bounds::check_dedupe_key)
            });
            if let Err(err) = checked {
                pending.push(Err(DeliverError::from(err)));
                continue;
            }
            let (tx, rx) = tokio::sync::oneshot::channel();
            let sent = gateway.cast(GatewayMsg::Ingress {
                agent_id: message.agent_id,
                body: message.body,
                dedupe_key: message.dedupe_key,
                ack: Ack::Applied,
                reply: tx.into(),
                cause: self.ctx.config.trace_causes.then(tracing::Span::current),
                events: message.events,
            });
            pending.push(match sent {
                Ok(()) => Ok(rx),
                Err(err) => Err(DeliverError::Unavailable(err.to_string())),
            });
        }
        // Every message is in flight now; their answers come back together.
        let deadline = tokio::time::Instant::now() + self.ctx.config.call_timeout;
        let mut answers = Vec::with_capacity(pending.len());
        for waiting in pending {
            answers.push(match waiting {
                Ok(rx) => match tokio::time::timeout_at(deadline, rx).await {
                    Ok(Ok(answer)) => answer,
                    Ok(Err(_)) => Err(DeliverError::Unavailable("the agent did not answer".into())),
                    Err(_) => Err(DeliverError::Unavailable("timed out".into())),
                },
                Err(err) => Err(err),
            });
        }
        if let Err(err) = crate::apply::durable(&self.ctx).await {
            let failed = err.to_string();
            for answer in &mut answers {
                if answer.is_ok() {
                    *answer = Err(DeliverError::Unavailable(format!("not flushed: {failed}")));
                }
            }
        }
        answers
    }

    /// The live view of a running agent; `None` if its actor is not running.
    /// A running agent's queue and turns as it published them, without a
    /// round trip through its mailbox (which cost a reader two wakeups);
    /// `None` when no actor runs for it.
    pub fn agent_snapshot(&self, agent_id: AgentId) -> Option<AgentSnapshot> {
        Some(self.ctx.directory.get(agent_id)?.snapshot())
    }

    pub async fn snapshot(&self) -> Result<RuntimeSnapshot, RuntimeError> {
        let timeout = Some(self.ctx.config.call_timeout);
        unanswered(self.root.call(RuntimeMsg::Snapshot, timeout).await)
            .map_err(|err| RuntimeError::Unavailable(err.to_string()))
    }

    /// Operator archive of a public agent: it and its whole private subtree
    /// end, durably, then their actors stop. The caller waits under the
    /// deadline of an operator's change; the cleanup, once begun, goes on
    /// to its end whether the caller waits or not.
    pub async fn archive_agent(
        &self,
        agent_id: AgentId,
    ) -> Result<CleanupOutcome, Bounded<ArchiveError>> {
        let record = self
            .ctx
            .reads()
            .agent(agent_id)
            .map_err(ArchiveError::from)?
            .ok_or(ArchiveError::NotFound(agent_id))?;
        if record.profile.visibility == Visibility::Private {
            return Err(ArchiveError::Private(agent_id).into());
        }
        if !record.state.is_live() {
            return Err(ArchiveError::NotLive {
                agent_id,
                state: record.state,
            }
            .into());
        }
        let ctx = self.ctx.clone();
        bounded(
            &self.ctx().lifecycle.tasks,
            self.change_deadline(),
            async move {
                Ok(
                    cleanup::run(&ctx, agent_id, CleanupReason::Archived, Default::default())
                        .await?,
                )
            },
        )
        .await
    }

    /// Operator control of a public agent's run: pause, resume, abort.
    pub async fn control(
        &self,
        agent_id: AgentId,
        action: Control,
    ) -> Result<ControlOutcome, ControlError> {
        let record = self
            .ctx
            .reads()
            .agent(agent_id)?
            .ok_or(ControlError::NotFound(agent_id))?;
        if record.profile.visibility == Visibility::Private {
            return Err(ControlError::Private(agent_id));
        }
        let entry = self
            .ctx
            .directory
            .get(agent_id)
            .ok_or(ControlError::NotRunning {
                agent_id,
                why: if record.state.is_live() {
                    NotRunning::Restarting
                } else {
                    NotRunning::Ended(record.state)
                },
            })?;
        let timeout = Some(self.ctx.config.call_timeout);
        let result = entry
            .actor
            .call(|reply| AgentMsg::Control { action, reply }, timeout)
            .await;
        unanswered(result).map_err(|err| ControlError::Unavailable(err.to_string()))?
    }

    /// Changes what decides an agent's turns, from its next turn on.
    pub async fn update_brain(
        &self,
        agent_id: AgentId,
        brain: BrainConfig,
    ) -> Result<AgentRecord, BrainError> {
        brain.validate()?;
        let record = self
            .ctx
            .reads()
            .agent(agent_id)?
            .ok_or(BrainError::NotFound(agent_id))?;
        let (plan, record) = plan::agent::rebrain(&record, brain, crate::now_ms())
            .map_err(|_| BrainError::NotLive(agent_id))?;
        crate::apply::apply(&self.ctx, plan).map_err(|err| match err {
            // A cleanup ended it since it was read: never revived.
            StoreError::Precondition(_) => BrainError::NotLive(agent_id),
            other => other.into(),
        })?;
        crate::apply::durable(&self.ctx).await?;
        Ok(record)
    }

    /// Logs that an operator's write was done, to `agent_id` (or to no
    /// agent: an instance's, a token's): `caller` as the audit trail
    /// names callers, `action` the method. Durable when this returns. (A
    /// sent message's is logged in its own commit, see
    /// [`Self::send_message_logged`].)
    pub async fn log_operator_action(
        &self,
        agent_id: Option<AgentId>,
        caller: String,
        action: String,
    ) -> Result<(), StoreError> {
        let mut batch = holarchy_supervision::effect::Batch::new();
        batch.events.push((
            agent_id,
            holarchy_supervision::EventKind::OperatorAction { caller, action },
        ));
        let flushed = crate::apply::apply_grouped(
            &self.ctx,
            holarchy_supervision::effect::Plan::writes(batch),
        )
        .await?;
        flushed.await
    }

    /// Starts no more turns (the disk is nearly full): agents with work
    /// wait, their queues kept, until [`Runtime::release_turns`].
    pub fn hold_turns(&self) {
        self.ctx.lifecycle.turns.close();
    }

    /// Lets turns start again, and wakes the agents that waited.
    pub fn release_turns(&self) {
        for actor in self.ctx.lifecycle.turns.open() {
            let _ = actor.cast(crate::protocol::AgentMsg::Release {
                pending: Vec::new(),
            });
        }
    }

    /// Purges archived agents (`agent delete`: a public one and its
    /// private descendants) in one commit, each with an
    /// `agent_state_changed` event that says so. The store refuses the
    /// whole commit ([`StoreError::Precondition`]) if any of them is not
    /// archived. Archived agents have no actors and no live descendants,
    /// so no supervisor's structure changes and no lock is taken; a
    /// cleanup still finishing skips a record that is gone.
    pub async fn delete_archived(&self, records: Vec<AgentRecord>) -> Result<(), StoreError> {
        crate::apply::apply(&self.ctx, plan::agent::purge(records))?;
        crate::apply::durable(&self.ctx).await
    }

    /// Stops every actor, top-down, within `timeout`. Pending work stays in
    /// the store and resumes on the next start. The turns this cuts short
    /// go back on their queues with their attempts given back, durably
    /// before this returns (and so before the daemon closes the store): a
    /// graceful stop is not a crash, and must not bring a message closer
    /// to being set aside (`--max-message-attempts`). A shutdown itself cut
    /// short by a crash before that write leaves them counted, as any
    /// crash mid-turn does: the write is the proof the stop was ours.
    pub async fn shutdown(&self, timeout: Duration) {
        // A root that stopped on its own took its turns down with it; that
        // is a failure, not a stop we asked for, so those attempts count.
        let asked = !*self.stopped.borrow();
        let cut_short = self.ctx.lifecycle.begin_shutdown();
        if asked {
            if let Err(err) = self
                .root
                .stop_and_wait(Some("shutdown".into()), Some(timeout))
                .await
            {
                warn!(error = %err, "runtime did not stop in time; killing it");
                self.root.kill();
            }
        }
        let _ = tokio::time::timeout(timeout, self.stopped()).await;
        // No turn runs any more: the MCP servers go too.
        self.ctx.mcp.shutdown(timeout).await;
        if asked && !cut_short.is_empty() {
            give_back(&self.ctx, cut_short, timeout).await;
        }
        // The tasks started beside the actors end with them: each finds
        // its actors gone or the runtime stopping.
        let tasks = &self.ctx.lifecycle.tasks;
        tasks.close();
        if tokio::time::timeout(timeout, tasks.wait()).await.is_err() {
            warn!(
                running = tasks.len(),
                "background tasks still running after the shutdown's timeout; they end with the process"
            );
        }
    }

    /// Tasks the runtime started beside its actors that are still running
    /// (none once a shutdown has returned).
    pub fn background_tasks(&self) -> usize {
        self.ctx.lifecycle.tasks.len()
    }
}

/// Puts the messages of turns a graceful shutdown stopped back on their
/// queues with their attempts given back, once their agents' actors have
/// let go of them (so no turn can still record its end), and waits for
/// the write to be on disk.
async fn give_back(ctx: &Ctx, turns: Vec<InFlightTurn>, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    // The agents were killed with their subtrees; their states (and the
    // turns' registrations) drop as tokio cancels their tasks.
    while !ctx.lifecycle.in_flight.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut cut = Vec::with_capacity(turns.len());
    for turn in turns {
        match ctx.reads().message(turn.agent_id, turn.message_id) {
            Ok(Some(message)) => cut.push((message, turn.run_id)),
            Ok(None) => {}
            Err(err) => {
                warn!(agent_id = %turn.agent_id, error = %err, "could not read a message cut short by the shutdown");
            }
        }
    }
    let detail = format!(
        "{STOPPED_GRACEFULLY}: the daemon was stopped mid-turn; message queued again, and this turn does not count towards --max-message-attempts"
    );
    // Only the run that still holds it: one that ended meanwhile stays as
    // it ended.
    let (plan, given_back) = plan::agent::give_back(cut, &detail);
    if given_back == 0 {
        return;
    }
    let written = match crate::apply::apply(ctx, plan) {
        Ok(()) => tokio::time::timeout(timeout, crate::apply::durable(ctx)).await,
        Err(err) => Ok(Err(err)),
    };
    match written {
        Ok(Ok(())) => info!(given_back, "turns cut short by the shutdown queued again"),
        Ok(Err(err)) => {
            warn!(error = %err, "could not queue again the turns cut short by the shutdown; they count as crashed")
        }
        Err(_) => warn!(
            "queuing again the turns cut short by the shutdown did not reach the disk in time"
        ),
    }
}
