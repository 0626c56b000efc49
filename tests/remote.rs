//! Proves that a CLI command driving many calls over TCP carries the bearer
//! token on every one of them: `holarchy bench idle --addr URL` against a
//! daemon listening on loopback succeeds with the token given by flag or by
//! HOLARCHY_TOKEN, reports every figure (none missing, none absurd), and
//! fails with `unauthenticated` when the token is wrong; `--compare-tcp`
//! reports the same figures over both transports.

mod common;

use std::process::Output;
use std::time::Duration;

use common::{data_dir, Daemon};
use holarchy::api::pb;
use serde_json::Value;

const TOKEN: &str = "remote-test-token-0123456789abcdef";

/// Agents the bench creates: enough for its calls to spread over many.
const AGENTS: usize = 200;

/// A daemon on a fresh data directory that also listens on a free loopback
/// port, with `token` as its bearer token (none: it writes one to
/// <data-dir>/token); and its URL.
async fn listening_daemon(root: &tempfile::TempDir, token: Option<&str>) -> (Daemon, String) {
    let listen = common::free_addr();
    let env: Vec<(&str, &str)> = token.map(|t| ("HOLARCHY_TOKEN", t)).into_iter().collect();
    let daemon = Daemon::start_with_env(&data_dir(root), &["--listen", &listen], &env).await;
    (daemon, format!("http://{listen}"))
}

/// Runs the `holarchy` CLI with `args` and `env`, nothing inherited that
/// could point it elsewhere, and a deadline so a hang fails the test.
async fn holarchy(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_holarchy"));
    command
        .args(args)
        .env_remove("HOLARCHY_TOKEN")
        .env_remove("HOLARCHY_ADDR")
        .env_remove("HOLARCHY_SOCKET")
        .env_remove("HOLARCHY_DATA_DIR")
        .envs(env.iter().copied())
        .kill_on_drop(true);
    tokio::time::timeout(Duration::from_secs(300), command.output())
        .await
        .expect("the CLI finishes within 5 minutes")
        .expect("the CLI runs")
}

/// `bench idle` with a small load; its output, required to succeed.
async fn bench_ok(extra: &[&str], env: &[(&str, &str)]) -> (String, Value) {
    let agents = AGENTS.to_string();
    let mut args = vec!["bench", "idle", "--agents", &agents, "--samples", "50"];
    args.extend_from_slice(extra);
    let out = holarchy(&args, env).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "bench idle failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report = stdout
        .lines()
        .last()
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("no JSON report last:\n{stdout}"));
    (stdout, report)
}

/// A latency figure that was measured: both percentiles present, positive,
/// ordered, and under a second (every call here is on loopback).
fn assert_latency(figures: &Value, what: &str) {
    let p50 = figures["p50"].as_f64();
    let p99 = figures["p99"].as_f64();
    let (Some(p50), Some(p99)) = (p50, p99) else {
        panic!("{what}: not measured: {figures}");
    };
    assert!(
        0.0 < p50 && p50 <= p99 && p99 < 1e6,
        "{what}: implausible p50 {p50} us, p99 {p99} us"
    );
    assert!(figures["samples"].as_u64() > Some(0), "{what}: no sample");
}

/// Every latency figure of one transport's part of the report.
fn assert_latencies(figures: &Value, transport: &str) {
    let points = figures["checkpoints"].as_array().expect("checkpoints");
    let last = points.last().expect("a checkpoint at N");
    assert_eq!(last["agents"].as_u64(), Some(AGENTS as u64));
    for point in points {
        assert_latency(&point["get_agent_us"], &format!("{transport} GetAgent"));
        assert_latency(
            &point["list_agents_1000_us"],
            &format!("{transport} ListAgents"),
        );
    }
    for key in [
        "empty_call_us",
        "send_message_ack_us",
        "send_message_to_turn_seen_us",
    ] {
        assert_latency(&figures[key], &format!("{transport} {key}"));
    }
}

/// What every successful run reports: the load went in and every figure
/// was taken, so none prints as `n/a`.
fn assert_sane(stdout: &str, report: &Value, transport: &str) {
    assert_eq!(report["transport"], transport);
    assert!(report["create_per_s"].as_f64() > Some(0.0));
    assert!(
        report["daemon_rss_per_agent_bytes"].is_number(),
        "RSS per agent not measured: {report}"
    );
    assert_latencies(report, transport);
    assert!(
        stdout.contains(&format!("GetAgent at {AGENTS} agents")),
        "no table:\n{stdout}"
    );
    assert!(!stdout.contains("n/a"), "a figure is missing:\n{stdout}");
}

async fn public_agents(daemon: &Daemon) -> u64 {
    let mut clients = daemon.clients().await;
    clients
        .runtime
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("status")
        .into_inner()
        .public_agents
}

#[tokio::test]
async fn bench_idle_over_tcp_with_the_token_flag() {
    let root = tempfile::tempdir().expect("tempdir");
    let (daemon, url) = listening_daemon(&root, Some(TOKEN)).await;
    let (stdout, report) = bench_ok(&["--addr", &url, "--token", TOKEN], &[]).await;
    assert_sane(&stdout, &report, "tcp");
    assert_eq!(public_agents(&daemon).await, AGENTS as u64);
}

#[tokio::test]
async fn bench_idle_over_tcp_with_the_token_from_the_environment() {
    let root = tempfile::tempdir().expect("tempdir");
    let (daemon, url) = listening_daemon(&root, Some(TOKEN)).await;
    let (stdout, report) = bench_ok(&["--addr", &url], &[("HOLARCHY_TOKEN", TOKEN)]).await;
    assert_sane(&stdout, &report, "tcp");
    assert_eq!(public_agents(&daemon).await, AGENTS as u64);
}

#[tokio::test]
async fn bench_idle_with_a_wrong_token_is_unauthenticated() {
    let root = tempfile::tempdir().expect("tempdir");
    let (daemon, url) = listening_daemon(&root, Some(TOKEN)).await;
    let wrong = "not-the-token-0123456789abcdef";
    let out = holarchy(
        &["bench", "idle", "--agents", "10", "--samples", "5"],
        &[("HOLARCHY_ADDR", &url), ("HOLARCHY_TOKEN", wrong)],
    )
    .await;
    assert!(!out.status.success(), "a wrong token was let in");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unauthenticated"),
        "not refused as unauthenticated:\n{stderr}"
    );
    assert_eq!(
        public_agents(&daemon).await,
        0,
        "the refused run created agents"
    );
}

#[tokio::test]
async fn compare_tcp_reports_both_transports_side_by_side() {
    let root = tempfile::tempdir().expect("tempdir");
    let (daemon, url) = listening_daemon(&root, None).await;
    let dir = daemon.data_dir.to_str().expect("utf-8 path");
    // No token given: the bench reads <data-dir>/token, as on the daemon's
    // own host.
    let (stdout, report) = bench_ok(&["--data-dir", dir, "--compare-tcp", &url], &[]).await;
    assert_sane(&stdout, &report, "unix");
    assert_latencies(&report["tcp"], "tcp");
    assert!(
        stdout.contains("tcp/unix"),
        "no side-by-side table:\n{stdout}"
    );
}
