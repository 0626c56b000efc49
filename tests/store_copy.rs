//! `holarchy store copy`: a daemon's embedded store moved into PostgreSQL
//! with the real binary, then served from there. The same agents (a
//! private child and its task handle too), messages, event cursors, task
//! output and notes come back; the copy refuses a store a daemon still
//! serves, a database that already holds data, and a store with a damaged
//! record, writing nothing.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{
    create, data_dir, events, eventually, handled, messages, pg_server, script, send,
    sled_message_key, tool_output, Daemon,
};
use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::json;

fn store_copy(from: &Path, to: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .args(["store", "copy", "--from"])
        .arg(from)
        .args(["--to", to])
        .env_remove("HOLARCHY_STORE")
        .stdin(Stdio::null())
        .output()
        .expect("holarchy runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every node of the supervision tree: its kind, id and liveness.
async fn tree(c: &mut Clients) -> Vec<(String, String, bool)> {
    let page = c
        .supervision
        .get_tree(pb::GetTreeRequest::default())
        .await
        .expect("tree")
        .into_inner();
    assert!(page.next_page_token.is_empty(), "one page holds this tree");
    let mut nodes: Vec<_> = page
        .nodes
        .into_iter()
        .map(|n| (n.node_type, n.id, n.actor_alive))
        .collect();
    nodes.sort();
    nodes
}

/// An event as an operator compares them.
#[derive(Debug, Clone, PartialEq)]
struct Logged {
    cursor: u64,
    slot: u32,
    seq: u64,
    kind: String,
    agent: String,
    text: String,
}

async fn log(c: &mut Clients) -> Vec<Logged> {
    events(c, 0)
        .await
        .into_iter()
        .map(|e| Logged {
            cursor: e.cursor,
            slot: e.slot,
            seq: e.seq,
            kind: e.kind,
            agent: e.agent_id,
            text: e.text,
        })
        .collect()
}

/// The agent's notes `query` finds, once the search has indexed one.
async fn notes_matching(c: &Clients, agent_id: &str, query: &str) -> usize {
    eventually(&format!("a note found by `{query}`"), || {
        let mut c = c.clone();
        async move {
            let hits = search(&mut c, agent_id, query).await;
            (hits > 0).then_some(hits)
        }
    })
    .await
}

async fn search(c: &mut Clients, agent_id: &str, query: &str) -> usize {
    c.memory
        .search_memory(pb::SearchMemoryRequest {
            agent_id: agent_id.into(),
            query: query.into(),
            limit: 10,
            kinds: vec!["note".into()],
        })
        .await
        .expect("searched")
        .into_inner()
        .hits
        .len()
}

/// A data directory for a daemon on the embedded store and an empty
/// database to copy it into; `None` when no PostgreSQL server can be had,
/// or when this run puts every daemon on PostgreSQL (the source must be
/// the embedded store).
async fn set_up() -> Option<(tempfile::TempDir, std::path::PathBuf, String)> {
    if std::env::var("HOLARCHY_TEST_STORE").as_deref() == Ok("postgres")
        || !pg_server::available().await
    {
        return None;
    }
    let root = tempfile::tempdir().expect("tempdir");
    let data = data_dir(&root);
    let url = pg_server::database_for(&root.path().join("copy"))
        .await
        .expect("a database");
    Some((root, data, url))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copied_store_serves_the_same_agents_messages_events_and_notes_from_postgres() {
    let Some((_root, data, url)) = set_up().await else {
        return;
    };

    let mut daemon = Daemon::start(&data).await;
    let mut c = daemon.clients().await;
    let agent = create(&mut c, "copied", None).await;
    send(
        &mut c,
        &agent,
        &script(json!([
            { "name": "MemoryWrite", "input": { "key": "otters", "text": "otters hold hands while they sleep", "tags": ["animals"] } },
            { "name": "ExecCommand", "input": { "command": "echo copied-output", "yield_ms": 10000 } },
            { "name": "SpawnAgent", "input": { "initial_message": "hello child" } },
        ])),
    )
    .await;
    handled(&c, &agent, 1).await;
    let exec = tool_output(&mut c, &agent, "ExecCommand").await;
    assert!(exec.to_string().contains("copied-output"), "{exec}");
    send(&mut c, &agent, "a plain second message").await;
    handled(&c, &agent, 2).await;
    assert_eq!(notes_matching(&c, &agent, "otters").await, 1);

    let refused = store_copy(&data, &url);
    assert!(!refused.status.success(), "a served store is not copied");
    let said = text(&refused.stderr);
    assert!(said.contains("stop the daemon"), "{said}");

    // Settled first: a child's turn may still be writing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before_tree = tree(&mut c).await;
    let before_log = log(&mut c).await;
    let before_messages = messages(&mut c, &agent).await;
    // Tokens, the audit trail and quotas move too: a copy locks nobody
    // out, nor lifts a bound.
    c.access
        .set_quota(pb::SetQuotaRequest {
            namespace: "team-a".into(),
            quota: Some(pb::Quota {
                agents: Some(7),
                ..Default::default()
            }),
        })
        .await
        .expect("a quota");
    c.access
        .create_token(pb::CreateTokenRequest {
            role: "viewer".into(),
            name: "copied".into(),
            ..Default::default()
        })
        .await
        .expect("a token");
    let before_access = access(&mut c).await;
    daemon.terminate(Duration::from_secs(20)).await;
    assert!(
        before_tree.iter().any(|(kind, _, _)| kind == "task"),
        "the child's task handle is in the tree: {before_tree:?}"
    );

    let copied = store_copy(&data, &url);
    let said = text(&copied.stdout);
    assert!(copied.status.success(), "{said}{}", text(&copied.stderr));
    assert!(
        said.contains("agents") && said.contains("event runs"),
        "{said}"
    );

    let again = store_copy(&data, &url);
    assert!(
        !again.status.success(),
        "a second copy into the same database"
    );
    let said = text(&again.stderr);
    assert!(said.contains("already holds holarchy data"), "{said}");

    let mut daemon = Daemon::start_with(&data, &["--store", &url]).await;
    let mut c = daemon.clients().await;
    assert_eq!(tree(&mut c).await, before_tree);
    let after_log = log(&mut c).await;
    assert_eq!(
        after_log[..before_log.len()],
        before_log[..],
        "the same events under the same cursors"
    );
    assert_eq!(messages(&mut c, &agent).await, before_messages);
    assert_eq!(notes_matching(&c, &agent, "otters").await, 1);
    assert_eq!(access(&mut c).await, before_access);

    // And it goes on from there: a new turn's events follow the copied
    // ones' cursors.
    send(&mut c, &agent, "a third message, on PostgreSQL").await;
    handled(&c, &agent, 3).await;
    let last_copied = before_log.last().map_or(0, |e| e.cursor);
    let newer = log(&mut c).await;
    assert!(
        newer
            .iter()
            .any(|e| e.cursor > last_copied && e.agent == agent),
        "new events after cursor {last_copied}"
    );
    // Each slot's numbers too: the copied ones, then on by one.
    let mut by_slot = std::collections::BTreeMap::<u32, Vec<u64>>::new();
    for event in &newer {
        by_slot.entry(event.slot).or_default().push(event.seq);
    }
    for (slot, numbers) in by_slot {
        assert_eq!(
            numbers,
            (1..=numbers.len() as u64).collect::<Vec<_>>(),
            "slot {slot}"
        );
    }
    daemon.terminate(Duration::from_secs(20)).await;
}

/// The tokens, the audit trail's entries and the namespaces' quotas.
async fn access(
    c: &mut Clients,
) -> (
    Vec<pb::TokenInfo>,
    Vec<pb::AuditEntry>,
    Vec<(String, Option<pb::Quota>)>,
) {
    let tokens = c
        .access
        .list_tokens(pb::ListTokensRequest {})
        .await
        .expect("tokens")
        .into_inner()
        .tokens;
    let entries = c
        .access
        .list_audit(pb::ListAuditRequest {
            page_size: 1000,
            ..Default::default()
        })
        .await
        .expect("the trail")
        .into_inner()
        .entries;
    let quotas: Vec<(String, Option<pb::Quota>)> = c
        .access
        .list_namespaces(pb::ListNamespacesRequest {})
        .await
        .expect("namespaces")
        .into_inner()
        .namespaces
        .into_iter()
        .filter(|n| n.quota_set_at_ms > 0)
        .map(|n| (n.name, n.quota))
        .collect();
    assert!(!tokens.is_empty() && !entries.is_empty() && !quotas.is_empty());
    (tokens, entries, quotas)
}

/// Cuts the stored record of `message` in half; hands back its bytes.
fn cut_message(data: &Path, agent: &str, message: &str) -> (Vec<u8>, Vec<u8>) {
    let db = sled::open(data.join("db")).expect("store opens");
    let messages = db.open_tree("messages").expect("tree");
    let key = sled_message_key(agent, message);
    let bytes = messages
        .get(&key)
        .expect("reads")
        .expect("the message")
        .to_vec();
    messages
        .insert(&key, &bytes[..bytes.len() / 2])
        .expect("writes");
    db.flush().expect("flushed");
    (key, bytes)
}

fn put_back(data: &Path, key: &[u8], bytes: &[u8]) {
    let db = sled::open(data.join("db")).expect("store opens");
    let messages = db.open_tree("messages").expect("tree");
    messages.insert(key, bytes).expect("writes");
    db.flush().expect("flushed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_that_meets_a_damaged_record_writes_nothing_and_names_it() {
    let Some((_root, data, url)) = set_up().await else {
        return;
    };
    let mut daemon = Daemon::start(&data).await;
    let mut c = daemon.clients().await;
    let agent = create(&mut c, "damaged-on-disk", None).await;
    let message = send(&mut c, &agent, "cut in half while the daemon is down").await;
    handled(&c, &agent, 1).await;
    daemon.terminate(Duration::from_secs(20)).await;
    let (key, bytes) = cut_message(&data, &agent, &message);

    let failed = store_copy(&data, &url);
    assert!(!failed.status.success(), "a damaged store is not copied");
    let said = text(&failed.stderr);
    assert!(
        said.contains("messages") && said.contains("nothing was written"),
        "the failure names the record's tree and what it left: {said}"
    );

    // Mended, it copies: the failed attempt left the database empty.
    put_back(&data, &key, &bytes);
    let copied = store_copy(&data, &url);
    assert!(
        copied.status.success(),
        "{}{}",
        text(&copied.stdout),
        text(&copied.stderr)
    );
    let mut daemon = Daemon::start_with(&data, &["--store", &url]).await;
    let mut c = daemon.clients().await;
    let all = messages(&mut c, &agent).await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].text, "cut in half while the daemon is down");
    daemon.terminate(Duration::from_secs(20)).await;
}
