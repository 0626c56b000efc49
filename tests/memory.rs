//! Agents' durable memory through the real binary: notes written by the
//! scripted brain's tool calls are found ranked by their own agent only,
//! survive `kill -9`, come back when the index directory is lost, go with
//! their agent's archive, and bad inputs change nothing.

mod common;

#[path = "memory/kinds.rs"]
mod kinds;

use common::{create, data_dir, eventually, handled, messages, script, send, tool_call, Daemon};
use holarchy::api::pb;
use holarchy::api::pb::memory_service_client::MemoryServiceClient;
use holarchy::client::{self, Clients, Target};
use serde_json::{json, Value};
use std::time::Duration;
use tonic::Code;

/// The agent's memory matching `query`, as an operator searches it.
async fn search(c: &mut Clients, agent_id: &str, query: &str) -> Vec<pb::MemoryHit> {
    c.memory
        .search_memory(pb::SearchMemoryRequest {
            agent_id: agent_id.into(),
            query: query.into(),
            limit: 50,
            kinds: vec!["note".into()],
        })
        .await
        .expect("searched")
        .into_inner()
        .hits
}

/// Waits until `query` finds exactly `count` of the agent's notes.
async fn found(c: &Clients, agent_id: &str, query: &str, count: usize) -> Vec<pb::MemoryHit> {
    eventually(&format!("{count} hits for `{query}`"), || {
        let mut c = c.clone();
        async move {
            let hits = search(&mut c, agent_id, query).await;
            (hits.len() == count).then_some(hits)
        }
    })
    .await
}

async fn listed(c: &mut Clients, agent_id: &str) -> pb::ListMemoryResponse {
    c.memory
        .list_memory(pb::ListMemoryRequest {
            agent_id: agent_id.into(),
            page_size: 0,
            page_token: String::new(),
        })
        .await
        .expect("listed")
        .into_inner()
}

/// Sends the agent one scripted message of `calls` and waits for its turn.
async fn run(c: &mut Clients, agent_id: &str, calls: Value) {
    let before = messages(c, agent_id).await.len();
    send(c, agent_id, &script(calls)).await;
    handled(c, agent_id, before + 1).await;
}

fn write(text: &str) -> Value {
    json!({ "name": "MemoryWrite", "input": { "text": text } })
}

