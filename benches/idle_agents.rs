//! Idle agents: memory per agent, durable creation throughput, and time to
//! recover every agent after a restart, each next to the same figure for
//! bare ractor actors measured in the same run.
//!
//! `cargo bench --bench idle_agents -- --agents 10000 [--concurrency 64]`
//! `cargo bench --bench idle_agents -- --agents 1000 --tree 10 --archive 10000`
//! `cargo bench --bench idle_agents -- --agents 1000000 --concurrency 4 --batch 1000`
//!
//! `--tree F` adds a tree shape: 1,000 public agents (`--publics`) with F
//! private children each, and its recovery. `--archive N` adds the time to
//! archive one public agent with N private descendants (100 delegators,
//! each with N/100 - 1 children). `--partition-restart` adds the time to
//! bring back one root partition, killed with every agent recovered.
//! `--poisoned` adds a recovery with one agent's record damaged on disk,
//! against the clean one.
//!
//! Each measurement runs in a fresh child process (this binary, re-run with
//! `--phase`), so memory freed by one phase cannot flatter the next within
//! the process. The bare reference runs twice, first and last: on a VM
//! the host's cost of backing fresh guest memory can move its rate
//! several times over, and a later process may get pages the earlier ones
//! warmed. Prints
//! a table and one JSON line, and writes the JSON to
//! `target/bench-results/idle_agents.json` (or `--json PATH`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use holarchy::store::sled_store::StoreConfig;
use holarchy::store::SledStore;
use holarchy_actors::plane::spawn::{spawn_agent, SpawnRequest};
use holarchy_actors::topology::partition_of;
use holarchy_actors::{NewAgent, Runtime, RuntimeConfig, ScriptedBrain};
use holarchy_supervision::{AgentId, Preset};
use serde_json::{json, Value};

#[path = "support/alloc.rs"]
mod alloc;
#[path = "support/bare.rs"]
mod bare;
#[path = "support/cli.rs"]
mod cli;
#[path = "support/figure.rs"]
mod figure;
#[path = "idle_agents/poisoned.rs"]
mod poisoned;
use bare::{phase_bare, settle};

struct Options {
    agents: usize,
    concurrency: usize,
    tree: usize,
    publics: usize,
    /// Create through `CreateAgents` batches of this size (0: one by one).
    batch: usize,
    archive: usize,
    /// Also time a root partition's restart with every agent recovered.
    partition_restart: bool,
    /// Also time a recovery with one agent's record damaged.
    poisoned: bool,
    json_out: PathBuf,
    phase: Option<String>,
    dir: Option<PathBuf>,
}

fn options() -> Options {
    let mut opts = Options {
        agents: 10_000,
        concurrency: 64,
        tree: 0,
        publics: 1_000,
        batch: 0,
        archive: 0,
        partition_restart: false,
        poisoned: false,
        json_out: cli::report_path("idle_agents"),
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
            "--tree" => opts.tree = value().parse().expect("--tree takes a number"),
            "--batch" => opts.batch = value().parse().expect("--batch takes a number"),
            "--publics" => opts.publics = value().parse().expect("--publics takes a number"),
            "--archive" => opts.archive = value().parse().expect("--archive takes a number"),
            "--partition-restart" => opts.partition_restart = true,
            "--poisoned" => opts.poisoned = true,
            "--json" => opts.json_out = PathBuf::from(value()),
            "--phase" => opts.phase = Some(value()),
            "--dir" => opts.dir = Some(PathBuf::from(value())),
            // cargo bench passes --bench; ignore what is not ours.
            _ => {}
        }
    }
    opts
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

