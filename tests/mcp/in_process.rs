//! In process: MCP tools under an agent's constraints and approvals.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::common::eventually;
use super::write_config;

/// In process, an agent under constraints (as an instance's agent is,
/// whose manifest cannot name MCP servers yet): a denied MCP tool is
/// refused before its server is asked, one that needs approval is parked
/// and runs once an operator approves it.
pub async fn constraints_and_approvals_apply_to_mcp_tools() {
    use holarchy::store::sled_store::StoreConfig;
    use holarchy::store::SledStore;
    use holarchy_actors::mcp::McpConfig;
    use holarchy_actors::{Batch, Runtime, RuntimeConfig, ScriptedBrain, Store, Write};
    use holarchy_composition::approval::ApprovalStatus;
    use holarchy_supervision::{
        AgentId, AgentRecord, Composition, EventKind, LifecycleState, Preset, ToolLimits,
    };

    let root = tempfile::tempdir().expect("tempdir");
    let store =
        Arc::new(SledStore::open(&root.path().join("db"), &StoreConfig::default()).expect("store"));
    let agent_id = AgentId::generate();
    let composition = Composition {
        limits: ToolLimits {
            deny: vec!["mcp__tools__pid".into()],
            require_approval: vec!["mcp__tools__echo".into()],
            ..ToolLimits::default()
        },
        ..Composition::default()
    };
    let record = AgentRecord {
        id: agent_id,
        name: Some("guarded".into()),
        profile: Preset::PublicNamed.profile(),
        lineage_parent_agent_id: None,
        supervisor_agent_id: None,
        state: LifecycleState::Active,
        brain: Default::default(),
        forked_context: None,
        composition: Some(Box::new(composition)),
        context_tokens: None,
        mcp_servers: vec!["tools".into()],
        network: Default::default(),
        namespace: "default".to_owned(),
        labels: Default::default(),
        created_at_ms: 1,
        updated_at_ms: 1,
    };
    store
        .commit(Batch::new().write(Write::CreateAgent(record)))
        .expect("commit");
    store.durable().await.expect("durable");

    let config_path = write_config(root.path(), None);
    let mut config = RuntimeConfig {
        mcp: Arc::new(McpConfig::load(Path::new(&config_path)).expect("config")),
        workspace_root: root.path().join("workspaces"),
        worktree_root: root.path().join("worktrees"),
        ..RuntimeConfig::default()
    };
    // Units are the daemon's binary, not this one.
    config.sandbox.unit_program = env!("CARGO_BIN_EXE_holarchy").into();
    config.sandbox.tmp_root = root.path().join("tmp");
    let runtime = Runtime::start(store.clone(), Arc::new(ScriptedBrain), config)
        .await
        .expect("runtime");
    let called = |tool: &'static str| {
        let store = store.clone();
        async move {
            eventually(tool, || {
                let store = store.clone();
                async move {
                    store
                        .events_after(0, 100_000)
                        .ok()?
                        .into_iter()
                        .rev()
                        .find_map(|event| match event.kind {
                            EventKind::ToolCalled {
                                tool: called,
                                output,
                                is_error,
                                ..
                            } if called == tool => Some((is_error, output)),
                            _ => None,
                        })
                }
            })
            .await
        }
    };
    let send = |tool: &str, input: Value| {
        json!({"tool_calls": [{"name": tool, "input": input}]}).to_string()
    };

    runtime
        .send_message(agent_id, send("mcp__tools__pid", json!({})), None)
        .await
        .expect("sent");
    let (failed, output) = called("mcp__tools__pid").await;
    let output: Value = serde_json::from_str(&output).expect("JSON");
    assert!(failed && output["kind"] == "refused", "{output}");

    runtime
        .send_message(
            agent_id,
            send("mcp__tools__echo", json!({"text": "approved"})),
            None,
        )
        .await
        .expect("sent");
    let (failed, output) = called("mcp__tools__echo").await;
    let output: Value = serde_json::from_str(&output).expect("JSON");
    assert!(
        !failed && output["status"] == "pending_approval",
        "{output}"
    );
    let id = output["approval_id"]
        .as_str()
        .and_then(|id| id.parse().ok())
        .expect("an approval id");
    let approved = runtime.approve(id).await.expect("approved");
    let ApprovalStatus::Approved { output, is_error } = approved.status else {
        panic!("not run: {:?}", approved.status);
    };
    assert!(!is_error, "{output}");
    assert!(output.contains("approved"), "{output}");

    runtime.shutdown(Duration::from_secs(5)).await;
    store.close().await;
}
