//! Ctrl-C, as the README promises it: the first stops the daemon cleanly
//! (exit 0, every agent and message back after a restart); a second one
//! while it is stopping exits at once.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use holarchy::client::{self, Target};
use tokio_stream::StreamExt;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

use crate::cli::{handled, until, Holarchy};
use crate::common::data_dir;

/// `holarchy serve` in the foreground, as a terminal runs it: this test
/// holds the process, so it can interrupt it and read its exit status.
struct Foreground {
    child: Child,
    data_dir: PathBuf,
    log: PathBuf,
}

impl Foreground {
    fn start(data_dir: &Path, extra: &[&str]) -> Foreground {
        let log = data_dir.with_extension("log");
        let child = Command::new(env!("CARGO_BIN_EXE_holarchy"))
            .arg("serve")
            .arg("--data-dir")
            .arg(data_dir)
            .args(extra)
            .env_remove("HOLARCHY_TOKEN")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).expect("log file"))
            .spawn()
            .expect("the daemon starts");
        let mut daemon = Foreground {
            child,
            data_dir: data_dir.to_owned(),
            log,
        };
        let cli = daemon.cli();
        until("the daemon to answer", || {
            if let Some(exit) = daemon.child.try_wait().expect("waits") {
                panic!("the daemon exited at start ({exit}):\n{}", daemon.log());
            }
            cli.run(&["status"]).status.success().then_some(())
        });
        daemon
    }

    fn cli(&self) -> Holarchy {
        Holarchy::data_dir(&self.data_dir)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// What a terminal's Ctrl-C sends.
    fn interrupt(&self) {
        let sent = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success());
    }

    /// Its exit status, if it exits within `within`.
    fn exit_within(&mut self, within: Duration) -> Option<ExitStatus> {
        let started = Instant::now();
        loop {
            if let Some(exit) = self.child.try_wait().expect("waits") {
                return Some(exit);
            }
            if started.elapsed() > within {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Ctrl-C, then its exit, which must be clean.
    fn stop(mut self) {
        self.interrupt();
        let exit = self.exit_within(crate::common::DEADLINE);
        assert!(
            exit.is_some_and(|e| e.success()),
            "Ctrl-C should stop the daemon with status 0, not {exit:?}:\n{}",
            self.log()
        );
    }
}

impl Drop for Foreground {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_the_daemon_cleanly_and_it_restarts_with_its_agents() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let daemon = Foreground::start(&dir, &[]);
    let cli = daemon.cli();
    cli.ok(&["agent", "create", "keeper", "--message", "remember me"]);
    handled(&cli, "keeper", 1);
    daemon.stop();
    let log = std::fs::read_to_string(dir.with_extension("log")).expect("log");
    let shutting = log.find("shutting down").expect("a shutdown");
    assert!(
        log[shutting..].contains("stopped"),
        "stopped in order:\n{log}"
    );
    assert!(!dir.join("holarchy.sock").exists(), "the socket is removed");

    let again = Foreground::start(&dir, &[]);
    let kept = handled(&cli, "keeper", 1);
    assert_eq!(kept[0]["text"], "remember me");
    assert_eq!(kept[0]["reply"], "ack: remember me");
    let status = cli.json_one(&["status"]);
    assert_eq!(status["recovered_agents"], 1);
    // And it still works.
    cli.ok(&["agent", "send", "keeper", "still there?"]);
    assert_eq!(handled(&cli, "keeper", 2)[1]["reply"], "ack: still there?");
    again.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_ctrl_c_while_stopping_exits_at_once() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    // Each shutdown step may take 30 s; the open stream below keeps the
    // first step (draining the socket's calls) waiting that long.
    let mut daemon = Foreground::start(&dir, &["--shutdown-timeout", "30"]);
    let cli = daemon.cli();
    cli.ok(&["agent", "create", "keeper"]);

    let channel = client::channel(&Target::Unix(dir.join("holarchy.sock")))
        .await
        .expect("connects");
    let mut watch = HealthClient::new(channel)
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("watch opens")
        .into_inner();
    watch.next().await.expect("a first status").expect("status");

    daemon.interrupt();
    until("the daemon to start stopping", || {
        daemon.log().contains("shutting down").then_some(())
    });
    assert!(
        daemon.exit_within(Duration::from_millis(500)).is_none(),
        "the open stream should hold the shutdown:\n{}",
        daemon.log()
    );
    let started = Instant::now();
    daemon.interrupt();
    let exit = daemon
        .exit_within(Duration::from_secs(5))
        .unwrap_or_else(|| panic!("a second Ctrl-C should exit at once:\n{}", daemon.log()));
    assert_eq!(exit.code(), Some(130), "{exit}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        daemon.log().contains("second interrupt"),
        "{}",
        daemon.log()
    );
    drop(watch);

    // What it acknowledged was on disk already.
    let again = Foreground::start(&dir, &[]);
    assert_eq!(cli.json_one(&["agent", "get", "keeper"])["state"], "active");
    again.stop();
}
