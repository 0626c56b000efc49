//! The console's writes that carry text, over its HTTP listener against
//! the real daemon: a message to an agent and input to a task reach it
//! only with the daemon's token (even with the read-only view open), a
//! private agent is refused as the gateway refuses it over gRPC, and every
//! body is bounded and checked, each refusal saying why. And the
//! overview: counts for anyone the read-only view admits, failures for
//! the operator only.

mod common;
#[path = "console/support.rs"]
mod support;

use holarchy::api::pb;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use common::{create, data_dir, eventually, free_addr, messages, script, Daemon};
use support::{http, post, private_subtree};

const JSON: &str = "application/json";

/// POSTs `chunks` chunks of `size` spaces with no declared length
/// (chunked), over a raw connection; the answer's status. Writes may
/// fail once the console answered and closed: the answer still counts.
async fn chunked(addr: &str, path: &str, token: &str, chunks: usize, size: usize) -> u16 {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    let chunk = format!("{size:x}\r\n{}\r\n", " ".repeat(size));
    let mut written = stream.write_all(head.as_bytes()).await;
    for _ in 0..chunks {
        if written.is_err() {
            break;
        }
        written = stream.write_all(chunk.as_bytes()).await;
    }
    if written.is_ok() {
        let _ = stream.write_all(b"0\r\n\r\n").await;
    }
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer);
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("an HTTP answer: {answer}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_writes_take_the_token_keep_private_agents_closed_and_bound_every_body() {
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
    let ops = create(&mut c, "ops", None).await;
    let to_ops = format!("/api/agents/{ops}/messages");
    let hello = json!({ "text": "hello over http" }).to_string();

    // No token, or a wrong one: refused, though reads are open.
    let anonymous = post(&addr, &to_ops, None, JSON, hello.clone()).await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    let wrong = post(
        &addr,
        &to_ops,
        Some("not-the-token-at-all"),
        JSON,
        hello.clone(),
    )
    .await;
    assert_eq!(wrong.status, 401, "{}", wrong.body);
    assert!(messages(&mut c, &ops).await.is_empty(), "nothing was sent");

    // The operator's message is on disk when answered, and handled.
    let sent = post(&addr, &to_ops, op, JSON, hello.clone()).await;
    assert_eq!(sent.status, 200, "{}", sent.body);
    let id = sent.json()["message_id"]
        .as_str()
        .expect("an id")
        .to_owned();
    let stored = messages(&mut c, &ops).await;
    assert_eq!(stored.len(), 1);
    assert_eq!(
        (stored[0].message_id.as_str(), stored[0].text.as_str()),
        (id.as_str(), "hello over http")
    );
    // A dedupe key makes a retry the same message.
    let keyed = json!({ "text": "pay once", "dedupe_key": "invoice-7" }).to_string();
    let first = post(&addr, &to_ops, op, JSON, keyed.clone()).await.json();
    let again = post(&addr, &to_ops, op, JSON, keyed).await.json();
    assert_eq!(first["message_id"], again["message_id"]);
    assert_eq!(
        (first["duplicate"].clone(), again["duplicate"].clone()),
        (json!(false), json!(true))
    );

    // A private agent takes no operator message, from the console either.
    let private = &tree.private[0];
    let refused = post(
        &addr,
        &format!("/api/agents/{private}/messages"),
        op,
        JSON,
        hello.clone(),
    )
    .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(messages(&mut c, private)
        .await
        .iter()
        .all(|m| m.text != "hello over http"));

    // Every body is checked, and each refusal says why.
    let cases: Vec<(&str, String, u16, &str)> = vec![
        ("text/plain", hello.clone(), 415, "application/json"),
        (JSON, "{\"text\": ".into(), 400, "malformed"),
        (
            JSON,
            json!({ "text": "x", "to": "y" }).to_string(),
            400,
            "unknown field",
        ),
        (JSON, json!({ "text": "  " }).to_string(), 400, "empty"),
        (
            JSON,
            json!({ "text": "x".repeat(65_537) }).to_string(),
            413,
            "at most 65536",
        ),
        (
            JSON,
            json!({ "text": "x", "dedupe_key": "k".repeat(300) }).to_string(),
            400,
            "dedupe key",
        ),
        // Past the body's bound: refused before it is read whole.
        (
            JSON,
            json!({ "text": "x".repeat(500_000) }).to_string(),
            413,
            "the body is over",
        ),
    ];
    for (content_type, body, status, says) in cases {
        let answer = post(&addr, &to_ops, op, content_type, body).await;
        assert_eq!(answer.status, status, "{content_type}: {}", answer.body);
        assert!(
            answer.json()["error"]
                .as_str()
                .is_some_and(|e| e.contains(says)),
            "{}",
            answer.body
        );
    }
    // A body with no declared length is cut at the bound all the same.
    let status = chunked(&addr, &to_ops, &token, 64, 16 * 1024).await;
    assert_eq!(status, 413, "a chunked body past the bound");
    assert_eq!(
        messages(&mut c, &ops).await.len(),
        2,
        "no refused body was sent"
    );

    // Input to the task that holds the private child: the operator's way in.
    let tasks = c
        .tasks
        .list_tasks(pb::ListTasksRequest {
            agent_id: tree.lead.clone(),
            page_size: 100,
            page_token: String::new(),
        })
        .await
        .expect("tasks")
        .into_inner()
        .tasks;
    let task = tasks
        .iter()
        .find(|t| &t.child_agent_id == private)
        .expect("the child's task")
        .task_id
        .clone();
    let input = format!("/api/tasks/{task}/input");
    let body = json!({ "text": "from the console" }).to_string();
    assert_eq!(
        post(&addr, &input, None, JSON, body.clone()).await.status,
        401
    );
    assert_eq!(http(&addr, "GET", &input, op).await.status, 405);
    let sent = post(&addr, &input, op, JSON, body.clone()).await;
    assert_eq!(sent.status, 200, "{}", sent.body);
    eventually("the child's input", || {
        let mut c = c.clone();
        let private = private.clone();
        async move {
            messages(&mut c, &private)
                .await
                .iter()
                .any(|m| m.text == "from the console")
                .then_some(())
        }
    })
    .await;
    let nobody = post(
        &addr,
        "/api/tasks/tsk_01KQ8Z3V5W0000000000000000/input",
        op,
        JSON,
        body.clone(),
    )
    .await;
    assert_eq!(nobody.status, 404, "{}", nobody.body);
    let malformed = post(&addr, "/api/tasks/nonsense/input", op, JSON, body).await;
    assert_eq!(malformed.status, 400, "{}", malformed.body);

    // A failed tool call, then the overview: counts for anyone the
    // read-only view admits, the failure for the operator only.
    let bad = script(json!([{ "name": "NoSuchTool", "input": {} }]));
    let sent = post(&addr, &to_ops, op, JSON, json!({ "text": bad }).to_string()).await;
    assert_eq!(sent.status, 200, "{}", sent.body);
    let failures = eventually("the failure in the overview", || {
        let addr = addr.clone();
        let token = token.clone();
        async move {
            let answer = http(&addr, "GET", "/api/overview", Some(&token))
                .await
                .json();
            let failures = answer["failures"].as_array()?.clone();
            (!failures.is_empty()).then_some((answer, failures))
        }
    })
    .await;
    let (overview, failures) = failures;
    assert_eq!(failures[0]["agent_name"], "ops");
    assert!(
        failures[0]["problem"]
            .as_str()
            .is_some_and(|p| p.contains("NoSuchTool")),
        "{}",
        failures[0]
    );
    assert_eq!(overview["agents"]["public"]["active"], 2);
    assert_eq!(overview["agents"]["private"]["active"], 3);
    // Polling from the cursor reads only what came since: nothing new.
    let cursor = overview["cursor"].as_u64().expect("a cursor");
    let later = http(&addr, "GET", &format!("/api/overview?after={cursor}"), op)
        .await
        .json();
    assert_eq!(later["failures"], json!([]), "{later}");
    let anonymous = http(&addr, "GET", "/api/overview", None).await;
    assert_eq!(anonymous.status, 200, "{}", anonymous.body);
    let anonymous: Value = anonymous.json();
    assert_eq!(anonymous["failures"], Value::Null, "failures are contents");
    assert_eq!(anonymous["agents"]["public"]["active"], 2);

    // The agent page names the supervisor and creator.
    let page = http(&addr, "GET", &format!("/api/agents/{private}"), op)
        .await
        .json();
    assert_eq!(
        (
            page["supervisor_name"].as_str(),
            page["lineage_parent_name"].as_str()
        ),
        (Some("lead"), Some("lead"))
    );
}
