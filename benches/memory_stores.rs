//! Agents' memory on each store, side by side: the same notes, handled
//! messages and queries through the sled store (its tantivy index beside
//! it) and through the PostgreSQL store (full-text search in the
//! database), the figures behind docs/memory.md, "On PostgreSQL".
//!
//! `cargo bench --bench memory_stores -- --entries 100000 --agents 10
//! [--searches 500] [--writers 4] [--batch 64]`
//!
//! For each store, in this order, on a new store each time:
//! - **notes**: half of `--entries`, spread evenly over `--agents` live
//!   agents, written by `--writers` threads, each note its own
//!   transaction as `MemoryWrite` does; then the time until all are
//!   searchable;
//! - **messages**: the other half as handled messages with their
//!   `run_finished` events, `--batch` to a commit (a turn commits one);
//!   the time from the first commit until all are searchable;
//! - **searches**: `--searches` two-word queries, as many one-word
//!   queries of the five commonest words, and a tenth as many of a word
//!   every entry holds (`journal`: an agent's worst case, all its entries
//!   match and are ranked), each for a random agent, through
//!   `search_memory`; latency percentiles;
//! - the bytes on disk.
//!
//! PostgreSQL is a throwaway server started for the run (as the tests
//! start one; `HOLARCHY_TEST_POSTGRES` names another), with fsync on.
//! Prints a table and one JSON line, written to
//! `target/bench-results/memory_stores.json` (or `--json PATH`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use holarchy::api::read_model::ReadModel;
use holarchy::store::sled_store::StoreConfig;
use holarchy::store::{PgStore, SledStore};
use holarchy_actors::{Batch, MemoryStore, NoteDraft, Store, Write};
use holarchy_supervision::{
    AgentId, AgentRecord, EventKind, MessageRecord, MessageStatus, Provenance, RunId, RunOutcome,
};
use serde_json::json;

#[path = "support/cli.rs"]
mod cli;
#[path = "support/figure.rs"]
mod figure;
#[path = "../tests/support/postgres.rs"]
mod pg_server;
#[path = "support/words.rs"]
mod words;

use words::{sentence, vocabulary, Rng};

struct Options {
    agents: usize,
    entries: usize,
    writers: usize,
    searches: usize,
    batch: usize,
    words: usize,
    vocabulary: usize,
    json_out: PathBuf,
}

fn options() -> Options {
    let args: Vec<String> = std::env::args().collect();
    let json_out = args
        .iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1))
        .map_or_else(|| cli::report_path("memory_stores"), PathBuf::from);
    Options {
        agents: cli::number(&args, "--agents", 10).max(1),
        entries: cli::number(&args, "--entries", 10_000),
        writers: cli::number(&args, "--writers", 4).max(1),
        searches: cli::number(&args, "--searches", 500),
        batch: cli::number(&args, "--batch", 64).max(1),
        words: cli::number(&args, "--words", 24).max(1),
        vocabulary: cli::number(&args, "--vocabulary", 5_000).clamp(10, 20_000),
        json_out,
    }
}

/// What the bench needs of a store beyond the actors' traits.
trait Measured: Store + ReadModel {
    /// Entries its searches can find, every agent's.
    fn searchable(&self) -> u64;
}

impl Measured for SledStore {
    fn searchable(&self) -> u64 {
        self.memory_indexed()
    }
}

impl Measured for PgStore {
    fn searchable(&self) -> u64 {
        self.memory_indexed()
    }
}

/// `count` live agents, committed directly (no actor runs).
fn agents(store: &impl Store, count: usize) -> Vec<AgentId> {
    (0..count)
        .map(|i| {
            let record = AgentRecord::public(format!("memory-{i}"), 1);
            let created = Batch::new()
                .write(Write::CreateAgent(record.clone()))
                .event(
                    record.id,
                    EventKind::AgentCreated {
                        name: record.name.clone(),
                        preset: None,
                        lineage_parent_agent_id: None,
                        supervisor_agent_id: None,
                    },
                );
            store.commit(created).expect("an agent created");
            record.id
        })
        .collect()
}

