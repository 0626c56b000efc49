//! The one committer: every batch queued while the previous transaction
//! ran lands in the next one, its statements pipelined on one connection.
//!
//! Why one: event cursors are handed out here, in commit order, so the log
//! stays dense and a reader following the watermark never skips an event
//! that commits late. Why grouped: a transaction costs the server a WAL
//! flush whatever its size, so N turns in one transaction pay it once.
//!
//! A group is all or none. If one of its batches is refused (a guard that
//! touched no row, a statement the database rejected), the transaction is
//! rolled back and the group split around it, as the sled store does: the
//! batches before it go again as a group of their own, the refused one is
//! answered with its refusal, and the rest follow. Each caller gets the
//! answer a commit of its own would have given at that point of the order.
//! A lost connection fails the whole group: its callers hear an error
//! (never OK without a commit), and the next group reconnects.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadpool_postgres::{Object, Pool};
use holarchy_actors::{Batch, StoreError};
use holarchy_supervision::{slot_of, EventCursor, Slot};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

use super::statements::{self, bigint, MessageRow, Refusal, Sql, Step};
use super::PgError;
use crate::store::codec::EventPlace;
use crate::store::event_log::{EncodedRun, Runs};
use crate::store::slots::{self, SlotSeqs};
use crate::store::stats::StoreStats;

/// At most this many batches in one transaction.
const MAX_GROUP: usize = 256;

/// How long a group waits for a new connection before its callers hear
/// that the database is unreachable.
const RECONNECT_WAIT: Duration = Duration::from_secs(1);

/// Where a caller hears how its batch fared.
#[derive(Debug)]
pub(crate) enum Answer {
    /// An async caller ([`holarchy_actors::Store::commit_grouped`]).
    Waiting(oneshot::Sender<Result<(), StoreError>>),
    /// A caller blocking its thread ([`holarchy_actors::Store::commit`]).
    Blocking(std::sync::mpsc::SyncSender<Result<(), StoreError>>),
}

impl Answer {
    fn send(self, outcome: Result<(), StoreError>) {
        // A caller that stopped waiting needs no answer.
        match self {
            Answer::Waiting(tx) => {
                let _ = tx.send(outcome);
            }
            Answer::Blocking(tx) => {
                let _ = tx.send(outcome);
            }
        }
    }
}

/// An audit entry as its table holds it: id and encoded value.
pub(crate) type AuditRow = (Vec<u8>, Vec<u8>);

#[derive(Debug)]
pub(crate) enum Job {
    Commit {
        batch: Batch,
        answer: Answer,
        /// When the caller handed it over.
        queued: Instant,
    },
    /// Audit entries, written in the next group's transaction: one
    /// transaction of their own per call cost the database a WAL flush
    /// each, beside the committer's.
    Audit {
        rows: Vec<AuditRow>,
        answer: Answer,
        queued: Instant,
    },
    /// Commit what is queued, then stop.
    Stop(oneshot::Sender<()>),
}

/// The committer's statements, prepared on its connection.
#[derive(Debug)]
pub(crate) struct Prepared(Vec<Statement>);

impl Prepared {
    pub async fn new(client: &Client) -> Result<Self, tokio_postgres::Error> {
        let mut statements = Vec::with_capacity(Sql::ALL.len());
        for sql in Sql::ALL {
            statements.push(client.prepare(sql.text()).await?);
        }
        Ok(Self(statements))
    }

    fn get(&self, sql: Sql) -> &Statement {
        // `ALL` lists every variant once, in declaration order.
        &self.0[sql as usize]
    }
}

/// The newest cursor in the log, or the last the retention removed; 0
/// when it is empty.
pub(crate) async fn last_cursor(client: &Client) -> Result<EventCursor, PgError> {
    let row = client
        .query_one(
            "SELECT greatest(coalesce(max(last), 0), \
             coalesce((SELECT seq FROM event_floors WHERE slot = -1), 0)) FROM events",
            &[],
        )
        .await?;
    let last: i64 = row.get(0);
    Ok(u64::try_from(last).unwrap_or(0))
}

