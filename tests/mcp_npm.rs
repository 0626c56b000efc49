//! End-to-end: the two most used reference MCP servers, installed from
//! npm as their READMEs say, run by the real daemon under its confinement
//! with the configurations docs/mcp.md gives:
//! `@modelcontextprotocol/server-filesystem` run by `node` from a project
//! folder (its package folder granted read-only by default), and
//! `@modelcontextprotocol/server-everything` run as `npx -y PACKAGE` from
//! npm's cache, which must stay unwritten. Each lists its tools and
//! answers calls; the environment it sees is cleared of the daemon's.
//!
//! Installs go under the build's target directory (`target/tmp/mcp-npm`),
//! kept between runs, never into the source tree. Its own main, so a
//! machine without `node` and `npm`, or without the npm registry, says
//! that it skipped, in the summary line CI tallies, instead of passing.

mod common;

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use holarchy::api::pb;
use serde_json::{json, Value};

use common::installed::{call, run, snapshot, which};
use common::{data_dir, Daemon};

const FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem";
const EVERYTHING: &str = "@modelcontextprotocol/server-everything";
/// A variable only the daemon has: no server may see it.
const DAEMON_ONLY: &str = "MCP_NPM_DAEMON_ONLY";
/// A variable the configuration gives a server.
const GIVEN: &str = "MCP_NPM_GIVEN";

/// Where the servers are installed: a project folder (`npm install`) and
/// npm's cache holding npx's install, side by side, so that npx (run from
/// `npx-run`) finds no project above it.
struct Installed {
    project: PathBuf,
    npm_cache: PathBuf,
}

/// Installs both servers once (a later run finds them), or says why not.
fn install() -> Result<Installed, String> {
    let npm = which("npm").ok_or("npm is not on PATH")?;
    let npx = which("npx").ok_or("npx is not on PATH")?;
    which("node").ok_or("node is not on PATH")?;
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mcp-npm");
    let project = root.join("project");
    let npm_cache = root.join("npm-cache");
    let npx_run = root.join("npx-run");
    for dir in [&project, &npm_cache, &npx_run] {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let quiet = [
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        "--no-update-notifier",
    ];
    if !project
        .join("node_modules")
        .join(FILESYSTEM)
        .join("package.json")
        .is_file()
    {
        let mut command = Command::new(&npm);
        command
            .arg("install")
            .args(quiet)
            .arg("--prefix")
            .arg(&project)
            .arg(FILESYSTEM)
            .env("npm_config_cache", &npm_cache);
        run(command, "npm install")?;
    }
    let npx_installed = std::fs::read_dir(npm_cache.join("_npx"))
        .map(|entries| {
            entries.flatten().any(|e| {
                std::fs::read_to_string(e.path().join("package.json"))
                    .is_ok_and(|text| text.contains(EVERYTHING))
            })
        })
        .unwrap_or(false);
    if !npx_installed {
        // As an operator would, once: npx installs into its cache, starts
        // the server, which ends at the end of its input.
        let mut command = Command::new(&npx);
        command
            .args(["-y", EVERYTHING])
            .current_dir(&npx_run)
            .env("npm_config_cache", &npm_cache)
            .env("npm_config_update_notifier", "false");
        run(command, "npx -y server-everything")?;
    }
    Ok(Installed { project, npm_cache })
}

fn text(failed: bool, output: &Value) -> String {
    assert!(!failed, "the call failed: {output}");
    output["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {output}"))
        .to_owned()
}

async fn npm_installed_servers_start_confined_list_tools_and_answer(installed: &Installed) {
    let root = tempfile::tempdir().expect("tempdir");
    let share = root.path().join("share");
    std::fs::create_dir_all(&share).expect("share");
    std::fs::write(share.join("notes.txt"), "hello from holarchy").expect("a file");
    let share = std::fs::canonicalize(&share).expect("canonical");
    let script_path = installed
        .project
        .join("node_modules")
        .join(FILESYSTEM)
        .join("dist/index.js");
    let config = json!({ "mcpServers": {
        "files": {
            "command": "node",
            "args": [script_path, share],
            "read_write": [share],
        },
        "everything": {
            "command": "npx",
            "args": ["-y", EVERYTHING],
            "env": { GIVEN: "yes" },
        },
    }});
    let config_path = root.path().join("mcp.json");
    std::fs::write(&config_path, config.to_string()).expect("config");
    let cache = installed.npm_cache.to_str().expect("UTF-8");
    let before = snapshot(&installed.npm_cache);
    let daemon = Daemon::start_with_env(
        &data_dir(&root),
        &["--mcp-config", config_path.to_str().expect("UTF-8")],
        &[
            (DAEMON_ONLY, "daemon-only-value"),
            ("npm_config_cache", cache),
        ],
    )
    .await;
    let mut c = daemon.clients().await;
    let agent = c
        .agents
        .create_agent(pb::CreateAgentRequest {
            name: "librarian".into(),
            mcp_servers: vec!["files".into(), "everything".into()],
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
    for tool in [
        "mcp__files__read_text_file",
        "mcp__files__write_file",
        "mcp__everything__echo",
        "mcp__everything__get-env",
    ] {
        assert!(names.contains(&tool), "{tool} in {names:?}");
    }

    // The filesystem server reads and writes where it was pointed.
    let notes = share.join("notes.txt");
    let (failed, out) = call(
        &mut c,
        &agent,
        "mcp__files__read_text_file",
        json!({ "path": notes }),
    )
    .await;
    assert_eq!(text(failed, &out), "hello from holarchy");
    let written = share.join("written.txt");
    let (failed, out) = call(
        &mut c,
        &agent,
        "mcp__files__write_file",
        json!({ "path": written, "content": "from the agent" }),
    )
    .await;
    assert!(!failed, "{out}");
    assert_eq!(
        std::fs::read_to_string(&written).expect("written"),
        "from the agent"
    );

    // The everything server, run by npx from its cache, answers.
    let (failed, out) = call(
        &mut c,
        &agent,
        "mcp__everything__echo",
        json!({ "message": "hi there" }),
    )
    .await;
    assert!(text(failed, &out).contains("hi there"), "{out}");
    // Its environment: the configuration's, never the daemon's.
    let (failed, out) = call(&mut c, &agent, "mcp__everything__get-env", json!({})).await;
    let env = text(failed, &out);
    assert!(env.contains(GIVEN), "{env}");
    assert!(
        !env.contains(DAEMON_ONLY) && !env.contains("daemon-only-value"),
        "{env}"
    );
    assert!(
        !env.contains("npm_config_cache"),
        "npx's cache is not passed on: {env}"
    );

    // npm's cache, read by the server, was not written to.
    assert!(
        before == snapshot(&installed.npm_cache),
        "npm's cache changed"
    );
}

fn main() -> ExitCode {
    common::installed::main(
        "npm_installed_servers_start_confined_list_tools_and_answer",
        install,
        &INSTALLED,
        || {
            Box::pin(npm_installed_servers_start_confined_list_tools_and_answer(
                INSTALLED.get().expect("installed"),
            ))
        },
    )
}

/// The installs, for the test (a plain `fn` pointer cannot capture them).
static INSTALLED: std::sync::OnceLock<Installed> = std::sync::OnceLock::new();
