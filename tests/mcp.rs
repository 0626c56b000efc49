//! End-to-end: MCP tools with the real daemon. The MCP server the daemon
//! talks to is this very binary, run with [`SERVE_STDIO`] as its first
//! argument (a stdio server), or served over streamable HTTP on loopback
//! by the test itself, both built on rmcp. So the binary has its own
//! `main` (`harness = false`): it runs the server when asked, and the
//! tests otherwise, printing a libtest-like summary.

mod common;
#[path = "mcp/faults.rs"]
mod faults;
#[path = "mcp/grants.rs"]
mod grants;
#[path = "mcp/hostile.rs"]
mod hostile;
#[path = "mcp/in_process.rs"]
mod in_process;
#[path = "mcp/instances.rs"]
mod instances;
#[path = "mcp/server.rs"]
mod server;

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use common::{create, data_dir, events, eventually, handled, messages, send, tool_call, Daemon};
use faults::servers_that_crash_at_every_call_or_never_answer_cost_only_tool_errors;
use grants::a_read_only_path_is_readable_and_not_writable_by_its_server;
use holarchy::api::pb;
use holarchy::client::Clients;
use hostile::{a_hostile_server_cannot_forge_or_flood_the_daemons_log, serve_hostile};
use in_process::constraints_and_approvals_apply_to_mcp_tools;
use instances::an_instance_gives_its_agent_mcp_servers_and_a_context_budget;
use serde_json::{json, Value};
use server::{serve_http, serve_stdio, text_schema};

/// The first argument that makes this binary the stdio MCP server.
const SERVE_STDIO: &str = "--serve-mcp-stdio";
/// The first argument that makes this binary a hostile stdio MCP server.
const SERVE_HOSTILE: &str = "--serve-mcp-hostile";
/// A variable only the daemon has: no server may see it.
const DAEMON_ONLY: &str = "MCP_TEST_DAEMON_ONLY";
/// A variable the configuration gives the stdio server.
const GIVEN: &str = "MCP_TEST_GIVEN";
/// The daemon's variable holding the HTTP server's header value.
const HEADER_ENV: &str = "MCP_TEST_HEADER_VALUE";
const HEADER_VALUE: &str = "hdr-5ecret-0123456789abcdef";
const HEADER_NAME: &str = "x-test-key";

// ------------------------------------------------------------- helpers

/// The daemon's MCP configuration: this binary as stdio servers `tools`
/// and `slow` (a 1 s call timeout) and as the hostile server `hostile`, a
/// program that does not exist as `broken`, a shell that prints a forged
/// log line on its stderr and exits as `liar`, a shell loop that never
/// answers as `mute` (see [`faults`]), and `web` at `url` when given.
fn write_config(dir: &Path, url: Option<&str>) -> String {
    let me = std::env::current_exe().expect("this binary");
    let me = me.to_str().expect("a UTF-8 path");
    let mut servers = json!({
        "tools": {"command": me, "args": [SERVE_STDIO], "env": {GIVEN: "yes"}},
        "slow": {"command": me, "args": [SERVE_STDIO], "timeout_ms": 1000},
        "hostile": {"command": me, "args": [SERVE_HOSTILE]},
        "liar": {"command": "/bin/sh", "args": ["-c", hostile::LIAR]},
        "broken": {"command": "/nonexistent/mcp-server"},
        "mute": faults::mute_entry(dir),
    });
    if let Some(url) = url {
        servers["web"] = json!({
            "type": "http",
            "url": url,
            "header": {"name": HEADER_NAME, "value_env": HEADER_ENV, "value_prefix": "Key "},
        });
    }
    let path = dir.join("mcp.json");
    std::fs::write(&path, json!({ "mcpServers": servers }).to_string()).expect("config written");
    path.to_str().expect("UTF-8").to_owned()
}

async fn start(root: &tempfile::TempDir, url: Option<&str>) -> Daemon {
    start_under(&[], root, url).await
}

/// As [`start`], the daemon started by `wrapper` (see `Daemon::start_under`).
async fn start_under(wrapper: &[&str], root: &tempfile::TempDir, url: Option<&str>) -> Daemon {
    let config = write_config(root.path(), url);
    Daemon::start_under(
        wrapper,
        &data_dir(root),
        &["--mcp-config", &config],
        &[
            (DAEMON_ONLY, "daemon-only-value"),
            ("MCP_TEST_API_KEY", "sk-test-0123456789"),
            (HEADER_ENV, HEADER_VALUE),
        ],
    )
    .await
}

