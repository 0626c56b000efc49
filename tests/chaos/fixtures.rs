//! What the chaos run sets up once, before its first kill, for the work
//! that needs more than an agent: three instances (a desk that takes
//! published events, signed webhooks and a schedule; a guard whose
//! commands wait for approval; an agent with the harness's own MCP
//! server), and the daemon's flags and environment they need.

use std::path::{Path, PathBuf};

use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::json;

use crate::SERVE_STDIO;

pub const DESK: &str = "chaos-desk";
pub const GUARD: &str = "chaos-guard";
pub const TOOLS: &str = "chaos-tools";

/// The daemon's variable holding the desk's webhook secret.
pub const SECRET_ENV: &str = "CHAOS_HOOK_SECRET";
pub const SECRET: &str = "chaos-hook-secret-0123456789abcdef";

const DESK_MANIFEST: &str = r#"
name = "chaos-desk"

[brain.scripted]

[[ingress]]
source = "publish"

[[ingress]]
source = "webhook"
provider = "generic"
secret_env = "CHAOS_HOOK_SECRET"

[[ingress]]
source = "schedule"
cron = "* * * * *"
payload = { kind = "tick" }
"#;

const GUARD_MANIFEST: &str = r#"
name = "chaos-guard"

[brain.scripted]

[constraints]
require_approval = ["ExecCommand"]
"#;

/// The tools instance, in one of two versions the load switches between
/// (a context budget or none), so an apply changes something.
pub fn tools_manifest(version: u32) -> String {
    let budget = if version.is_multiple_of(2) {
        ""
    } else {
        "context_tokens = 8000\n"
    };
    format!("name = \"chaos-tools\"\nmcp_servers = [\"tools\"]\n{budget}\n[brain.scripted]\n")
}

/// The instances' agents and where the daemon listens for webhooks.
#[derive(Debug, Clone)]
pub struct Fixtures {
    pub desk: String,
    pub guard: String,
    pub tools: String,
    pub http: String,
    /// The wall clock (ms) when the desk's schedule was applied: every
    /// minute after it is a slot that must fire once.
    pub schedule_from_ms: u64,
    /// The agents' home directories' parent.
    pub workspaces: PathBuf,
    /// An agent working in `repo`, which spawns worktree children.
    pub lead: String,
    pub repo: PathBuf,
    /// An agent that armed an external trigger, and the trigger's token.
    pub waker: String,
    pub token: String,
    /// Where directories made for workspace attaches go.
    pub attachable: PathBuf,
}

/// The daemon's MCP configuration: this very binary as the stdio server
/// `tools`. Written beside the data directory.
pub fn mcp_config(data_dir: &Path) -> PathBuf {
    let me = std::env::current_exe().expect("this binary");
    let path = data_dir.with_extension("mcp.json");
    let config = json!({ "mcpServers": { "tools": { "command": me, "args": [SERVE_STDIO] } } });
    std::fs::write(&path, config.to_string()).expect("MCP configuration written");
    path
}

/// The marker of this run's MCP servers in the process table: this
/// binary's path with the server's argument.
pub fn mcp_marker() -> String {
    let me = std::env::current_exe().expect("this binary");
    format!("{} {SERVE_STDIO}", me.display())
}

async fn apply(c: &mut Clients, manifest: &str) -> String {
    let applied = c
        .instances
        .apply_instance(pb::ApplyInstanceRequest {
            manifest: manifest.to_owned(),
            files: Default::default(),
        })
        .await
        .expect("a fixture instance applies")
        .into_inner();
    let name = applied.instance.map(|i| i.name).expect("the instance");
    let agent = c
        .agents
        .get_agent(pb::GetAgentRequest {
            agent: Some(pb::get_agent_request::Agent::Name(name)),
        })
        .await
        .expect("the instance's agent")
        .into_inner();
    agent.agent.map(|a| a.agent_id).expect("an agent")
}

/// Applies the three instances, and makes the lead in a new repository
/// beside the data directory.
pub async fn set_up(c: &mut Clients, data_dir: &Path, http: &str) -> Fixtures {
    let schedule_from_ms = crate::check_ops::now_ms();
    let root = data_dir.parent().expect("the data directory's parent");
    let repo = crate::common::workspaces::repository(root);
    let lead = crate::common::workspaces::lead_in(c, &repo).await;
    let waker = crate::common::create(c, "chaos-waker", None).await;
    // The token is kept out of every record: the agent hands it over
    // through a placeholder, as a file in its home.
    let arm = json!([
        { "name": "CreateExternalTrigger", "input": {} },
        { "name": "ExecCommand", "input": {
            "command": "printf %s \"$TOKEN\" > trigger-token",
            "env": { "TOKEN": "{{results[0].token}}" } } },
    ]);
    crate::common::workspaces::run(c, &waker, arm).await;
    let token_file = data_dir
        .join("workspaces")
        .join(&waker)
        .join("trigger-token");
    let token = std::fs::read_to_string(token_file).expect("the trigger's token handed over");
    let attachable = root.join("attachable");
    std::fs::create_dir_all(&attachable).expect("attachable directory");
    Fixtures {
        lead,
        repo,
        waker,
        token,
        attachable,
        desk: apply(c, DESK_MANIFEST).await,
        guard: apply(c, GUARD_MANIFEST).await,
        tools: apply(c, &tools_manifest(0)).await,
        http: http.to_owned(),
        schedule_from_ms,
        workspaces: data_dir.join("workspaces"),
    }
}