async fn phase_create(n: usize, concurrency: usize, batch: usize, dir: &Path) -> Value {
    let (store, runtime) = open(dir).await;
    let runtime = Arc::new(runtime);
    let before = settle().await;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..concurrency {
        let runtime = runtime.clone();
        tasks.push(tokio::spawn(async move {
            if batch > 0 {
                // Batches of `batch` names, dealt round-robin to workers.
                let mut start = worker * batch;
                while start < n {
                    let specs = (start..(start + batch).min(n))
                        .map(|i| NewAgent {
                            name: format!("idle-{i}"),
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
                    runtime.create_agents(specs).await.expect("agents created");
                    start += concurrency * batch;
                }
                return;
            }
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
    let commit_path = store.commit_stats();
    runtime.shutdown(Duration::from_secs(30)).await;
    store.close().await;
    json!({
        "bytes_per_agent": figure::per_item(before, after, n),
        "create_per_s": figure::rate(n, elapsed.as_secs_f64()),
        "flushes": commit_path.flushes,
        "commit_path": commit_path,
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
        "bytes_per_agent_after_recovery": figure::per_item(before, after, n),
    })
}

/// Kills one root partition of the recovered store and times until its
/// replacement supervises every agent of its share again: the share listed
/// from the store, then each agent's subtree respawned.
async fn phase_partition(n: usize, dir: &Path) -> Value {
    let (store, runtime) = open(dir).await;
    let ctx = runtime.ctx().clone();
    let count = ctx.topology.partition_count();
    let ids = ctx.reads().public_agent_ids().expect("public ids");
    // A fresh store of live agents: every id listed comes back.
    assert_eq!(ids.len(), n, "every agent created is listed");
    let first = *ids.first().expect("an agent");
    let index = partition_of(first, count);
    let share = ids
        .iter()
        .filter(|id| partition_of(**id, count) == index)
        .count();
    drop(ids);
    let victim = ctx.topology.partition_for(first).expect("partition");
    let started = Instant::now();
    victim.kill();
    loop {
        let back = ctx
            .topology
            .partition_for(first)
            .filter(|p| p.get_id() != victim.get_id())
            .is_some_and(|p| p.get_children().len() == share);
        if back {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "the partition's agents did not come back"
        );
        // Reading the children copies half a million cells under the
        // lock each spawn takes to link: not too often.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let elapsed = started.elapsed();
    runtime.shutdown(Duration::from_secs(30)).await;
    store.close().await;
    json!({
        "partitions": count,
        "share": share,
        "restart_s": elapsed.as_secs_f64(),
    })
}

/// Creates `publics` public agents, then `fanout` private children under
/// each, every call durable, `concurrency` callers at a time.
async fn phase_tree(publics: usize, fanout: usize, concurrency: usize, dir: &Path) -> Value {
    let (store, runtime) = open(dir).await;
    let runtime = Arc::new(runtime);
    let before = settle().await;
    let started = Instant::now();
    let ids = Arc::new(create_publics(&runtime, publics, concurrency, "tree").await);
    let publics_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..concurrency {
        let runtime = runtime.clone();
        let ids = ids.clone();
        tasks.push(tokio::spawn(async move {
            let mut i = worker;
            while i < ids.len() * fanout {
                spawn_private(&runtime, ids[i / fanout], Preset::PrivateChild).await;
                i += concurrency;
            }
        }));
    }
    for task in tasks {
        task.await.expect("spawner task");
    }
    let private_s = started.elapsed().as_secs_f64();
    let after = settle().await;
    let total = publics * (1 + fanout);
    runtime.shutdown(Duration::from_secs(60)).await;
    store.close().await;
    json!({
        "agents": total,
        "bytes_per_agent": figure::per_item(before, after, total),
        "public_create_per_s": figure::rate(publics, publics_s),
        "private_spawn_per_s": figure::rate(publics * fanout, private_s),
    })
}

/// Times the archive of one public agent with `n` private descendants.
async fn phase_archive(n: usize, concurrency: usize, dir: &Path) -> Value {
    let (store, runtime) = open(dir).await;
    let runtime = Arc::new(runtime);
    let root = runtime
        .create_agent("archive-root".into(), None)
        .await
        .expect("root");
    let delegators = 100.min(n.max(1));
    let mut teams = Vec::with_capacity(delegators);
    for _ in 0..delegators {
        teams.push(spawn_private(&runtime, root, Preset::PrivateDelegator).await);
    }
    let teams = Arc::new(teams);
    let children = n.saturating_sub(delegators);
    let mut tasks = Vec::new();
    for worker in 0..concurrency {
        let runtime = runtime.clone();
        let teams = teams.clone();
        tasks.push(tokio::spawn(async move {
            let mut i = worker;
            while i < children {
                spawn_private(&runtime, teams[i % teams.len()], Preset::PrivateChild).await;
                i += concurrency;
            }
        }));
    }
    for task in tasks {
        task.await.expect("spawner task");
    }
    let started = Instant::now();
    let outcome = runtime.archive_agent(root).await.expect("archived");
    let archive_s = started.elapsed().as_secs_f64();
    let snapshot = runtime.snapshot().await.expect("snapshot");
    assert_eq!(
        snapshot.private_agents, 0,
        "every descendant's actor stopped"
    );
    runtime.shutdown(Duration::from_secs(60)).await;
    store.close().await;
    json!({ "descendants": outcome.agents - 1, "tasks_stopped": outcome.tasks, "archive_s": archive_s })
}

async fn create_publics(
    runtime: &Arc<Runtime>,
    n: usize,
    concurrency: usize,
    prefix: &str,
) -> Vec<AgentId> {
    let mut tasks = Vec::new();
    for worker in 0..concurrency {
        let runtime = runtime.clone();
        let prefix = prefix.to_owned();
        tasks.push(tokio::spawn(async move {
            let mut made = Vec::new();
            let mut i = worker;
            while i < n {
                made.push(
                    runtime
                        .create_agent(format!("{prefix}-{i}"), None)
                        .await
                        .expect("agent created"),
                );
                i += concurrency;
            }
            made
        }));
    }
    let mut ids = Vec::with_capacity(n);
    for task in tasks {
        ids.extend(task.await.expect("creator task"));
    }
    ids
}

async fn spawn_private(runtime: &Runtime, parent: AgentId, preset: Preset) -> AgentId {
    let profile = runtime
        .ctx()
        .reads()
        .agent(parent)
        .expect("read")
        .expect("parent")
        .profile;
    let request = SpawnRequest {
        fork: false,
        preset,
        initial_message: Some("stand by".into()),
        name: None,
        workspace_mode: Default::default(),
        root: None,
        role: None,
    };
    spawn_agent(runtime.ctx(), parent, profile, request)
        .await
        .expect("spawned")
        .agent_id
}

fn run_phase(phase: &str, opts: &Options, dir: &Path) -> Value {
    let exe = std::env::current_exe().expect("own path");
    let output = Command::new(exe)
        .args(["--phase", phase, "--agents", &opts.agents.to_string()])
        .args([
            "--tree",
            &opts.tree.to_string(),
            "--publics",
            &opts.publics.to_string(),
        ])
        .args(["--archive", &opts.archive.to_string()])
        .args(["--batch", &opts.batch.to_string()])
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
    // `RUST_LOG=info` shows the runtime's own account (recovery timings).
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    if let Some(phase) = &opts.phase {
        let dir = opts.dir.clone().expect("--dir");
        let result = runtime.block_on(async {
            match phase.as_str() {
                "bare" => phase_bare(opts.agents).await,
                "create" => phase_create(opts.agents, opts.concurrency, opts.batch, &dir).await,
                "recover" => phase_recover(opts.agents, &dir).await,
                "partition" => phase_partition(opts.agents, &dir).await,
                "tree" => phase_tree(opts.publics, opts.tree, opts.concurrency, &dir).await,
                "tree-recover" => phase_recover(opts.publics * (1 + opts.tree), &dir).await,
                "archive" => phase_archive(opts.archive, opts.concurrency, &dir).await,
                "poison" => poisoned::phase_poison(&dir),
                "poisoned-recover" => poisoned::phase_poisoned_recover(opts.agents, &dir).await,
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
    // The bare reference again, now on memory the phases before just gave
    // back. On a VM whose host backs guest memory on first touch, a first
    // bare run can be several times slower than this one (bare spawns are
    // bound by page faults), so the ratio is shown against both.
    let bare_again = run_phase("bare", &opts, &dir);
    let bare_bytes = figure::get(&bare["bytes_per_actor"]);
    let agent_bytes = figure::get(&create["bytes_per_agent"]);
    let recovered_bytes = figure::get(&recover["bytes_per_agent_after_recovery"]);
    let bare_rate = figure::get(&bare["spawn_per_s"]);
    let bare_again_rate = figure::get(&bare_again["spawn_per_s"]);
    let create_rate = figure::get(&create["create_per_s"]);
    let recover_s = figure::get(&recover["recover_s"]);
    let recover_rate = recover_s.and_then(|s| figure::rate(opts.agents, s));

    let mode = match opts.batch {
        0 => "one by one".to_owned(),
        n => format!("CreateAgents batches of {n}"),
    };
    println!(
        "idle agents: {} (create concurrency {}, {mode})",
        opts.agents, opts.concurrency
    );
    println!(
        "{:<40} {:>14} {:>14} {:>8}",
        "figure", "holarchy", "bare ractor", "ratio"
    );
    let row = |name: &str, ours: Option<f64>, reference: Option<f64>, unit: &str| {
        println!(
            "{:<40} {} {unit:<2} {} {unit:<2} {}x",
            name,
            figure::show(ours, 11, 0),
            figure::show(reference, 11, 0),
            figure::show(figure::ratio(ours, reference), 7, 2),
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
        "  the same vs bare spawns run again",
        create_rate,
        bare_again_rate,
        "/s",
    );
    row(
        "recovered agents / s vs bare spawns / s",
        recover_rate,
        bare_rate,
        "/s",
    );
    println!(
        "{:<40} {} s",
        "recovery to all actors live",
        figure::show(recover_s, 11, 3)
    );
    println!(
        "{:<40} {:>14}",
        "flushes during creation", create["flushes"]
    );

    let mut partition = Value::Null;
    if opts.partition_restart {
        partition = run_phase("partition", &opts, &dir);
        println!(
            "{:<40} {} s",
            format!(
                "partition restart, {} of {} agents",
                partition["share"], opts.agents
            ),
            figure::show(figure::get(&partition["restart_s"]), 11, 3)
        );
    }

    let mut poisoned = Value::Null;
    if opts.poisoned {
        // A clean recovery just before, so both starts find the store as
        // warm in the page cache.
        let clean = run_phase("recover", &opts, &dir);
        let clean_s = figure::get(&clean["recover_s"]);
        run_phase("poison", &opts, &dir);
        let damaged = run_phase("poisoned-recover", &opts, &dir);
        let poisoned_s = figure::get(&damaged["recover_s"]);
        println!(
            "{:<40} {} s",
            "clean recovery again",
            figure::show(clean_s, 11, 3)
        );
        println!(
            "{:<40} {} s {}x the clean recovery",
            "recovery with one poisoned record",
            figure::show(poisoned_s, 11, 3),
            figure::show(figure::ratio(poisoned_s, clean_s), 7, 2),
        );
        poisoned = json!({ "clean": clean, "poisoned": damaged });
    }

    let mut tree = Value::Null;
    if opts.tree > 0 {
        let tree_dir = tmp.path().join("tree");
        let made = run_phase("tree", &opts, &tree_dir);
        let back = run_phase("tree-recover", &opts, &tree_dir);
        let bytes = figure::get(&made["bytes_per_agent"]);
        println!(
            "tree: {} public agents x {} private children = {} agents",
            opts.publics, opts.tree, made["agents"]
        );
        row("RSS per agent in the tree", bytes, bare_bytes, "B");
        row(
            "private spawns / s vs bare spawns / s",
            figure::get(&made["private_spawn_per_s"]),
            bare_rate,
            "/s",
        );
        println!(
            "{:<40} {} s",
            "tree recovery to all actors live",
            figure::show(figure::get(&back["recover_s"]), 11, 3)
        );
        tree = json!({ "publics": opts.publics, "fanout": opts.tree, "create": made, "recover": back });
    }
    let mut archive = Value::Null;
    if opts.archive > 0 {
        let done = run_phase("archive", &opts, &tmp.path().join("archive"));
        println!(
            "{:<40} {} s",
            format!("archive of {} descendants", done["descendants"]),
            figure::show(figure::get(&done["archive_s"]), 11, 3)
        );
        archive = done;
    }

    let report = json!({
        "bench": "idle_agents",
        "agents": opts.agents,
        "concurrency": opts.concurrency,
        "batch": opts.batch,
        "holarchy": {
            "create": create,
            "recover": recover,
            "partition_restart": partition,
            "poisoned_recover": poisoned,
            "tree": tree,
            "archive": archive,
        },
        "bare_ractor": bare,
        "bare_ractor_again": bare_again,
        "ratios": {
            "create_rate_vs_bare": figure::ratio(create_rate, bare_rate),
            "create_rate_vs_bare_again": figure::ratio(create_rate, bare_again_rate),
            "rss_per_agent_vs_bare": figure::ratio(agent_bytes, bare_bytes),
            "rss_after_recovery_vs_bare": figure::ratio(recovered_bytes, bare_bytes),
        },
    });
    println!("{report}");
    cli::write_report(&opts.json_out, &report);
}