async fn create_with(
    c: &mut Clients,
    name: &str,
    servers: &[&str],
) -> Result<String, tonic::Status> {
    c.agents
        .create_agent(pb::CreateAgentRequest {
            name: name.into(),
            initial_message: None,
            brain: None,
            context_tokens: None,
            mcp_servers: servers.iter().map(|s| (*s).to_owned()).collect(),
            network: String::new(),
            labels: Default::default(),
        })
        .await
        .map(|r| r.into_inner().agent_id)
}

/// Has `agent_id` call `tool` with `input` (one scripted turn) and returns
/// whether it failed and its output.
async fn call(c: &mut Clients, agent_id: &str, tool: &str, input: Value) -> (bool, Value) {
    let before = messages(c, agent_id).await.len();
    let script = json!({ "tool_calls": [{ "name": tool, "input": input }] });
    send(c, agent_id, &script.to_string()).await;
    handled(c, agent_id, before + 1).await;
    tool_call(c, agent_id, tool).await
}

/// The text of a successful MCP call's first content item.
fn text(failed: bool, output: &Value) -> String {
    assert!(!failed, "the call failed: {output}");
    output["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {output}"))
        .to_owned()
}

async fn list_tools(c: &mut Clients, agent_id: &str) -> pb::ListToolsResponse {
    c.agents
        .list_tools(pb::ListToolsRequest {
            agent_id: agent_id.into(),
        })
        .await
        .expect("tools")
        .into_inner()
}

/// Children of `pid` that are zombies (exited, not reaped).
fn zombies_of(pid: u32) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').and_then(|i| stat.get(i + 2..)) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() == Some(&"Z") && fields.get(1) == Some(&pid.to_string().as_str()) {
            found.push(stat.clone());
        }
    }
    found
}

// --------------------------------------------------------------- tests

/// An allowed agent lists and calls the servers' tools; an agent not
/// allowed neither sees nor runs them; children inherit the list.
async fn allowed_agents_see_and_call_mcp_tools_others_do_not() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = start(&root, None).await;
    let mut c = daemon.clients().await;
    let ops = create_with(&mut c, "ops", &["tools", "broken"])
        .await
        .expect("created");
    let plain = create(&mut c, "plain", None).await;

    let listed = list_tools(&mut c, &ops).await;
    let echo = listed
        .tools
        .iter()
        .find(|t| t.name == "mcp__tools__echo")
        .expect("echo listed");
    assert_eq!((echo.family.as_str(), echo.plane.as_str()), ("mcp", "mcp"));
    assert_eq!(echo.description, "Echoes its text back.");
    let schema: Value = serde_json::from_str(&echo.input_schema_json).expect("schema");
    assert_eq!(schema, text_schema(), "the server's own schema");
    assert!(
        listed.tools.iter().any(|t| t.name == "AgentGet"),
        "typed tools stay"
    );
    assert!(
        !listed.tools.iter().any(|t| t.name.contains("bad")),
        "a name no catalog takes is left out"
    );
    let broken: Vec<&String> = listed
        .unavailable
        .iter()
        .filter(|u| u.starts_with("broken:"))
        .collect();
    assert_eq!(broken.len(), 1, "{:?}", listed.unavailable);
    assert!(broken[0].contains("could not start"), "{}", broken[0]);
    let summary = common::get_agent(&mut c, &ops).await;
    assert_eq!(summary.mcp_servers, ["tools", "broken"]);
    assert!(summary
        .profile
        .as_ref()
        .is_some_and(|p| p.tool_families.iter().any(|f| f == "mcp")));

    // The CLI lists them too.
    let cli = std::process::Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .args([
            "--socket",
            daemon.socket().to_str().expect("UTF-8"),
            "tools",
            "ops",
        ])
        .output()
        .expect("cli runs");
    let stdout = String::from_utf8_lossy(&cli.stdout);
    assert!(
        cli.status.success() && stdout.contains("mcp__tools__echo"),
        "{stdout}"
    );
    assert!(String::from_utf8_lossy(&cli.stderr).contains("unavailable: broken"));

    let (failed, out) = call(
        &mut c,
        &ops,
        "mcp__tools__echo",
        json!({"text": "hello mcp"}),
    )
    .await;
    assert_eq!(text(failed, &out), "hello mcp");

    // The server's environment: the configuration's, never the daemon's.
    let (failed, out) = call(&mut c, &ops, "mcp__tools__env", json!({})).await;
    let names = text(failed, &out);
    assert!(names.split(',').any(|n| n == GIVEN), "{names}");
    assert!(
        !names.contains(DAEMON_ONLY) && !names.contains("API_KEY"),
        "{names}"
    );

    // Errors keep their kind.
    let (failed, out) = call(&mut c, &ops, "mcp__tools__fail", json!({})).await;
    assert!(failed && out["kind"] == "failed", "{out}");
    assert!(out["error"]
        .as_str()
        .is_some_and(|e| e.contains("it broke on purpose")));
    let (failed, out) = call(&mut c, &ops, "mcp__tools__echo", json!({})).await;
    assert!(failed && out["kind"] == "invalid_input", "{out}");
    let (failed, out) = call(&mut c, &ops, "mcp__tools__nope", json!({})).await;
    assert!(failed && out["kind"] == "not_found", "{out}");

    // A server that cannot start: a clear tool error, and the agent goes on.
    let (failed, out) = call(&mut c, &ops, "mcp__broken__anything", json!({})).await;
    let error = out["error"].as_str().unwrap_or_default();
    assert!(failed && out["kind"] == "failed", "{out}");
    assert!(error.contains("MCP server `broken`"), "{error}");
    let (failed, out) = call(
        &mut c,
        &ops,
        "mcp__tools__echo",
        json!({"text": "still here"}),
    )
    .await;
    assert_eq!(text(failed, &out), "still here");

    // Not allowed: not in the catalog, and refused.
    let listed = list_tools(&mut c, &plain).await;
    assert!(!listed.tools.iter().any(|t| t.name.starts_with("mcp__")));
    assert!(listed.unavailable.is_empty());
    let (failed, out) = call(&mut c, &plain, "mcp__tools__echo", json!({"text": "x"})).await;
    assert!(failed && out["kind"] == "refused", "{out}");

    // Unknown servers are refused at creation, naming the server.
    let status = create_with(&mut c, "typo", &["tool"])
        .await
        .expect_err("refused");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("`tool`"), "{}", status.message());

    // A child inherits its creator's servers and calls their tools.
    let spawn = json!({"preset": "private_child", "initial_message": "wait"});
    let (failed, out) = call(&mut c, &ops, "SpawnAgent", spawn).await;
    assert!(!failed, "{out}");
    let child = out["agent_id"].as_str().expect("child id").to_owned();
    let task = out["task_handle"]["task_id"]
        .as_str()
        .expect("task")
        .to_owned();
    assert_eq!(
        common::get_agent(&mut c, &child).await.mcp_servers,
        ["tools", "broken"]
    );
    let script =
        json!({"tool_calls": [{"name": "mcp__tools__echo", "input": {"text": "from the child"}}]});
    c.tasks
        .send_task_input(pb::SendTaskInputRequest {
            task_id: task,
            text: script.to_string(),
        })
        .await
        .expect("task input");
    let out = eventually("the child's call", || {
        let mut c = c.clone();
        let child = child.clone();
        async move {
            let event = events(&mut c, 0).await.into_iter().find(|e| {
                e.kind == "tool_called" && e.agent_id == child && e.text == "mcp__tools__echo"
            })?;
            let detail: Value = serde_json::from_str(&event.detail_json).ok()?;
            serde_json::from_str::<Value>(detail["output"].as_str()?).ok()
        }
    })
    .await;
    assert_eq!(out["content"][0]["text"], "from the child");
}

