//! End-to-end: a Python reference MCP server, `mcp-server-time` from
//! PyPI, configured as its README says (`uvx mcp-server-time`) and run by
//! the real daemon under its confinement, from the environment uvx left
//! in uv's cache (docs/mcp.md, "`npx` and `uvx`"). It lists its tools and
//! answers a call; the environment it runs with is the configuration's,
//! never the daemon's; uv's cache, read by the server, stays unwritten.
//!
//! The install goes under the build's target directory
//! (`target/tmp/mcp-uvx`), kept between runs, never into the source tree;
//! uv runs it on the system's Python (`/usr/bin/python3`) and never
//! downloads one. Its own main, so a machine without `uv`, without a
//! Python, or without the package index says that it skipped, in the
//! summary line CI tallies, instead of passing.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use holarchy::api::pb;
use serde_json::{json, Value};

use common::installed::{call, run, snapshot, which};
use common::{data_dir, Daemon};

const SERVER: &str = "mcp-server-time";
/// The Python uv builds the environment on: the distribution's, so the
/// test needs no interpreter download.
const PYTHON: &str = "/usr/bin/python3";
/// A variable only the daemon has: the server must not see it.
const DAEMON_ONLY: &str = "MCP_UVX_DAEMON_ONLY";
/// A variable the configuration gives the server.
const GIVEN: &str = "MCP_UVX_GIVEN";

/// uv's cache with `uvx mcp-server-time`'s environment in it, made once
/// (a later run finds it), or why not.
fn install() -> Result<PathBuf, String> {
    let uvx = which("uvx").ok_or("uvx is not on PATH (install uv: `pipx install uv`)")?;
    if !Path::new(PYTHON).is_file() {
        return Err(format!("{PYTHON} is missing"));
    }
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mcp-uvx");
    let cache = root.join("uv-cache");
    let run_dir = root.join("uvx-run");
    for dir in [&cache, &run_dir] {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    // uvx keeps each environment two levels down (`environments-v2/KEY/
    // HASH`, a link into its archive).
    let installed = std::fs::read_dir(cache.join("environments-v2"))
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|key| {
            std::fs::read_dir(key.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .any(|env| env.path().join("bin").join(SERVER).is_file());
    if !installed {
        // As an operator would, once: uvx builds the environment in its
        // cache and starts the server, which ends at the end of its input.
        let mut command = Command::new(&uvx);
        command
            .arg(SERVER)
            .current_dir(&run_dir)
            .env("UV_CACHE_DIR", &cache)
            .env("UV_PYTHON", PYTHON)
            .env("UV_PYTHON_DOWNLOADS", "never")
            .env("UV_NO_PROGRESS", "1");
        run(command, "uvx mcp-server-time")?;
    }
    Ok(cache)
}

/// The environment of the one running process whose command line holds
/// `marker` (the server, run from its environment's `bin`), the daemon's
/// confining unit that started it left out.
fn environment_of(marker: &str) -> Vec<String> {
    let running: Vec<String> = common::processes_with(marker)
        .into_iter()
        .filter(|p| !p.contains("__holarchy-unit"))
        .collect();
    let [process] = running.as_slice() else {
        panic!("one process runs {marker}: {running:?}");
    };
    let pid = process.split(':').next().expect("a pid");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).expect("its environment");
    environ
        .split(|b| *b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect()
}

async fn a_uvx_server_starts_confined_from_uvs_cache_and_answers(cache: &Path) {
    let root = tempfile::tempdir().expect("tempdir");
    let config = json!({ "mcpServers": {
        "time": {
            "command": "uvx",
            "args": [SERVER, "--local-timezone", "UTC"],
            "env": { GIVEN: "yes" },
        },
    }});
    let config_path = root.path().join("mcp.json");
    std::fs::write(&config_path, config.to_string()).expect("config");
    let cache_text = cache.to_str().expect("UTF-8");
    let before = snapshot(cache);
    let daemon = Daemon::start_with_env(
        &data_dir(&root),
        &["--mcp-config", config_path.to_str().expect("UTF-8")],
        &[
            (DAEMON_ONLY, "daemon-only-value"),
            ("UV_CACHE_DIR", cache_text),
        ],
    )
    .await;
    let mut c = daemon.clients().await;
    let agent = c
        .agents
        .create_agent(pb::CreateAgentRequest {
            name: "clock".into(),
            mcp_servers: vec!["time".into()],
            network: String::new(),
            ..Default::default()
        })
        .await
        .expect("created")
        .into_inner()
        .agent_id;

    let listed = c
        .agents
        .list_tools(pb::ListToolsRequest {
            agent_id: agent.clone(),
        })
        .await
        .expect("tools")
        .into_inner();
    assert!(listed.unavailable.is_empty(), "{:?}", listed.unavailable);
    let names: Vec<&str> = listed.tools.iter().map(|t| t.name.as_str()).collect();
    for tool in ["mcp__time__get_current_time", "mcp__time__convert_time"] {
        assert!(names.contains(&tool), "{tool} in {names:?}");
    }

    let (failed, out) = call(
        &mut c,
        &agent,
        "mcp__time__get_current_time",
        json!({ "timezone": "UTC" }),
    )
    .await;
    assert!(!failed, "the call failed: {out}");
    let answer = out["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {out}"));
    let answer: Value = serde_json::from_str(answer).expect("the time, as JSON");
    assert_eq!(answer["timezone"], "UTC", "{answer}");
    let year = chrono::Utc::now().format("%Y-").to_string();
    assert!(
        answer["datetime"]
            .as_str()
            .is_some_and(|at| at.starts_with(&year)),
        "now: {answer}"
    );

    // Its environment: the configuration's, never the daemon's, and not
    // the cache's location either (the daemon found the install itself).
    let env = environment_of(&format!("bin/{SERVER}"));
    assert!(env.iter().any(|v| v == &format!("{GIVEN}=yes")), "{env:?}");
    assert!(
        !env.iter()
            .any(|v| v.starts_with(DAEMON_ONLY) || v.starts_with("UV_CACHE_DIR")),
        "{env:?}"
    );

    // uv's cache, read by the server, was not written to.
    assert!(before == snapshot(cache), "uv's cache changed");
}

fn main() -> ExitCode {
    common::installed::main(
        "a_uvx_server_starts_confined_from_uvs_cache_and_answers",
        install,
        &CACHE,
        || {
            Box::pin(a_uvx_server_starts_confined_from_uvs_cache_and_answers(
                CACHE.get().expect("installed"),
            ))
        },
    )
}

/// The cache, for the test (a plain `fn` pointer cannot capture it).
static CACHE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
