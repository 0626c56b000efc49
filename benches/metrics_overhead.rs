//! What the metrics cost: the real daemon with its metrics on and with
//! `serve --no-metrics`, alternated in one run (on/off, then off/on, ...),
//! each on a fresh data directory. Each daemon is driven by the bench
//! tools over its Unix socket: `holarchy bench idle` for SendMessage to the
//! turn's start on an idle daemon, then `holarchy bench turns` for
//! throughput and the daemon's CPU per turn.
//!
//! ```sh
//! cargo bench --bench metrics_overhead -- [--rounds 3] [--agents 1000] [--messages 20000] [--samples 500]
//! ```
//!
//! First, in process and without the noise of a whole daemon, what the
//! metrics add to one turn: the runtime's counters and the gRPC layer's,
//! on and off, from two threads at once.
//!
//! Prints a table of medians over the rounds (with every round's figure)
//! and one JSON line, and writes the JSON to
//! `target/bench-results/metrics_overhead.json`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

#[path = "support/cli.rs"]
mod cli;
#[path = "support/figure.rs"]
mod figure;

const HOLARCHY: &str = env!("CARGO_BIN_EXE_holarchy");

struct Options {
    rounds: usize,
    agents: usize,
    messages: usize,
    samples: usize,
}

fn options() -> Options {
    let mut opts = Options {
        rounds: 3,
        agents: 1_000,
        messages: 20_000,
        samples: 500,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = || -> usize {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{arg} takes a number"))
        };
        match arg.as_str() {
            "--rounds" => opts.rounds = number(),
            "--agents" => opts.agents = number(),
            "--messages" => opts.messages = number(),
            "--samples" => opts.samples = number(),
            // cargo bench passes --bench; ignore what is not ours.
            _ => {}
        }
    }
    opts
}

/// The figures of one daemon's run.
const FIGURES: [(&str, &str); 5] = [
    (
        "SendMessage to turn seen p50, idle (us)",
        "turn_seen_p50_us",
    ),
    ("SendMessage acknowledged p50, idle (us)", "ack_p50_us"),
    ("handled turns / s, 512 in flight", "handled_per_s"),
    ("daemon CPU per turn (us)", "cpu_us_per_turn"),
    (
        "send to turn end p50, loaded (us)",
        "loaded_turn_end_p50_us",
    ),
];

/// A running daemon on its own data directory.
struct Daemon {
    child: Child,
    data_dir: PathBuf,
    _dir: tempfile::TempDir,
}