/// A batch ready to run: its statements built once, whatever group it
/// lands in.
struct Ready {
    batch: Batch,
    steps: Vec<Step>,
    audit: Vec<AuditRow>,
    answer: Answer,
    at_ms: u64,
    queued: Instant,
}

/// How one try of a group went.
enum Outcome {
    Applied,
    /// Batch `at` of the group was refused (or rejected by the database).
    Refused {
        at: usize,
        error: StoreError,
    },
    /// The connection failed: nothing is known to have committed.
    Lost(String),
}

#[derive(Debug)]
pub(crate) struct Committer {
    client: Option<Object>,
    prepared: Prepared,
    pool: Pool,
    /// The newest committed cursor.
    last: EventCursor,
    /// Each slot's last committed event number.
    seqs: SlotSeqs,
    watermark: watch::Sender<EventCursor>,
    stats: Arc<StoreStats>,
    /// Set at the first lost connection: the daemon then stops serving
    /// and opens the store again, as after a crash (see `PgStore::failed`).
    failure: watch::Sender<Option<String>>,
}

impl Committer {
    pub fn new(
        client: Object,
        prepared: Prepared,
        pool: Pool,
        (last, seqs): (EventCursor, SlotSeqs),
        watermark: watch::Sender<EventCursor>,
        stats: Arc<StoreStats>,
        failure: watch::Sender<Option<String>>,
    ) -> Self {
        Self {
            client: Some(client),
            prepared,
            pool,
            last,
            seqs,
            watermark,
            stats,
            failure,
        }
    }

    /// A working connection, reconnecting (and re-reading the log's end,
    /// as a lost commit's outcome is unknown) if the last one failed.
    async fn connection(&mut self) -> Result<(), PgError> {
        if self.client.as_ref().is_some_and(|c| !c.is_closed()) {
            return Ok(());
        }
        self.client = None;
        let client = tokio::time::timeout(RECONNECT_WAIT, self.pool.get())
            .await
            .map_err(|_| PgError::Unreachable(RECONNECT_WAIT))?
            .map_err(|err| PgError::Pool(err.to_string()))?;
        self.prepared = Prepared::new(&client).await?;
        self.last = last_cursor(&client).await?;
        self.seqs = slot_seqs(&client).await?;
        self.watermark.send_replace(self.last);
        self.client = Some(client);
        Ok(())
    }

    /// Applies `jobs` in order, in as few transactions as their refusals
    /// allow, and answers each.
    async fn apply_all(&mut self, jobs: Vec<Queued>) {
        let mut rest = VecDeque::with_capacity(jobs.len());
        for Queued {
            batch,
            audit,
            answer,
            queued,
        } in jobs
        {
            match statements::batch_steps(&batch.writes) {
                Ok(steps) => rest.push_back(Ready {
                    batch,
                    steps,
                    audit,
                    answer,
                    at_ms: holarchy_actors::now_ms(),
                    queued,
                }),
                Err(err) => answer.send(Err(err)),
            }
        }
        let mut limit = rest.len();
        while !rest.is_empty() {
            if let Err(err) = self.connection().await {
                let why = err.to_string();
                self.fail(&why);
                for ready in rest.drain(..) {
                    ready.answer.send(Err(StoreError::Backend(why.clone())));
                }
                return;
            }
            let group: Vec<&Ready> = rest.iter().take(limit).collect();
            let began = Instant::now();
            match self.try_group(&group).await {
                Outcome::Applied => {
                    // A transaction is the database's flush: one WAL flush
                    // makes the whole group durable.
                    let took = began.elapsed();
                    self.stats.record_flush(took, limit);
                    let share = took / u32::try_from(limit).unwrap_or(u32::MAX).max(1);
                    for ready in rest.drain(..limit) {
                        self.stats.record_commit(Duration::ZERO, share);
                        self.stats.record_waits(ready.queued.elapsed(), 1);
                        ready.answer.send(Ok(()));
                    }
                    limit = rest.len();
                }
                Outcome::Refused { at: 0, error } => {
                    if let Some(ready) = rest.pop_front() {
                        ready.answer.send(Err(error));
                    }
                    limit = rest.len();
                }
                Outcome::Refused { at, .. } => limit = at,
                Outcome::Lost(why) => {
                    tracing::warn!(error = %why, batches = limit, "a commit to PostgreSQL failed");
                    self.fail(&why);
                    self.client = None;
                    for ready in rest.drain(..limit) {
                        ready.answer.send(Err(StoreError::Backend(why.clone())));
                    }
                    limit = rest.len();
                }
            }
        }
    }

