//! [`PgStore`]: the actors' store on PostgreSQL, for a daemon whose data
//! must outlive its machine (docs/storage.md).
//!
//! The store keeps a small tokio runtime of its own that drives every
//! connection. The actors' reads are synchronous (the `Store` trait, which
//! sled answers from memory or a page read): a read hands its query to
//! that runtime and blocks its caller's thread until the answer, as a sled
//! read blocks on a page fault. It never runs on the caller's runtime, so a
//! caller on a single-threaded runtime cannot starve it.
//!
//! Every commit goes through one committer ([`committer`]) on a connection
//! of its own: batches queued meanwhile land in one transaction, their
//! statements pipelined, and event cursors are handed out in commit order,
//! which keeps the log dense. Transactions commit synchronously
//! (`synchronous_commit` as the server has it, on by default): a commit
//! that answered is durable, so [`Store::durable`] has nothing left to wait
//! for.
//!
//! - [`schema`]: tables and versioned migrations.
//! - [`statements`]: each `Write` as SQL, with the guards that refuse a batch.
//! - [`committer`]: grouped, pipelined transactions.
//! - [`reads`]: the `Store` trait's reads.
//! - [`side`]: the stores outside batches (instances, inbound events,
//!   approvals, context).
//! - [`memory`]: agents' notes, and the full-text search over their
//!   memory.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use holarchy_actors::{Batch, CommitFuture, DurableFuture, Reads, Store, StoreError};
use holarchy_supervision::EventCursor;
use tokio::sync::{mpsc, oneshot, watch};

use super::stats::StoreStats;

mod access;
mod committer;
pub mod import;
mod memory;
mod reads;
mod replays;
mod retention;
pub mod schema;
mod side;
mod statements;
mod turn_inputs;
mod views;