/// Waits until `store` can find `count` entries; when, or `None` past ten
/// minutes.
async fn searchable<S: Measured>(store: &S, count: u64) -> Option<Instant> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        if store.searchable() >= count {
            return Some(Instant::now());
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Writes `count` notes round-robin over `agents` from `writers`
/// threads; notes per second.
fn write_notes<S: Measured>(
    store: &Arc<S>,
    agents: &Arc<Vec<AgentId>>,
    vocabulary: &Arc<Vec<String>>,
    count: usize,
    opts: &Options,
) -> Option<f64> {
    let started = Instant::now();
    let threads: Vec<_> = (0..opts.writers)
        .map(|writer| {
            let (store, agents, vocabulary) = (store.clone(), agents.clone(), vocabulary.clone());
            let (writers, words) = (opts.writers, opts.words);
            std::thread::spawn(move || {
                let mut rng = Rng(0x1234 + writer as u64);
                let mut i = writer;
                while i < count {
                    let draft = NoteDraft {
                        agent_id: agents[i % agents.len()],
                        key: None,
                        text: format!("journal {}", sentence(&mut rng, &vocabulary, words)),
                        tags: Vec::new(),
                    };
                    store.put_note(&draft, i as u64).expect("a note written");
                    i += writers;
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a writer");
    }
    figure::rate(count, started.elapsed().as_secs_f64())
}

/// Commits `count` handled messages round-robin over `agents`, `batch`
/// to a commit, from `writers` threads; messages per second.
fn write_messages<S: Measured>(
    store: &Arc<S>,
    agents: &Arc<Vec<AgentId>>,
    vocabulary: &Arc<Vec<String>>,
    count: usize,
    opts: &Options,
) -> Option<f64> {
    let started = Instant::now();
    let threads: Vec<_> = (0..opts.writers)
        .map(|writer| {
            let (store, agents, vocabulary) = (store.clone(), agents.clone(), vocabulary.clone());
            let (writers, words, size) = (opts.writers, opts.words, opts.batch);
            std::thread::spawn(move || {
                let mut rng = Rng(0x4321 + writer as u64);
                let mut batch = Batch::new();
                let mut i = writer;
                while i < count {
                    let agent = agents[i % agents.len()];
                    let run_id = RunId::generate();
                    let record = MessageRecord {
                        status: MessageStatus::Handled { run_id },
                        reply: Some(sentence(&mut rng, &vocabulary, words / 2)),
                        ..MessageRecord::queued(
                            agent,
                            Provenance::Operator,
                            format!("journal {}", sentence(&mut rng, &vocabulary, words)),
                            None,
                            1,
                        )
                    };
                    let finished = EventKind::RunFinished {
                        run_id,
                        message_id: record.id,
                        outcome: RunOutcome::Completed,
                        detail: String::new(),
                    };
                    batch = batch
                        .write(Write::PutMessage(record))
                        .event(agent, finished);
                    if batch.writes.len() == size {
                        store
                            .commit(std::mem::take(&mut batch))
                            .expect("messages committed");
                    }
                    i += writers;
                }
                if !batch.writes.is_empty() {
                    store.commit(batch).expect("messages committed");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a writer");
    }
    figure::rate(count, started.elapsed().as_secs_f64())
}

/// Search latencies in microseconds, sorted; hits found; searches that
/// failed (past their budget).
fn searches<S: MemoryStore>(
    store: &S,
    agents: &[AgentId],
    queries: &[String],
    seed: u64,
) -> (Vec<f64>, usize, usize) {
    let mut rng = Rng(seed);
    let mut latencies = Vec::with_capacity(queries.len());
    let (mut found, mut failed) = (0, 0);
    for query in queries {
        let agent = agents[rng.below(agents.len())];
        let started = Instant::now();
        match store.search_memory(agent, query, &[], 10) {
            Ok(hits) => found += hits.len(),
            Err(_) => failed += 1,
        }
        latencies.push(started.elapsed().as_secs_f64() * 1e6);
    }
    latencies.sort_by(f64::total_cmp);
    (latencies, found, failed)
}

fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let at = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted.get(at).copied()
}

/// Every phase on one store.
async fn measure<S: Measured>(store: Arc<S>, opts: &Options) -> serde_json::Value {
    let agents = Arc::new(agents(&*store, opts.agents));
    let vocabulary = Arc::new(vocabulary(opts.vocabulary));
    let notes = opts.entries / 2;
    let messages = opts.entries - notes;

    let started = Instant::now();
    let notes_rate = {
        let (store, agents, vocabulary) = (store.clone(), agents.clone(), vocabulary.clone());
        let opts = Options {
            json_out: PathBuf::new(),
            ..*opts
        };
        tokio::task::spawn_blocking(move || write_notes(&store, &agents, &vocabulary, notes, &opts))
            .await
            .expect("notes")
    };
    let written = Instant::now();
    let notes_searchable = searchable(&*store, notes as u64).await;
    let notes_lag_ms = notes_searchable.map(|at| (at - written).as_secs_f64() * 1e3);
    let notes_searchable_rate =
        notes_searchable.and_then(|at| figure::rate(notes, (at - started).as_secs_f64()));

    let started = Instant::now();
    let messages_rate = {
        let (store, agents, vocabulary) = (store.clone(), agents.clone(), vocabulary.clone());
        let opts = Options {
            json_out: PathBuf::new(),
            ..*opts
        };
        tokio::task::spawn_blocking(move || {
            write_messages(&store, &agents, &vocabulary, messages, &opts)
        })
        .await
        .expect("messages")
    };
    let messages_searchable = searchable(&*store, opts.entries as u64).await;
    let messages_searchable_rate =
        messages_searchable.and_then(|at| figure::rate(messages, (at - started).as_secs_f64()));

    let mut rng = Rng(0xfeed);
    let two_words: Vec<String> = (0..opts.searches)
        .map(|_| sentence(&mut rng, &vocabulary, 2))
        .collect();
    let common: Vec<String> = (0..opts.searches)
        .map(|i| vocabulary[i % 5].clone())
        .collect();
    let everywhere: Vec<String> = vec!["journal".to_owned(); (opts.searches / 10).max(1)];
    let (plain, common_run, every_run) = {
        let (store, agents) = (store.clone(), agents.clone());
        tokio::task::spawn_blocking(move || {
            (
                searches(&*store, &agents, &two_words, 1),
                searches(&*store, &agents, &common, 2),
                searches(&*store, &agents, &everywhere, 3),
            )
        })
        .await
        .expect("searches")
    };
    let disk = ReadModel::size_on_disk(&*store);
    json!({
        "notes_written_per_s": notes_rate,
        "notes_searchable_per_s": notes_searchable_rate,
        "notes_lag_after_last_write_ms": notes_lag_ms,
        "messages_committed_per_s": messages_rate,
        "messages_searchable_per_s": messages_searchable_rate,
        "search_p50_us": percentile(&plain.0, 0.5),
        "search_p99_us": percentile(&plain.0, 0.99),
        "hits_per_search": plain.1 as f64 / opts.searches.max(1) as f64,
        "failed_searches": plain.2,
        "common_word_p50_us": percentile(&common_run.0, 0.5),
        "common_word_p99_us": percentile(&common_run.0, 0.99),
        "common_word_max_us": common_run.0.last().copied(),
        "common_word_hits_per_search": common_run.1 as f64 / opts.searches.max(1) as f64,
        "common_word_failed_searches": common_run.2,
        "every_entry_p50_us": percentile(&every_run.0, 0.5),
        "every_entry_max_us": every_run.0.last().copied(),
        "every_entry_failed_searches": every_run.2,
        "disk_bytes": disk,
    })
}

async fn run(opts: &Options) -> serde_json::Value {
    eprintln!("sled: {} entries over {} agents", opts.entries, opts.agents);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let sled = Arc::new(
        SledStore::open(&dir.path().join("db"), &StoreConfig::default()).expect("sled opens"),
    );
    let on_sled = measure(sled.clone(), opts).await;
    sled.close().await;
    drop(sled);

    eprintln!(
        "postgres: {} entries over {} agents",
        opts.entries, opts.agents
    );
    let database = pg_server::database()
        .await
        .expect("a PostgreSQL server (install postgresql, or set HOLARCHY_TEST_POSTGRES)");
    let pg = Arc::new(PgStore::open(database.config.clone()).expect("PostgreSQL opens"));
    let on_pg = measure(pg.clone(), opts).await;
    pg.close().await;

    println!(
        "memory on each store: {} entries (half notes, half handled messages) over {} agents, {} writers",
        opts.entries, opts.agents, opts.writers
    );
    println!("{:<44} {:>14} {:>14}", "figure", "sled", "postgres");
    let rows = [
        ("notes written / s", "notes_written_per_s", 0),
        ("notes searchable / s", "notes_searchable_per_s", 0),
        (
            "notes searchable after the last, ms",
            "notes_lag_after_last_write_ms",
            0,
        ),
        ("messages committed / s", "messages_committed_per_s", 0),
        ("messages searchable / s", "messages_searchable_per_s", 0),
        ("two-word search p50, us", "search_p50_us", 0),
        ("two-word search p99, us", "search_p99_us", 0),
        ("hits per two-word search", "hits_per_search", 2),
        ("common-word search p50, us", "common_word_p50_us", 0),
        ("common-word search p99, us", "common_word_p99_us", 0),
        ("common-word search max, us", "common_word_max_us", 0),
        (
            "common-word searches over budget",
            "common_word_failed_searches",
            0,
        ),
        ("word in every entry p50, us", "every_entry_p50_us", 0),
        ("word in every entry max, us", "every_entry_max_us", 0),
        (
            "every-entry searches over budget",
            "every_entry_failed_searches",
            0,
        ),
        ("bytes on disk", "disk_bytes", 0),
    ];
    for (name, key, precision) in rows {
        println!(
            "{name:<44} {} {}",
            figure::show(figure::get(&on_sled[key]), 14, precision),
            figure::show(figure::get(&on_pg[key]), 14, precision)
        );
    }
    json!({
        "bench": "memory_stores",
        "agents": opts.agents,
        "entries": opts.entries,
        "writers": opts.writers,
        "batch": opts.batch,
        "searches": opts.searches,
        "sled": on_sled,
        "postgres": on_pg,
    })
}

fn main() {
    let opts = options();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    let report = runtime.block_on(run(&opts));
    println!("{report}");
    cli::write_report(&opts.json_out, &report);
}
