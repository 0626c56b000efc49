//! How the suite opens, crashes and reopens one kind of store.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use holarchy::api::read_model::ReadModel;
use holarchy::store::sled_store::StoreConfig;
use holarchy::store::{PgStore, SledStore};
use holarchy_actors::{MemoryHit, MemoryKind, Store, StoreError};
use holarchy_supervision::AgentId;

/// One kind of store, as the suite drives it.
pub trait Harness: Sized + Send + 'static {
    type Store: Store + ReadModel + holarchy::replay::store::ReplayStore;
    /// Where one store's data lives; dropping it removes the data.
    type Place: Send + Sync;

    /// A new, empty store.
    fn create() -> impl Future<Output = (Self::Place, Arc<Self::Store>)> + Send;
    /// Stops `store` the way a daemon's shutdown does.
    fn close(store: Arc<Self::Store>) -> impl Future<Output = ()> + Send;
    /// Drops `store` without closing it: what survives is what a crash of
    /// the process would leave, and `place` now names that.
    fn crash(place: &mut Self::Place, store: Arc<Self::Store>) -> impl Future<Output = ()> + Send;
    /// Opens the store at `place` again.
    fn reopen(place: &Self::Place) -> impl Future<Output = Arc<Self::Store>> + Send;
    /// The event log's retention: removes up to `limit` runs all made
    /// before `before_ms`.
    fn trim_events(store: &Self::Store, before_ms: u64, limit: usize) -> Result<u64, StoreError>;
    /// A memory search with a budget of the caller's choosing, as each
    /// store bounds one.
    fn search_within(
        store: &Self::Store,
        agent: AgentId,
        query: &str,
        kinds: &[MemoryKind],
        limit: usize,
        budget: Duration,
    ) -> Result<Vec<MemoryHit>, StoreError>;
}

/// The embedded store in a temporary directory.
#[derive(Debug)]
pub struct Sled;

/// A sled store's directory.
#[derive(Debug)]
pub struct SledPlace {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Harness for Sled {
    type Store = SledStore;
    type Place = SledPlace;

    async fn create() -> (SledPlace, Arc<SledStore>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("db");
        let store = SledStore::open(&path, &StoreConfig::default()).expect("a new store opens");
        (SledPlace { _dir: dir, path }, Arc::new(store))
    }

    async fn close(store: Arc<SledStore>) {
        store.close().await;
    }

    async fn crash(place: &mut SledPlace, store: Arc<SledStore>) {
        // The store's threads hold its directory until it closes; what a
        // killed process leaves is the files as they are now, copied
        // before the close could add to them.
        let image = place
            ._dir
            .path()
            .join(format!("crashed-{}", ulid::Ulid::new()));
        copy_dir(&place.path, &image);
        drop(store);
        place.path = image;
    }

    async fn reopen(place: &SledPlace) -> Arc<SledStore> {
        // sled's own threads let go of the directory's lock a moment after
        // the last handle goes.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match SledStore::open(&place.path, &StoreConfig::default()) {
                Ok(store) => return Arc::new(store),
                Err(err) if Instant::now() < deadline && err.to_string().contains("lock") => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(err) => panic!("the store reopens: {err}"),
            }
        }
    }

    fn trim_events(store: &SledStore, before_ms: u64, limit: usize) -> Result<u64, StoreError> {
        store.trim_events(before_ms, limit)
    }

    fn search_within(
        store: &SledStore,
        agent: AgentId,
        query: &str,
        kinds: &[MemoryKind],
        limit: usize,
        budget: Duration,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        store.search_memory_within(agent, query, kinds, limit, budget)
    }
}

/// A database of its own on the test server (`support::postgres`).
#[derive(Debug)]
pub struct Postgres;

impl Harness for Postgres {
    type Store = PgStore;
    type Place = crate::pg_server::Database;

    async fn create() -> (Self::Place, Arc<PgStore>) {
        let database = crate::pg_server::database()
            .await
            .expect("checked by the test before it ran");
        let store = PgStore::open(database.config.clone()).expect("the store opens");
        (database, Arc::new(store))
    }

    async fn close(store: Arc<PgStore>) {
        store.close().await;
    }

    async fn crash(_place: &mut Self::Place, store: Arc<PgStore>) {
        // Its runtime stops at once: connections drop mid-way, as a
        // killed process's would.
        drop(store);
    }

    async fn reopen(place: &Self::Place) -> Arc<PgStore> {
        Arc::new(PgStore::open(place.config.clone()).expect("the store reopens"))
    }

    fn trim_events(store: &PgStore, before_ms: u64, limit: usize) -> Result<u64, StoreError> {
        store.trim_events(before_ms, limit)
    }

    fn search_within(
        store: &PgStore,
        agent: AgentId,
        query: &str,
        kinds: &[MemoryKind],
        limit: usize,
        budget: Duration,
    ) -> Result<Vec<MemoryHit>, StoreError> {
        store.search_memory_within(agent, query, kinds, limit, budget)
    }
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("a crash image");
    for entry in std::fs::read_dir(from).expect("the store's directory") {
        let entry = entry.expect("an entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("a copy");
        }
    }
}
