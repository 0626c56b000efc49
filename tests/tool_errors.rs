//! Tool errors as a brain reads them, through `tools::call` on a runtime
//! in-process over the real sled store: each keeps its kind (refused,
//! invalid input, not found, failed) beside its message.

use std::sync::Arc;
use std::time::Duration;

use holarchy::store::sled_store::StoreConfig;
use holarchy::store::SledStore;
use holarchy_actors::brain::ToolCall;
use holarchy_actors::tools;
use holarchy_actors::{Runtime, RuntimeConfig, ScriptedBrain};
use holarchy_supervision::{AgentId, Preset, TaskId, WaitId, WorkItemId};
use serde_json::{json, Value};

/// Calls `tool` as the agent with `preset`'s profile; whether it failed,
/// and its output.
async fn call(
    runtime: &Runtime,
    id: AgentId,
    preset: Preset,
    tool: &str,
    input: Value,
) -> (bool, Value) {
    let call = ToolCall {
        name: tool.into(),
        input,
    };
    let result = tools::call(runtime.ctx(), id, preset.profile(), &call).await;
    (result.is_error, result.output)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_errors_keep_their_kind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SledStore::open(dir.path(), &StoreConfig::default()).expect("store"));
    let runtime = Runtime::start(store, Arc::new(ScriptedBrain), RuntimeConfig::default())
        .await
        .expect("runtime starts");
    let id = runtime
        .create_agent("caller".into(), None)
        .await
        .expect("created");
    let public = Preset::PublicNamed;

    let (failed, out) = call(&runtime, id, public, "AgentGet", Value::Null).await;
    assert!(!failed, "{out}");
    assert_eq!(out["agent"]["agent_id"], id.to_string());
    assert!(out.get("kind").is_none(), "a result has no kind: {out}");

    let task = TaskId::generate().to_string();
    let wait = WaitId::generate().to_string();
    let item = WorkItemId::generate().to_string();
    let cases = [
        // Outside the profile's catalog.
        (
            Preset::PrivateChild,
            "SpawnAgent",
            json!({}),
            "refused",
            "tool catalog",
        ),
        (
            public,
            "LaunchRockets",
            json!({}),
            "refused",
            "tool catalog",
        ),
        // Inputs that do not parse, each naming its field.
        (
            public,
            "TaskStatus",
            json!({ "task_id": "tsk_nope" }),
            "invalid_input",
            "`task_id`: ",
        ),
        (
            public,
            "TaskStatus",
            json!({}),
            "invalid_input",
            "missing field `task_id`",
        ),
        (
            public,
            "Sleep",
            json!({ "duration_ms": 10, "nap": true }),
            "invalid_input",
            "unknown field `nap`",
        ),
        (
            public,
            "Enqueue",
            json!({ "text": 7 }),
            "invalid_input",
            "`text`: invalid type",
        ),
        (
            public,
            "AgentGet",
            json!("me"),
            "invalid_input",
            "must be a JSON object",
        ),
        // Parsed, then refused by the plane's own checks.
        (
            public,
            "UseWorkspace",
            json!({}),
            "invalid_input",
            "exactly one of",
        ),
        (
            public,
            "Sleep",
            json!({ "duration_ms": u64::MAX }),
            "invalid_input",
            "a year",
        ),
        (
            public,
            "ExecCommand",
            json!({ "command": " " }),
            "invalid_input",
            "1 to",
        ),
        // Well formed, naming nothing the caller has.
        (
            public,
            "TaskStatus",
            json!({ "task_id": task }),
            "not_found",
            "not found",
        ),
        (
            public,
            "CancelExternalTrigger",
            json!({ "wait_id": wait }),
            "not_found",
            "not found",
        ),
        (
            public,
            "update_work_plan",
            json!({ "work_item_id": item, "steps": [] }),
            "not_found",
            "not found",
        ),
        (
            public,
            "DetachWorkspace",
            json!({ "workspace_id": "elsewhere" }),
            "not_found",
            "no workspace",
        ),
        // A built-in workspace cannot be detached.
        (
            public,
            "DetachWorkspace",
            json!({ "workspace_id": "agent_home" }),
            "refused",
            "built in",
        ),
    ];
    for (preset, tool, input, kind, text) in cases {
        let (failed, out) = call(&runtime, id, preset, tool, input.clone()).await;
        assert!(failed, "{tool} {input}: {out}");
        assert_eq!(out["kind"], kind, "{tool} {input}: {out}");
        assert!(
            out["error"].as_str().is_some_and(|e| e.contains(text)),
            "{tool} {input}: {out}"
        );
        assert_eq!(out.as_object().map(|o| o.len()), Some(2), "{out}");
    }
    runtime.shutdown(Duration::from_secs(5)).await;
}