fn note_text(hit: &pb::MemoryHit) -> &str {
    hit.note
        .as_ref()
        .map(|n| n.text.as_str())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notes_are_found_ranked_by_their_own_agent_only() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let alice = create(&mut c, "alice", None).await;
    let bob = create(&mut c, "bob", None).await;
    run(
        &mut c,
        &alice,
        json!([
            write("otters otters otters: a raft of otters"),
            write("the deploy key lives in the vault; otters are unrelated"),
            { "name": "MemoryWrite", "input": { "key": "lunch", "text": "soup on mondays", "tags": ["food"] } },
            { "name": "MemoryWrite", "input": { "key": "lunch", "text": "salad on mondays", "tags": ["food"] } },
        ]),
    )
    .await;
    run(&mut c, &bob, json!([write("bob has otters too")])).await;

    let hits = found(&c, &alice, "otters", 2).await;
    assert!(
        note_text(&hits[0]).starts_with("otters otters otters"),
        "{hits:?}"
    );
    assert!(hits[0].score > hits[1].score, "ranked: {hits:?}");
    assert!(
        hits[0].snippet.contains("**otters**"),
        "{}",
        hits[0].snippet
    );
    assert!(hits
        .iter()
        .all(|h| h.note.as_ref().is_some_and(|n| n.agent_id == alice)));
    // The same key replaced the note: one lunch, the newer text.
    assert_eq!(listed(&mut c, &alice).await.total, 3);
    let lunch = found(&c, &alice, "mondays", 1).await;
    assert_eq!(note_text(&lunch[0]), "salad on mondays");
    found(&c, &alice, "food", 1).await;

    // The agent's own search: its notes, never bob's.
    run(
        &mut c,
        &alice,
        // Notes only: its handled messages (this script among them) are
        // searchable too, once the indexer reaches them.
        json!([{ "name": "MemorySearch", "input": { "query": "otters", "limit": 5, "kinds": ["note"] } }]),
    )
    .await;
    let (failed, output) = tool_call(&mut c, &alice, "MemorySearch").await;
    assert!(!failed, "{output}");
    let hits = output["hits"].as_array().expect("hits");
    assert_eq!(hits.len(), 2, "{output}");
    let best = hits[0]["id"].as_str().expect("id").to_owned();
    run(
        &mut c,
        &alice,
        json!([{ "name": "MemoryGet", "input": { "id": best } }]),
    )
    .await;
    let (_, note) = tool_call(&mut c, &alice, "MemoryGet").await;
    assert_eq!(note["text"], "otters otters otters: a raft of otters");
    // Bob cannot read alice's note by its id.
    run(
        &mut c,
        &bob,
        json!([{ "name": "MemoryGet", "input": { "id": best } }]),
    )
    .await;
    let (failed, output) = tool_call(&mut c, &bob, "MemoryGet").await;
    assert!(failed && output["kind"] == "not_found", "{output}");
    assert_eq!(found(&c, &bob, "otters", 1).await.len(), 1);
    found(&c, &bob, "raft", 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_inputs_are_refused_and_change_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let alice = create(&mut c, "alice", None).await;

    let big = "x".repeat(17 * 1024);
    let cases = [
        ("MemoryWrite", json!({ "text": big })),
        ("MemoryWrite", json!({ "text": "  " })),
        ("MemoryWrite", json!({ "text": "t", "tags": ["two words"] })),
        ("MemorySearch", json!({ "query": "" })),
        ("MemorySearch", json!({ "query": "x", "limit": 0 })),
        (
            "MemorySearch",
            json!({ "query": "x", "limit": 1_000_000_000u64 }),
        ),
        (
            "MemoryGet",
            json!({ "id": "agt_01KQ8Z3V5W0000000000000000" }),
        ),
    ];
    for (tool, input) in cases {
        run(&mut c, &alice, json!([{ "name": tool, "input": input }])).await;
        let (failed, output) = tool_call(&mut c, &alice, tool).await;
        assert!(failed, "{tool} {output}");
        assert_eq!(output["kind"], "invalid_input", "{tool}: {output}");
    }
    // A refused call is recorded with a hint of its input, not all of it:
    // failing calls must not grow the event log or the index.
    let recorded = common::events(&mut c, 0)
        .await
        .into_iter()
        .filter(|e| e.kind == "tool_called" && e.agent_id == alice)
        .map(|e| serde_json::from_str::<Value>(&e.detail_json).expect("detail is JSON"))
        .map(|detail| detail["input"].as_str().unwrap_or_default().len())
        .max()
        .expect("calls recorded");
    assert!(
        recorded <= 1200,
        "a refused call kept {recorded} bytes of input"
    );

    let refused = |request: pb::SearchMemoryRequest| {
        let mut c = c.clone();
        async move {
            c.memory
                .search_memory(request)
                .await
                .expect_err("refused")
                .code()
        }
    };
    for (query, limit) in [("", 5), ("x", 0), ("x", 1_000_000_000), ("   ", 5)] {
        let request = pb::SearchMemoryRequest {
            agent_id: alice.clone(),
            query: query.into(),
            limit,
            kinds: Vec::new(),
        };
        assert_eq!(
            refused(request).await,
            Code::InvalidArgument,
            "{query:?} {limit}"
        );
    }
    let unknown_kind = pb::SearchMemoryRequest {
        agent_id: alice.clone(),
        query: "x".into(),
        limit: 5,
        kinds: vec!["secrets".into()],
    };
    assert_eq!(refused(unknown_kind).await, Code::InvalidArgument);
    let note = |text: String| pb::WriteMemoryRequest {
        agent_id: alice.clone(),
        key: String::new(),
        text,
        tags: Vec::new(),
    };
    let over = c.memory.write_memory(note("y".repeat(100 * 1024))).await;
    assert_eq!(over.expect_err("refused").code(), Code::InvalidArgument);
    // Past the daemon's 4 MiB message bound: refused before the handler
    // (sent by a client that does not stop it first).
    let channel = client::channel(&Target::Unix(daemon.socket()))
        .await
        .expect("channel");
    let mut unbounded = MemoryServiceClient::new(channel).max_encoding_message_size(usize::MAX);
    let huge = unbounded.write_memory(note("z".repeat(10 << 20))).await;
    assert_eq!(huge.expect_err("refused").code(), Code::OutOfRange);
    assert_eq!(listed(&mut c, &alice).await.total, 0, "nothing was kept");

    // A note the operator writes is the agent's, and found.
    let written = c
        .memory
        .write_memory(note("an operator's hint: pelicans".into()))
        .await
        .expect("written")
        .into_inner();
    assert_eq!(written.agent_id, alice);
    found(&c, &alice, "pelicans", 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notes_survive_kill9_and_a_lost_index_is_rebuilt() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let alice = create(&mut c, "alice", None).await;
    let notes: Vec<Value> = (0..20)
        .map(|n| write(&format!("fact{n}: herons nest in colonies")))
        .collect();
    run(&mut c, &alice, Value::Array(notes)).await;
    // At once: the index may not have caught up, the notes are on disk.
    daemon.kill9();

    let mut daemon = Daemon::start(&dir).await;
    let c = daemon.clients().await;
    found(&c, &alice, "herons", 20).await;
    found(&c, &alice, "fact7", 1).await;
    daemon.kill9();

    let index = dir.join("db").join("memory_index");
    assert!(index.is_dir(), "the index lives in {}", index.display());
    std::fs::remove_dir_all(&index).expect("index removed");
    let daemon = Daemon::start(&dir).await;
    let c = daemon.clients().await;
    found(&c, &alice, "herons", 20).await;
    found(&c, &alice, "fact13", 1).await;
    assert!(index.is_dir(), "rebuilt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_leaves_no_note_behind() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let lead = create(&mut c, "lead", None).await;
    let child_script = script(json!([write("the child's zebra fact")]));
    run(
        &mut c,
        &lead,
        json!([
            write("the lead's zebra fact"),
            { "name": "SpawnAgent", "input": { "initial_message": child_script } },
        ]),
    )
    .await;
    let (_, spawned) = tool_call(&mut c, &lead, "SpawnAgent").await;
    let child = spawned["agent_id"].as_str().expect("child id").to_owned();
    found(&c, &child, "zebra", 1).await;
    found(&c, &lead, "zebra", 1).await;
    eventually("the lead's handled message indexed", || {
        let mut c = c.clone();
        let lead = lead.clone();
        async move {
            let hits = search_kind(&mut c, &lead, "MemoryWrite zebra", "message").await;
            (!hits.is_empty()).then_some(())
        }
    })
    .await;

    // An operator writes only into a public agent's memory.
    let private = c
        .memory
        .write_memory(pb::WriteMemoryRequest {
            agent_id: child.clone(),
            key: String::new(),
            text: "from outside".into(),
            tags: Vec::new(),
        })
        .await;
    assert_eq!(private.expect_err("refused").code(), Code::PermissionDenied);

    c.agents
        .archive_agent(pb::ArchiveAgentRequest {
            agent_id: lead.clone(),
        })
        .await
        .expect("archived");
    for agent in [&lead, &child] {
        let left = listed(&mut c, agent).await;
        assert!(left.notes.is_empty() && left.total == 0, "{left:?}");
        found(&c, agent, "zebra", 0).await;
        // Its handled messages are no longer its memory either.
        assert!(search_kind(&mut c, agent, "MemoryWrite zebra", "message")
            .await
            .is_empty());
    }
    let late = c
        .memory
        .write_memory(pb::WriteMemoryRequest {
            agent_id: lead.clone(),
            key: String::new(),
            text: "too late".into(),
            tags: Vec::new(),
        })
        .await;
    assert_eq!(late.expect_err("refused").code(), Code::FailedPrecondition);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fact_from_the_first_of_many_messages_is_found_by_the_agent() {
    // Ten thousand turns later: two thousand times the five messages a
    // brain's context shows. The turn rate limit is raised for one agent
    // to take them at once.
    const LATER: usize = 10_000;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with(
        &data_dir(&root),
        &["--max-turns-per-minute", "1000000", "--max-queue", "20000"],
    )
    .await;
    let mut c = daemon.clients().await;
    let alice = create(&mut c, "alice", None).await;
    send(
        &mut c,
        &alice,
        "remember: the vault combination is 7-3-9 kingfisher",
    )
    .await;
    let later: Vec<pb::SendMessageRequest> = (0..LATER)
        .map(|n| pb::SendMessageRequest {
            agent_id: alice.clone(),
            text: format!("routine update {n}"),
            dedupe_key: String::new(),
        })
        .collect();
    for batch in later.chunks(1_000) {
        c.agents
            .send_messages(pb::SendMessagesRequest {
                messages: batch.to_vec(),
            })
            .await
            .expect("sent");
    }
    // Counted, not listed: listing a thousand messages at every poll
    // would cost more than the turns.
    // Ten thousand turns: on a loaded 2-core machine that takes longer
    // than one ordinary wait.
    common::eventually_within("every message handled", Duration::from_secs(180), || {
        let mut c = c.clone();
        let alice = alice.clone();
        async move {
            let turns = common::get_agent(&mut c, &alice).await.turns_completed;
            (turns as usize > LATER).then_some(())
        }
    })
    .await;

    let search = json!([{ "name": "MemorySearch", "input": { "query": "vault kingfisher", "kinds": ["message"] } }]);
    let hits = eventually("the first message found", || {
        let mut c = c.clone();
        let alice = alice.clone();
        let search = search.clone();
        async move {
            run(&mut c, &alice, search).await;
            let (failed, output) = tool_call(&mut c, &alice, "MemorySearch").await;
            assert!(!failed, "{output}");
            let hits = output["hits"].as_array().cloned().unwrap_or_default();
            (!hits.is_empty()).then_some(hits)
        }
    })
    .await;
    assert_eq!(hits[0]["kind"], "message", "{hits:?}");
    let snippet = hits[0]["snippet"].as_str().expect("snippet");
    assert!(snippet.contains("**kingfisher**"), "{snippet}");
    // The reply (the scripted brain's `ack: ...`) is found with it.
    let acked = search_kind(&mut c, &alice, "ack routine", "message").await;
    assert!(acked.len() >= 10, "{}", acked.len());
    assert!(search_kind(&mut c, &alice, "kingfisher", "note")
        .await
        .is_empty());
}

async fn search_kind(
    c: &mut Clients,
    agent_id: &str,
    query: &str,
    kind: &str,
) -> Vec<pb::MemoryHit> {
    c.memory
        .search_memory(pb::SearchMemoryRequest {
            agent_id: agent_id.into(),
            query: query.into(),
            limit: 50,
            kinds: vec![kind.into()],
        })
        .await
        .expect("searched")
        .into_inner()
        .hits
}

/// A hundred full notes are 1.6 MiB: the listing pages them within its
/// byte budget, and the pages together hold every note once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_of_large_notes_pages_within_its_byte_budget() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let agent = create(&mut c, "hoarder", None).await;
    for i in 0..100 {
        c.memory
            .write_memory(pb::WriteMemoryRequest {
                agent_id: agent.clone(),
                key: format!("k{i}"),
                text: format!("{i:03}{}", "n".repeat(16 * 1024 - 3)),
                tags: Vec::new(),
            })
            .await
            .expect("written");
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let page = c
            .memory
            .list_memory(pb::ListMemoryRequest {
                agent_id: agent.clone(),
                page_size: 1000,
                page_token: token.clone(),
            })
            .await
            .expect("listed")
            .into_inner();
        pages += 1;
        assert!(prost::Message::encoded_len(&page) < 1024 * 1024 + 64 * 1024);
        for note in &page.notes {
            assert!(seen.insert(note.key.clone()), "{} twice", note.key);
        }
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert!(pages >= 2, "{pages} page(s)");
    assert_eq!(seen.len(), 100);
}
