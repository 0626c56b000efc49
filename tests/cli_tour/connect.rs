//! How the CLI reaches its daemon: the Unix socket by `--data-dir`,
//! `HOLARCHY_DATA_DIR` or `--socket`, and TCP by `--addr`/`--token` or
//! `HOLARCHY_ADDR`/`HOLARCHY_TOKEN`, refused without the right token.
//! `bench idle` too (over the socket only).

use crate::cli::{last_word, until, Holarchy};
use crate::common::{data_dir, Daemon};

/// Where a daemon started with `--listen 127.0.0.1:0` listens, as its log
/// reports it (the line may come just after the socket answers).
fn tcp_url(daemon: &Daemon) -> String {
    let addr = until("the daemon to log its tcp address", || {
        daemon
            .log()
            .lines()
            .filter(|l| l.contains("listening on tcp"))
            .find_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("addr=")))
            .map(str::to_owned)
    });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_reaches_one_daemon_by_socket_and_by_tcp_with_its_token() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with(&data_dir(&root), &["--listen", "127.0.0.1:0"]).await;
    let url = tcp_url(&daemon);
    // Made on first use, mode 0600 (README).
    let token = std::fs::read_to_string(daemon.data_dir.join("token")).expect("token file");
    let token = token.trim();

    let by_flags = Holarchy::tcp_flags(&url, token);
    let created = by_flags.ok(&["agent", "create", "over-tcp"]);
    let agent = last_word(&created);
    let by_variables = Holarchy::tcp_variables(&url, token);
    let sent = by_variables.json_one(&["agent", "send", "over-tcp", "hello"]);
    assert_eq!(sent["duplicate"], false);
    let status = by_variables.json_one(&["status"]);
    assert_eq!(status["pid"], daemon.pid());

    // The same daemon through its socket, however it is named.
    for socket in [
        Holarchy::data_dir(&daemon.data_dir),
        Holarchy::data_dir_variable(&daemon.data_dir),
    ] {
        assert_eq!(
            socket.json_one(&["agent", "get", "over-tcp"])["agent_id"],
            agent.as_str()
        );
    }
    let mut by_socket = Holarchy::data_dir(&root.path().join("elsewhere"));
    by_socket = by_socket.with_flags(&["--socket", daemon.socket().to_str().expect("utf-8")]);
    // The table shows the tail of each id.
    assert!(by_socket
        .ok(&["agent", "list"])
        .contains(&agent[agent.len() - 6..]));
    let nowhere = Holarchy::data_dir(&root.path().join("elsewhere")).fails(&["status"]);
    assert!(
        nowhere.contains("elsewhere"),
        "says where it looked: {nowhere}"
    );

    // Without the right token, TCP answers nothing but UNAUTHENTICATED.
    for wrong in [
        Holarchy::tcp_flags(&url, "not-the-token-at-all"),
        Holarchy::tcp_variables(&url, "not-the-token-at-all"),
        Holarchy::default().with_flags(&["--addr", &url]),
    ] {
        let refused = wrong.fails(&["agent", "list"]);
        assert!(refused.contains("unauthenticated"), "{refused}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_idle_loads_a_running_daemon_and_reports_its_figures() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);

    let human = cli.ok(&["bench", "idle", "--agents", "50", "--samples", "20"]);
    let figure = |name: &str| {
        human
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name:?} in\n{human}"))
            .to_owned()
    };
    let rate = figure("durable creations / s");
    let number: f64 = rate
        .split_whitespace()
        .last()
        .expect("figure")
        .parse()
        .expect("a number");
    assert!(number > 0.0, "{rate}");
    assert!(figure("GetAgent at 50 agents").contains("p99"));

    // The tour's second run: trees of children, then a kill -9 restart of
    // the daemon, timed. The restarted daemon is no child of this test, so
    // it is stopped here by its pid.
    let args = [
        "bench",
        "idle",
        "--agents",
        "50",
        "--samples",
        "20",
        "--tree",
        "2",
        "--restart",
    ];
    let report = cli.json_one(&args);
    let restarted = RestartedDaemon(cli.json_one(&["status"])["pid"].as_u64().expect("pid") as u32);
    assert_ne!(restarted.0, daemon.pid(), "a new daemon");
    assert_eq!(report["agents"], 50);
    assert_eq!(
        report["total_agents"], 150,
        "50 agents with 2 children each"
    );
    assert!(report["create_per_s"].as_f64().expect("rate") > 0.0);
    assert!(report["tree_agents_per_s"].as_f64().expect("tree rate") > 0.0);
    let checkpoint = &report["checkpoints"][0];
    assert!(checkpoint["get_agent_us"]["p50"].as_f64().expect("latency") > 0.0);
    let restart = &report["restart"];
    assert!(restart["restart_s"].as_f64().expect("restart time") > 0.0);
    assert_eq!(
        restart["pid"], restarted.0,
        "the report names the new daemon"
    );
    assert_eq!(
        restart["recovered_agents"], 200,
        "both runs' agents recovered"
    );
    if let Some(log) = restart["log"].as_str() {
        let _ = std::fs::remove_file(log);
    }
    let status = cli.json_one(&["status"]);
    assert_eq!(
        (
            status["public_agents"].as_u64(),
            status["private_agents"].as_u64()
        ),
        (Some(100), Some(100))
    );
    drop(restarted);
}

/// A daemon `bench idle --restart` started; stopped (SIGTERM) when dropped.
struct RestartedDaemon(u32);

impl Drop for RestartedDaemon {
    fn drop(&mut self) {
        let pid = self.0.to_string();
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status();
        // Gone, or a zombie nobody here can reap; no panic here, as the
        // test may be unwinding already.
        let started = std::time::Instant::now();
        while started.elapsed() < crate::common::DEADLINE {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .next();
            if matches!(state, None | Some("Z")) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status();
    }
}
