//! The daemon's replays as background jobs: started, cancelled, resumed and
//! deleted by operators, each a task the manager owns (a shutdown stops
//! and awaits every one), bounded in turns at once, tokens and wall time,
//! and run on command-brain process slots of their own, so a replay never
//! takes what live agents run on. Progress is stored as it goes; a replay
//! the daemon stopped (or a kill cut short) is marked interrupted at the
//! next start and can be resumed where its reports end.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt;
use holarchy_actors::replay::{classify, Candidate, Class, Decided, RecordedTurn, Replayer};
use holarchy_actors::{Runtime, StoreError};
use holarchy_composition::constraint::{Layer, Policy, ToolRules};
use holarchy_composition::skill::SkillCatalog;
use holarchy_supervision::{AgentId, AgentRecord, ReplayId};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{info, warn, Instrument};

use super::model::{
    ReplayRecord, ReplaySpec, ReplayStatus, Summary, TurnReport, MAX_RUNNING, MAX_STORED,
    REPORT_CALLS, REPORT_STEPS, REPORT_TEXT_BYTES,
};
use super::recorded::{self, TurnRef};
use super::store::ReplayStore;
use crate::api::read_model::ReadModel;

/// Command-brain processes all replays may run at once: few, and never
/// the live agents' own.
const REPLAY_PROCESSES: usize = 2;
/// Turns all replays together start a second, unless the daemon is told
/// otherwise: at 2,000 the live turns beside a replay of scripted turns
/// kept 0.86 of their rate on two cores; this keeps them above nine
/// tenths (docs/benchmarks.md).
pub const DEFAULT_TURNS_PER_SECOND: u32 = 1200;

/// Spaces the starts of replayed turns, across every replay, at most
/// `per_second` a second: each start takes the next free moment.
#[derive(Debug)]
struct Pace {
    every: Duration,
    next: Mutex<Instant>,
}

impl Pace {
    fn new(per_second: u32) -> Self {
        Self {
            every: Duration::from_secs(1) / per_second.max(1),
            next: Mutex::new(Instant::now()),
        }
    }

    /// Waits for the moment of the first of `turns` turns, the rest
    /// taking the moments after it: a group starts together, and the
    /// rate holds over groups.
    async fn turns(&self, turns: usize) {
        let at = {
            let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
            let at = (*next).max(Instant::now());
            *next = at + self.every * u32::try_from(turns).unwrap_or(u32::MAX);
            at
        };
        tokio::time::sleep_until(at.into()).await;
    }
}

/// Recorded turns read from the store together.
const LOAD_GROUP: usize = 32;

/// Reports written together, at most; a batch is written sooner once it
/// is this old.
const REPORT_BATCH: usize = 64;
const REPORT_EVERY: Duration = Duration::from_millis(250);

/// Why a replay could not be started, resumed, cancelled or deleted.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("no replay {0}")]
    NotFound(ReplayId),
    #[error("{0}")]
    Precondition(String),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The daemon's replays.
#[derive(Debug)]
pub struct Replays {
    runtime: Arc<Runtime>,
    reads: Arc<dyn ReadModel>,
    store: Arc<dyn ReplayStore>,
    processes: Arc<tokio::sync::Semaphore>,
    pace: Pace,
    /// The running ones, each with the sender that stops it.
    running: Mutex<HashMap<ReplayId, watch::Sender<Stop>>>,
    tasks: Mutex<JoinSet<()>>,
}

/// Why a running replay is told to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    No,
    Cancel,
    Shutdown,
}

impl Replays {
    /// The manager, with every replay a previous run left running marked
    /// interrupted (the daemon stopped, or was killed, under it).
    pub async fn open(
        runtime: Arc<Runtime>,
        reads: Arc<dyn ReadModel>,
        store: Arc<dyn ReplayStore>,
        turns_per_second: u32,
    ) -> Result<Arc<Self>, StoreError> {
        let marked = {
            let store = store.clone();
            tokio::task::spawn_blocking(move || {
                let mut marked = 0;
                for mut record in store.replays()? {
                    if record.status == ReplayStatus::Running {
                        record.status = ReplayStatus::Interrupted;
                        record.reason = "the daemon stopped while it ran".into();
                        record.updated_ms = holarchy_actors::now_ms();
                        store.put_replay(&record)?;
                        marked += 1;
                    }
                }
                Ok::<_, StoreError>(marked)
            })
            .await
            .map_err(|join| StoreError::Backend(join.to_string()))??
        };
        if marked > 0 {
            reads.durable().await?;
            info!(
                replays = marked,
                "replays the daemon stopped under are marked interrupted"
            );
        }
        Ok(Arc::new(Self {
            runtime,
            reads,
            store,
            processes: Arc::new(tokio::sync::Semaphore::new(REPLAY_PROCESSES)),
            pace: Pace::new(turns_per_second),
            running: Mutex::default(),
            tasks: Mutex::default(),
        }))
    }

