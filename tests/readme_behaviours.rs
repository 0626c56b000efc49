//! End-to-end proofs of behaviours the README promises, each against the
//! real `holarchy` binary over gRPC: trigger cancellation, workspace tools,
//! forked children, timers, redelivery after `kill -9`, subtrees, paging
//! and filtered following. One module per behaviour.

mod common;

#[path = "readme_behaviours/follow.rs"]
mod follow;
#[path = "readme_behaviours/fork.rs"]
mod fork;
#[path = "readme_behaviours/paging.rs"]
mod paging;
#[path = "readme_behaviours/redelivery.rs"]
mod redelivery;
#[path = "readme_behaviours/timers.rs"]
mod timers;
#[path = "readme_behaviours/tree.rs"]
mod tree;
#[path = "readme_behaviours/triggers.rs"]
mod triggers;
#[path = "readme_behaviours/workspaces.rs"]
mod workspaces;

use std::path::Path;

use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::Value;

/// Has `agent_id` (public, scripted) make one `SpawnAgent` call with
/// `input`; returns the child and the task that supervises it.
async fn spawn(c: &mut Clients, agent_id: &str, input: Value) -> (String, String) {
    common::workspaces::run(
        c,
        agent_id,
        serde_json::json!([{ "name": "SpawnAgent", "input": input }]),
    )
    .await;
    let out = common::tool_output(c, agent_id, "SpawnAgent").await;
    let child = out["agent_id"].as_str().expect("child id").to_owned();
    let task = out["task_handle"]["task_id"]
        .as_str()
        .expect("task id")
        .to_owned();
    (child, task)
}

/// Writes `script` to `path` as an executable shell program and returns a
/// command brain that runs it.
fn shell_brain(path: &Path, script: &str) -> pb::BrainConfig {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, script).expect("brain written");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    common::command_brain(&path.display().to_string(), &[])
}

/// An agent's private directory: the working directory of its command
/// brain, where that brain may write.
fn private_dir(data_dir: &Path, agent_id: &str) -> std::path::PathBuf {
    data_dir.join("tmp").join(agent_id)
}
