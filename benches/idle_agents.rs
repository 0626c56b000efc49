//! Idle agents: memory per agent, durable creation throughput, and time to
//! recover every agent after a restart, each next to the same figure for
//! bare ractor actors measured in the same run.
//!
//! `cargo bench --bench idle_agents -- --agents 10000 [--concurrency 64]`
//!
//! Each measurement runs in a fresh child process (this binary, re-run with
//! `--phase`), so memory freed by one phase cannot flatter the next. Prints
//! a table and one JSON line, and writes the JSON to
//! `target/bench-results/idle_agents.json` (or `--json PATH`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use holarchy::api::runtime_service::rss_bytes;
use holarchy::store::sled_store::StoreConfig;
use holarchy::store::SledStore;
use holarchy_actors::{Runtime, RuntimeConfig, ScriptedBrain};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::{json, Value};

struct Options {
    agents: usize,
    concurrency: usize,
    json_out: PathBuf,
    phase: Option<String>,
    dir: Option<PathBuf>,
}

fn options() -> Options {
    let mut opts = Options {
        agents: 10_000,
        concurrency: 64,
        json_out: PathBuf::from("target/bench-results/idle_agents.json"),
        phase: None,
        dir: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--agents" => opts.agents = value().parse().expect("--agents takes a number"),
            "--concurrency" => {
                opts.concurrency = value().parse().expect("--concurrency takes a number")
            }
            "--json" => opts.json_out = PathBuf::from(value()),
            "--phase" => opts.phase = Some(value()),
            "--dir" => opts.dir = Some(PathBuf::from(value())),
            // cargo bench passes --bench; ignore what is not ours.
            _ => {}
        }
    }
    opts
}

/// The reference: an actor with no state that handles nothing.
struct Bare;