    /// Tells the daemon, once, that commits stopped landing.
    fn fail(&self, why: &str) {
        self.failure.send_if_modified(|failure| {
            let first = failure.is_none();
            if first {
                *failure = Some(why.to_owned());
            }
            first
        });
    }

    /// One transaction over `group`, its statements pipelined.
    async fn try_group(&mut self, group: &[&Ready]) -> Outcome {
        let mut taken = Vec::new();
        let outcome = self.run_group(group, &mut taken).await;
        if !matches!(outcome, Outcome::Applied) {
            // Nothing was taken since: the committer is the one writer.
            self.seqs.give_back(&taken);
        }
        outcome
    }

    /// [`Committer::try_group`]'s transaction; the slots whose numbers
    /// it took go in `taken`, given back unless it applied.
    async fn run_group(&mut self, group: &[&Ready], taken: &mut Vec<Slot>) -> Outcome {
        let Some(client) = self.client.as_mut() else {
            return Outcome::Lost("no connection to PostgreSQL".into());
        };
        let tx = match client.transaction().await {
            Ok(tx) => tx,
            Err(err) => return Outcome::Lost(format!("PostgreSQL: {err}")),
        };
        // The group's events as a few runs of consecutive cursors (as the
        // sled store writes a flush's), inserted by one statement: one row
        // per batch cost the database a statement and an index entry each.
        // By slot, one run per slot (see `slots`): the table keys runs by
        // slot and number.
        let mut cursor = self.last;
        let mut runs = Runs::per_slot();
        let first_with_events = group
            .iter()
            .position(|ready| !ready.batch.events.is_empty());
        for (at, (agent_id, kind)) in
            slots::log_order(group.iter().map(|r| r.batch.events.as_slice()))
        {
            cursor += 1;
            let slot = slot_of(*agent_id);
            taken.push(slot);
            let place = EventPlace {
                cursor,
                seq: self.seqs.take(slot),
            };
            if let Err(error) = runs.push(place, group[at].at_ms, agent_id, kind) {
                return Outcome::Refused { at, error };
            }
        }
        let runs = RunColumns::new(runs.finish(), cursor);
        let prepared = &self.prepared;
        // A requeue reads the message row an earlier upsert wrote, so a
        // group with one keeps every statement in its place.
        let merge = !group
            .iter()
            .any(|ready| ready.steps.iter().any(|step| step.sql == Sql::Requeue));
        let mut messages = MessageColumns::default();
        let mut audit = AuditColumns::default();
        let mut calls = Vec::new();
        for (at, ready) in group.iter().enumerate() {
            for row in &ready.audit {
                audit.push(at, row);
            }
            for step in &ready.steps {
                let params: Vec<&(dyn ToSql + Sync)> = match &step.message {
                    Some(row) if merge => {
                        messages.push(at, row);
                        continue;
                    }
                    Some(row) => row.params(),
                    None => step
                        .params
                        .iter()
                        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
                        .collect(),
                };
                calls.push((at, step.guard.as_ref(), params, prepared.get(step.sql)));
            }
        }
        if let Some(at) = messages.blame.blamed() {
            calls.push((
                at,
                None,
                messages.params(),
                prepared.get(Sql::UpsertMessages),
            ));
        }
        if let Some(at) = audit.blame.blamed() {
            calls.push((at, None, audit.params(), prepared.get(Sql::UpsertAudit)));
        }
        if let Some(at) = first_with_events {
            // Blamed on the first batch with events: only a log another
            // writer touched makes it fail, and the split then goes on
            // batch by batch.
            calls.push((at, None, runs.params(), prepared.get(Sql::InsertEvents)));
        }
        let outcomes = futures::future::join_all(
            calls
                .iter()
                .map(|(_, _, params, statement)| tx.execute(*statement, params)),
        )
        .await;
        let mut refused: Option<(usize, StoreError)> = None;
        for ((at, guard, _, _), outcome) in calls.iter().zip(outcomes) {
            match outcome {
                Ok(rows) => {
                    if let Some(refusal) = guard {
                        if rows != 1 {
                            refused = Some((*at, StoreError::from(Refusal::clone(refusal))));
                            break;
                        }
                    }
                }
                Err(err) if err.as_db_error().is_some() => {
                    refused = Some((*at, super::backend(err)));
                    break;
                }
                Err(err) => return Outcome::Lost(format!("PostgreSQL: {err}")),
            }
        }
        if let Some((at, error)) = refused {
            if let Err(err) = tx.rollback().await {
                return Outcome::Lost(format!("PostgreSQL: {err}"));
            }
            return Outcome::Refused { at, error };
        }
        if let Err(err) = tx.commit().await {
            return Outcome::Lost(format!("PostgreSQL: {err}"));
        }
        self.last = cursor;
        self.watermark.send_replace(cursor);
        Outcome::Applied
    }
}

