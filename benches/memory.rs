//! Agents' memory at scale, in process: how fast notes are written and
//! indexed, how long a search takes over a large index, and how a lost
//! index is rebuilt while searches go on answering.
//!
//! `cargo bench --bench memory -- --agents 10000 --entries 1000000 [--searches 2000]
//! [--costly 5] [--unique]`
//!
//! Phases, in one run:
//! - **write**: `--entries` notes spread evenly over `--agents` live
//!   agents, written by `--writers` threads through the store (each note
//!   its own transaction, as `MemoryWrite` does), then made durable;
//! - **index**: the time from the first write until the index holds every
//!   note (the indexer runs while the notes are written);
//! - **search**: `--searches` two-word queries, each for a random agent,
//!   through the store's `search_memory` (what the `MemorySearch` tool and
//!   `SearchMemory` call), latency percentiles;
//! - **costly queries**: `--costly` searches of a kilobyte of range,
//!   prefix and field clauses through the store, and (in the same run,
//!   on the same index) as tantivy's own query parser reads them;
//! - **rebuild**: the store closed, its index directory deleted, the store
//!   opened again; the time until the index holds every note once more,
//!   and one search answered while it is being rebuilt.
//!
//! Prints a table and one JSON line, and writes the JSON to
//! `target/bench-results/memory.json` (or `--json PATH`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use holarchy::store::sled_store::StoreConfig;
use holarchy::store::SledStore;
use holarchy_actors::{MemoryKind, Store};
use holarchy_actors::{MemoryStore, NewAgent, NoteDraft, Runtime, RuntimeConfig, ScriptedBrain};
use holarchy_supervision::AgentId;
use serde_json::json;

#[path = "support/alloc.rs"]
mod alloc;
#[path = "support/cli.rs"]
mod cli;
#[path = "memory/costly.rs"]
mod costly;
#[path = "support/figure.rs"]
mod figure;
#[path = "support/words.rs"]
mod words;

use words::{sentence, vocabulary, Rng};

struct Options {
    agents: usize,
    entries: usize,
    writers: usize,
    searches: usize,
    costly: usize,
    /// Each note also holds a word of its own (`n<index>`), as ids and
    /// numbers make real text's term dictionary large.
    unique: bool,
    words: usize,
    vocabulary: usize,
    json_out: PathBuf,
}

fn options() -> Options {
    let mut opts = Options {
        agents: 10_000,
        entries: 1_000_000,
        writers: 2,
        searches: 2_000,
        costly: 5,
        unique: false,
        words: 24,
        vocabulary: 5_000,
        json_out: cli::report_path("memory"),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        let mut number = |name: &str| -> usize {
            value()
                .parse()
                .unwrap_or_else(|_| panic!("{name} takes a number"))
        };
        match arg.as_str() {
            "--agents" => opts.agents = number("--agents"),
            "--entries" => opts.entries = number("--entries"),
            "--writers" => opts.writers = number("--writers").max(1),
            "--searches" => opts.searches = number("--searches"),
            "--costly" => opts.costly = number("--costly"),
            "--unique" => opts.unique = true,
            "--words" => opts.words = number("--words").max(1),
            "--vocabulary" => opts.vocabulary = number("--vocabulary").clamp(10, 20_000),
            "--json" => opts.json_out = PathBuf::from(value()),
            // cargo bench passes --bench; ignore what is not ours.
            _ => {}
        }
    }
    opts
}

fn open(dir: &Path) -> Arc<SledStore> {
    Arc::new(SledStore::open(&dir.join("db"), &StoreConfig::default()).expect("store opens"))
}

