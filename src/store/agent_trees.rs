//! Where agents' records live: public agents in `public_agents`, private
//! ones in `agents`. A public agent's creation then writes its record and
//! its name, with no index of public ids beside them: each tree a commit
//! writes costs sled's writer about 4-5 us per agent, and that index was a
//! third of a public creation (`benches/sled_writes.rs`). Listing public
//! agents reads their tree alone, however many private agents there are.
//!
//! An agent's visibility is fixed at its creation, so its record never
//! moves between the trees. Stores written before this layout kept every
//! record in `agents` and an index of public ids in `public`;
//! [`AgentTrees::open`] moves those records over, a chunk per transaction,
//! and a crash half-way resumes where the index still has entries.

use holarchy_actors::StoreError;
use holarchy_supervision::{AgentId, AgentRecord};
use sled::transaction::{TransactionalTree, UnabortableTransactionError};
use sled::{IVec, Tree};

use super::codec::decode_agent;

/// Private agents' records (every agent's, in stores of the old layout).
pub const AGENTS: &str = "agents";
/// Public agents' records.
pub const PUBLIC_AGENTS: &str = "public_agents";
/// The old layout's index of public ids; emptied and dropped by
/// [`AgentTrees::open`].
const LEGACY_PUBLIC_INDEX: &str = "public";
/// Agents moved per transaction while migrating an old store.
const MIGRATION_CHUNK: usize = 1_000;
/// How often the migration says how far it got.
const PROGRESS_EVERY: usize = 100 * MIGRATION_CHUNK;

fn backend(err: sled::Error) -> StoreError {
    StoreError::Backend(err.to_string())
}

/// The two trees of agents' records.
#[derive(Debug, Clone)]
pub struct AgentTrees {
    pub public: Tree,
    pub private: Tree,
}

impl AgentTrees {
    /// Opens both trees, moving the records of an old store's public
    /// agents into theirs first.
    pub fn open(db: &sled::Db) -> Result<Self, StoreError> {
        let trees = Self {
            public: db.open_tree(PUBLIC_AGENTS).map_err(backend)?,
            private: db.open_tree(AGENTS).map_err(backend)?,
        };
        let legacy_name = LEGACY_PUBLIC_INDEX.as_bytes();
        if !db.tree_names().iter().any(|name| name == legacy_name) {
            return Ok(trees);
        }
        let legacy = db.open_tree(LEGACY_PUBLIC_INDEX).map_err(backend)?;
        // Said before, since it holds up the start: about 28 s for
        // 1,000,000 agents (docs/benchmarks.md).
        tracing::info!("moving public agents' records to their own tree, once");
        let moved = trees.migrate(&legacy)?;
        // Emptied, so a crash before the drop only finds nothing to move.
        drop(legacy);
        db.drop_tree(LEGACY_PUBLIC_INDEX).map_err(backend)?;
        db.flush().map_err(backend)?;
        tracing::info!(agents = moved, "public agents moved to their own tree");
        Ok(trees)
    }

    /// The tree a record of this visibility lives in.
    pub fn of(&self, public: bool) -> &Tree {
        if public {
            &self.public
        } else {
            &self.private
        }
    }

    /// An agent's encoded record, wherever it lives, with the name of
    /// its tree (for an error about it).
    pub fn get(&self, key: &[u8]) -> Result<Option<(&'static str, IVec)>, StoreError> {
        if let Some(bytes) = self.public.get(key).map_err(backend)? {
            return Ok(Some((PUBLIC_AGENTS, bytes)));
        }
        Ok(self.private.get(key).map_err(backend)?.map(|b| (AGENTS, b)))
    }

    /// An agent's record, wherever it lives.
    pub fn record(&self, key: &[u8]) -> Result<Option<AgentRecord>, StoreError> {
        self.get(key)?
            .map(|(tree, bytes)| decode_agent(tree, &bytes))
            .transpose()
    }

    /// Whether the agent exists and has not ended.
    pub fn is_live(&self, agent: AgentId) -> Result<bool, StoreError> {
        Ok(self
            .record(&agent.to_bytes())?
            .is_some_and(|r| r.state.is_live()))
    }

    /// Moves the records the old index names, a chunk per transaction;
    /// each chunk drops its index entries with the move, so a crash leaves
    /// exactly the unmoved ones indexed.
    fn migrate(&self, legacy: &Tree) -> Result<usize, StoreError> {
        let mut moved = 0;
        loop {
            let chunk: Vec<IVec> = legacy
                .iter()
                .keys()
                .take(MIGRATION_CHUNK)
                .collect::<Result<_, _>>()
                .map_err(backend)?;
            if chunk.is_empty() {
                return Ok(moved);
            }
            let trees = (&self.private, &self.public, legacy);
            sled::transaction::Transactional::<()>::transaction(
                &trees,
                |(private, public, index)| {
                    for key in &chunk {
                        if let Some(record) = private.remove(key)? {
                            public.insert(key, record)?;
                        }
                        index.remove(key)?;
                    }
                    Ok(())
                },
            )
            .map_err(|err| StoreError::Backend(format!("moving public agents: {err:?}")))?;
            moved += chunk.len();
            if moved % PROGRESS_EVERY == 0 {
                tracing::info!(agents = moved, "public agents moved so far");
            }
        }
    }
}