/// A group's message rows as the columns of one upsert: the last write of
/// each message, as the statements one by one would have left it.
#[derive(Default)]
struct MessageColumns<'a> {
    agent_ids: Vec<&'a [u8]>,
    ids: Vec<&'a [u8]>,
    pending: Vec<bool>,
    handling: Vec<bool>,
    values: Vec<&'a [u8]>,
    /// Where each message's row is in the columns.
    index: std::collections::HashMap<(&'a [u8], &'a [u8]), usize>,
    blame: Blame,
}

impl<'a> MessageColumns<'a> {
    fn push(&mut self, at: usize, row: &'a MessageRow) {
        let key = (row.agent_id.as_slice(), row.id.as_slice());
        match self.index.get(&key) {
            Some(&i) => {
                self.pending[i] = row.pending;
                self.handling[i] = row.handling;
                self.values[i] = &row.value;
            }
            None => {
                self.index.insert(key, self.agent_ids.len());
                self.agent_ids.push(key.0);
                self.ids.push(key.1);
                self.pending.push(row.pending);
                self.handling.push(row.handling);
                self.values.push(&row.value);
            }
        }
        self.blame.saw(at);
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.agent_ids,
            &self.ids,
            &self.pending,
            &self.handling,
            &self.values,
        ]
    }
}

/// Which batches a statement of many batches' rows holds rows of.
#[derive(Default)]
struct Blame {
    /// The first and last batch with a row.
    batches: Option<(usize, usize)>,
}

impl Blame {
    fn saw(&mut self, at: usize) {
        let first = self.batches.map_or(at, |(first, _)| first);
        self.batches = Some((first, at));
    }

    /// The batch a failure of the statement is blamed on, if it has rows.
    /// Rows of several batches are never blamed on the first: it is only
    /// answered with an error after it ran alone (the split at 1 retries
    /// it so), since the culprit may be any of them.
    fn blamed(&self) -> Option<usize> {
        let (first, last) = self.batches?;
        Some(if first == last || first > 0 { first } else { 1 })
    }
}

/// A group's audit entries as the columns of one upsert, the last write
/// of each entry (an upsert may touch a row once).
#[derive(Default)]
struct AuditColumns<'a> {
    ids: Vec<&'a [u8]>,
    values: Vec<&'a [u8]>,
    index: std::collections::HashMap<&'a [u8], usize>,
    blame: Blame,
}

impl<'a> AuditColumns<'a> {
    fn push(&mut self, at: usize, (id, value): &'a AuditRow) {
        match self.index.get(id.as_slice()) {
            Some(&i) => self.values[i] = value,
            None => {
                self.index.insert(id, self.ids.len());
                self.ids.push(id);
                self.values.push(value);
            }
        }
        self.blame.saw(at);
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![&self.ids, &self.values]
    }
}