    /// Runs `f` on the store off the async workers.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn ReplayStore) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || f(store.as_ref()))
            .await
            .map_err(|join| StoreError::Backend(join.to_string()))?
    }

    pub async fn get(&self, id: ReplayId) -> Result<ReplayRecord, JobError> {
        self.blocking(move |s| s.replay(id))
            .await?
            .ok_or(JobError::NotFound(id))
    }

    pub async fn list(&self) -> Result<Vec<ReplayRecord>, JobError> {
        Ok(self.blocking(|s| s.replays()).await?)
    }

    pub async fn reports(
        &self,
        id: ReplayId,
        after: Option<u32>,
        limit: usize,
    ) -> Result<Vec<TurnReport>, JobError> {
        Ok(self.blocking(move |s| s.reports(id, after, limit)).await?)
    }

    fn running_count(&self) -> usize {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Stores a new replay of `spec` (durably) and starts it.
    pub async fn start(
        self: &Arc<Self>,
        spec: ReplaySpec,
        namespace: String,
    ) -> Result<ReplayRecord, JobError> {
        let stored = self.list().await?;
        if stored.len() >= MAX_STORED {
            return Err(JobError::Precondition(format!(
                "{MAX_STORED} replays are stored, the most kept: delete one first (`holarchy replay delete ID`)"
            )));
        }
        if self.running_count() >= MAX_RUNNING {
            return Err(JobError::Precondition(format!(
                "{MAX_RUNNING} replays are running, the most at once: wait for one, or cancel one (`holarchy replay cancel ID`)"
            )));
        }
        let now = holarchy_actors::now_ms();
        let record = ReplayRecord {
            id: ReplayId::generate(),
            namespace,
            spec,
            status: ReplayStatus::Running,
            reason: String::new(),
            selected: 0,
            summary: Summary::default(),
            created_ms: now,
            updated_ms: now,
        };
        self.save(&record).await?;
        self.launch(record.clone());
        Ok(record)
    }

    /// Takes up a replay that stopped short where its reports end.
    pub async fn resume(self: &Arc<Self>, id: ReplayId) -> Result<ReplayRecord, JobError> {
        let mut record = self.get(id).await?;
        if self.is_running(id) || !record.status.resumable() {
            return Err(JobError::Precondition(format!(
                "replay {id} is {}: only a cancelled, interrupted or stopped one can be resumed",
                record.status.name()
            )));
        }
        if self.running_count() >= MAX_RUNNING {
            return Err(JobError::Precondition(format!(
                "{MAX_RUNNING} replays are running, the most at once: wait for one, or cancel one"
            )));
        }
        record.status = ReplayStatus::Running;
        record.reason.clear();
        record.updated_ms = holarchy_actors::now_ms();
        self.save(&record).await?;
        self.launch(record.clone());
        Ok(record)
    }

    /// Stops a running replay and waits until it has stopped, its last
    /// progress stored.
    pub async fn cancel(&self, id: ReplayId) -> Result<ReplayRecord, JobError> {
        let stopped = {
            let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
            running.get(&id).map(|stop| {
                let _ = stop.send(Stop::Cancel);
                stop.subscribe()
            })
        };
        let Some(mut stopped) = stopped else {
            let record = self.get(id).await?;
            return Err(JobError::Precondition(format!(
                "replay {id} is {}, not running",
                record.status.name()
            )));
        };
        // The job drops its sender once its last progress is stored.
        let _ = stopped.wait_for(|_| false).await;
        self.get(id).await
    }

    /// Drops a replay that is not running, and its reports, durably.
    pub async fn delete(&self, id: ReplayId) -> Result<(), JobError> {
        if self.is_running(id) {
            return Err(JobError::Precondition(format!(
                "replay {id} is running: cancel it first (`holarchy replay cancel {id}`)"
            )));
        }
        self.get(id).await?;
        self.blocking(move |s| s.delete_replay(id)).await?;
        self.reads.durable().await?;
        Ok(())
    }

    fn is_running(&self, id: ReplayId) -> bool {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(&id)
    }

    async fn save(&self, record: &ReplayRecord) -> Result<(), StoreError> {
        let copy = record.clone();
        self.blocking(move |s| s.put_replay(&copy)).await?;
        self.reads.durable().await
    }

    /// Starts the job of `record`, owned by the manager.
    fn launch(self: &Arc<Self>, record: ReplayRecord) {
        let (stop, stopped) = watch::channel(Stop::No);
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(record.id, stop);
        let manager = self.clone();
        let span =
            tracing::info_span!("replay", replay_id = %record.id, agent_id = %record.spec.agent_id);
        let job = async move {
            let id = record.id;
            let ended = manager.run(record, stopped).await;
            if let Err(err) = ended {
                warn!(error = %err, "the replay failed");
            }
            manager
                .running
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
        };
        self.tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .spawn(job.instrument(span));
    }

    /// Stops every running replay (each marked interrupted, to be resumed)
    /// and waits for their tasks.
    pub async fn shutdown(&self) {
        for stop in self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            let _ = stop.send(Stop::Shutdown);
        }
        let mut tasks =
            std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        while tasks.join_next().await.is_some() {}
    }

    /// The job: chooses the turns, replays those not yet reported, and
    /// stores how it ended.
    async fn run(
        self: &Arc<Self>,
        mut record: ReplayRecord,
        stopped: watch::Receiver<Stop>,
    ) -> Result<(), StoreError> {
        let started = Instant::now();
        let outcome = self.replay_turns(&mut record, stopped, started).await;
        let (status, reason) = match outcome {
            Ok(ended) => ended,
            Err(err) => (ReplayStatus::Failed, err.to_string()),
        };
        record.status = status;
        record.reason = reason;
        record.updated_ms = holarchy_actors::now_ms();
        self.save(&record).await?;
        info!(
            status = status.name(),
            replayed = record.summary.replayed(),
            selected = record.selected,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "replay stopped"
        );
        Ok(())
    }

    async fn replay_turns(
        self: &Arc<Self>,
        record: &mut ReplayRecord,
        mut stopped: watch::Receiver<Stop>,
        started: Instant,
    ) -> Result<(ReplayStatus, String), StoreError> {
        let ctx = self.runtime.ctx().clone();
        let spec = record.spec.clone();
        let agent = match ctx.reads().agent(spec.agent_id)? {
            Some(agent) => agent,
            None => {
                return Ok((
                    ReplayStatus::Failed,
                    format!("agent {} is gone", spec.agent_id),
                ));
            }
        };
        let candidate = match candidate_of(&spec) {
            Ok(candidate) => candidate,
            Err(reason) => return Ok((ReplayStatus::Failed, reason)),
        };
        let (turns, done) = {
            let (ctx, store, id) = (ctx.clone(), self.store.clone(), record.id);
            let spec = spec.clone();
            tokio::task::spawn_blocking(move || {
                let turns = recorded::select(&ctx, &spec)?;
                let done: HashSet<u32> = store.reported(id)?.into_iter().collect();
                Ok::<_, StoreError>((turns, done))
            })
            .await
            .map_err(|join| StoreError::Backend(join.to_string()))??
        };
        record.selected = u32::try_from(turns.len()).unwrap_or(u32::MAX);
        // The summary is of every report, those of an earlier run too.
        record.summary = self.summary_of(record.id).await?;
        record.updated_ms = holarchy_actors::now_ms();
        self.save(record).await?;
        let owner = AgentId::generate();
        let replayer = Arc::new(Replayer {
            ctx: ctx.clone(),
            candidate: candidate.clone(),
            processes: self.processes.clone(),
            owner,
            step_timeout: ctx.config.turn_timeout,
        });
        let policy = agent_policy(&ctx, &agent, &spec);
        let source = Arc::new(Source {
            reads: self.reads.clone(),
            hint: recorded::Hint::default(),
        });
        let budget = spec.budget;
        let to_do: Vec<(u32, TurnRef)> = turns
            .into_iter()
            .enumerate()
            .filter_map(|(i, t)| u32::try_from(i).ok().map(|i| (i, t)))
            .filter(|(i, _)| !done.contains(i))
            .collect();
        let concurrency = budget.concurrency.clamp(1, super::model::MAX_CONCURRENCY) as usize;
        // Turns are read from the store a group at a time, one group read
        // ahead of those replaying: a thread of the blocking pool per
        // group, not per turn, and the pace kept per group.
        let groups: Vec<Vec<(u32, TurnRef)>> =
            to_do.chunks(LOAD_GROUP).map(<[_]>::to_vec).collect();
        let loaded = futures::stream::iter(groups)
            .map(|group| {
                let (ctx, source, manager) = (ctx.clone(), source.clone(), self.clone());
                async move {
                    manager.pace.turns(group.len()).await;
                    load_group(ctx, source, group).await
                }
            })
            .buffered(2)
            .flat_map(futures::stream::iter);
        let mut reports =
            loaded
                .map(|(index, turn, loaded)| {
                    let replayer = replayer.clone();
                    let (brain, policy) = (agent.brain.clone(), policy.clone());
                    async move {
                        replay_one(&replayer, index, turn, loaded, &brain, policy.as_ref()).await
                    }
                })
                .buffer_unordered(concurrency);
        let mut batch: Vec<TurnReport> = Vec::new();
        let mut written = Instant::now();
        let ended = loop {
            let next = tokio::select! {
                next = reports.next() => next,
                _ = stopped.changed() => None,
            };
            let stop = *stopped.borrow();
            match stop {
                Stop::Cancel => {
                    break (
                        ReplayStatus::Cancelled,
                        "cancelled by an operator".to_owned(),
                    )
                }
                Stop::Shutdown => {
                    break (
                        ReplayStatus::Interrupted,
                        "the daemon stopped while it ran".to_owned(),
                    )
                }
                Stop::No => {}
            }
            let Some(report) = next else {
                break (ReplayStatus::Completed, String::new());
            };
            let report = report?;
            record.summary.add(&report);
            batch.push(report);
            if batch.len() >= REPORT_BATCH || written.elapsed() >= REPORT_EVERY {
                self.write(record, &mut batch).await?;
                written = Instant::now();
            }
            if budget.max_tokens > 0 && record.summary.candidate_tokens >= budget.max_tokens {
                break (
                    ReplayStatus::BudgetSpent,
                    format!(
                        "the candidate spent {} tokens, the budget's {}",
                        record.summary.candidate_tokens, budget.max_tokens
                    ),
                );
            }
            if budget.max_wall_ms > 0
                && started.elapsed() >= Duration::from_millis(budget.max_wall_ms)
            {
                break (
                    ReplayStatus::BudgetSpent,
                    format!(
                        "it ran {} ms, the budget's {}",
                        started.elapsed().as_millis(),
                        budget.max_wall_ms
                    ),
                );
            }
        };
        // Turns under way are dropped (their brains' processes with them);
        // what finished is kept.
        drop(reports);
        self.write(record, &mut batch).await?;
        if let Err(err) = ctx.config.sandbox.remove_tmp_dir(owner) {
            warn!(error = %err, "could not remove the replay's temporary directory");
        }
        Ok(ended)
    }

    /// Stores `batch`'s reports and the record's progress.
    async fn write(
        &self,
        record: &ReplayRecord,
        batch: &mut Vec<TurnReport>,
    ) -> Result<(), StoreError> {
        let reports = std::mem::take(batch);
        let mut copy = record.clone();
        copy.updated_ms = holarchy_actors::now_ms();
        let id = record.id;
        self.blocking(move |s| {
            s.put_reports(id, &reports)?;
            s.put_replay(&copy)
        })
        .await
    }

    /// The summary over every stored report of `id`.
    async fn summary_of(&self, id: ReplayId) -> Result<Summary, StoreError> {
        self.blocking(move |s| {
            let mut summary = Summary::default();
            let mut after = None;
            loop {
                let page = s.reports(id, after, 512)?;
                let Some(last) = page.last() else { break };
                after = Some(last.index);
                page.iter().for_each(|r| summary.add(r));
            }
            Ok(summary)
        })
        .await
    }
}