/// [`AgentTrees::get`] inside a transaction over both trees.
pub fn get_in(
    public: &TransactionalTree,
    private: &TransactionalTree,
    key: &[u8],
) -> Result<Option<(&'static str, IVec)>, UnabortableTransactionError> {
    if let Some(bytes) = public.get(key)? {
        return Ok(Some((PUBLIC_AGENTS, bytes)));
    }
    Ok(private.get(key)?.map(|b| (AGENTS, b)))
}

#[cfg(test)]
mod tests {
    use holarchy_supervision::{AgentRecord, Visibility};

    use super::*;
    use crate::store::codec::encode_agent;

    fn private(name: &str) -> AgentRecord {
        let mut record = AgentRecord::public(name, 1);
        record.profile.visibility = Visibility::Private;
        record
    }

    /// An old store: every record in `agents`, public ids indexed.
    fn old_store(db: &sled::Db, public: &[AgentRecord], private: &[AgentRecord]) {
        let agents = db.open_tree(AGENTS).expect("tree");
        let index = db.open_tree(LEGACY_PUBLIC_INDEX).expect("tree");
        for record in public.iter().chain(private) {
            let value = encode_agent(AGENTS, record).expect("encodes");
            agents.insert(record.id.to_bytes(), value).expect("insert");
        }
        for record in public {
            index
                .insert(record.id.to_bytes(), &[] as &[u8])
                .expect("insert");
        }
    }

    #[test]
    fn an_old_stores_public_agents_move_to_their_tree_and_private_ones_stay() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sled::Config::new().path(dir.path()).open().expect("opens");
        // More than one chunk, so the loop's resumption is exercised.
        let public: Vec<_> = (0..MIGRATION_CHUNK + 7)
            .map(|i| AgentRecord::public(format!("p{i}"), 1))
            .collect();
        let private: Vec<_> = (0..5).map(|i| private(&format!("q{i}"))).collect();
        old_store(&db, &public, &private);

        let trees = AgentTrees::open(&db).expect("opens");
        assert_eq!(trees.public.len(), public.len());
        assert_eq!(trees.private.len(), private.len());
        assert!(!db
            .tree_names()
            .iter()
            .any(|name| name == LEGACY_PUBLIC_INDEX.as_bytes()));
        for record in public.iter().chain(&private) {
            assert_eq!(
                trees.record(&record.id.to_bytes()).expect("reads").as_ref(),
                Some(record)
            );
        }
        // Opening again finds nothing left to move.
        let again = AgentTrees::open(&db).expect("opens");
        assert_eq!(again.public.len(), public.len());
    }

    #[test]
    fn a_migration_cut_short_resumes_from_what_is_still_indexed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sled::Config::new().path(dir.path()).open().expect("opens");
        let public: Vec<_> = (0..3)
            .map(|i| AgentRecord::public(format!("p{i}"), 1))
            .collect();
        old_store(&db, &public, &[]);
        // As a crash after the first chunk leaves it: one record moved and
        // unindexed, the others still in `agents` and indexed.
        let first = public[0].id.to_bytes();
        let value = db
            .open_tree(AGENTS)
            .expect("tree")
            .remove(first)
            .expect("remove");
        db.open_tree(PUBLIC_AGENTS)
            .expect("tree")
            .insert(first, value.expect("was there"))
            .expect("insert");
        db.open_tree(LEGACY_PUBLIC_INDEX)
            .expect("tree")
            .remove(first)
            .expect("remove");

        let trees = AgentTrees::open(&db).expect("opens");
        assert_eq!(trees.public.len(), 3);
        assert!(trees.private.is_empty());
        for record in &public {
            assert_eq!(
                trees.record(&record.id.to_bytes()).expect("reads").as_ref(),
                Some(record)
            );
        }
    }

    #[test]
    fn a_corrupt_record_is_reported_in_the_tree_that_holds_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = sled::Config::new().path(dir.path()).open().expect("opens");
        let trees = AgentTrees::open(&db).expect("opens");
        let (public, private) = (AgentId::generate(), AgentId::generate());
        // The current version byte, then a body that is not a record.
        let garbage = [crate::store::codec::AGENT_VERSION, 0xff, 0xff];
        for (tree, id) in [(&trees.public, public), (&trees.private, private)] {
            tree.insert(id.to_bytes(), &garbage[..]).expect("insert");
        }
        for (id, tree) in [(public, PUBLIC_AGENTS), (private, AGENTS)] {
            match trees.record(&id.to_bytes()) {
                Err(StoreError::Corrupt { tree: named, .. }) => assert_eq!(named, tree),
                other => panic!("{tree}: {other:?}"),
            }
        }
    }
}
