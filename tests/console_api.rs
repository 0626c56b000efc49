//! The web console's JSON API end to end, against the real daemon over its
//! HTTP listener: nothing without the token unless the read-only view is
//! opened (then structure), contents and writes with it, private agents
//! refused like gRPC refuses them, every input bounded, the tree one level
//! and one page at a time (its filter walking past what was loaded, in
//! `console_api/tree_filter.rs`), replays with the token only and in the
//! caller's namespace only (`console_api/replays.rs`), and only under the
//! names it was given.

mod common;
#[path = "console_api/replays.rs"]
mod replays;
#[path = "console/support.rs"]
mod support;
#[path = "console_api/tree_filter.rs"]
mod tree_filter;

use std::time::{Duration, Instant};

use holarchy::api::pb;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use common::{create, data_dir, free_addr, script, send, Daemon};
use support::{http, private_subtree, state};

pub(crate) fn ids(nodes: &Value) -> Vec<String> {
    nodes
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| n["id"].as_str().expect("id").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_api_shows_structure_to_anyone_and_contents_to_the_operator() {
    let root = tempfile::tempdir().expect("tempdir");
    let addr = free_addr();
    let daemon = Daemon::start_with(
        &data_dir(&root),
        &["--http-listen", &addr, "--console-public-read"],
    )
    .await;
    let token = daemon.token();
    let op = Some(token.as_str());
    let mut c = daemon.clients().await;
    let tree = private_subtree(&mut c, "lead").await;
    let (lead, top) = (tree.lead.clone(), tree.private[0].clone());
    send(&mut c, &lead, "remember the launch code 0000").await;

    // The page and its assets, with the headers that confine them.
    let page = http(&addr, "GET", "/", None).await;
    assert_eq!(page.status, 200);
    assert!(page.header("content-type").starts_with("text/html"));
    let policy = page.header("content-security-policy");
    assert!(policy.contains("script-src 'self'"), "{policy}");
    assert!(!policy.contains("unsafe-inline"), "{policy}");
    assert_eq!(page.header("x-content-type-options"), "nosniff");
    assert!(page.body.contains("/console/console.js"));
    assert!(!page.body.contains("<script>"), "no inline script");
    let script_asset = http(&addr, "GET", "/console/console.js", None).await;
    assert_eq!(script_asset.status, 200);
    assert!(script_asset
        .header("content-type")
        .starts_with("text/javascript"));
    assert_eq!(
        http(&addr, "GET", "/console/other.js", None).await.status,
        404
    );

    // Without the token: the tree, one level at a time, with its marks.
    let roots = http(&addr, "GET", "/api/tree", None).await.json();
    assert_eq!(ids(&roots["nodes"]), vec![lead.clone()], "{roots}");
    let below = http(&addr, "GET", &format!("/api/tree?agent={lead}"), None)
        .await
        .json();
    assert_eq!(below["root"]["id"], lead.as_str());
    let nodes = below["nodes"].as_array().expect("nodes");
    let child = nodes
        .iter()
        .find(|n| n["id"] == top.as_str())
        .expect("the private child");
    assert_eq!(child["visibility"], "private");
    assert_eq!(child["actor_alive"], true);
    let handle = nodes
        .iter()
        .find(|n| n["type"] == "task")
        .expect("the task handle");
    assert_eq!(handle["kind"], "child_agent_task");
    assert_eq!(handle["child_agent_id"], top.as_str(), "{handle}");
    assert_eq!(handle["name"], "", "a task's label is content: {handle}");
    assert!(
        nodes.iter().all(|n| n["depth"] == 1),
        "one level only: {below}"
    );
    assert!(below["mismatches"].as_array().expect("list").is_empty());
    // The whole-runtime check walks every agent: the operator's only.
    let refused = http(&addr, "GET", "/api/check", None).await;
    assert_eq!(refused.status, 401, "{}", refused.body);
    let whole = http(&addr, "GET", "/api/check", op).await.json();
    assert_eq!(whole["agents"], 4, "{whole}");
    assert_eq!(whole["next"], "", "{whole}");
    assert!(whole["mismatches"].as_array().expect("list").is_empty());
    // ... and the agent's page without what it holds.
    let anonymous = http(&addr, "GET", &format!("/api/agents/{lead}"), None)
        .await
        .json();
    assert_eq!(anonymous["state"], "active");
    assert_eq!(anonymous["full"], false);
    assert!(anonymous.get("waiting_on").is_none(), "{anonymous}");
    for listing in ["messages", "tasks", "work", "workspaces", "events"] {
        let refused = http(&addr, "GET", &format!("/api/agents/{lead}/{listing}"), None).await;
        assert_eq!(refused.status, 401, "{listing}: {}", refused.body);
    }
    let found = http(&addr, "GET", "/api/search?q=le", None).await.json();
    assert_eq!(found["agents"][0]["agent_id"], lead.as_str(), "{found}");

    // A wrong token is refused outright; the right one shows contents.
    let wrong = http(&addr, "GET", "/api/tree", Some("not-the-daemons-token")).await;
    assert_eq!(wrong.status, 401);
    assert_eq!(
        http(&addr, "GET", "/api/session", op).await.json(),
        json!({ "operator": true, "writes": true, "role": "admin" })
    );
    let messages = http(&addr, "GET", &format!("/api/agents/{lead}/messages"), op)
        .await
        .json();
    assert!(
        messages["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .any(|m| m["text"] == "remember the launch code 0000"),
        "{messages}"
    );
    let tasks = http(&addr, "GET", &format!("/api/agents/{lead}/tasks"), op)
        .await
        .json();
    let task_id = tasks["tasks"][0]["task_id"]
        .as_str()
        .expect("a task")
        .to_owned();
    assert_eq!(tasks["tasks"][0]["child_agent_id"], top.as_str());
    let output = http(&addr, "GET", &format!("/api/tasks/{task_id}/output"), op).await;
    assert_eq!(output.status, 200, "{}", output.body);
    let full = http(&addr, "GET", &format!("/api/agents/{lead}"), op)
        .await
        .json();
    assert_eq!(full["full"], true);
    assert!(full["waiting_on"].is_array());
    assert_eq!(
        http(&addr, "GET", &format!("/api/agents/{lead}/workspaces"), op)
            .await
            .status,
        200
    );
    assert_eq!(
        http(&addr, "GET", &format!("/api/agents/{lead}/work"), op)
            .await
            .status,
        200
    );

    // Writes: the token, public agents only, and answered once stored.
    let path = format!("/api/agents/{lead}/pause");
    assert_eq!(http(&addr, "POST", &path, None).await.status, 401);
    assert_eq!(http(&addr, "GET", &path, op).await.status, 405);
    let private_pause = http(&addr, "POST", &format!("/api/agents/{top}/pause"), op).await;
    assert_eq!(private_pause.status, 403, "{}", private_pause.body);
    let private_archive = http(&addr, "POST", &format!("/api/agents/{top}/archive"), op).await;
    assert_eq!(private_archive.status, 403, "{}", private_archive.body);
    let paused = http(&addr, "POST", &path, op).await;
    assert_eq!(paused.status, 200, "{}", paused.body);
    assert_eq!(paused.json()["state"], "paused");
    assert_eq!(state(&mut c, &lead).await, pb::LifecycleState::Paused);
    let resumed = http(&addr, "POST", &format!("/api/agents/{lead}/resume"), op).await;
    assert_eq!(resumed.json()["state"], "active");
    assert_eq!(state(&mut c, &lead).await, pb::LifecycleState::Active);

    // Bad input is a 400 that says why; an unknown agent a 404.
    for bad in [
        "/api/tree?limit=0",
        "/api/tree?limit=5000",
        "/api/tree?limit=ten",
        "/api/tree?page=..%2Fetc",
        "/api/tree?agent=not-an-id",
        "/api/search?q=",
        "/api/agents/not-an-id",
        "/api/tree?q=%zz",
    ] {
        let answer = http(&addr, "GET", bad, None).await;
        assert_eq!(answer.status, 400, "{bad}: {}", answer.body);
        assert!(answer.json()["error"].is_string(), "{bad}");
    }
    let messages_page = format!("/api/agents/{lead}/messages?limit=100000");
    assert_eq!(http(&addr, "GET", &messages_page, op).await.status, 400);
    let nobody = "agt_01KQ8Z3V5W0000000000000000";
    assert_eq!(
        http(&addr, "GET", &format!("/api/agents/{nobody}"), None)
            .await
            .status,
        404
    );
    assert_eq!(
        http(&addr, "POST", &format!("/api/agents/{nobody}/pause"), op)
            .await
            .status,
        404
    );
    assert_eq!(http(&addr, "GET", "/api/nothing", None).await.status, 404);
    let long_path = format!("/api/agents/{}", "a".repeat(300));
    assert_eq!(http(&addr, "GET", &long_path, None).await.status, 414);
    let long_query = format!("/api/search?q={}", "a".repeat(600));
    assert_eq!(http(&addr, "GET", &long_query, None).await.status, 414);

    // Events follow live, as server-sent events.
    let mut stream = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connects");
    let head = format!(
        "GET /api/agents/{lead}/events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("sent");
    send(&mut c, &lead, "a live one").await;
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !seen.contains("a live one") {
        let mut buf = [0u8; 4096];
        let left = deadline.saturating_duration_since(Instant::now());
        let n = tokio::time::timeout(left, stream.read(&mut buf))
            .await
            .expect("events in time")
            .expect("read");
        assert!(n > 0, "the stream ended: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(seen.contains("text/event-stream"), "{seen}");
    assert!(seen.contains("\"kind\":\"message_queued\""), "{seen}");
}

/// `GetTree`'s `max_depth`, which the console expands with, over gRPC:
/// the walk stops at the depth asked for and looks for no strays then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_tree_stops_at_the_depth_asked_for() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let tree = private_subtree(&mut c, "lead").await;
    for (max_depth, agents) in [(None, 4), (Some(0), 1), (Some(1), 2), (Some(2), 3)] {
        let page = c
            .supervision
            .get_tree(pb::GetTreeRequest {
                agent_id: tree.lead.clone(),
                max_depth,
                ..Default::default()
            })
            .await
            .expect("tree")
            .into_inner();
        let deepest = page.nodes.iter().map(|n| n.depth).max().unwrap_or(0);
        assert_eq!(page.agents, agents, "max_depth {max_depth:?}");
        assert!(
            max_depth.is_none_or(|d| deepest <= d),
            "max_depth {max_depth:?} went to depth {deepest}"
        );
        assert!(page.mismatches.is_empty(), "{:?}", page.mismatches);
    }
    // The whole runtime, roots only: no stray is reported for the agents
    // the walk did not reach.
    let roots = c
        .supervision
        .get_tree(pb::GetTreeRequest {
            max_depth: Some(0),
            ..Default::default()
        })
        .await
        .expect("tree")
        .into_inner();
    assert_eq!(roots.agents, 1);
    assert!(roots.mismatches.is_empty(), "{:?}", roots.mismatches);
}

/// The roots alone come a page at a time after the last id shown, so a
/// page costs its own roots, not a walk of the runtime.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_roots_come_a_page_at_a_time_by_id() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let mut live = Vec::new();
    for i in 0..7 {
        live.push(create(&mut c, &format!("root-{i}"), None).await);
    }
    let ended = create(&mut c, "ended", None).await;
    c.agents
        .archive_agent(pb::ArchiveAgentRequest {
            agent_id: ended.clone(),
        })
        .await
        .expect("archives");
    // A root with private agents under it: they are not roots.
    live.push(private_subtree(&mut c, "lead").await.lead);
    live.sort();

    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = c
            .supervision
            .get_tree(pb::GetTreeRequest {
                page_token: token.clone(),
                max_nodes: 3,
                max_depth: Some(0),
                ..Default::default()
            })
            .await
            .expect("a page of roots")
            .into_inner();
        assert!(page.nodes.len() <= 3, "{page:?}");
        assert!(page.nodes.iter().all(|n| n.depth == 0 && n.actor_alive));
        seen.extend(page.nodes.into_iter().map(|n| n.id));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(
        seen, live,
        "every live root once, in id order, no ended one"
    );
    let refused = c
        .supervision
        .get_tree(pb::GetTreeRequest {
            page_token: "40".into(),
            max_depth: Some(0),
            ..Default::default()
        })
        .await
        .expect_err("an offset is not a root's id");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
}

/// A wide agent's children come a page at a time, the first page fast.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wide_level_of_the_tree_comes_a_page_at_a_time() {
    const CHILDREN: usize = 300;
    let root = tempfile::tempdir().expect("tempdir");
    let addr = free_addr();
    let daemon = Daemon::start_with(
        &data_dir(&root),
        &[
            "--http-listen",
            &addr,
            "--console-public-read",
            "--max-children",
            "1000",
            "--max-tool-calls-per-step",
            "1000",
        ],
    )
    .await;
    let mut c = daemon.clients().await;
    let wide = create(&mut c, "wide", None).await;
    let spawns: Vec<_> = (0..CHILDREN)
        .map(|i| {
            json!({ "name": "SpawnAgent", "input": {
            "preset": "private_child", "initial_message": format!("child {i}") } })
        })
        .collect();
    send(&mut c, &wide, &script(json!(spawns))).await;
    common::eventually("every child up", || {
        let addr = addr.clone();
        let wide = wide.clone();
        async move {
            let level = http(
                &addr,
                "GET",
                &format!("/api/tree?agent={wide}&limit=1000"),
                None,
            )
            .await
            .json();
            let agents = level["nodes"]
                .as_array()?
                .iter()
                .filter(|n| n["type"] == "agent")
                .count();
            (agents == CHILDREN).then_some(())
        }
    })
    .await;

    let started = Instant::now();
    let first = http(&addr, "GET", &format!("/api/tree?agent={wide}"), None).await;
    let took = started.elapsed();
    let first = first.json();
    assert_eq!(first["nodes"].as_array().expect("nodes").len(), 200);
    let next = first["next"].as_str().expect("a next page").to_owned();
    assert!(!next.is_empty(), "{first}");
    let second = http(
        &addr,
        "GET",
        &format!("/api/tree?agent={wide}&page={next}"),
        None,
    )
    .await
    .json();
    // 300 handles and 300 children: 600 nodes below, 200 on the first page.
    assert_eq!(second["nodes"].as_array().expect("nodes").len(), 200);
    let mut all = ids(&first["nodes"]);
    all.extend(ids(&second["nodes"]));
    let distinct: std::collections::HashSet<_> = all.iter().collect();
    assert_eq!(distinct.len(), all.len(), "pages do not overlap");
    eprintln!("first page of {CHILDREN} private children (debug build): {took:?}");
}

/// Without `--console-public-read`, nothing but the page and its login
/// check answers without the token: no local program reads the tree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_nothing_without_the_token_by_default() {
    let root = tempfile::tempdir().expect("tempdir");
    let addr = free_addr();
    let daemon = Daemon::start_with(&data_dir(&root), &["--http-listen", &addr]).await;
    let mut c = daemon.clients().await;
    let lead = create(&mut c, "lead", None).await;
    let token = daemon.token();

    // The page loads, so the operator can log in; nothing else answers.
    assert_eq!(http(&addr, "GET", "/", None).await.status, 200);
    let session = http(&addr, "GET", "/api/session", None).await;
    assert_eq!(session.json()["operator"], false);
    for path in [
        "/api/tree".to_owned(),
        "/api/check".to_owned(),
        "/api/search?q=le".to_owned(),
        format!("/api/agents/{lead}"),
    ] {
        let refused = http(&addr, "GET", &path, None).await;
        assert_eq!(refused.status, 401, "{path}: {}", refused.body);
        assert!(
            refused.body.contains("console-public-read"),
            "{}",
            refused.body
        );
        assert!(!refused.body.contains(&lead), "{}", refused.body);
    }
    let tree = http(&addr, "GET", "/api/tree", Some(&token)).await;
    assert_eq!(tree.status, 200, "{}", tree.body);
    assert_eq!(ids(&tree.json()["nodes"]), vec![lead]);
}

/// `--console-private`, what older command lines say, is still taken: it
/// is what the console does anyway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_private_flag_still_starts_a_private_console() {
    let root = tempfile::tempdir().expect("tempdir");
    let addr = free_addr();
    let _daemon = Daemon::start_with(
        &data_dir(&root),
        &["--http-listen", &addr, "--console-private"],
    )
    .await;
    assert_eq!(http(&addr, "GET", "/api/tree", None).await.status, 401);
}