/// One chosen turn replayed, as its report.
/// Where a replay reads its recorded turns, and where its last search
/// of the log ended.
struct Source {
    reads: Arc<dyn ReadModel>,
    hint: recorded::Hint,
}

/// A recorded turn as read (or why it could not be).
type Loaded = Result<RecordedTurn, StoreError>;

/// Reads `group`'s recorded turns, in order, on one blocking thread.
async fn load_group(
    ctx: Arc<holarchy_actors::Ctx>,
    source: Arc<Source>,
    group: Vec<(u32, TurnRef)>,
) -> Vec<(u32, TurnRef, Loaded)> {
    let refs = group.clone();
    let read = tokio::task::spawn_blocking(move || {
        group
            .into_iter()
            .map(|(index, turn)| {
                let loaded = recorded::load(&ctx, source.reads.as_ref(), &turn, &source.hint);
                (index, turn, loaded)
            })
            .collect()
    })
    .await;
    read.unwrap_or_else(|join| {
        let why = join.to_string();
        refs.into_iter()
            .map(|(index, turn)| (index, turn, Err(StoreError::Backend(why.clone()))))
            .collect()
    })
}

async fn replay_one(
    replayer: &Replayer,
    index: u32,
    turn: TurnRef,
    loaded: Loaded,
    brain: &holarchy_supervision::BrainConfig,
    policy: Option<&Policy>,
) -> Result<TurnReport, StoreError> {
    let mut report = TurnReport {
        index,
        run_id: turn.run_id,
        agent_id: turn.agent_id,
        at_ms: turn.at_ms,
        class: Class::Error.name().to_owned(),
        recorded: Decided::default(),
        candidate: Decided::default(),
        unrecorded_calls: 0,
        recorded_usage: None,
        candidate_usage: None,
        error: None,
    };
    let recorded = match loaded {
        Ok(recorded) => recorded,
        // A turn the log no longer holds is this turn's error, not the
        // replay's.
        Err(StoreError::Precondition(why)) => {
            report.error = Some(why);
            return Ok(report);
        }
        Err(err) => return Err(err),
    };
    report.recorded_usage = recorded.usage;
    let recorded_decided = recorded.decided();
    match replayer.replay(&recorded, brain, policy).await {
        Ok(replayed) => {
            report.class = classify(&recorded_decided, &replayed.decided)
                .name()
                .to_owned();
            report.unrecorded_calls = replayed.unrecorded_calls;
            report.candidate_usage = replayed.usage;
            // What a candidate said is stored apart from the redacting
            // store: the daemon's secrets go here.
            let secrets = replayer.ctx.config.secrets.clone();
            report.candidate =
                replayed
                    .decided
                    .bounded(REPORT_TEXT_BYTES, REPORT_STEPS, REPORT_CALLS, |text| {
                        secrets.redact(text);
                        *text = holarchy_actors::secrets::redact_trigger_tokens(text);
                    });
        }
        Err(err) => report.error = Some(err.to_string()),
    }
    // The recorded side came from the log, redacted when it was written.
    report.recorded =
        recorded_decided.bounded(REPORT_TEXT_BYTES, REPORT_STEPS, REPORT_CALLS, |_| ());
    Ok(report)
}