impl Daemon {
    fn start(metrics: bool) -> Daemon {
        let dir = tempfile::tempdir().expect("temp dir");
        let data_dir = dir.path().join("data");
        let mut command = Command::new(HOLARCHY);
        command.args(["serve", "--data-dir"]).arg(&data_dir);
        if !metrics {
            command.arg("--no-metrics");
        }
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the daemon starts");
        let daemon = Daemon {
            child,
            data_dir,
            _dir: dir,
        };
        for _ in 0..300 {
            if daemon.tool(&["status"]).is_some() {
                return daemon;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the daemon did not answer within 30 s");
    }

    /// Runs `holarchy --json ARGS` against this daemon: its last JSON line.
    fn tool(&self, args: &[&str]) -> Option<Value> {
        let output = Command::new(HOLARCHY)
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--json")
            .args(args)
            .stderr(Stdio::null())
            .output()
            .ok()?;
        if !output.status.success() {
            return None;
        }
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .rev()
            .find_map(|line| serde_json::from_str(line).ok())
    }

    fn stop(mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
        wait_unlocked(&self.data_dir);
    }
}

/// Lets the daemon's shutdown finish before its directory is deleted.
fn wait_unlocked(data_dir: &Path) {
    let lock = data_dir.join("holarchy.lock");
    for _ in 0..600 {
        if std::fs::File::open(&lock).is_ok_and(|f| f.try_lock().is_ok()) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The first value under `key` anywhere in `v`.
fn find<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    match v {
        Value::Object(map) => map
            .get(key)
            .or_else(|| map.values().find_map(|inner| find(inner, key))),
        Value::Array(items) => items.iter().find_map(|inner| find(inner, key)),
        _ => None,
    }
}

fn p50(v: &Value, key: &str) -> Option<f64> {
    find(v, key).and_then(|f| figure::get(&f["p50"]))
}

/// One daemon, measured idle and then loaded.
fn measure(metrics: bool, opts: &Options) -> Value {
    let daemon = Daemon::start(metrics);
    let (agents, samples, messages) = (
        opts.agents.to_string(),
        opts.samples.to_string(),
        opts.messages.to_string(),
    );
    let idle = daemon
        .tool(&["bench", "idle", "--agents", &agents, "--samples", &samples])
        .expect("bench idle ran");
    let out = daemon.data_dir.join("turns.json");
    let turns = daemon
        .tool(&[
            "bench",
            "turns",
            "--agents",
            &agents,
            "--messages",
            &messages,
            "--concurrency",
            "512",
            "--out",
            out.to_str().expect("UTF-8 path"),
        ])
        .expect("bench turns ran");
    daemon.stop();
    json!({
        "metrics": metrics,
        "turn_seen_p50_us": p50(&idle, "send_message_to_turn_seen_us"),
        "ack_p50_us": p50(&idle, "send_message_ack_us"),
        "handled_per_s": figure::get(&turns["handled_per_s"]),
        "cpu_us_per_turn": figure::get(&turns["daemon_cpu_us_per_turn"]),
        "loaded_turn_end_p50_us": figure::get(&turns["send_to_turn_end_us"]["p50"]),
    })
}

fn median(mut xs: Vec<f64>) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let mid = xs.len() / 2;
    Some(if xs.len().is_multiple_of(2) {
        (xs[mid - 1] + xs[mid]) / 2.0
    } else {
        xs[mid]
    })
}

/// Nanoseconds per turn of what a turn records (its start, its end, one
/// tool call), `metrics` on or off, two threads at once.
fn runtime_recording_ns(metrics: bool) -> f64 {
    use holarchy_actors::metrics::RuntimeMetrics;
    const TURNS: u32 = 500_000;
    let meters = std::sync::Arc::new(if metrics {
        RuntimeMetrics::default()
    } else {
        RuntimeMetrics::off()
    });
    let started = Instant::now();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let meters = meters.clone();
            std::thread::spawn(move || {
                let agent = holarchy_supervision::AgentId::generate();
                for _ in 0..TURNS {
                    meters.turn_started("scripted", agent);
                    meters.tool_called("core", false, Duration::from_micros(20));
                    meters.turn_finished("scripted", "handled", Duration::from_micros(90));
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("recording thread");
    }
    started.elapsed().as_nanos() as f64 / f64::from(TURNS)
}

/// Nanoseconds per call through the gRPC counting layer around a service
/// that answers at once, counting on or off, two tasks at once.
fn grpc_recording_ns(metrics: bool) -> f64 {
    use tower::{Layer as _, Service as _};
    const CALLS: u32 = 200_000;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("tokio");
    let mut meters = holarchy::metrics::GrpcMetrics::new(&[holarchy::api::pb::FILE_DESCRIPTOR_SET]);
    if !metrics {
        meters = meters.off();
    }
    let started = Instant::now();
    runtime.block_on(async {
        let tasks: Vec<_> = (0..2)
            .map(|_| {
                let layer = holarchy::metrics::GrpcLayer(meters.clone());
                tokio::spawn(async move {
                    let mut service =
                        layer.layer(tower::service_fn(|_: http::Request<()>| async {
                            let mut answer = http::Response::new(());
                            answer
                                .headers_mut()
                                .insert("grpc-status", http::HeaderValue::from_static("0"));
                            Ok::<_, std::convert::Infallible>(answer)
                        }));
                    for _ in 0..CALLS {
                        let request = http::Request::builder()
                            .uri("/holarchy.v1.AgentService/SendMessage")
                            .body(())
                            .expect("request");
                        service.call(request).await.expect("answered");
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("caller");
        }
    });
    started.elapsed().as_nanos() as f64 / f64::from(CALLS)
}

fn main() {
    let opts = options();
    let recording = json!({
        "runtime_ns_per_turn": { "on": runtime_recording_ns(true), "off": runtime_recording_ns(false) },
        "grpc_ns_per_call": { "on": grpc_recording_ns(true), "off": grpc_recording_ns(false) },
    });
    println!("in process, two threads: what one turn records (start, end, one tool call), and one call through the gRPC layer");
    for (name, key) in [
        ("runtime, ns per turn", "runtime_ns_per_turn"),
        ("gRPC layer, ns per call", "grpc_ns_per_call"),
    ] {
        println!(
            "{:<42} {} {}",
            name,
            figure::show(figure::get(&recording[key]["on"]), 12, 0),
            figure::show(figure::get(&recording[key]["off"]), 12, 0),
        );
    }
    let mut runs = Vec::new();
    for round in 0..opts.rounds {
        // Alternate which goes first, so drift over the run (the machine
        // warming, another load) falls on both sides.
        let order = if round.is_multiple_of(2) {
            [true, false]
        } else {
            [false, true]
        };
        for metrics in order {
            eprintln!(
                "round {} of {}: metrics {}",
                round + 1,
                opts.rounds,
                if metrics { "on" } else { "off" }
            );
            runs.push(measure(metrics, &opts));
        }
    }
    let side = |metrics: bool, key: &str| -> Vec<f64> {
        runs.iter()
            .filter(|r| r["metrics"] == metrics)
            .filter_map(|r| figure::get(&r[key]))
            .collect()
    };
    println!(
        "metrics overhead: {} rounds, {} agents, {} messages",
        opts.rounds, opts.agents, opts.messages
    );
    println!(
        "{:<42} {:>12} {:>12} {:>8}   rounds (on | off)",
        "figure (median)", "metrics on", "metrics off", "on/off"
    );
    let mut medians = serde_json::Map::new();
    for (name, key) in FIGURES {
        let (on, off) = (side(true, key), side(false, key));
        let show = |xs: &[f64]| {
            xs.iter()
                .map(|x| format!("{x:.0}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let (m_on, m_off) = (median(on.clone()), median(off.clone()));
        println!(
            "{:<42} {} {} {}x   {} | {}",
            name,
            figure::show(m_on, 12, 0),
            figure::show(m_off, 12, 0),
            figure::show(figure::ratio(m_on, m_off), 7, 3),
            show(&on),
            show(&off),
        );
        medians.insert(
            key.to_owned(),
            json!({ "on": m_on, "off": m_off, "on_vs_off": figure::ratio(m_on, m_off) }),
        );
    }
    let report = json!({
        "bench": "metrics_overhead",
        "rounds": opts.rounds,
        "agents": opts.agents,
        "messages": opts.messages,
        "samples": opts.samples,
        "recording": recording,
        "medians": medians,
        "runs": runs,
    });
    println!("{report}");
    cli::write_report(&cli::report_path("metrics_overhead"), &report);
}
