//! Idle agents through the real daemon: starts the `holarchy` binary on a
//! fresh data directory, drives it with `holarchy bench idle` over its Unix
//! socket (creation, memory, latencies at 1,000 / 10,000 / 100,000 / N
//! agents, SendMessage to turn start, archive, `kill -9` and restart), and
//! puts the bare ractor actor measured in this run next to its memory
//! figure.
//!
//! ```sh
//! cargo bench --bench daemon_idle -- --agents 100000 [--archive 90000] [--tree 0]
//! ```
//!
//! Other arguments (`--concurrency`, `--batch`, `--samples`) go to the tool
//! as they are. Prints a table and one JSON line and writes the JSON to
//! `target/bench-results/daemon_idle.json`.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

#[path = "support/alloc.rs"]
mod alloc;
#[path = "support/bare.rs"]
mod bare;
#[path = "support/cli.rs"]
mod cli;
#[path = "support/figure.rs"]
mod figure;

const HOLARCHY: &str = env!("CARGO_BIN_EXE_holarchy");

fn main() {
    // cargo bench passes --bench; everything else is the tool's.
    let tool_args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let agents: usize = tool_args
        .iter()
        .position(|a| a == "--agents")
        .and_then(|i| tool_args.get(i + 1))
        .map(|n| n.parse().expect("--agents takes a number"))
        .unwrap_or(10_000);

    // The reference first, while this process is still small.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    let reference = runtime.block_on(bare::phase_bare(agents));
    drop(runtime);

    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("data");
    let log = dir.path().join("daemon.log");
    let mut daemon = Command::new(HOLARCHY)
        .args(["serve", "--data-dir"])
        .arg(&data_dir)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("daemon log"))
        .spawn()
        .expect("the daemon starts");
    let socket = data_dir.join("holarchy.sock");
    for _ in 0..500 {
        if socket.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }

    let output = Command::new(HOLARCHY)
        .arg("--data-dir")
        .arg(&data_dir)
        .args(["--json", "bench", "idle", "--restart"])
        .args(&tool_args)
        .stderr(Stdio::inherit())
        .output()
        .expect("the bench tool runs");
    // `--restart` replaced the daemon we started; stop whichever runs now.
    let status = Command::new(HOLARCHY)
        .arg("--data-dir")
        .arg(&data_dir)
        .args(["--json", "status"])
        .output();
    let _ = daemon.kill();
    let _ = daemon.wait();
    if let Some(pid) = status
        .ok()
        .and_then(|o| serde_json::from_slice::<Value>(&o.stdout).ok())
        .and_then(|v| v["pid"].as_u64())
    {
        let _ = Command::new("kill").arg(pid.to_string()).status();
    }
    // The temporary directory goes when this returns: let the daemon finish
    // its shutdown (its lock is released last) rather than delete a store
    // under it.
    let lock = data_dir.join("holarchy.lock");
    for _ in 0..1200 {
        let free = std::fs::File::open(&lock).is_ok_and(|f| f.try_lock().is_ok());
        if free {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        output.status.success(),
        "bench idle failed: {}\n(daemon log: {})",
        String::from_utf8_lossy(&output.stdout),
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let mut report: Value = String::from_utf8_lossy(&output.stdout)
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .expect("the tool printed its JSON line");

    let bare_bytes = figure::get(&reference["bytes_per_actor"]);
    let per_agent = figure::get(&report["daemon_rss_per_agent_bytes"]);
    report["bench"] = json!("daemon_idle");
    report["bare_ractor"] = reference;
    report["ratios"] =
        json!({ "daemon_rss_per_agent_vs_bare": figure::ratio(per_agent, bare_bytes) });
    print_table(&report);
    println!("{report}");
    cli::write_report(&cli::report_path("daemon_idle"), &report);
}

fn print_table(r: &Value) {
    use figure::{get, show};
    println!("idle agents through the daemon: {}", r["total_agents"]);
    println!("{:<46} {:>14} {:>14}", "figure", "holarchy", "bare ractor");
    println!(
        "{:<46} {} B {} B   {}x",
        "RSS per idle agent",
        show(get(&r["daemon_rss_per_agent_bytes"]), 12, 0),
        show(get(&r["bare_ractor"]["bytes_per_actor"]), 12, 0),
        show(get(&r["ratios"]["daemon_rss_per_agent_vs_bare"]), 0, 2)
    );
    println!(
        "{:<46} {}/s {}/s",
        "durable creations vs bare spawns",
        show(get(&r["create_per_s"]), 12, 0),
        show(get(&r["bare_ractor"]["spawn_per_s"]), 12, 0)
    );
    let latency = |name: String, v: &Value| {
        println!(
            "{:<46} {} us p50 {} us p99",
            name,
            show(get(&v["p50"]), 10, 0),
            show(get(&v["p99"]), 8, 0)
        );
    };
    for point in r["checkpoints"].as_array().into_iter().flatten() {
        let n = &point["agents"];
        latency(format!("GetAgent at {n}"), &point["get_agent_us"]);
        latency(
            format!("ListAgents, page of 1,000, at {n}"),
            &point["list_agents_1000_us"],
        );
    }
    for (name, key) in [
        ("SendMessage until acknowledged", "send_message_ack_us"),
        (
            "SendMessage until the turn is seen",
            "send_message_to_turn_seen_us",
        ),
    ] {
        latency(name.to_owned(), &r[key]);
    }
    if let Some(a) = r["archive"].as_object() {
        println!(
            "{:<46} {} MB, {}x RSS when {} existed",
            format!("RSS after archiving {}", a["archived"]),
            show(get(&a["daemon_rss_bytes"]).map(|b| b / 1e6), 10, 0),
            show(get(&a["ratio"]), 0, 2),
            a["left"]
        );
    }
    if let Some(restart) = r["restart"].as_object() {
        println!(
            "{:<46} {} s",
            "kill -9 to answering with every agent",
            show(get(&restart["restart_s"]), 12, 3)
        );
    }
}
