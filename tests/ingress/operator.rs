//! The operators' routes on the same HTTP listener: `/healthz` and
//! `/readyz` answer without a token, even while one peer holds all the
//! connections it may, and `/metrics` is OpenMetrics text that counts
//! turns, tool calls and gRPC calls by fixed labels only, never naming an
//! agent.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::common::{
    command_brain, create, create_on, data_dir, eventually, free_addr, get_agent, handled, script,
    send, Daemon,
};
use holarchy::api::pb;

/// One HTTP/1.1 request; the status, the content type and the body.
async fn fetch(addr: &str, method: &str, path: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connects");
    let head =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.expect("sent");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut answer))
        .await
        .expect("answered in time")
        .expect("read");
    let answer = String::from_utf8(answer).expect("utf-8");
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status");
    let content_type = head
        .lines()
        .find_map(|line| line.strip_prefix("content-type: "))
        .unwrap_or_default()
        .to_owned();
    (status, content_type, body.to_owned())
}

/// Fails naming the first of `lines` that `body` lacks.
fn has(body: &str, lines: &[&str]) {
    for line in lines {
        assert!(body.contains(line), "{line} missing from:\n{body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_and_metrics_answer_on_the_http_listener() {
    let root = tempfile::tempdir().expect("tempdir");
    let http = free_addr();
    let daemon = Daemon::start_with(&data_dir(&root), &["--http-listen", &http]).await;
    let mut c = daemon.clients().await;

    assert_eq!(fetch(&http, "GET", "/healthz").await.0, 200);
    assert_eq!(fetch(&http, "GET", "/readyz").await.0, 200);
    assert_eq!(fetch(&http, "POST", "/metrics").await.0, 405);

    let agent = create(&mut c, "metered", None).await;
    send(&mut c, &agent, "hello").await;
    let calls = serde_json::json!([
        { "name": "AgentGet", "input": {} },
        { "name": "Sleep", "input": { "duration_ms": 600_000 } },
    ]);
    send(&mut c, &agent, &script(calls)).await;
    handled(&c, &agent, 2).await;
    let missing = c
        .agents
        .get_agent(pb::GetAgentRequest {
            agent: Some(pb::get_agent_request::Agent::AgentId(
                "agt_01KQ8Z3V5W0000000000000000".into(),
            )),
        })
        .await;
    assert_eq!(
        missing.expect_err("no such agent").code(),
        tonic::Code::NotFound
    );

    let (status, content_type, body) = fetch(&http, "GET", "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    assert!(body.ends_with("# EOF\n"), "{body}");
    has(&body, &[
        "holarchy_turns_started_total{brain=\"scripted\"} 2",
        "holarchy_turns_finished_total{brain=\"scripted\",outcome=\"handled\"} 2",
        "holarchy_turn_duration_seconds_count{brain=\"scripted\"} 2",
        "holarchy_tool_calls_total{family=\"core\",outcome=\"ok\"} 2",
        "holarchy_agents{visibility=\"public\",state=\"active\"} 1",
        "holarchy_agents{visibility=\"public\",state=\"paused\"} 0",
        "holarchy_waits_armed{kind=\"timer\"} 1",
        "holarchy_waits_armed{kind=\"external_trigger\"} 0",
        "holarchy_actors 2",
        "holarchy_tasks_running{kind=\"command\"} 0",
        "holarchy_tasks_running{kind=\"child_agent\"} 0",
        "holarchy_queued_messages 0",
        "holarchy_grpc_requests_total{method=\"/holarchy.v1.AgentService/CreateAgent\",code=\"OK\"} 1",
        "holarchy_grpc_requests_total{method=\"/holarchy.v1.AgentService/GetAgent\",code=\"NOT_FOUND\"} 1",
    ]);
    has(
        &body,
        &[
            "holarchy_store_commit_latency_seconds_bucket",
            "holarchy_store_flush_batch_bucket",
            "holarchy_store_flushes_total",
            "holarchy_event_log_cursor",
            "holarchy_process_resident_memory_bytes",
            "holarchy_tasks_running",
            "holarchy_waits_armed",
        ],
    );
    // Fixed labels only: no series names an agent.
    assert!(!body.contains(&agent), "{body}");
    assert!(!body.contains("agt_"), "{body}");

    // A pause moves the agent from one state to the other, and a resume
    // back; so does a restart of the daemon with the agent paused.
    c.agents
        .pause_agent(pb::PauseAgentRequest {
            agent_id: agent.clone(),
        })
        .await
        .expect("paused");
    let body = fetch(&http, "GET", "/metrics").await.2;
    has(
        &body,
        &[
            "holarchy_agents{visibility=\"public\",state=\"active\"} 0",
            "holarchy_agents{visibility=\"public\",state=\"paused\"} 1",
        ],
    );
    drop(c);
    let mut daemon = daemon;
    daemon.kill9();
    let daemon = Daemon::start_with(&data_dir(&root), &["--http-listen", &http]).await;
    let mut c = daemon.clients().await;
    let body = fetch(&http, "GET", "/metrics").await.2;
    has(
        &body,
        &[
            "holarchy_agents{visibility=\"public\",state=\"paused\"} 1",
            "holarchy_waits_armed{kind=\"timer\"} 1",
        ],
    );
    c.agents
        .resume_agent(pb::ResumeAgentRequest {
            agent_id: agent.clone(),
        })
        .await
        .expect("resumed");
    let body = fetch(&http, "GET", "/metrics").await.2;
    has(
        &body,
        &[
            "holarchy_agents{visibility=\"public\",state=\"active\"} 1",
            "holarchy_agents{visibility=\"public\",state=\"paused\"} 0",
        ],
    );

    // A turn an operator aborts is counted finished, as aborted.
    let slow = create_on(&mut c, "slow", command_brain("sleep", &["30"])).await;
    send(&mut c, &slow, "take your time").await;
    let run_id = eventually("the slow turn to start", || {
        let mut c = c.clone();
        let slow = slow.clone();
        async move {
            let run = get_agent(&mut c, &slow).await.current_run_id;
            (!run.is_empty()).then_some(run)
        }
    })
    .await;
    c.agents
        .abort_run(pb::AbortRunRequest {
            agent_id: slow.clone(),
            run_id,
        })
        .await
        .expect("aborted");
    let line = "holarchy_turns_finished_total{brain=\"command\",outcome=\"aborted\"} 1";
    eventually("the aborted turn counted", || {
        let http = http.clone();
        async move {
            fetch(&http, "GET", "/metrics")
                .await
                .2
                .contains(line)
                .then_some(())
        }
    })
    .await;
    let body = fetch(&http, "GET", "/metrics").await.2;
    assert!(
        body.contains("holarchy_turns_started_total{brain=\"command\"} 1"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_without_metrics_answers_404_and_still_serves() {
    let root = tempfile::tempdir().expect("tempdir");
    let http = free_addr();
    let daemon =
        Daemon::start_with(&data_dir(&root), &["--http-listen", &http, "--no-metrics"]).await;
    let mut c = daemon.clients().await;
    let agent = create(&mut c, "unmetered", None).await;
    send(&mut c, &agent, "hello").await;
    handled(&c, &agent, 1).await;
    let (status, _, body) = fetch(&http, "GET", "/metrics").await;
    assert_eq!(
        (status, body.as_str()),
        (404, "metrics are off (serve --no-metrics)\n")
    );
    assert_eq!(fetch(&http, "GET", "/healthz").await.0, 200);
}

/// One peer (here 127.0.0.2) opening more idle connections than the whole
/// listener has places for holds only its share: the rest are closed at
/// once, and a health probe from another address is answered right away
/// instead of waiting in the backlog behind them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_peer_cannot_hold_the_listener_and_health_still_answers() {
    const IDLE: usize = 300;
    // The default share of a peer, and of the health routes' reserve.
    const SHARE: usize = 32 + 2;
    let root = tempfile::tempdir().expect("tempdir");
    let http = free_addr();
    let _daemon = Daemon::start_with(&data_dir(&root), &["--http-listen", &http]).await;
    let addr = http.parse().expect("an address");
    let mut idle = Vec::with_capacity(IDLE);
    for _ in 0..IDLE {
        let socket = TcpSocket::new_v4().expect("a socket");
        socket
            .bind("127.0.0.2:0".parse().expect("an address"))
            .expect("bound to 127.0.0.2");
        idle.push(socket.connect(addr).await.expect("connects"));
    }

    // The whole pool is 256: before the per-peer share, this probe waited
    // until the idle connections' header timeout (10 s) freed places.
    let probe = tokio::time::timeout(Duration::from_secs(5), fetch(&http, "GET", "/healthz")).await;
    let (status, _, body) = probe.expect("/healthz answered while one peer holds connections");
    assert_eq!((status, body.as_str()), (200, "ok\n"));

    // Past its share, the peer's connections were closed without a word.
    let closed = futures::future::join_all(idle.iter_mut().map(|stream| async move {
        let mut byte = [0u8; 1];
        matches!(
            tokio::time::timeout(Duration::from_secs(5), stream.read(&mut byte)).await,
            Ok(Ok(0) | Err(_))
        )
    }))
    .await
    .into_iter()
    .filter(|closed| *closed)
    .count();
    assert!(
        closed >= IDLE - SHARE,
        "{closed} of {IDLE} idle connections closed"
    );
}

/// One HTTP/1.1 request, as [`fetch`], where a refused or cut connection
/// is an answer too: `Err` with what happened.
/// [`try_fetch`], asked again (a few times) when the connection closed
/// before its request was read: the graceful close that the loop on
/// `/readyz` above allows for can take any idle connection.
async fn answered(addr: &str, method: &str, path: &str) -> Result<(u16, String), String> {
    let mut tries = 0;
    loop {
        match try_fetch(addr, method, path).await {
            Err(empty) if empty.ends_with("\"\"") && tries < 5 => tries += 1,
            other => return other,
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn try_fetch(addr: &str, method: &str, path: &str) -> Result<(u16, String), String> {
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let head =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    stream
        .write_all(head.as_bytes())
        .await
        .map_err(|e| format!("send: {e}"))?;
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .map_err(|_| "no answer in time".to_owned())?
        .map_err(|e| format!("read: {e}"))?;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("no status in {answer:?}"))?;
    Ok((status, answer))
}

/// From the moment shutdown begins until the runtime has stopped, the
/// listener answers probes rather than closing its port: `/readyz` 503
/// `stopping` (a load balancer takes the daemon out of rotation),
/// `/healthz` 200, and a webhook 503 with `Retry-After` (its sender
/// retries). A webhook under way at the stop, whose body is still coming,
/// finishes, and holds the drain (and so this window) open until it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_answers_503_from_the_start_of_shutdown_until_the_runtime_stops() {
    let root = tempfile::tempdir().expect("tempdir");
    let http = free_addr();
    let mut daemon = Daemon::start_with(&data_dir(&root), &["--http-listen", &http]).await;
    assert_eq!(fetch(&http, "GET", "/readyz").await.0, 200);

    // A delivery under way: its head is in, and the daemon reads its body
    // (`100 Continue` comes when the handler first asks for it).
    let body = br#"{"type":"deploy"}"#;
    let mut under_way = TcpStream::connect(&http).await.expect("connects");
    let head = format!(
        "POST /ingress/generic/nobody HTTP/1.1\r\nHost: {http}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\nX-Holarchy-Signature-256: sha256=00\r\n\r\n",
        body.len()
    );
    under_way
        .write_all(head.as_bytes())
        .await
        .expect("head sent");
    let mut continued = [0u8; 25];
    tokio::time::timeout(
        Duration::from_secs(10),
        under_way.read_exact(&mut continued),
    )
    .await
    .expect("100 Continue in time")
    .expect("read");
    assert!(
        continued.starts_with(b"HTTP/1.1 100 Continue"),
        "{:?}",
        String::from_utf8_lossy(&continued)
    );

    daemon.sigterm();
    // Ready until the stop reaches the listener, then stopping; never a
    // closed port meanwhile.
    let started = std::time::Instant::now();
    let answer = loop {
        let answer = try_fetch(&http, "GET", "/readyz").await;
        match &answer {
            Ok((200, _)) => {}
            // Accepted just as the stop came, before its request was read:
            // hyper's graceful close ends such an idle connection without
            // an answer, and a probe asks again.
            Err(empty) if empty.ends_with("\"\"") => {}
            Ok((503, _)) => break answer.expect("an answer").1,
            other => panic!("/readyz during shutdown: {other:?}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "/readyz still ready after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(answer.ends_with("stopping\n"), "{answer}");
    let (status, _) = answered(&http, "GET", "/healthz")
        .await
        .expect("/healthz answers while stopping");
    assert_eq!(status, 200);
    let (status, refused) = answered(&http, "POST", "/ingress/generic/nobody")
        .await
        .expect("a webhook is answered while stopping");
    assert_eq!(status, 503, "{refused}");
    assert!(refused.contains("retry-after: 1"), "{refused}");

    // The delivery under way finishes (unsigned: 401), and only then can
    // the daemon go on to stop.
    under_way.write_all(body).await.expect("body sent");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), under_way.read_to_end(&mut answer))
        .await
        .expect("answered in time")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    let status = daemon.wait_exit(Duration::from_secs(20)).await;
    assert!(status.success(), "{status}");
}