impl Actor for Bare {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

/// Lets allocator and runtime settle before reading RSS.
async fn settle() -> u64 {
    tokio::time::sleep(Duration::from_millis(300)).await;
    rss_bytes()
}

async fn phase_bare(n: usize) -> Value {
    let before = settle().await;
    let started = Instant::now();
    let mut actors = Vec::with_capacity(n);
    for _ in 0..n {
        let (actor, _) = Actor::spawn(None, Bare, ())
            .await
            .expect("bare actor spawns");
        actors.push(actor);
    }
    let elapsed = started.elapsed();
    let after = settle().await;
    json!({
        "bytes_per_actor": (after.saturating_sub(before)) as f64 / n as f64,
        "spawn_per_s": n as f64 / elapsed.as_secs_f64(),
    })
}

async fn open(dir: &Path) -> (Arc<SledStore>, Runtime) {
    let store = Arc::new(SledStore::open(dir, &StoreConfig::default()).expect("store opens"));
    let runtime = Runtime::start(
        store.clone(),
        Arc::new(ScriptedBrain),
        RuntimeConfig::default(),
    )
    .await
    .expect("runtime starts");
    (store, runtime)
}

async fn phase_create(n: usize, concurrency: usize, dir: &Path) -> Value {
    let (store, runtime) = open(dir).await;
    let runtime = Arc::new(runtime);
    let before = settle().await;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..concurrency {
        let runtime = runtime.clone();
        tasks.push(tokio::spawn(async move {
            let mut i = worker;
            while i < n {
                runtime
                    .create_agent(format!("idle-{i}"), None)
                    .await
                    .expect("agent created");
                i += concurrency;
            }
        }));
    }
    for task in tasks {
        task.await.expect("creator task");
    }
    let elapsed = started.elapsed();
    let after = settle().await;
    let flushes = store
        .flush_stats()
        .flushes
        .load(std::sync::atomic::Ordering::Relaxed);
    runtime.shutdown(Duration::from_secs(30)).await;
    store.close().await;
    json!({
        "bytes_per_agent": (after.saturating_sub(before)) as f64 / n as f64,
        "create_per_s": n as f64 / elapsed.as_secs_f64(),
        "flushes": flushes,
        "store_bytes": store.size_on_disk(),
    })
}

async fn phase_recover(n: usize, dir: &Path) -> Value {
    let before = settle().await;
    let started = Instant::now();
    let (store, runtime) = open(dir).await;
    let elapsed = started.elapsed();
    let snapshot = runtime.snapshot().await.expect("snapshot");
    assert_eq!(snapshot.recovered_agents, n, "every agent recovered");
    let after = settle().await;
    runtime.shutdown(Duration::from_secs(30)).await;
    store.close().await;
    json!({
        "recover_s": elapsed.as_secs_f64(),
        "bytes_per_agent_after_recovery": (after.saturating_sub(before)) as f64 / n as f64,
    })
}

fn run_phase(phase: &str, opts: &Options, dir: &Path) -> Value {
    let exe = std::env::current_exe().expect("own path");
    let output = Command::new(exe)
        .args(["--phase", phase, "--agents", &opts.agents.to_string()])
        .args(["--concurrency", &opts.concurrency.to_string()])
        .arg("--dir")
        .arg(dir)
        .output()
        .expect("phase runs");
    assert!(
        output.status.success(),
        "phase {phase} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("phase prints JSON")
}

fn main() {
    let opts = options();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    if let Some(phase) = &opts.phase {
        let dir = opts.dir.clone().expect("--dir");
        let result = runtime.block_on(async {
            match phase.as_str() {
                "bare" => phase_bare(opts.agents).await,
                "create" => phase_create(opts.agents, opts.concurrency, &dir).await,
                "recover" => phase_recover(opts.agents, &dir).await,
                other => panic!("unknown phase {other}"),
            }
        });
        println!("{result}");
        return;
    }

    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("db");
    eprintln!(
        "measuring {} idle agents (concurrency {})",
        opts.agents, opts.concurrency
    );
    let bare = run_phase("bare", &opts, &dir);
    let create = run_phase("create", &opts, &dir);
    let recover = run_phase("recover", &opts, &dir);
    let bare_bytes = bare["bytes_per_actor"].as_f64().unwrap_or(0.0);
    let agent_bytes = create["bytes_per_agent"].as_f64().unwrap_or(0.0);
    let recovered_bytes = recover["bytes_per_agent_after_recovery"]
        .as_f64()
        .unwrap_or(0.0);
    let bare_rate = bare["spawn_per_s"].as_f64().unwrap_or(0.0);
    let create_rate = create["create_per_s"].as_f64().unwrap_or(0.0);
    let recover_s = recover["recover_s"].as_f64().unwrap_or(0.0);
    let recover_rate = opts.agents as f64 / recover_s.max(1e-9);

    println!(
        "idle agents: {} (create concurrency {})",
        opts.agents, opts.concurrency
    );
    println!(
        "{:<40} {:>14} {:>14} {:>8}",
        "figure", "holarchy", "bare ractor", "ratio"
    );
    let row = |name: &str, ours: f64, reference: f64, unit: &str| {
        let ratio = if reference > 0.0 {
            ours / reference
        } else {
            0.0
        };
        println!(
            "{:<40} {:>11.0} {unit:<2} {:>11.0} {unit:<2} {:>7.2}x",
            name, ours, reference, ratio
        );
    };
    row(
        "RSS per idle agent (after create)",
        agent_bytes,
        bare_bytes,
        "B",
    );
    row(
        "RSS per idle agent (after recovery)",
        recovered_bytes,
        bare_bytes,
        "B",
    );
    row(
        "durable creations / s vs bare spawns / s",
        create_rate,
        bare_rate,
        "/s",
    );
    row(
        "recovered agents / s vs bare spawns / s",
        recover_rate,
        bare_rate,
        "/s",
    );
    println!(
        "{:<40} {:>11.3} s",
        "recovery to all actors live", recover_s
    );
    println!(
        "{:<40} {:>14}",
        "flushes during creation", create["flushes"]
    );

    let report = json!({
        "bench": "idle_agents",
        "agents": opts.agents,
        "concurrency": opts.concurrency,
        "holarchy": { "create": create, "recover": recover },
        "bare_ractor": bare,
        "ratios": {
            "rss_per_agent_vs_bare": agent_bytes / bare_bytes.max(1.0),
            "rss_after_recovery_vs_bare": recovered_bytes / bare_bytes.max(1.0),
        },
    });
    println!("{report}");
    if let Some(parent) = opts.json_out.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    std::fs::write(&opts.json_out, format!("{report}\n")).expect("JSON written");
    eprintln!("wrote {}", opts.json_out.display());
}
