//! The daemon speaks systemd's readiness protocol: started with
//! `NOTIFY_SOCKET` (a path, or an abstract `@name`), it sends `READY=1`
//! only once its gRPC socket answers, and `STOPPING=1` when a SIGTERM
//! starts its shutdown. This is how packaging/holarchy.service
//! (`Type=notify`) learns the daemon is up.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use holarchy::client::{self, Target};
use tokio::net::UnixDatagram;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{health_check_response::ServingStatus, HealthCheckRequest};

/// The daemon's process, killed if the test ends before it stops.
struct Started(Child);

impl Drop for Started {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn start(data_dir: &Path, notify_socket: &str) -> Started {
    let log = std::fs::File::create(data_dir.with_extension("log")).expect("log file");
    let child = Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .arg("serve")
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("HOLARCHY_TOKEN")
        .env_remove("HOLARCHY_CONFIG")
        .env("NOTIFY_SOCKET", notify_socket)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("holarchy starts");
    Started(child)
}

/// Whether the daemon's socket answers a health check with SERVING now.
async fn answers(socket: &Path) -> bool {
    let Ok(channel) = client::channel(&Target::Unix(socket.to_owned())).await else {
        return false;
    };
    let reply = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await;
    reply.is_ok_and(|r| r.into_inner().status == ServingStatus::Serving as i32)
}

/// The next datagram, as text.
async fn next_state(listener: &UnixDatagram, data_dir: &Path) -> String {
    let mut buf = vec![0u8; 4096];
    match tokio::time::timeout(common::DEADLINE, listener.recv(&mut buf)).await {
        Ok(Ok(n)) => String::from_utf8_lossy(&buf[..n]).into_owned(),
        Ok(Err(err)) => panic!("notify socket: {err}"),
        Err(_) => panic!(
            "no notification in time; daemon log:\n{}",
            std::fs::read_to_string(data_dir.with_extension("log")).unwrap_or_default()
        ),
    }
}

/// Starts the daemon reporting to `listener` (named `notify_socket`) and
/// checks the protocol: READY=1 once it answers, STOPPING=1 at SIGTERM.
async fn ready_after_it_answers_then_stopping(listener: UnixDatagram, notify_socket: &str) {
    let root = tempfile::tempdir().expect("tempdir");
    let data_dir = common::data_dir(&root);
    let socket = data_dir.join("holarchy.sock");
    let mut daemon = start(&data_dir, notify_socket);

    let ready = next_state(&listener, &data_dir).await;
    let started = Instant::now();
    assert!(
        ready.lines().any(|l| l == "READY=1"),
        "first notification is readiness: {ready:?}"
    );
    // At once, with no retry: a unit started on READY=1 can be used.
    assert!(
        answers(&socket).await,
        "READY=1 came before the gRPC socket answered"
    );
    assert!(started.elapsed() < Duration::from_secs(5));

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(daemon.0.id()).expect("pid")),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM sent");
    let stopping = next_state(&listener, &data_dir).await;
    assert!(
        stopping.lines().any(|l| l == "STOPPING=1"),
        "shutdown is announced: {stopping:?}"
    );
    let status = daemon.0.wait().expect("daemon exits");
    assert!(status.success(), "clean exit after SIGTERM: {status}");
}

#[tokio::test]
async fn ready_is_sent_to_a_path_socket_only_once_grpc_answers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("notify.sock");
    let listener = UnixDatagram::bind(&path).expect("notify socket binds");
    ready_after_it_answers_then_stopping(listener, &path.display().to_string()).await;
}

#[tokio::test]
async fn ready_is_sent_to_an_abstract_socket() {
    use std::os::linux::net::SocketAddrExt;
    let name = format!(
        "holarchy-notify-test-{}-{}",
        std::process::id(),
        ulid::Ulid::new()
    );
    let addr =
        std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract name");
    let std_listener = std::os::unix::net::UnixDatagram::bind_addr(&addr).expect("binds");
    std_listener.set_nonblocking(true).expect("non-blocking");
    let listener = UnixDatagram::from_std(std_listener).expect("tokio socket");
    ready_after_it_answers_then_stopping(listener, &format!("@{name}")).await;
}

/// The shipped unit is a valid systemd unit of `Type=notify` (checked by
/// `systemd-analyze verify` where it is installed; it needs no running
/// systemd), pointed at the binary under test.
#[test]
fn shipped_unit_is_a_valid_notify_unit() {
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/holarchy.service"),
    )
    .expect("packaging/holarchy.service");
    for line in [
        "Type=notify",
        "Restart=on-failure",
        "User=holarchy",
        "NoNewPrivileges=yes",
    ] {
        assert!(shipped.lines().any(|l| l == line), "the unit sets {line}");
    }
    let analyze = Command::new("systemd-analyze").arg("--version").output();
    if !analyze.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: systemd-analyze is not installed here");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let unit = dir.path().join("holarchy.service");
    let here = shipped.replace("/usr/local/bin/holarchy", env!("CARGO_BIN_EXE_holarchy"));
    std::fs::write(&unit, here).expect("unit written");
    let verified = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&unit)
        .output()
        .expect("systemd-analyze runs");
    assert!(
        verified.status.success() && verified.stderr.is_empty(),
        "systemd-analyze verify: {}",
        String::from_utf8_lossy(&verified.stderr)
    );
}
