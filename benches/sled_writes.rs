//! What sled's writer pays for one public agent's creation, in the shape
//! the store uses and in others: the evidence for the store's layout and
//! for the ceiling on durable creation (docs/benchmarks.md).
//!
//! `cargo bench --bench sled_writes -- [--agents 100000] [--rounds 2]`
//!
//! Each shape writes `--agents` public agents in batches of 1,000 into a
//! fresh sled database, with the store's own record encoding, and a flush
//! every second batch (as group commit does under load):
//! - `transaction, 3 trees`: the store's shape before public agents had a
//!   tree of their own: records, names and an index of public ids, plus
//!   one event-log value per batch, with the name check;
//! - `transaction, 2 trees`: the store's shape now, records and names;
//! - `transaction, 1 tree`: agents only;
//! - `one tree, apply_batch`: the three records under key prefixes in one
//!   tree, written by `apply_batch` (atomic, no transaction), the name
//!   checked by a read before;
//! - `3 trees, apply_batch each`: not atomic across trees, for reference.
//!
//! Shapes alternate within each round, so a noisy phase of the machine
//! falls on all of them. Prints a table and one JSON line, and writes the
//! JSON to `target/bench-results/sled_writes.json` (or `--json PATH`).

use std::path::PathBuf;
use std::time::Instant;

use holarchy::store::codec::{encode, encode_agent};
use holarchy_supervision::AgentRecord;
use serde_json::{json, Value};
use sled::transaction::{ConflictableTransactionError, Transactional};

#[path = "support/alloc.rs"]
mod alloc;
#[path = "support/cli.rs"]
mod cli;

const BATCH: usize = 1_000;

type Tx = Result<(), ConflictableTransactionError<&'static str>>;

#[derive(Clone, Copy)]
enum Shape {
    ThreeTrees,
    TwoTrees,
    OneTree,
    OneTreeBatch,
    ThreeTreeBatches,
}

impl Shape {
    const ALL: [Shape; 5] = [
        Shape::ThreeTrees,
        Shape::TwoTrees,
        Shape::OneTree,
        Shape::OneTreeBatch,
        Shape::ThreeTreeBatches,
    ];

    fn label(self) -> &'static str {
        match self {
            Shape::ThreeTrees => "transaction, 3 trees (with a public index)",
            Shape::TwoTrees => "transaction, 2 trees (the store)",
            Shape::OneTree => "transaction, 1 tree (agents only)",
            Shape::OneTreeBatch => "one tree, apply_batch",
            Shape::ThreeTreeBatches => "3 trees, apply_batch each",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Shape::ThreeTrees => "tx_3_trees",
            Shape::TwoTrees => "tx_2_trees",
            Shape::OneTree => "tx_1_tree",
            Shape::OneTreeBatch => "one_tree_batch",
            Shape::ThreeTreeBatches => "three_tree_batches",
        }
    }
}

/// One agent as the store writes it: its key, name and encoded record.
struct Row {
    id: [u8; 16],
    name: String,
    record: Vec<u8>,
}

fn rows(n: usize) -> Vec<Row> {
    (0..n)
        .map(|i| {
            let record = AgentRecord::public(format!("idle-{i}"), 1_700_000_000_000);
            Row {
                id: record.id.to_bytes(),
                name: format!("idle-{i}"),
                record: encode_agent("agents", &record).expect("record encodes"),
            }
        })
        .collect()
}

/// The event-log value of one batch: one small record per created agent.
fn events(batch: &[Row]) -> Vec<u8> {
    let ids: Vec<[u8; 16]> = batch.iter().map(|r| r.id).collect();
    encode("events", &ids).expect("events encode")
}

fn prefixed(prefix: u8, key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 1);
    out.push(prefix);
    out.extend_from_slice(key);
    out
}

struct Trees {
    db: sled::Db,
    agents: sled::Tree,
    names: sled::Tree,
    public: sled::Tree,
    events: sled::Tree,
    one: sled::Tree,
}

fn open(dir: &std::path::Path) -> Trees {
    let db = sled::Config::new()
        .path(dir)
        .cache_capacity(96 * 1024 * 1024)
        .open()
        .expect("sled opens");
    let tree = |name: &str| db.open_tree(name).expect("tree opens");
    Trees {
        agents: tree("agents"),
        names: tree("names"),
        public: tree("public"),
        events: tree("events"),
        one: tree("one"),
        db,
    }
}