/// A server that exits mid-call gives a tool error and is started again
/// for the next call; a call past its timeout is a tool error; the daemon
/// reaps what ends and leaves no server behind when it stops.
async fn servers_restart_time_out_and_stop_with_the_daemon() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut daemon = start(&root, None).await;
    let mut c = daemon.clients().await;
    let ops = create_with(&mut c, "ops", &["tools", "slow"])
        .await
        .expect("created");

    let (failed, out) = call(&mut c, &ops, "mcp__tools__pid", json!({})).await;
    let first: u32 = text(failed, &out).parse().expect("a pid");
    let (failed, out) = call(&mut c, &ops, "mcp__tools__crash", json!({})).await;
    let error = out["error"].as_str().unwrap_or_default().to_owned();
    assert!(failed && out["kind"] == "failed", "{out}");
    assert!(error.contains("stopped during the call"), "{error}");
    let (failed, out) = call(&mut c, &ops, "mcp__tools__pid", json!({})).await;
    let second: u32 = text(failed, &out).parse().expect("a pid");
    assert_ne!(first, second, "a new server process");
    let (failed, out) = call(&mut c, &ops, "mcp__tools__echo", json!({"text": "again"})).await;
    assert_eq!(text(failed, &out), "again");
    eventually("the crashed server reaped", || async {
        let gone = !Path::new(&format!("/proc/{first}")).exists();
        (gone && zombies_of(daemon.pid()).is_empty()).then_some(())
    })
    .await;

    let started = Instant::now();
    let (failed, out) = call(&mut c, &ops, "mcp__slow__sleep", json!({"ms": 20_000})).await;
    let error = out["error"].as_str().unwrap_or_default();
    assert!(
        failed && error.contains("did not answer within 1000 ms"),
        "{out}"
    );
    assert!(started.elapsed() < Duration::from_secs(15));

    // Units name the daemon's data directory (their servers' private
    // directories are in it): two servers, each in its unit.
    let data = daemon.data_dir.to_str().expect("UTF-8").to_owned();
    let units = || {
        common::processes_with(SERVE_STDIO)
            .into_iter()
            .filter(|p| p.contains(&data))
            .count()
    };
    eventually("two units", || async { (units() == 2).then_some(()) }).await;
    let status = daemon.terminate(Duration::from_secs(20)).await;
    assert!(status.success(), "{status}");
    eventually("no server left", || async { (units() == 0).then_some(()) }).await;
}