/// The candidate `spec` names, its skills read from their folder.
fn candidate_of(spec: &ReplaySpec) -> Result<Candidate, String> {
    let c = &spec.candidate;
    let role = c
        .role_prompt
        .as_deref()
        .map(holarchy_composition::role::from_text)
        .transpose()
        .map_err(|err| format!("the candidate's role: {err}"))?;
    let skills = match &c.skills_dir {
        Some(dir) => {
            let (catalog, errors) = SkillCatalog::load(&[std::path::PathBuf::from(dir)]);
            if let Some(err) = errors.first() {
                warn!(error = %err, "a candidate skill could not be read; the rest are used");
            }
            Some(Arc::new(catalog))
        }
        None => None,
    };
    Ok(Candidate {
        brain: c.brain.clone(),
        role,
        skills,
        policy: None,
    })
}

/// The policy the candidate's calls are checked against: the agent's, its
/// configuration layer the candidate's when it names tools.
fn agent_policy(
    ctx: &holarchy_actors::Ctx,
    agent: &AgentRecord,
    spec: &ReplaySpec,
) -> Option<Policy> {
    let own = agent
        .composition
        .as_deref()
        .map(|stored| holarchy_actors::compose::current(ctx.instances(), stored))
        .map(|c| holarchy_actors::compose::policy(&c));
    let c = &spec.candidate;
    if c.allow_tools.is_none() && c.deny_tools.is_empty() {
        return own;
    }
    let mut policy = own.unwrap_or_default();
    let approval = policy.rules(Layer::Config).require_approval.clone();
    *policy.rules_mut(Layer::Config) = ToolRules {
        allow: c.allow_tools.as_ref().map(|a| a.iter().cloned().collect()),
        deny: c.deny_tools.iter().cloned().collect(),
        require_approval: approval,
    };
    Some(policy)
}