/// One request on a fresh connection naming `host`; the status and body.
async fn under_host(addr: &str, path: &str, host: &str, token: Option<&str>) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let head = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Connection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.expect("sent");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut answer))
        .await
        .expect("answered in time")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("a status line in {answer:?}"));
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_owned())
}

/// A page that re-points its own DNS name at the listener (DNS
/// rebinding) sends that name as `Host`: the console answers it nothing,
/// not even the page, and not even with the token. Addresses and
/// `localhost` are answered; the health route is not checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_request_under_a_name_it_was_not_given_is_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    let addr = free_addr();
    let daemon = Daemon::start_with(&data_dir(&root), &["--http-listen", &addr]).await;
    let token = daemon.token();
    let port = addr.rsplit(':').next().expect("a port");
    let rebound = format!("attacker.example:{port}");
    for path in ["/", "/console/console.js", "/api/session", "/api/tree"] {
        let (status, body) = under_host(&addr, path, &rebound, Some(&token)).await;
        assert_eq!(status, 421, "{path}: {body}");
    }
    let (status, body) = under_host(&addr, "/api/tree", &rebound, None).await;
    assert_eq!(status, 421, "{body}");
    for host in [
        addr.clone(),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ] {
        let (status, body) = under_host(&addr, "/api/tree", &host, Some(&token)).await;
        assert_eq!(status, 200, "{host}: {body}");
    }
    assert_eq!(under_host(&addr, "/healthz", &rebound, None).await.0, 200);
}

