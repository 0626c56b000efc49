//! What the tests of MCP servers a package manager installs share (npm's
//! in `mcp_npm`, uv's in `mcp_uvx`): finding the manager on PATH, an
//! install run to a deadline, a snapshot of its cache that shows the
//! server left it unwritten, one scripted tool call, and a `main` that
//! says it skipped, in the summary line CI tallies, when nothing could be
//! installed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::{json, Value};

use super::{eventually, messages, runner, script, send, tool_call};

/// How long an install from a registry may take.
pub const INSTALL: Duration = Duration::from_secs(300);

/// The program `name` on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Runs `command` to its end or [`INSTALL`]'s deadline; why it failed, if
/// it did.
pub fn run(mut command: Command, what: &str) -> Result<(), String> {
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

/// Every file under `dir` with its size and time of change: what a write
/// to a package manager's cache would change.
pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (u64, SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            // Links are not followed: a cache links into itself (uv's
            // environments into its archive, npm's `.bin` into packages),
            // and the walk reaches what they point at by its own path.
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
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
pub async fn call(c: &mut Clients, agent: &str, tool: &str, input: Value) -> (bool, Value) {
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

/// The `main` of a test binary whose one test, `name`, needs `install`
/// to have succeeded: what it installed goes in `installed`, where the
/// test (a plain `fn` pointer, which cannot capture it) finds it. When
/// the install fails, the test is reported ignored with the reason,
/// rather than passed, so CI counts it as not run.
pub fn main<T: Send + Sync>(
    name: &str,
    install: impl FnOnce() -> Result<T, String>,
    installed: &'static OnceLock<T>,
    test: runner::Test,
) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // Listing installs nothing.
    if args.iter().any(|a| a == "--list") {
        println!("{name}: test");
        return ExitCode::SUCCESS;
    }
    match install() {
        Ok(done) => {
            let _ = installed.set(done);
        }
        Err(why) => {
            println!("\nrunning 1 test\ntest {name} ... ignored, skipped: {why}");
            // In the harness's words, so CI's tally counts it as not run.
            println!(
                "\ntest result: ok. 0 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out\n"
            );
            return ExitCode::SUCCESS;
        }
    }
    runner::run(&[(name, test)], &args)
}
