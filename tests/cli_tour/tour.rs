//! The README's five-minute tour, run as written, top to bottom, on one
//! daemon (and the scratch daemon its load tests start): every command
//! must succeed. What a person fills in is filled in here: `TASK_ID` is
//! the newest task of the agent the tour last named, `~/src/project` a
//! fresh git repository, `/tmp/holarchy-bench` a temporary directory. The
//! load tests' sizes are cut (a debug build creating 100,000 agents
//! would take minutes), their flags kept. After each `agent send`, the
//! runner waits for the agent's turns to end, as a person reading the
//! replies would.

use std::path::Path;

use serde_json::Value;

use crate::cli::{text, until, Holarchy};
use crate::common::workspaces::repository;
use crate::common::{data_dir, Daemon};
use crate::readme::tour_commands;

/// Where the README's load tests put their scratch daemon.
const BENCH_DIR: &str = "/tmp/holarchy-bench";

/// The load tests' sizes, cut for a test; every other value as written.
fn cut_size(flag: &str, value: &str) -> String {
    let most = match flag {
        "--agents" => 30,
        "--messages" => 120,
        "--concurrency" => 8,
        "--tree" => 2,
        _ => return value.to_owned(),
    };
    let written: u64 = value.parse().expect("a number");
    written.min(most).to_string()
}

/// The newest task (ids are ordered by time) of `agent`.
fn newest_task(cli: &Holarchy, agent: &str) -> String {
    until(&format!("a task of {agent}"), || {
        cli.json(&["task", "list", agent])
            .iter()
            .map(|t| text(t, "task_id").to_owned())
            .max()
    })
}

/// Waits until none of `agent`'s messages is queued or being handled.
fn settled(cli: &Holarchy, agent: &str) {
    until(&format!("{agent}'s turns to end"), || {
        let messages = cli.json(&["agent", "messages", agent]);
        messages
            .iter()
            .all(|m| m["status"] != "queued" && m["status"] != "handling")
            .then_some(())
    });
}

/// The agent a command names, when it names one (`agent send ops ...`,
/// `task list ops`).
fn named_agent(words: &[String]) -> Option<&str> {
    match words.get(1..4) {
        Some([group, verb, agent])
            if (group == "agent" && verb != "list") || (group == "task" && verb == "list") =>
        {
            Some(agent.as_str())
        }
        _ => None,
    }
}

/// A daemon a `--restart` started: no child of this test, stopped by pid.
struct Detached(Option<u32>);

impl Drop for Detached {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_tour_runs_top_to_bottom_on_one_daemon() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let tour = tour_commands(&readme);
    assert!(tour.len() >= 30, "the tour was found: {tour:?}");

    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    let project = repository(root.path());
    let bench_dir = root.path().join("bench");
    let mut scratch: Option<Daemon> = None;
    let mut detached = Detached(None);
    let mut agent = String::new();

    for words in &tour {
        let line = words.join(" ");
        let mut args: Vec<String> = Vec::new();
        for (i, word) in words.iter().enumerate().skip(1) {
            let word = match word.as_str() {
                "TASK_ID" => newest_task(&cli, &agent),
                "~/src/project" => project.display().to_string(),
                _ if word.starts_with(BENCH_DIR) => {
                    word.replacen(BENCH_DIR, &bench_dir.display().to_string(), 1)
                }
                _ if words[1] == "bench" || words.get(3).is_some_and(|w| w == "bench") => {
                    cut_size(&words[i - 1], word)
                }
                _ => word.clone(),
            };
            args.push(word);
        }
        if args[0] == "serve" {
            assert_eq!(args[1], "--data-dir", "{line}");
            scratch = Some(Daemon::start(Path::new(&args[2])).await);
            continue;
        }
        if let Some(named) = named_agent(words) {
            named.clone_into(&mut agent);
        }
        let runner = if args.iter().any(|a| a == "--data-dir") {
            Holarchy::default()
        } else {
            cli.clone()
        };
        let mut with_samples: Vec<&str> = args.iter().map(String::as_str).collect();
        if args.iter().any(|a| a == "idle") {
            // Fewer latency samples than the default 1,000 per checkpoint.
            with_samples.extend(["--samples", "20"]);
        }
        let run = runner.run(&with_samples);
        assert!(
            run.status.success(),
            "the tour's `{line}` failed ({}):\n{}",
            run.status,
            run.stderr
        );
        if args.iter().any(|a| a == "--restart") {
            // The restarted daemon's log, in the system's temporary
            // directory, goes with the test.
            let report: Value = run
                .stdout
                .lines()
                .last()
                .and_then(|l| serde_json::from_str(l).ok())
                .unwrap_or_default();
            if let Some(log) = report["restart"]["log"].as_str() {
                let _ = std::fs::remove_file(log);
            }
            let status: Value = runner
                .json(&["--data-dir", &bench_dir.display().to_string(), "status"])
                .remove(0);
            detached.0 = status["pid"].as_u64().map(|pid| pid as u32);
        }
        if args.get(1).is_some_and(|verb| verb == "send") && args[0] == "agent" {
            settled(&cli, &agent);
        }
    }
    assert!(scratch.is_some(), "the tour starts a scratch daemon");
    // The tour archived ops at its end; the list says so only with --all.
    let live = cli.ok(&["agent", "list"]);
    assert!(!live.lines().any(|l| l.contains(" ops ")), "{live}");
    drop(detached);
}
