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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, SystemTime};

use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::{json, Value};

use common::{data_dir, eventually, messages, script, send, tool_call, Daemon};

const FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem";
const EVERYTHING: &str = "@modelcontextprotocol/server-everything";
/// A variable only the daemon has: no server may see it.
const DAEMON_ONLY: &str = "MCP_NPM_DAEMON_ONLY";
/// A variable the configuration gives a server.
const GIVEN: &str = "MCP_NPM_GIVEN";
/// How long an install from the registry may take.
const INSTALL: Duration = Duration::from_secs(300);

/// Where the servers are installed: a project folder (`npm install`) and
/// npm's cache holding npx's install, side by side, so that npx (run from
/// `npx-run`) finds no project above it.
struct Installed {
    project: PathBuf,
    npm_cache: PathBuf,
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Runs `command` to its end or its deadline; why it failed, if it did.
fn run(mut command: Command, what: &str) -> Result<(), String> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{what}: {e}"))?;
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(|e| format!("{what}: {e}"))? {
            if status.success() {
                return Ok(());
            }
            let mut stderr = String::new();
            if let Some(mut pipe) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
            }
            let tail: String = stderr.lines().rev().take(5).collect::<Vec<_>>().join(" / ");
            return Err(format!("{what} failed ({status}): {tail}"));
        }
        if started.elapsed() > INSTALL {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{what} took over {INSTALL:?}"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
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

/// Every file under `dir` with its size and time of change: what a write
/// to npm's cache would change.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (u64, SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                let changed = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                out.insert(entry.path(), (meta.len(), changed));
            }
        }
    }
    out
}

/// Has `agent` call `tool` with `input` in one scripted turn: whether it
/// failed, and its output.
async fn call(c: &mut Clients, agent: &str, tool: &str, input: Value) -> (bool, Value) {
    let before = messages(c, agent).await.len();
    send(c, agent, &script(json!([{ "name": tool, "input": input }]))).await;
    eventually("the call's turn", || {
        let mut c = c.clone();
        let agent = agent.to_owned();
        async move {
            let all = messages(&mut c, &agent).await;
            (all.len() > before && all[before].status == pb::MessageStatus::Handled as i32)
                .then_some(())
        }
    })
    .await;
    tool_call(c, agent, tool).await
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
    let args: Vec<String> = std::env::args().skip(1).collect();
    let name = "npm_installed_servers_start_confined_list_tools_and_answer";
    if args.iter().any(|a| a == "--list") {
        println!("{name}: test");
        return ExitCode::SUCCESS;
    }
    let installed = match install() {
        Ok(installed) => installed,
        Err(why) => {
            println!("\nrunning 1 test\ntest {name} ... ignored, skipped: {why}");
            // In the harness's words, so CI's tally counts it as not run.
            println!(
                "\ntest result: ok. 0 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out\n"
            );
            return ExitCode::SUCCESS;
        }
    };
    let _ = INSTALLED.set(installed);
    let tests: &[(&str, common::runner::Test)] = &[(name, || {
        Box::pin(npm_installed_servers_start_confined_list_tools_and_answer(
            INSTALLED.get().expect("installed"),
        ))
    })];
    common::runner::run(tests, &args)
}

/// The installs, for the test (a plain `fn` pointer cannot capture them).
static INSTALLED: std::sync::OnceLock<Installed> = std::sync::OnceLock::new();
