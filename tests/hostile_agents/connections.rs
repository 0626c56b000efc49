//! Hostile agents: connections that never authenticate.

use std::time::{Duration, Instant};

use holarchy::api::pb;
use holarchy::client::{self, Target};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::common::{data_dir, free_addr, tcp_clients, Daemon, DEADLINE};

const IDLE_CONNECTIONS: usize = 2_000;

/// Waits until the daemon closes `stream`: end of file, or a reset. Data
/// from the daemon (its HTTP/2 settings) is read past.
async fn closed_by_daemon(mut stream: TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(err) => return err.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
}

#[tokio::test]
async fn idle_unauthenticated_connections_neither_block_the_socket_nor_stay_open() {
    // The test process holds 2,000 sockets too.
    holarchy::daemon::process::raise_open_files().expect("open file limit");
    let root = tempfile::tempdir().expect("tempdir");
    let listen = free_addr();
    let daemon = Daemon::start_with(
        &data_dir(&root),
        &["--listen", &listen, "--auth-timeout", "1"],
    )
    .await;

    // Half of them say nothing; half start HTTP/2 and then stall, never
    // sending a request with the token.
    // Past the cap and the kernel's backlog a connect waits for the daemon
    // to close older ones, so opening them is bounded too.
    let mut idle = Vec::with_capacity(IDLE_CONNECTIONS);
    for i in 0..IDLE_CONNECTIONS {
        let mut stream = tokio::time::timeout(DEADLINE, TcpStream::connect(&listen))
            .await
            .expect("the daemon frees slots by closing idle connections")
            .expect("tcp connects");
        if i % 2 == 1 {
            use tokio::io::AsyncWriteExt;
            stream
                .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
                .await
                .expect("preface sent");
        }
        idle.push(stream);
    }
    let opened = Instant::now();

    // The Unix socket answers a fresh client while they are open.
    let asked = tokio::time::timeout(Duration::from_secs(5), async {
        let mut clients = daemon.clients().await;
        clients
            .runtime
            .get_status(pb::GetStatusRequest {})
            .await
            .map(|_| ())
    })
    .await;
    assert!(
        matches!(asked, Ok(Ok(()))),
        "unix socket did not answer: {asked:?}"
    );

    // And the daemon closes every one of them after the auth timeout
    // (those past the default cap of 1,024 are accepted, and closed, as
    // the first ones go).
    let waits = idle
        .into_iter()
        .map(|stream| tokio::spawn(tokio::time::timeout(DEADLINE, closed_by_daemon(stream))));
    let mut closed = 0;
    for wait in waits {
        if matches!(wait.await.expect("joins"), Ok(true)) {
            closed += 1;
        }
    }
    assert_eq!(closed, IDLE_CONNECTIONS, "connections left open");
    assert!(
        opened.elapsed() >= Duration::from_millis(500),
        "closed before the auth timeout could have passed"
    );

    // The daemon is fine and TCP still admits the token.
    let mut allowed = tcp_clients(&listen, Some(&daemon.token())).await;
    allowed
        .runtime
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("authenticated call");
}

#[tokio::test]
async fn at_the_connection_cap_new_clients_wait_until_one_closes() {
    let root = tempfile::tempdir().expect("tempdir");
    let listen = free_addr();
    let daemon = Daemon::start_with(
        &data_dir(&root),
        &["--listen", &listen, "--max-connections", "2"],
    )
    .await;
    let token = std::fs::read_to_string(daemon.data_dir.join("token")).expect("token");
    let target = Target::Tcp {
        url: format!("http://{listen}"),
        token: Some(token),
        tls: Default::default(),
    };
    let first = TcpStream::connect(&listen).await.expect("first");
    let second = TcpStream::connect(&listen).await.expect("second");

    // Both slots are held: a third client is not served...
    let call = |target: Target| async move {
        let mut clients = client::connect(&target).await?;
        clients.runtime.get_status(pb::GetStatusRequest {}).await?;
        anyhow::Ok(())
    };
    let waited = tokio::time::timeout(Duration::from_secs(1), call(target.clone())).await;
    assert!(waited.is_err(), "served past the cap: {waited:?}");

    // ...until one closes; the Unix socket never waited.
    daemon
        .clients()
        .await
        .runtime
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("unix answers while tcp is full");
    drop(first);
    tokio::time::timeout(DEADLINE, call(target))
        .await
        .expect("served once a slot freed")
        .expect("call succeeds");
    drop(second);
}

#[tokio::test]
async fn an_open_watch_outlives_the_auth_and_idle_timeouts() {
    let root = tempfile::tempdir().expect("tempdir");
    let listen = free_addr();
    let daemon = Daemon::start_with(
        &data_dir(&root),
        &[
            "--listen",
            &listen,
            "--auth-timeout",
            "1",
            "--idle-timeout",
            "1",
        ],
    )
    .await;
    let mut remote = tcp_clients(&listen, Some(&daemon.token())).await;
    let mut events = remote
        .agents
        .watch_events(pb::WatchEventsRequest {
            after_cursor: 0,
            follow: true,
            agent_id: String::new(),
        })
        .await
        .expect("watching")
        .into_inner();
    // Not synchronisation: the point is that both timeouts pass while the
    // authenticated stream is open and silent.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut local = daemon.clients().await;
    crate::common::create(&mut local, "watched", None).await;
    let event = tokio::time::timeout(DEADLINE, tokio_stream::StreamExt::next(&mut events))
        .await
        .expect("an event in time")
        .expect("the stream is still open")
        .expect("an event, not an error");
    assert_eq!(event.kind, "agent_created");
}
