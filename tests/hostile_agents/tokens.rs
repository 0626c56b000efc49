//! Hostile agents: weak tokens and unsafe data directories.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use holarchy::api::pb;

use crate::common::{data_dir, free_addr, tcp_clients, Daemon, DEADLINE};

/// A token that passes every check.
const GOOD_TOKEN: &str = "0123456789abcdef0123456789abcdef";

/// Runs `holarchy serve` on `dir` and expects it to refuse to start:
/// returns its stderr. Panics if it is still running at the deadline.
fn refused(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let log = dir.with_extension("refusal.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .arg("serve")
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .env_remove("HOLARCHY_TOKEN")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"))
        .spawn()
        .expect("holarchy binary starts");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waits") {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the daemon started instead of refusing:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = std::fs::read_to_string(&log).expect("log readable");
    assert!(!status.success(), "exit {status}:\n{stderr}");
    stderr
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .expect("exists")
        .permissions()
        .mode()
        & 0o7777
}

#[test]
fn an_empty_token_on_the_command_line_refuses_to_start() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let listen = free_addr();
    let stderr = refused(&dir, &["--listen", &listen, "--token", ""], &[]);
    assert!(stderr.contains("--token is empty"), "{stderr}");
    // Even without TCP: a weak token is refused wherever it is given.
    let stderr = refused(&dir, &["--token", ""], &[]);
    assert!(stderr.contains("--token is empty"), "{stderr}");
}

#[test]
fn an_empty_token_in_the_environment_refuses_to_start_rather_than_making_one() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let listen = free_addr();
    let stderr = refused(&dir, &["--listen", &listen], &[("HOLARCHY_TOKEN", "")]);
    assert!(stderr.contains("HOLARCHY_TOKEN is empty"), "{stderr}");
    assert!(!dir.join("token").exists(), "no token was made up");
}

#[test]
fn a_15_byte_token_refuses_to_start() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let listen = free_addr();
    let short = &GOOD_TOKEN[..15];
    let stderr = refused(&dir, &["--listen", &listen, "--token", short], &[]);
    assert!(stderr.contains("is 15 bytes"), "{stderr}");
    let stderr = refused(&dir, &["--listen", &listen], &[("HOLARCHY_TOKEN", short)]);
    assert!(stderr.contains("is 15 bytes"), "{stderr}");
}

#[test]
fn a_symlinked_token_file_refuses_to_start() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    std::fs::create_dir(&dir).expect("data dir");
    chmod(&dir, 0o700);
    // The link points at a file that would pass every check on its own.
    let elsewhere = root.path().join("elsewhere");
    std::fs::write(&elsewhere, GOOD_TOKEN).expect("write");
    chmod(&elsewhere, 0o600);
    std::os::unix::fs::symlink(&elsewhere, dir.join("token")).expect("symlink");
    let listen = free_addr();
    let stderr = refused(&dir, &["--listen", &listen], &[]);
    assert!(stderr.contains("is a symbolic link"), "{stderr}");
    assert!(
        stderr.contains(&dir.join("token").display().to_string()),
        "{stderr}"
    );
}

#[test]
fn a_token_file_others_can_read_refuses_to_start() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    std::fs::create_dir(&dir).expect("data dir");
    chmod(&dir, 0o700);
    let token = dir.join("token");
    std::fs::write(&token, GOOD_TOKEN).expect("write");
    chmod(&token, 0o644);
    let listen = free_addr();
    let stderr = refused(&dir, &["--listen", &listen], &[]);
    assert!(stderr.contains("has mode 0644"), "{stderr}");
    assert!(stderr.contains(&token.display().to_string()), "{stderr}");
    assert_eq!(mode(&token), 0o644, "the daemon did not touch it");
}

#[test]
fn a_world_writable_data_directory_refuses_to_start() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    std::fs::create_dir(&dir).expect("data dir");
    chmod(&dir, 0o777);
    let stderr = refused(&dir, &[], &[]);
    assert!(stderr.contains("other users"), "{stderr}");
    assert!(stderr.contains(&dir.display().to_string()), "{stderr}");
    assert!(!dir.join("db").exists(), "nothing was created in it");

    // A group-writable directory the daemon keeps inside is refused too.
    chmod(&dir, 0o700);
    std::fs::create_dir(dir.join("workspaces")).expect("mkdir");
    chmod(&dir.join("workspaces"), 0o770);
    let stderr = refused(&dir, &[], &[]);
    assert!(stderr.contains("workspaces has mode 0770"), "{stderr}");
}

#[tokio::test]
async fn an_empty_bearer_is_unauthenticated_and_the_made_token_file_is_private() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let listen = free_addr();
    let daemon = Daemon::start_with(&dir, &["--listen", &listen]).await;
    assert_eq!(mode(&dir), 0o700, "the daemon made its data dir private");
    let token_file = dir.join("token");
    assert_eq!(mode(&token_file), 0o600);
    let token = std::fs::read_to_string(&token_file).expect("token written");
    assert!(token.len() >= holarchy::daemon::MIN_TOKEN_LEN);

    let mut clients = tcp_clients(&listen, None).await;
    for header in ["Bearer ", "Bearer", "Bearer  ", ""] {
        let mut request = tonic::Request::new(pb::GetStatusRequest {});
        request
            .metadata_mut()
            .insert("authorization", header.parse().expect("header text"));
        let refused = clients
            .runtime
            .get_status(request)
            .await
            .expect_err("refused");
        assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{header:?}");
        assert!(refused.message().contains("token"), "{refused:?}");
    }
    let mut allowed = tcp_clients(&listen, Some(&token)).await;
    allowed
        .runtime
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("the real token is admitted");
    drop(daemon);
}

#[tokio::test]
async fn a_token_on_the_command_line_works_and_warns_that_others_can_see_it() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let listen = free_addr();
    let daemon = Daemon::start_with(&dir, &["--listen", &listen, "--token", GOOD_TOKEN]).await;
    let warned = daemon
        .log()
        .lines()
        .any(|l| l.contains("WARN") && l.contains("--token") && l.contains("/proc"));
    assert!(warned, "{}", daemon.log());
    let mut clients = tcp_clients(&listen, Some(GOOD_TOKEN)).await;
    clients
        .runtime
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("admitted");
    assert!(!dir.join("token").exists(), "a given token is not written");
}