/// `count` live agents, created through the runtime, which then stops:
/// the agents stay live in the store.
async fn agents(store: &Arc<SledStore>, dir: &Path, count: usize) -> Vec<AgentId> {
    let config = RuntimeConfig {
        workspace_root: dir.join("workspaces"),
        worktree_root: dir.join("worktrees"),
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::start(store.clone(), Arc::new(ScriptedBrain), config)
        .await
        .expect("runtime starts");
    let mut ids = Vec::with_capacity(count);
    let specs: Vec<NewAgent> = (0..count)
        .map(|i| NewAgent {
            name: format!("memory-{i}"),
            initial_message: None,
            brain: None,
            context_tokens: None,
            mcp_servers: Vec::new(),
            network: Default::default(),
            namespace: "default".to_owned(),
            labels: Default::default(),
            created_by: None,
        })
        .collect();
    for chunk in specs.chunks(1_000) {
        ids.extend(
            runtime
                .create_agents(chunk.to_vec())
                .await
                .expect("agents created"),
        );
    }
    runtime.shutdown(Duration::from_secs(30)).await;
    ids
}

/// Writes `opts.entries` notes round-robin over `agents`; notes per second.
fn write_notes(
    store: &Arc<SledStore>,
    agents: &Arc<Vec<AgentId>>,
    vocabulary: &Arc<Vec<String>>,
    opts: &Options,
) -> Option<f64> {
    let started = Instant::now();
    let writers: Vec<_> = (0..opts.writers)
        .map(|writer| {
            let (store, agents, vocabulary) = (store.clone(), agents.clone(), vocabulary.clone());
            let (entries, writers, words) = (opts.entries, opts.writers, opts.words);
            let unique = opts.unique;
            std::thread::spawn(move || {
                let mut rng = Rng(0x1234 + writer as u64);
                let mut i = writer;
                while i < entries {
                    let draft = NoteDraft {
                        agent_id: agents[i % agents.len()],
                        key: None,
                        text: if unique {
                            format!("{} n{i}", sentence(&mut rng, &vocabulary, words))
                        } else {
                            sentence(&mut rng, &vocabulary, words)
                        },
                        tags: Vec::new(),
                    };
                    store.put_note(&draft, i as u64).expect("note written");
                    i += writers;
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("writer");
    }
    figure::rate(opts.entries, started.elapsed().as_secs_f64())
}

/// Waits until the index holds `count` entries; `None` past ten minutes.
async fn indexed(store: &SledStore, count: u64) -> Option<Instant> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        if store.memory_indexed() >= count {
            return Some(Instant::now());
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Search latencies in microseconds, sorted, and the hits found.
fn searches(
    store: &SledStore,
    agents: &[AgentId],
    vocabulary: &[String],
    count: usize,
) -> (Vec<f64>, usize) {
    let mut rng = Rng(0xfeed);
    let mut latencies = Vec::with_capacity(count);
    let mut found = 0;
    for _ in 0..count {
        let agent = agents[rng.below(agents.len())];
        let query = sentence(&mut rng, vocabulary, 2);
        let started = Instant::now();
        let hits = store
            .search_memory(agent, &query, &[MemoryKind::Note], 10)
            .expect("searched");
        latencies.push(started.elapsed().as_secs_f64() * 1e6);
        found += hits.len();
    }
    latencies.sort_by(f64::total_cmp);
    (latencies, found)
}

fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let at = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted.get(at).copied()
}

async fn run(opts: &Options) -> serde_json::Value {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = open(tmp.path());
    let agents = Arc::new(agents(&store, tmp.path(), opts.agents).await);
    let vocabulary = Arc::new(vocabulary(opts.vocabulary));
    let total = opts.entries as u64;

    eprintln!("writing {} notes over {} agents", opts.entries, opts.agents);
    let started = Instant::now();
    let write_rate = {
        let (store, agents, vocabulary) = (store.clone(), agents.clone(), vocabulary.clone());
        let opts = Options {
            json_out: PathBuf::new(),
            ..*opts
        };
        tokio::task::spawn_blocking(move || write_notes(&store, &agents, &vocabulary, &opts))
            .await
            .expect("writers")
    };
    store.durable().await.expect("durable");
    let written = started.elapsed().as_secs_f64();
    eprintln!("written in {written:.1} s; waiting for the index");
    let index_rate = indexed(&store, total)
        .await
        .and_then(|done| figure::rate(opts.entries, (done - started).as_secs_f64()));

    eprintln!("searching {} times", opts.searches);
    let (latencies, found) = {
        let (store, agents, vocabulary) = (store.clone(), agents.clone(), vocabulary.clone());
        let count = opts.searches;
        tokio::task::spawn_blocking(move || searches(&store, &agents, &vocabulary, count))
            .await
            .expect("searches")
    };
    eprintln!(
        "{} costly queries, through the store and the parser",
        opts.costly
    );
    let (costly_store, costly_parser) = {
        let (store, agents) = (store.clone(), agents.clone());
        let (count, index) = (opts.costly, tmp.path().join("db").join("memory_index"));
        tokio::task::spawn_blocking(move || {
            (
                costly::through_store(&store, &agents, count),
                costly::through_parser(&index, count),
            )
        })
        .await
        .expect("costly queries")
    };
    let disk = store.size_on_disk();
    store.close().await;
    drop(store);

    eprintln!("deleting the index and rebuilding it");
    std::fs::remove_dir_all(tmp.path().join("db").join("memory_index")).expect("index deleted");
    let reopened = Instant::now();
    let store = open(tmp.path());
    // One search while the rebuild runs, once part of the index is back:
    // it answers from what is indexed.
    let deadline = Instant::now() + Duration::from_secs(60);
    while store.memory_indexed() == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let during = {
        let (store, agents) = (store.clone(), agents.clone());
        let query = vocabulary[0].clone();
        tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let hits = store
                .search_memory(agents[0], &query, &[], 10)
                .expect("searched during the rebuild");
            (
                started.elapsed().as_secs_f64() * 1e6,
                hits.len(),
                store.memory_indexed(),
            )
        })
        .await
        .expect("search during rebuild")
    };
    let rebuild_rate = indexed(&store, total)
        .await
        .and_then(|done| figure::rate(opts.entries, (done - reopened).as_secs_f64()));
    store.close().await;

    let p50 = percentile(&latencies, 0.5);
    let p99 = percentile(&latencies, 0.99);
    let costly_p50 = percentile(&costly_store, 0.5);
    let costly_max = costly_store.last().copied();
    let parser_p50 = percentile(&costly_parser, 0.5);
    println!(
        "memory: {} notes over {} agents, {} writers, {} words each of {}",
        opts.entries, opts.agents, opts.writers, opts.words, opts.vocabulary
    );
    println!("{:<46} {:>14}", "figure", "value");
    let rows = [
        (
            "notes written / s (each its own transaction)",
            write_rate,
            0,
        ),
        (
            "entries indexed / s (first write to all indexed)",
            index_rate,
            0,
        ),
        ("entries rebuilt / s (index deleted)", rebuild_rate, 0),
        ("search p50, us", p50, 0),
        ("search p99, us", p99, 0),
        (
            "hits per search (limit 10)",
            Some(found as f64 / opts.searches.max(1) as f64),
            2,
        ),
        ("costly 1 KiB query via the store p50, us", costly_p50, 0),
        ("costly 1 KiB query via the store max, us", costly_max, 0),
        ("same query via tantivy's parser p50, us", parser_p50, 0),
        (
            "parser / store, same query (x)",
            figure::ratio(parser_p50, costly_p50),
            0,
        ),
        ("search during rebuild, us", Some(during.0), 0),
        (
            "store and index on disk, MiB",
            Some(disk as f64 / 1048576.0),
            0,
        ),
    ];
    for (name, value, precision) in rows {
        println!("{name:<46} {}", figure::show(value, 14, precision));
    }
    json!({
        "bench": "memory",
        "agents": opts.agents,
        "entries": opts.entries,
        "writers": opts.writers,
        "words_per_note": opts.words,
        "vocabulary": opts.vocabulary,
        "searches": opts.searches,
        "written_per_s": write_rate,
        "indexed_per_s": index_rate,
        "rebuilt_per_s": rebuild_rate,
        "search_p50_us": p50,
        "search_p99_us": p99,
        "hits_per_search": found as f64 / opts.searches.max(1) as f64,
        "unique_word_per_note": opts.unique,
        "costly_query_bytes": costly::query().len(),
        "costly_store_p50_us": costly_p50,
        "costly_store_max_us": costly_max,
        "costly_parser_p50_us": parser_p50,
        "search_during_rebuild_us": during.0,
        "hits_during_rebuild": during.1,
        "indexed_when_searched_during_rebuild": during.2,
        "disk_bytes": disk,
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
