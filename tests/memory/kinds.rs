//! Beyond notes: an agent's tool calls and its children's results are its
//! memory too, each found by its kind and read back whole with
//! `MemoryGet`; `GetAgent` says how much the memory holds, and an agent
//! that never wrote a note leaves nothing in the index when archived.

use serde_json::json;

use super::{run, search_kind};
use crate::common::{self, create, data_dir, eventually, tool_call, Daemon};
use holarchy::api::pb;
use holarchy::client::Clients;

/// GetAgent's memory figures for the agent.
async fn memory_of(c: &mut Clients, agent_id: &str) -> pb::AgentMemory {
    common::get_agent_result(c, agent_id)
        .await
        .memory
        .expect("GetAgent reports memory")
}

/// Waits until a search of `kind` finds something for `query`.
async fn found_kind(c: &Clients, agent_id: &str, query: &str, kind: &str) -> Vec<pb::MemoryHit> {
    eventually(&format!("a {kind} hit for `{query}`"), || {
        let mut c = c.clone();
        async move {
            let hits = search_kind(&mut c, agent_id, query, kind).await;
            (!hits.is_empty()).then_some(hits)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_and_child_results_are_found_by_kind_and_read_back_whole() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let lead = create(&mut c, "lead", None).await;
    let child_says = json!({ "reply": "wombats dig long burrows", "done": true }).to_string();
    run(
        &mut c,
        &lead,
        json!([
            { "name": "ExecCommand", "input": { "command": "echo otters counted: 31", "yield_ms": 5000 } },
            { "name": "SpawnAgent", "input": { "initial_message": child_says } },
        ]),
    )
    .await;
    let (failed, ran) = tool_call(&mut c, &lead, "ExecCommand").await;
    assert!(!failed, "{ran}");

    // The command's output is found as a tool call, with its input.
    let hits = found_kind(&c, &lead, "otters counted", "tool_call").await;
    let call = hits[0].tool_call.as_ref().expect("a tool call hit");
    assert_eq!(call.tool, "ExecCommand");
    assert!(call.input.contains("echo otters"), "{}", call.input);
    assert!(
        call.output.contains("otters counted: 31"),
        "{}",
        call.output
    );
    assert!(
        hits[0].snippet.contains("**otters**"),
        "{}",
        hits[0].snippet
    );
    assert!(search_kind(&mut c, &lead, "otters counted", "note")
        .await
        .is_empty());

    // The child's result, once the lead handled it, is a child_result.
    let hits = found_kind(&c, &lead, "wombats burrows", "child_result").await;
    let result = hits[0].message.as_ref().expect("a message hit");
    assert_eq!(result.provenance, "child_result");
    assert!(
        result.text.contains("wombats dig long burrows"),
        "{result:?}"
    );

    // The agent reads both back whole by the ids its search gave.
    let get = |id: &str| json!([{ "name": "MemoryGet", "input": { "id": id } }]);
    run(&mut c, &lead, get(&call.id)).await;
    let (failed, entry) = tool_call(&mut c, &lead, "MemoryGet").await;
    assert!(!failed, "{entry}");
    assert_eq!(entry["kind"], "tool_call", "{entry}");
    assert!(
        entry["output"]
            .as_str()
            .unwrap_or_default()
            .contains("otters counted: 31"),
        "{entry}"
    );
    run(&mut c, &lead, get(&result.message_id)).await;
    let (failed, entry) = tool_call(&mut c, &lead, "MemoryGet").await;
    assert!(!failed, "{entry}");
    assert_eq!(entry["kind"], "child_result", "{entry}");
    assert_eq!(entry["provenance"], "child_result", "{entry}");

    // Another agent's entry is not found by its id.
    let other = create(&mut c, "other", None).await;
    run(&mut c, &other, get(&call.id)).await;
    let (failed, entry) = tool_call(&mut c, &other, "MemoryGet").await;
    assert!(failed, "{entry}");
    assert_eq!(entry["kind"], "not_found", "{entry}");

    // Three handled messages and the child's result; four tool calls.
    let memory = eventually("every entry counted", || {
        let mut c = c.clone();
        let lead = lead.clone();
        async move {
            let memory = memory_of(&mut c, &lead).await;
            (memory.entries == 8).then_some(memory)
        }
    })
    .await;
    assert_eq!(memory.notes, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_without_notes_leaves_no_entry_behind_when_archived() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let quiet = create(&mut c, "quiet", None).await;
    for n in 0..3 {
        common::send(&mut c, &quiet, &format!("a heron passed, number {n}")).await;
    }
    common::handled(&c, &quiet, 3).await;
    eventually("its messages indexed", || {
        let mut c = c.clone();
        let quiet = quiet.clone();
        async move { (memory_of(&mut c, &quiet).await.entries >= 3).then_some(()) }
    })
    .await;
    assert_eq!(memory_of(&mut c, &quiet).await.notes, 0);

    c.agents
        .archive_agent(pb::ArchiveAgentRequest {
            agent_id: quiet.clone(),
        })
        .await
        .expect("archived");
    eventually("its entries gone from the index", || {
        let mut c = c.clone();
        let quiet = quiet.clone();
        async move { (memory_of(&mut c, &quiet).await.entries == 0).then_some(()) }
    })
    .await;
}
