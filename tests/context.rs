//! End-to-end: a brain's context within its budget, through the real
//! daemon. A long tool loop is compacted before it outgrows the budget
//! (checked by the brain itself, on every request it receives), the
//! running summary survives `kill -9`, and a long-lived agent's context
//! holds the newest turns that fit, not a fixed five.

mod common;

use common::{command_brain, create, create_on, data_dir, eventually, handled, send, Daemon};
use holarchy::api::pb;
use serde_json::{json, Value};

/// A brain that calls `AgentGet` at every step until the request it gets
/// shows the compaction marker, checking first that what it was sent
/// (context, message, steps, compaction) is within the budget the context
/// states, counted as the runtime estimates (4 bytes a token, compact JSON).
const LOOPING_BRAIN: &str = r#"
import json, sys
x = json.load(sys.stdin)
def tokens(v):
    return -(-len(json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode()) // 4)
budget = x["context"]["budget"]["tokens"]
parts = [x["context"], x["message"], x["steps"]] + ([x["compacted"]] if "compacted" in x else [])
used = sum(tokens(p) for p in parts)
if used > budget:
    print(json.dumps({"reply": "OVER step %d: %d of %d" % (x["step"], used, budget)}))
elif "compacted" in x:
    c = x["compacted"]
    print(json.dumps({"reply": "COMPACTED step %d by %s after %d steps, %d of %d: %s" % (x["step"], c["by"], c["steps"], used, budget, c["summary"])}))
else:
    print(json.dumps({"tool_calls": [{"name": "AgentGet", "input": {}}]}))
"#;

async fn context_of(
    c: &mut holarchy::client::Clients,
    id: &str,
) -> (pb::GetAgentContextResponse, Value) {
    let answer = c
        .agents
        .get_agent_context(pb::GetAgentContextRequest {
            agent_id: id.to_owned(),
        })
        .await
        .expect("context")
        .into_inner();
    let seen = serde_json::from_str(&answer.context_json).expect("json");
    (answer, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_turn_is_compacted_within_its_budget_and_the_summary_survives_kill_9() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let args = ["--context-tokens", "1000"];
    let mut daemon = Daemon::start_with(&dir, &args).await;
    let mut c = daemon.clients().await;
    // A command brain has 8 steps: enough, as each AgentGet result is a
    // few hundred tokens.
    let brain = command_brain("python3", &["-c", LOOPING_BRAIN]);
    let id = create_on(&mut c, "looper", brain).await;
    send(&mut c, &id, "loop until compacted").await;
    let turn = handled(&c, &id, 1).await;
    let reply = &turn[0].reply;
    assert!(reply.starts_with("COMPACTED"), "{reply}");
    assert!(reply.contains("by truncation"), "{reply}");
    assert!(
        reply.contains("AgentGet x"),
        "the summary names the tools: {reply}"
    );

    // Stored durably: the summary survives a crash.
    daemon.kill9();
    let daemon = Daemon::start_with(&dir, &args).await;
    let mut c = daemon.clients().await;
    let (answer, seen) = context_of(&mut c, &id).await;
    assert!(answer.compactions >= 1);
    assert!(!answer.last_compacted_run_id.is_empty());
    let summary = seen["context"]["summary"].as_str().expect("a summary");
    assert!(summary.contains("compacted by truncation"), "{summary}");
    assert!(summary.contains("AgentGet x"), "{summary}");
    assert_eq!(answer.budget_tokens, 1000);
    assert!(answer.used_tokens <= 500, "{}", answer.used_tokens);

    // The CLI prints the same.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .args(["--data-dir"])
        .arg(&dir)
        .args(["agent", "context", "looper"])
        .env_remove("HOLARCHY_TOKEN")
        .env_remove("HOLARCHY_ADDR")
        .env_remove("HOLARCHY_SOCKET")
        .output()
        .expect("the CLI runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("budget: 1000 tokens"), "{text}");
    assert!(text.contains("compacted by truncation"), "{text}");

    // Archived, the agent keeps no summary.
    c.agents
        .archive_agent(pb::ArchiveAgentRequest {
            agent_id: id.clone(),
        })
        .await
        .expect("archived");
    let (answer, seen) = context_of(&mut c, &id).await;
    assert_eq!(answer.compactions, 0);
    assert!(seen["context"]["summary"].is_null(), "{seen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_lived_agent_sees_the_newest_turns_that_fit_not_five() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with(&data_dir(&root), &["--context-tokens", "2000"]).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "elder", None).await;
    let total = 40;
    for n in 0..total {
        send(&mut c, &id, &format!("turn {n:03} {}", "w".repeat(100))).await;
    }
    handled(&c, &id, total).await;
    let seen = eventually("the context", || {
        let mut c = c.clone();
        let id = id.clone();
        async move { Some(context_of(&mut c, &id).await.1) }
    })
    .await;
    let turns = seen["context"]["recent_turns"].as_array().expect("turns");
    let budget = &seen["context"]["budget"];
    assert!(turns.len() > 5, "only {} turns", turns.len());
    assert!(
        turns.len() < total,
        "all {total} turns fit: the budget does nothing"
    );
    // Turns read that did not fit are counted (older ones are not read).
    assert!(budget["turns_left_out"].as_u64().expect("left out") >= 1);
    // The newest, oldest first, ending at the last message.
    let last = turns.last().expect("a turn")["text"]
        .as_str()
        .expect("text");
    assert!(
        last.starts_with(&format!("turn {:03}", total - 1)),
        "{last}"
    );
    let first = turns[0]["text"].as_str().expect("text");
    assert!(
        first.starts_with(&format!("turn {:03}", total - turns.len())),
        "{first}"
    );
    // Within half the budget: the other half is the turn's own.
    assert!(budget["used"].as_u64().expect("used") <= 1000);
    assert_eq!(seen["context"]["memory_hits"], Value::Array(vec![]));
}

/// A brain that replies with the snippets of its context's memory hits.
const RECALLING_BRAIN: &str = r#"
import json, sys
x = json.load(sys.stdin)
hits = x["context"]["memory_hits"]
print(json.dumps({"reply": "hits: " + " | ".join(h["kind"] + ":" + h["snippet"] for h in hits)}))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brain_finds_what_its_agent_noted_among_the_memory_hits_of_its_context() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let brain = command_brain("python3", &["-c", RECALLING_BRAIN]);
    let id = create_on(&mut c, "recaller", brain).await;
    c.memory
        .write_memory(pb::WriteMemoryRequest {
            agent_id: id.clone(),
            key: "launch".into(),
            text: "the launch code word is pelican".into(),
            tags: Vec::new(),
        })
        .await
        .expect("noted");
    // Indexed off the turn's path: wait until the note is searchable.
    eventually("the note indexed", || {
        let mut c = c.clone();
        let id = id.clone();
        async move {
            let hits = c
                .memory
                .search_memory(pb::SearchMemoryRequest {
                    agent_id: id,
                    query: "launch code".into(),
                    limit: 5,
                    kinds: Vec::new(),
                })
                .await
                .ok()?
                .into_inner()
                .hits;
            (!hits.is_empty()).then_some(())
        }
    })
    .await;
    send(&mut c, &id, "what is the launch code word?").await;
    let turn = handled(&c, &id, 1).await;
    let reply = &turn[0].reply;
    assert!(
        reply.contains("note:") && reply.contains("pelican"),
        "{reply}"
    );
}

/// Creates `name` with its own context budget; the daemon's answer.
async fn create_budgeted(
    c: &mut holarchy::client::Clients,
    name: &str,
    tokens: u32,
) -> Result<String, tonic::Status> {
    c.agents
        .create_agent(pb::CreateAgentRequest {
            name: name.into(),
            initial_message: None,
            brain: None,
            context_tokens: Some(tokens),
            mcp_servers: Vec::new(),
            network: String::new(),
            labels: Default::default(),
        })
        .await
        .map(|r| r.into_inner().agent_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_own_budget_comes_before_the_daemons_and_passes_to_its_children() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with(&data_dir(&root), &["--context-tokens", "3000"]).await;
    let mut c = daemon.clients().await;
    for bad in [0, 100, 499, 2_000_001, u32::MAX] {
        let refused = create_budgeted(&mut c, &format!("bad-{bad}"), bad).await;
        let status = refused.expect_err("out of bounds");
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{bad}");
    }
    let own = create_budgeted(&mut c, "own", 12_000)
        .await
        .expect("created");
    let plain = create(&mut c, "plain", None).await;
    let budget = |seen: &Value| seen["context"]["budget"]["tokens"].as_u64();
    assert_eq!(budget(&context_of(&mut c, &own).await.1), Some(12_000));
    assert_eq!(budget(&context_of(&mut c, &plain).await.1), Some(3_000));
    assert_eq!(common::get_agent(&mut c, &own).await.context_tokens, 12_000);
    assert_eq!(common::get_agent(&mut c, &plain).await.context_tokens, 0);

    // Its children think within the same budget.
    let spawn = json!({ "tool_calls": [{ "name": "SpawnAgent", "input": { "initial_message": "hello" } }] });
    send(&mut c, &own, &spawn.to_string()).await;
    handled(&c, &own, 1).await;
    let tree = c
        .agents
        .list_agents(pb::ListAgentsRequest {
            page_size: 100,
            page_token: String::new(),
            include_private: true,
        })
        .await
        .expect("listed")
        .into_inner();
    let child = tree
        .agents
        .iter()
        .find(|a| a.supervisor_agent_id == own)
        .expect("the child");
    assert_eq!(child.context_tokens, 12_000);
    let (_, seen) = context_of(&mut c, &child.agent_id).await;
    assert_eq!(budget(&seen), Some(12_000));
}
