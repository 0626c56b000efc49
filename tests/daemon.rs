//! End-to-end: the daemon process itself: one per data directory, graceful
//! shutdown, health, reflection, TCP with a token.

mod common;

#[path = "daemon/traces.rs"]
mod traces;

use std::time::{Duration, Instant};

use common::{create, data_dir, Daemon};
use holarchy::api::pb;
use holarchy::client::{self, Target};
use tokio_stream::StreamExt;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
use tonic_reflection::pb::v1::ServerReflectionRequest;

#[tokio::test]
async fn a_second_daemon_on_the_same_data_dir_exits_with_a_clear_error() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let first = Daemon::start(&dir).await;
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .args(["serve", "--data-dir"])
        .arg(&dir)
        .output()
        .expect("runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("already serves"), "{stderr}");
    assert!(stderr.contains(&first.pid().to_string()), "{stderr}");
    // The first one is unharmed.
    let mut c = first.clients().await;
    create(&mut c, "still-here", None).await;
}

#[tokio::test]
async fn sigterm_stops_the_daemon_promptly_even_with_an_open_follow_stream() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    create(&mut c, "watched", None).await;
    let mut stream = c
        .agents
        .watch_events(pb::WatchEventsRequest {
            after_cursor: 0,
            follow: true,
            agent_id: String::new(),
        })
        .await
        .expect("watch")
        .into_inner();
    stream.next().await.expect("first event").expect("ok");
    let started = Instant::now();
    let status = daemon.terminate(Duration::from_secs(15)).await;
    assert!(status.success(), "exit status {status}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    // The stream ended rather than hanging.
    let rest = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(item) = stream.next().await {
            if item.is_err() {
                break;
            }
        }
    })
    .await;
    assert!(rest.is_ok(), "follow stream did not end at shutdown");
    assert!(!daemon.socket().exists(), "socket removed on a clean stop");
}

#[tokio::test]
async fn the_socket_is_private_to_its_owner() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mode = std::fs::metadata(daemon.socket())
        .expect("socket")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[tokio::test]
async fn reflection_lists_every_service_for_stock_clients() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let channel = client::channel(&Target::Unix(daemon.socket()))
        .await
        .expect("channel");
    let mut reflection = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut replies = reflection
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("reflection answers")
        .into_inner();
    let reply = replies.next().await.expect("one reply").expect("ok");
    let Some(MessageResponse::ListServicesResponse(list)) = reply.message_response else {
        panic!("unexpected reflection reply");
    };
    let names: Vec<_> = list.service.into_iter().map(|s| s.name).collect();
    for wanted in [
        "holarchy.v1.AgentService",
        "holarchy.v1.RuntimeService",
        "grpc.health.v1.Health",
    ] {
        assert!(
            names.iter().any(|n| n == wanted),
            "{wanted} missing from {names:?}"
        );
    }
}

#[tokio::test]
async fn tcp_requires_the_bearer_token() {
    let root = tempfile::tempdir().expect("tempdir");
    let listen = common::free_addr();
    let daemon = Daemon::start_with(&data_dir(&root), &["--listen", &listen]).await;
    let token = daemon.token();

    // No token and a wrong one (even the right one with a byte more or
    // less) are refused as unauthenticated, saying why.
    let wrong_tokens = [
        None,
        Some("nope".to_owned()),
        Some(format!("{token}x")),
        Some(token[..token.len() - 1].to_owned()),
    ];
    for wrong in wrong_tokens {
        let mut client = common::tcp_clients(&listen, wrong.as_deref()).await;
        let refused = client
            .runtime
            .get_status(pb::GetStatusRequest {})
            .await
            .expect_err("refused");
        assert_eq!(
            refused.code(),
            tonic::Code::Unauthenticated,
            "{wrong:?}: {refused:?}"
        );
        assert!(refused.message().contains("token"), "{refused:?}");
    }

    let mut allowed = common::tcp_clients(&listen, Some(&token)).await;
    let status = common::status(&mut allowed).await;
    assert_eq!(status.version, env!("CARGO_PKG_VERSION"));
}

/// `serve --log-format json` writes one JSON object per log line, for a
/// log collector: every line parses, and the start says where it serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_is_one_json_object_per_line_when_asked() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon =
        common::Daemon::start_with(&common::data_dir(&root), &["--log-format", "json"]).await;
    // The health service answers before the start's last line is written.
    let started = Instant::now();
    while !daemon.log().contains("\"serving\"") && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let log = daemon.log();
    // Whole lines only: the daemon may be writing the next one.
    let whole = &log[..log.rfind('\n').map_or(0, |end| end + 1)];
    let lines: Vec<serde_json::Value> = whole
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["fields"]["message"] == "serving" && l["level"] == "INFO"),
        "{log}"
    );
}

/// `GetStatus` (and `holarchy status`) says where the daemon answers: its
/// socket, its gRPC address and whether it is TLS, and its HTTP address
/// with the console's URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_lists_where_the_daemon_listens() {
    let root = tempfile::tempdir().expect("tempdir");
    let (grpc, http) = (common::free_addr(), common::free_addr());
    let daemon = Daemon::start_with(
        &data_dir(&root),
        &["--listen", &grpc, "--http-listen", &http],
    )
    .await;
    let mut c = daemon.clients().await;
    let listeners = common::status(&mut c).await.listeners;
    assert_eq!(
        listeners,
        [
            format!("unix {}", daemon.socket().display()),
            format!("grpc {grpc} (plain text)"),
            format!("http {http}: webhooks, /metrics, console http://{http}/"),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_past_the_retention_are_removed_and_the_newest_stay() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let retention = ["--event-retention", "3s"];
    let daemon = Daemon::start_with(&dir, &retention).await;
    let mut c = daemon.clients().await;
    let old = create(&mut c, "old-events", None).await;
    let first = common::events(&mut c, 0).await;
    assert!(!first.is_empty());
    tokio::time::sleep(Duration::from_secs(4)).await;
    let fresh = create(&mut c, "new-events", None).await;
    let oldest = first.iter().map(|e| e.cursor).max().unwrap_or(0);
    let kept = common::eventually_within("the old events removed", Duration::from_secs(20), || {
        let mut c = c.clone();
        async move {
            let kept = common::events(&mut c, 0).await;
            kept.iter().all(|e| e.cursor > oldest).then_some(kept)
        }
    })
    .await;
    assert!(kept.iter().all(|e| e.agent_id != old), "{kept:?}");
    assert!(kept.iter().any(|e| e.agent_id == fresh), "the newest stay");
}