/// The columns of the events rows, as arrays: each run's first and last
/// cursor, its slot and first number, and its value. A run ends where the
/// next begins; the last ends at the group's newest cursor.
struct RunColumns {
    firsts: Vec<i64>,
    lasts: Vec<i64>,
    slots: Vec<i16>,
    seqs: Vec<i64>,
    values: Vec<Vec<u8>>,
}

impl RunColumns {
    fn new(runs: Vec<EncodedRun>, last: EventCursor) -> Self {
        let lasts = runs
            .iter()
            .skip(1)
            .map(|next| next.first - 1)
            .chain(std::iter::once(last))
            .map(bigint)
            .take(runs.len())
            .collect();
        Self {
            firsts: runs.iter().map(|run| bigint(run.first)).collect(),
            lasts,
            slots: runs.iter().map(|run| slot_column(run.slot)).collect(),
            seqs: runs.iter().map(|run| bigint(run.seq)).collect(),
            values: runs.into_iter().map(|run| run.value).collect(),
        }
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.firsts,
            &self.lasts,
            &self.slots,
            &self.seqs,
            &self.values,
        ]
    }
}

/// A slot as its column holds it (`smallint`: slots are below 1024).
pub(crate) fn slot_column(slot: Slot) -> i16 {
    i16::try_from(slot.get()).unwrap_or(i16::MAX)
}

/// Each slot's last event number, its rows' or the retention's floor:
/// one index probe per slot.
pub(crate) async fn slot_seqs(client: &Client) -> Result<SlotSeqs, PgError> {
    let rows = client
        .query(
            "SELECT greatest(coalesce((SELECT e.seq + (e.last - e.first) FROM events e \
                     WHERE e.slot = s.n ORDER BY e.seq DESC LIMIT 1), 0), \
                     coalesce((SELECT f.seq FROM event_floors f WHERE f.slot = s.n), 0)) \
             FROM generate_series(0, $1::int4 - 1) AS s(n) ORDER BY s.n",
            &[&i32::from(Slot::COUNT)],
        )
        .await?;
    let lasts = rows
        .iter()
        .map(|row| {
            let last: i64 = row.try_get(0)?;
            Ok(u64::try_from(last).unwrap_or(0))
        })
        .collect::<Result<Vec<u64>, tokio_postgres::Error>>()?;
    SlotSeqs::from_lasts(lasts).ok_or(PgError::Unexpected("a last number for every slot"))
}

/// A job to commit, as taken from the queue.
struct Queued {
    batch: Batch,
    audit: Vec<AuditRow>,
    answer: Answer,
    queued: Instant,
}

/// Takes jobs until stopped, each group what queued while the last ran.
pub(crate) async fn run(mut committer: Committer, mut queue: mpsc::UnboundedReceiver<Job>) {
    let mut stopped = None;
    while let Some(job) = queue.recv().await {
        let mut jobs = Vec::new();
        let mut next = Some(job);
        while let Some(job) = next.take() {
            match job {
                Job::Commit {
                    batch,
                    answer,
                    queued,
                } => jobs.push(Queued {
                    batch,
                    audit: Vec::new(),
                    answer,
                    queued,
                }),
                Job::Audit {
                    rows,
                    answer,
                    queued,
                } => jobs.push(Queued {
                    batch: Batch::default(),
                    audit: rows,
                    answer,
                    queued,
                }),
                Job::Stop(done) => stopped = Some(done),
            }
            if jobs.len() < MAX_GROUP {
                next = queue.try_recv().ok();
            }
        }
        if stopped.is_some() {
            // Nothing new is taken; what is queued still lands.
            queue.close();
        }
        committer.apply_all(jobs).await;
        if stopped.is_some() && queue.is_empty() {
            break;
        }
    }
    if let Some(done) = stopped {
        let _ = done.send(());
    }
}
