//! `holarchy store copy`: moves a stopped daemon's embedded store into an
//! empty PostgreSQL database.
//!
//! The sled store is read on a thread of its own and handed over in
//! chunks through a small channel, so memory stays bounded whatever the
//! store's size; the database takes everything in one transaction (see
//! `postgres::import`), so a copy is all or nothing. The source is only
//! read: after a copy it is still a daemon's whole store, and stays the
//! way back until the operator removes it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use holarchy_actors::StoreError;
use tokio::sync::mpsc;

use super::dump::{Record, Table};
use super::postgres::import::{Chunk, ImportError};
use super::postgres::PgStore;
use super::sled_store::{SledStore, StoreConfig};

/// Records per chunk: a chunk of the largest records (messages of 64 KiB)
/// stays near 16 MiB.
const CHUNK: usize = 256;
/// Chunks read ahead of the database.
const AHEAD: usize = 2;

/// Why a copy did not happen; in each case nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error("there is no store at {0}: `--from` is the daemon's --data-dir, the directory that holds `db`")]
    NoStore(PathBuf),
    #[error("cannot open the store at {path}: {source} (stop the daemon serving from it first; `--from` is its --data-dir)")]
    Source { path: PathBuf, source: StoreError },
    #[error("the database already holds holarchy data (in {}): copy only into a new, empty database", .0.join(", "))]
    NotEmpty(Vec<&'static str>),
    #[error("reading the store: {0} (nothing was written to the database)")]
    Read(StoreError),
    #[error("writing the database: {0} (nothing was written: the copy is one transaction)")]
    Write(StoreError),
}

/// What a copy moved.
#[derive(Debug)]
pub struct Copied {
    /// Rows each table took, as the database counted them.
    pub tables: BTreeMap<Table, u64>,
    pub took: Duration,
}

/// Opens the sled store of the data directory `data_dir` (its `db`
/// directory) to be copied. Fails while a daemon serves from it: sled
/// holds the directory's lock.
pub fn open_source(data_dir: &Path) -> Result<SledStore, CopyError> {
    let path = data_dir.join(crate::daemon::DB_DIR);
    if !path.is_dir() {
        return Err(CopyError::NoStore(path));
    }
    SledStore::open(&path, &StoreConfig::default())
        .map_err(|source| CopyError::Source { path, source })
}

/// Copies every record of `from` into `to`, which must hold no holarchy
/// data yet. `progress` hears of each chunk read: its table and the
/// records read so far. Blocks: call it off an async runtime's workers.
pub fn copy(
    from: &SledStore,
    to: &PgStore,
    progress: &mut (dyn FnMut(Table, u64) + Send),
) -> Result<Copied, CopyError> {
    let started = Instant::now();
    let (chunks, taken) = mpsc::channel(AHEAD);
    let (read, written) = std::thread::scope(|scope| {
        // The sender moves in: however the read ends, the channel closes.
        let reader = scope.spawn(move || read_all(from, chunks, progress));
        let written = to.import(taken);
        let read = reader
            .join()
            .unwrap_or_else(|_| Err(StoreError::Backend("the reading thread panicked".into())));
        (read, written)
    });
    // A refused database is why the read stopped (nothing took its
    // chunks); otherwise a failed read ends the channel without `Done`, so
    // the import rolled back, and the read's own error says why.
    let tables = match written {
        Err(ImportError::Occupied(tables)) => return Err(CopyError::NotEmpty(tables)),
        Err(ImportError::Store(err)) => {
            read.map_err(CopyError::Read)?;
            return Err(CopyError::Write(err));
        }
        Ok(tables) => tables,
    };
    read.map_err(CopyError::Read)?;
    Ok(Copied {
        tables,
        took: started.elapsed(),
    })
}

/// Sends every record of `from` in chunks of one table, then `Done`.
fn read_all(
    from: &SledStore,
    chunks: mpsc::Sender<Chunk>,
    progress: &mut (dyn FnMut(Table, u64) + Send),
) -> Result<(), StoreError> {
    let stopped = || StoreError::Backend("the database stopped taking rows".into());
    let mut chunk: Vec<Record> = Vec::with_capacity(CHUNK);
    let mut read: u64 = 0;
    let mut send = |chunk: &mut Vec<Record>, read: u64| -> Result<(), StoreError> {
        if let Some(table) = chunk.first().map(Record::table) {
            progress(table, read);
            let full = std::mem::replace(chunk, Vec::with_capacity(CHUNK));
            chunks
                .blocking_send(Chunk::Records(full))
                .map_err(|_| stopped())?;
        }
        Ok(())
    };
    from.dump(&mut |record| {
        if chunk.len() == CHUNK || chunk.first().is_some_and(|r| r.table() != record.table()) {
            send(&mut chunk, read)?;
        }
        read += 1;
        chunk.push(record);
        Ok(())
    })?;
    send(&mut chunk, read)?;
    chunks.blocking_send(Chunk::Done).map_err(|_| stopped())
}
