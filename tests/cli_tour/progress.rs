//! Progress bars are for people at a terminal: `bench` draws one there,
//! and neither `bench` nor `store copy` writes a single frame (`\r`, an
//! escape code, a bar) into a log file that stderr is redirected to.

use std::time::Duration;

use crate::cli::Holarchy;
use crate::common::{data_dir, pg_server, Daemon};

/// What no line of a log file should hold: a frame redrawn in place, an
/// escape code, or a bar.
fn assert_no_frames(log: &str) {
    assert!(!log.contains('\r'), "a \\r in the log:\n{log:?}");
    assert!(
        !log.contains('\u{1b}'),
        "an escape code in the log:\n{log:?}"
    );
    assert!(!log.contains("[#"), "a bar in the log:\n{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_draws_its_bar_on_a_terminal_and_never_into_a_log_file() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    let bench = ["bench", "idle", "--agents", "40", "--samples", "5"];

    let log = root.path().join("bench.log");
    let logged = cli.run_logged(&bench, &log);
    assert!(logged.status.success(), "{}", logged.stderr);
    assert!(
        logged.stderr.contains("this run left 40 agent(s)"),
        "what it says is still said, as lines:\n{}",
        logged.stderr
    );
    assert_no_frames(&logged.stderr);

    // A terminal gets the bar (stdout and stderr are one pty there).
    let cli = cli.with_env("TERM", "xterm");
    if let Some(shown) = cli.on_terminal(&bench) {
        assert!(
            shown.contains("public agents") && shown.contains("40/40"),
            "a bar on the terminal:\n{shown}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_copy_writes_no_progress_frame_into_a_log_file() {
    // The source must be the embedded store, and the target a server.
    if std::env::var("HOLARCHY_TEST_STORE").as_deref() == Ok("postgres")
        || !pg_server::available().await
    {
        return;
    }
    let root = tempfile::tempdir().expect("tempdir");
    let data = data_dir(&root);
    let url = pg_server::database_for(&root.path().join("copy"))
        .await
        .expect("a database");
    let mut daemon = Daemon::start(&data).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    for name in ["ops", "build"] {
        cli.ok(&["agent", "create", name]);
    }
    let status = daemon.terminate(Duration::from_secs(20)).await;
    assert!(status.success(), "{status}");

    let log = root.path().join("copy.log");
    let from = data.to_str().expect("UTF-8");
    let copied =
        Holarchy::default().run_logged(&["store", "copy", "--from", from, "--to", &url], &log);
    assert!(copied.status.success(), "{}", copied.stderr);
    assert!(copied.stdout.contains("agents"), "{}", copied.stdout);
    assert_no_frames(&copied.stderr);
}