/// Writes one batch in `shape`; returns the seconds spent in sled's write.
fn write(trees: &Trees, shape: Shape, batch: &[Row], seq: u64) -> f64 {
    let event_key = seq.to_be_bytes();
    let event_value = events(batch);
    let started = Instant::now();
    let taken = || ConflictableTransactionError::Abort("name taken");
    match shape {
        Shape::ThreeTrees | Shape::TwoTrees => {
            // The same transaction either way: a tree it does not write
            // costs it nothing.
            let indexed = matches!(shape, Shape::ThreeTrees);
            (&trees.agents, &trees.names, &trees.public, &trees.events)
                .transaction(|(agents, names, public, log)| -> Tx {
                    for row in batch {
                        if indexed {
                            public.insert(&row.id[..], &[] as &[u8])?;
                        }
                        if names.get(row.name.as_bytes())?.is_some() {
                            return Err(taken());
                        }
                        names.insert(row.name.as_bytes(), &row.id[..])?;
                        agents.insert(&row.id[..], row.record.as_slice())?;
                    }
                    log.insert(&event_key[..], event_value.as_slice())?;
                    Ok(())
                })
                .expect("transaction commits");
        }
        Shape::OneTree => {
            (&trees.agents, &trees.events)
                .transaction(|(agents, log)| -> Tx {
                    for row in batch {
                        agents.insert(&row.id[..], row.record.as_slice())?;
                    }
                    log.insert(&event_key[..], event_value.as_slice())?;
                    Ok(())
                })
                .expect("transaction commits");
        }
        Shape::OneTreeBatch => {
            let mut writes = sled::Batch::default();
            for row in batch {
                let name = prefixed(b'n', row.name.as_bytes());
                assert!(trees.one.get(&name).expect("read").is_none(), "name taken");
                writes.insert(prefixed(b'p', &row.id), &[] as &[u8]);
                writes.insert(name, &row.id[..]);
                writes.insert(prefixed(b'a', &row.id), row.record.as_slice());
            }
            writes.insert(prefixed(b'e', &event_key), event_value);
            trees.one.apply_batch(writes).expect("batch applies");
        }
        Shape::ThreeTreeBatches => {
            let (mut agents, mut names, mut public) = Default::default();
            for row in batch {
                assert!(trees
                    .names
                    .get(row.name.as_bytes())
                    .expect("read")
                    .is_none());
                sled::Batch::insert(&mut public, &row.id[..], &[] as &[u8]);
                sled::Batch::insert(&mut names, row.name.as_bytes(), &row.id[..]);
                sled::Batch::insert(&mut agents, &row.id[..], row.record.as_slice());
            }
            trees.public.apply_batch(public).expect("batch applies");
            trees.names.apply_batch(names).expect("batch applies");
            trees.agents.apply_batch(agents).expect("batch applies");
            trees
                .events
                .insert(&event_key[..], event_value)
                .expect("event written");
        }
    }
    started.elapsed().as_secs_f64()
}

/// Microseconds per agent inside sled's writes, and agents per second
/// including the flushes.
fn measure(shape: Shape, rows: &[Row], dir: &std::path::Path) -> (f64, f64) {
    let _ = std::fs::remove_dir_all(dir);
    let trees = open(dir);
    let started = Instant::now();
    let mut writing = 0.0;
    for (seq, batch) in rows.chunks(BATCH).enumerate() {
        writing += write(&trees, shape, batch, seq as u64);
        if seq % 2 == 1 {
            trees.db.flush().expect("flush");
        }
    }
    trees.db.flush().expect("flush");
    let elapsed = started.elapsed().as_secs_f64();
    drop(trees);
    let _ = std::fs::remove_dir_all(dir);
    let n = rows.len() as f64;
    (writing * 1e6 / n, n / elapsed)
}

fn main() {
    let mut agents = 100_000;
    let mut rounds = 2;
    let mut json_out = cli::report_path("sled_writes");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--agents" => agents = value().parse().expect("--agents takes a number"),
            "--rounds" => rounds = value().parse().expect("--rounds takes a number"),
            "--json" => json_out = PathBuf::from(value()),
            // cargo bench passes --bench; ignore what is not ours.
            _ => {}
        }
    }
    let rows = rows(agents);
    let scratch = tempfile::tempdir().expect("scratch dir");
    let mut results: Vec<Vec<(f64, f64)>> = vec![Vec::new(); Shape::ALL.len()];
    for round in 0..rounds {
        for (i, shape) in Shape::ALL.iter().enumerate() {
            let dir = scratch.path().join(format!("{}-{round}", shape.key()));
            results[i].push(measure(*shape, &rows, &dir));
        }
    }

    println!("sled writes: {agents} public agents in batches of {BATCH}, {rounds} rounds");
    println!(
        "{:<42} {:>22} {:>20}",
        "shape", "us/agent in writes", "agents/s with flush"
    );
    let mut report = json!({ "bench": "sled_writes", "agents": agents, "batch": BATCH });
    let base = mean(results[0].iter().map(|r| r.0));
    for (i, shape) in Shape::ALL.iter().enumerate() {
        let us: Vec<f64> = results[i].iter().map(|r| r.0).collect();
        let rates: Vec<f64> = results[i].iter().map(|r| r.1).collect();
        println!(
            "{:<42} {:>22} {:>20}",
            shape.label(),
            us.iter()
                .map(|x| format!("{x:.1}"))
                .collect::<Vec<_>>()
                .join(" / "),
            rates
                .iter()
                .map(|x| format!("{x:.0}"))
                .collect::<Vec<_>>()
                .join(" / ")
        );
        report[shape.key()] = json!({
            "us_per_agent_writing": us,
            "agents_per_s": rates,
            "writing_vs_three_trees": mean(us.iter().copied()) / base,
        });
    }
    let line = Value::to_string(&report);
    println!("{line}");
    cli::write_report(&json_out, &line);
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        f64::NAN
    } else {
        sum / n as f64
    }
}