/// The HTTP server gets its header, whose value comes from the daemon's
/// environment and never reaches an event or the log.
async fn the_http_servers_header_is_sent_and_never_recorded() {
    let (url, seen) = serve_http().await;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = start(&root, Some(&url)).await;
    let mut c = daemon.clients().await;
    let ops = create_with(&mut c, "ops", &["web"]).await.expect("created");

    let listed = list_tools(&mut c, &ops).await;
    assert!(
        listed.tools.iter().any(|t| t.name == "mcp__web__echo"),
        "{:?}",
        listed.unavailable
    );
    let (failed, out) = call(&mut c, &ops, "mcp__web__echo", json!({"text": "over http"})).await;
    assert_eq!(text(failed, &out), "over http");
    assert_eq!(
        seen.lock().expect("lock").as_deref(),
        Some(format!("Key {HEADER_VALUE}").as_str()),
        "the header, with its value from the daemon's environment"
    );
    // The server echoes the value back: what is stored has it redacted.
    let (failed, out) = call(&mut c, &ops, "mcp__web__whoami", json!({})).await;
    assert_eq!(text(failed, &out), "Key <redacted>");
    for event in events(&mut c, 0).await {
        assert!(
            !event.text.contains(HEADER_VALUE) && !event.detail_json.contains(HEADER_VALUE),
            "{event:?}"
        );
    }
    assert!(!daemon.log().contains(HEADER_VALUE));
}

/// A stdio server starts with no signal blocked or ignored, though its
/// unit blocks the ones it waits for and the daemon runs under `nohup`
/// (SIGHUP ignored): `kill -TERM` and `timeout(1)` work in it.
async fn a_stdio_server_starts_with_its_signals_reset() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = start_under(&["nohup"], &root, None).await;
    let mut c = daemon.clients().await;
    let ops = create_with(&mut c, "ops", &["tools"])
        .await
        .expect("created");
    let (failed, out) = call(&mut c, &ops, "mcp__tools__signals", json!({})).await;
    common::assert_signals_reset("the MCP server", &text(failed, &out));
}

// -------------------------------------------------------------- runner

const TESTS: &[(&str, common::runner::Test)] = &[
    (
        "allowed_agents_see_and_call_mcp_tools_others_do_not",
        || Box::pin(allowed_agents_see_and_call_mcp_tools_others_do_not()),
    ),
    ("servers_restart_time_out_and_stop_with_the_daemon", || {
        Box::pin(servers_restart_time_out_and_stop_with_the_daemon())
    }),
    (
        "servers_that_crash_at_every_call_or_never_answer_cost_only_tool_errors",
        || Box::pin(servers_that_crash_at_every_call_or_never_answer_cost_only_tool_errors()),
    ),
    ("a_stdio_server_starts_with_its_signals_reset", || {
        Box::pin(a_stdio_server_starts_with_its_signals_reset())
    }),
    (
        "a_read_only_path_is_readable_and_not_writable_by_its_server",
        || Box::pin(a_read_only_path_is_readable_and_not_writable_by_its_server()),
    ),
    (
        "a_hostile_server_cannot_forge_or_flood_the_daemons_log",
        || Box::pin(a_hostile_server_cannot_forge_or_flood_the_daemons_log()),
    ),
    ("the_http_servers_header_is_sent_and_never_recorded", || {
        Box::pin(the_http_servers_header_is_sent_and_never_recorded())
    }),
    ("constraints_and_approvals_apply_to_mcp_tools", || {
        Box::pin(constraints_and_approvals_apply_to_mcp_tools())
    }),
    (
        "an_instance_gives_its_agent_mcp_servers_and_a_context_budget",
        || Box::pin(an_instance_gives_its_agent_mcp_servers_and_a_context_budget()),
    ),
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some(SERVE_STDIO) => serve_stdio(),
        Some(SERVE_HOSTILE) => serve_hostile(),
        _ => common::runner::run(TESTS, &args),
    }
}