/// A name given to `--http-allowed-host` (the one a reverse proxy or a
/// browser uses) is answered; others still are not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_given_to_http_allowed_host_is_answered() {
    let root = tempfile::tempdir().expect("tempdir");
    let addr = free_addr();
    let daemon = Daemon::start_with(
        &data_dir(&root),
        &[
            "--http-listen",
            &addr,
            "--http-allowed-host",
            "console.example",
        ],
    )
    .await;
    let token = daemon.token();
    let (status, body) = under_host(&addr, "/api/tree", "Console.Example:443", Some(&token)).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = under_host(&addr, "/api/tree", "other.example", Some(&token)).await;
    assert_eq!(status, 421, "{body}");
}

/// A tool error's reason is on the console's messages page, beside the
/// message whose turn met it, in the words the CLI uses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_messages_page_says_what_went_wrong_in_each_turn() {
    let root = tempfile::tempdir().expect("tempdir");
    let addr = free_addr();
    let daemon = Daemon::start_with(&data_dir(&root), &["--http-listen", &addr]).await;
    let mut c = daemon.clients().await;
    let token = daemon.token();
    let agent = create(&mut c, "clumsy", None).await;
    send(&mut c, &agent, "a plain turn").await;
    send(
        &mut c,
        &agent,
        &script(json!([{ "name": "NoSuchTool", "input": {} }])),
    )
    .await;
    common::handled(&c, &agent, 2).await;
    let page = http(
        &addr,
        "GET",
        &format!("/api/agents/{agent}/messages"),
        Some(&token),
    )
    .await;
    assert_eq!(page.status, 200, "{}", page.body);
    let messages = page.json()["messages"]
        .as_array()
        .expect("messages")
        .clone();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(messages[0].get("problems").is_none(), "{:?}", messages[0]);
    let problems = messages[1]["problems"].to_string();
    assert!(problems.contains("tool NoSuchTool"), "{problems}");
}