/// Why the database could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error("PostgreSQL: {0}")]
    Database(#[from] tokio_postgres::Error),
    #[error("no connection to PostgreSQL: {0}")]
    Pool(String),
    #[error(
        "PostgreSQL did not answer within {0:?}: check that the server named by --store is up"
    )]
    Unreachable(std::time::Duration),
    #[error(
        "the database's schema is version {found}, newer than this build knows ({known}): \
         run the newer holarchy, or restore a backup taken before it migrated"
    )]
    NewerSchema { found: i32, known: i32 },
    #[error("{0}")]
    Settings(String),
    #[error("PostgreSQL answered unexpectedly: expected {0}")]
    Unexpected(&'static str),
    #[error("the store's runtime could not start: {0}")]
    Runtime(#[from] std::io::Error),
}

impl From<PgError> for StoreError {
    fn from(err: PgError) -> Self {
        StoreError::Backend(err.to_string())
    }
}

/// The connection settings of `url` (a URL or key=value string), with
/// `password`. A password written into `url` is refused: it would show in
/// the process list, the shell's history and the logs.
pub fn database(url: &str, password: Option<String>) -> Result<tokio_postgres::Config, PgError> {
    let mut config: tokio_postgres::Config = url.parse().map_err(|err| {
        PgError::Settings(format!(
            "--store is not a PostgreSQL connection string: {err}"
        ))
    })?;
    if config.get_password().is_some() {
        return Err(PgError::Settings(
            "--store holds a password: give it with --store-password-file or HOLARCHY_STORE_PASSWORD instead".into(),
        ));
    }
    if let Some(password) = password {
        config.password(password);
    }
    if config.get_application_name().is_none() {
        config.application_name("holarchy");
    }
    Ok(config)
}

/// A database error as the actors see it.
pub(crate) fn backend(err: tokio_postgres::Error) -> StoreError {
    StoreError::Backend(format!("PostgreSQL: {err}"))
}

/// `PostgreSQL <host>:<port>/<database> as <user>`, each part as the
/// settings give it (a socket's directory for its host).
fn describe(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        Some(tokio_postgres::config::Host::Unix(dir)) => dir.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("(the login role)");
    let database = config.get_dbname().unwrap_or(user);
    format!("PostgreSQL {host}:{port}/{database} as {user}")
}

/// Connections the store's reads share; the committer holds one more,
/// and the memory follower takes one more while it works.
const READ_CONNECTIONS: usize = 4;

/// The actors' store on PostgreSQL.
#[derive(Debug)]
pub struct PgStore {
    /// Drives every connection; shut down in the background on drop, as a
    /// runtime may not be dropped inside another one's task.
    runtime: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
    pool: Pool,
    committer: mpsc::UnboundedSender<committer::Job>,
    /// The committer's task, awaited by [`PgStore::close`].
    committing: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    watermark: watch::Receiver<EventCursor>,
    stats: Arc<StoreStats>,
    failure: watch::Receiver<Option<String>>,
    agent_ends: AtomicU64,
    /// Brings handled messages and tool calls into the memory search;
    /// stopped by [`PgStore::close`].
    following: std::sync::Mutex<Option<memory::Following>>,
    /// See [`PgStore::describe`].
    described: String,
}

impl PgStore {
    /// Connects to the database `config` names, migrates its schema, and
    /// starts the committer. May be called from any thread, inside a
    /// runtime or not.
    pub fn open(config: tokio_postgres::Config) -> Result<Self, PgError> {
        let described = describe(&config);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("holarchy-pg")
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let manager = Manager::from_config(
            config,
            tokio_postgres::NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(READ_CONNECTIONS + 2)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|err| PgError::Pool(err.to_string()))?;
        let started = {
            let pool = pool.clone();
            block(&handle, async move {
                let mut client = pool.get().await.map_err(|e| PgError::Pool(e.to_string()))?;
                schema::migrate(&mut client).await?;
                turn_inputs::sweep_shared(&client).await?;
                let last = committer::last_cursor(&client).await?;
                let seqs = committer::slot_seqs(&client).await?;
                let prepared = committer::Prepared::new(&client).await?;
                Ok::<_, PgError>((client, (last, seqs), prepared))
            })
        };
        let (client, last, prepared) =
            started.ok_or(PgError::Pool("the runtime stopped".into()))??;
        let (watermark_tx, watermark) = watch::channel(last.0);
        let stats = Arc::new(StoreStats::default());
        let (jobs, queue) = mpsc::unbounded_channel();
        let (failure_tx, failure) = watch::channel(None);
        let committing = handle.spawn(committer::run(
            committer::Committer::new(
                client,
                prepared,
                pool.clone(),
                last,
                watermark_tx,
                stats.clone(),
                failure_tx,
            ),
            queue,
        ));
        let following = memory::Following::start(&handle, pool.clone(), watermark.clone());
        Ok(Self {
            runtime: Some(runtime),
            handle,
            pool,
            committer: jobs,
            committing: std::sync::Mutex::new(Some(committing)),
            watermark,
            stats,
            failure,
            agent_ends: AtomicU64::new(0),
            following: std::sync::Mutex::new(Some(following)),
            described,
        })
    }

    /// Resolves with the reason once a commit lost its connection to the
    /// database: what it committed is unknown to this process, so the
    /// daemon stops serving and opens the store again (reading what the
    /// database holds, as after a crash) once the database answers.
    pub async fn failed(&self) -> String {
        let mut failure = self.failure.clone();
        let why = match failure.wait_for(Option::is_some).await {
            Ok(why) => why.clone(),
            Err(_) => None,
        };
        match why {
            Some(why) => why,
            None => std::future::pending().await,
        }
    }

    /// Stops taking commits and waits for those queued to land; the last
    /// step of a shutdown.
    pub async fn close(&self) {
        let task = self
            .committing
            .lock()
            .map(|mut task| task.take())
            .unwrap_or(None);
        let (stopped, done) = oneshot::channel();
        if self.committer.send(committer::Job::Stop(stopped)).is_ok() {
            let _ = done.await;
        }
        if let Some(task) = task {
            let _ = task.await;
        }
        let following = self
            .following
            .lock()
            .map(|mut following| following.take())
            .unwrap_or(None);
        if let Some(following) = following {
            following.stop().await;
        }
        self.pool.close();
    }

    /// Transactions (each the database's flush) and batches committed
    /// since the store opened.
    pub fn work_done(&self) -> (u64, u64) {
        (self.stats.flushes(), self.stats.commits())
    }

    /// Adds the commit path's histograms to `registry`, under the names
    /// the sled store gives them.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.stats.register(registry);
    }

    /// The cursor of the newest committed event, as it moves.
    pub fn event_watermark(&self) -> watch::Receiver<EventCursor> {
        self.watermark.clone()
    }

    /// Committed events after `cursor`, oldest first.
    /// Removes up to `limit` runs of the oldest events, all made before
    /// `before_ms`, never the newest: the log's retention. How many
    /// events went.
    pub fn trim_events(&self, before_ms: u64, limit: usize) -> Result<u64, StoreError> {
        retention::trim(self, before_ms, limit)
    }

    pub fn events_after(
        &self,
        cursor: EventCursor,
        limit: usize,
    ) -> Result<Vec<holarchy_supervision::Event>, StoreError> {
        let upto = *self.watermark.borrow();
        reads::events_after(self, cursor, upto, limit)
    }

    /// One page of agents after `after`, in id (creation) order.
    pub fn list_agents(
        &self,
        after: Option<holarchy_supervision::AgentId>,
        limit: usize,
        include_private: bool,
    ) -> Result<Vec<holarchy_supervision::AgentRecord>, StoreError> {
        reads::list_agents(self, after, limit, include_private)
    }

    /// Up to `limit` agent names starting with `prefix`, in name order.
    pub fn names_from(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, holarchy_supervision::AgentId)>, StoreError> {
        reads::names_from(self, prefix, limit)
    }

    /// The tokens the agent's turns spent, summed.
    pub fn usage_of(
        &self,
        agent_id: holarchy_supervision::AgentId,
    ) -> Result<Option<holarchy_supervision::UsageTotals>, StoreError> {
        reads::usage_of(self, agent_id)
    }

    /// Bytes the database takes on disk (every table, this daemon's or
    /// not: the database is the unit an operator sizes).
    pub fn size_on_disk(&self) -> u64 {
        self.call(|client| async move {
            let row = client
                .query_one("SELECT pg_database_size(current_database())", &[])
                .await
                .map_err(backend)?;
            Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
        })
        .unwrap_or(0)
    }

    /// Bytes the database holds for `agent` (as stored, before the
    /// table's own overhead): its record, messages, notes, context, and
    /// its commands' records and output. One statement.
    pub fn agent_bytes(&self, agent: holarchy_supervision::AgentId) -> Result<u64, StoreError> {
        let id = agent.to_bytes().to_vec();
        self.call(move |client| async move {
            let row = client
                .query_one(
                    "SELECT \
                       COALESCE((SELECT sum(octet_length(value)) FROM agents WHERE id = $1), 0) \
                     + COALESCE((SELECT sum(octet_length(value)) FROM messages WHERE agent_id = $1), 0) \
                     + COALESCE((SELECT sum(octet_length(value)) FROM notes WHERE agent_id = $1), 0) \
                     + COALESCE((SELECT sum(octet_length(value)) FROM context WHERE agent_id = $1), 0) \
                     + COALESCE((SELECT sum(octet_length(value)) FROM tasks WHERE owner = $1), 0) \
                     + COALESCE((SELECT sum(octet_length(o.value)) FROM output o \
                                 JOIN tasks t ON o.task_id = t.id WHERE t.owner = $1), 0)",
                    &[&id],
                )
                .await
                .map_err(backend)?;
            // `sum` of integers is a bigint: no numeric to decode.
            let bytes: i64 = row.try_get(0).map_err(backend)?;
            Ok(u64::try_from(bytes).unwrap_or(0))
        })
    }

    /// Where the database is, for an operator: its host, port, name and
    /// role, never its password.
    pub fn describe(&self) -> String {
        self.described.clone()
    }

    /// Runs `work` on a pooled connection on the store's runtime and
    /// blocks until it answers.
    pub(super) fn call<T, F, Fut>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(Object) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        let pool = self.pool.clone();
        block(&self.handle, async move {
            let client = pool.get().await.map_err(|err| {
                StoreError::Backend(format!("no connection to PostgreSQL: {err}"))
            })?;
            work(client).await
        })
        .unwrap_or(Err(StoreError::Closed))
    }

    /// Runs one statement in a transaction of its own; the rows it
    /// touched.
    pub(super) fn execute(
        &self,
        sql: &'static str,
        params: Vec<statements::Param>,
    ) -> Result<u64, StoreError> {
        self.call(move |client| async move {
            let statement = client.prepare_cached(sql).await.map_err(backend)?;
            let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
                .iter()
                .map(|p| p.as_ref() as &(dyn tokio_postgres::types::ToSql + Sync))
                .collect();
            client.execute(&statement, &refs).await.map_err(backend)
        })
    }

    fn count_an_end(&self, batch: &Batch) {
        if batch.may_end_an_agent() {
            self.agent_ends.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Queues audit entries for the next group's transaction.
    pub(crate) fn send_audit(&self, rows: Vec<committer::AuditRow>, answer: committer::Answer) {
        let _ = self.committer.send(committer::Job::Audit {
            rows,
            answer,
            queued: std::time::Instant::now(),
        });
    }

    /// Queues `batch`; a closed committer drops `answer`, which tells
    /// its receiver.
    fn send(&self, batch: Batch, answer: committer::Answer) {
        let _ = self.committer.send(committer::Job::Commit {
            batch,
            answer,
            queued: std::time::Instant::now(),
        });
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Runs `work` on the store's runtime and blocks the calling thread until
/// it ends; `None` if the runtime stopped first.
fn block<T: Send + 'static>(
    handle: &tokio::runtime::Handle,
    work: impl Future<Output = T> + Send + 'static,
) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    handle.spawn(async move {
        let _ = tx.send(work.await);
    });
    rx.recv().ok()
}

impl Reads for PgStore {
    fn agent(
        &self,
        id: holarchy_supervision::AgentId,
    ) -> Result<Option<holarchy_supervision::AgentRecord>, StoreError> {
        reads::agent(self, id)
    }

    fn agent_id_by_name(
        &self,
        name: &str,
    ) -> Result<Option<holarchy_supervision::AgentId>, StoreError> {
        reads::agent_id_by_name(self, name)
    }

    fn message(
        &self,
        agent_id: holarchy_supervision::AgentId,
        id: holarchy_supervision::MessageId,
    ) -> Result<Option<holarchy_supervision::MessageRecord>, StoreError> {
        reads::message(self, agent_id, id)
    }

    fn message_id_by_dedupe_key(
        &self,
        agent_id: holarchy_supervision::AgentId,
        key: &str,
    ) -> Result<Option<holarchy_supervision::MessageId>, StoreError> {
        reads::message_id_by_dedupe_key(self, agent_id, key)
    }

    fn list_messages(
        &self,
        agent_id: holarchy_supervision::AgentId,
        after: Option<holarchy_supervision::MessageId>,
        limit: usize,
    ) -> Result<Vec<holarchy_supervision::MessageRecord>, StoreError> {
        reads::list_messages(self, agent_id, after, limit)
    }

    fn last_settled_messages(
        &self,
        agent_id: holarchy_supervision::AgentId,
        limit: usize,
    ) -> Result<Vec<holarchy_supervision::MessageRecord>, StoreError> {
        reads::last_settled_messages(self, agent_id, limit)
    }

    fn last_run_starts(
        &self,
        agent_id: holarchy_supervision::AgentId,
        scan: usize,
    ) -> Result<Vec<u64>, StoreError> {
        reads::last_run_starts(self, agent_id, scan)
    }

    fn pending_messages(
        &self,
        agent_id: holarchy_supervision::AgentId,
    ) -> Result<Vec<holarchy_supervision::MessageRecord>, StoreError> {
        reads::pending_messages(self, agent_id)
    }

    fn recovery_input(&self) -> Result<holarchy_actors::store::RecoveryInput, StoreError> {
        reads::recovery_input(self)
    }

    fn task(
        &self,
        id: holarchy_supervision::TaskId,
    ) -> Result<Option<holarchy_supervision::TaskRecord>, StoreError> {
        reads::task(self, id)
    }

    fn workspaces(
        &self,
        agent_id: holarchy_supervision::AgentId,
    ) -> Result<Option<holarchy_supervision::workspace::Projection>, StoreError> {
        reads::workspaces(self, agent_id)
    }

    fn worktree_tasks(&self) -> Result<Vec<holarchy_supervision::TaskRecord>, StoreError> {
        reads::worktree_tasks(self)
    }

    fn tasks_of(
        &self,
        owner: holarchy_supervision::AgentId,
    ) -> Result<Vec<holarchy_supervision::TaskRecord>, StoreError> {
        reads::tasks_of(self, owner)
    }

    fn children_of(
        &self,
        supervisor: holarchy_supervision::AgentId,
    ) -> Result<Vec<holarchy_supervision::AgentId>, StoreError> {
        reads::children_of(self, supervisor)
    }

    fn public_agent_ids(&self) -> Result<Vec<holarchy_supervision::AgentId>, StoreError> {
        reads::public_agent_ids(self)
    }

    fn wait(
        &self,
        id: holarchy_supervision::WaitId,
    ) -> Result<Option<holarchy_supervision::WaitRecord>, StoreError> {
        reads::wait(self, id)
    }

    fn waits_of(
        &self,
        owner: holarchy_supervision::AgentId,
    ) -> Result<Vec<holarchy_supervision::WaitRecord>, StoreError> {
        reads::waits_of(self, owner)
    }

    fn wait_by_token_hash(
        &self,
        token_hash: &[u8; 32],
    ) -> Result<Option<holarchy_supervision::WaitId>, StoreError> {
        reads::wait_by_token_hash(self, *token_hash)
    }

    fn work_item(
        &self,
        id: holarchy_supervision::WorkItemId,
    ) -> Result<Option<holarchy_supervision::WorkItemRecord>, StoreError> {
        reads::work_item(self, id)
    }

    fn output_after(
        &self,
        task_id: holarchy_supervision::TaskId,
        offset: u64,
        max_bytes: usize,
    ) -> Result<Vec<holarchy_supervision::OutputChunk>, StoreError> {
        reads::output_after(self, task_id, offset, max_bytes)
    }

    fn work_items_of(
        &self,
        owner: holarchy_supervision::AgentId,
    ) -> Result<Vec<holarchy_supervision::WorkItemRecord>, StoreError> {
        reads::work_items_of(self, owner)
    }
}

impl Store for PgStore {
    fn commit(&self, batch: Batch) -> Result<(), StoreError> {
        self.count_an_end(&batch);
        // A std channel: the caller may be a runtime's worker, where
        // tokio's blocking receive would panic.
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        self.send(batch, committer::Answer::Blocking(answer));
        answered.recv().unwrap_or(Err(StoreError::Closed))
    }

    fn durable(&self) -> DurableFuture {
        // Every commit that answered was committed synchronously.
        Box::pin(std::future::ready(Ok(())))
    }

    fn agent_ends(&self) -> u64 {
        self.agent_ends.load(Ordering::SeqCst)
    }

    fn commit_grouped(&self, batch: Batch) -> CommitFuture {
        self.count_an_end(&batch);
        let (answer, answered) = oneshot::channel();
        self.send(batch, committer::Answer::Waiting(answer));
        Box::pin(async move {
            answered.await.unwrap_or(Err(StoreError::Closed))?;
            Ok(Box::pin(std::future::ready(Ok(()))) as DurableFuture)
        })
    }
}
