//! The command brain: one run of an external program per step. The program
//! reads one JSON object ([`TurnInput`]) on stdin and prints one JSON object
//! on stdout: `{"reply": string?, "tool_calls": [{"name", "input"}]?,
//! "done": bool?, "decision": object?}` (see docs/brains.md). A non-zero exit, output that is
//! not such JSON, or a timeout fails the turn; the failure keeps the exit
//! status and the ends of stdout and stderr.
//!
//! The program runs in a unit (see [`crate::sandbox`]), confined to a
//! private directory of its agent (its working directory, `HOME` and
//! `TMPDIR`) and read-only access to the system and to its own files, with
//! a scrubbed environment; its pipes are drained beside it (so it never
//! stalls on a full pipe) and a step that ends, times out or is aborted
//! ends everything the program started.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::{Brain, BrainError, BrainFuture, ToolCall, TurnInput, TurnPlan};

/// Bytes of stdout a decision may take.
const MAX_STDOUT: usize = 1024 * 1024;
/// Bytes kept of each stream's end in a failure record.
const KEPT: usize = 2048;
/// How long the pipes may stay open after the program exited (a child it
/// left behind may hold them).
const DRAIN_GRACE: Duration = Duration::from_millis(200);

#[derive(Debug, Clone)]
pub struct CommandBrain {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    pub sandbox: crate::sandbox::SandboxConfig,
    /// The daemon's slots for brain processes (`max_brain_processes`).
    pub slots: std::sync::Arc<tokio::sync::Semaphore>,
}

/// A decision as programs may write it: every field optional, `null` too.
#[derive(Debug, Deserialize)]
struct Decision {
    #[serde(default)]
    reply: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCall>>,
    #[serde(default)]
    done: Option<bool>,
    /// The turn's decision for an instance's log; checked at the turn's
    /// end, so a malformed one is noted there, never a failed step.
    #[serde(default)]
    decision: Option<serde_json::Value>,
}

/// Reads a pipe to its end, keeping the first `head` bytes and the last
/// `KEPT`, so a chatty program neither stalls nor fills memory.
async fn drain(mut pipe: impl AsyncRead + Unpin, head: usize) -> (Vec<u8>, Vec<u8>, bool) {
    let mut first = Vec::new();
    let mut last: VecDeque<u8> = VecDeque::new();
    let mut overflow = false;
    let mut buf = [0u8; 8192];
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let room = head.saturating_sub(first.len());
        first.extend_from_slice(&buf[..n.min(room)]);
        overflow |= n > room;
        // Only the tail of the read can matter, and the excess goes in one
        // cut: byte by byte, a flood cost a step of CPU per byte.
        last.extend(&buf[n.saturating_sub(KEPT)..n]);
        let excess = last.len().saturating_sub(KEPT);
        last.drain(..excess);
    }
    (first, last.into_iter().collect(), overflow)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn failed(detail: String) -> BrainError {
    BrainError {
        brain: "command",
        detail: crate::secrets::redact_trigger_tokens(&detail),
    }
}

impl CommandBrain {
    async fn run(self, input: TurnInput) -> Result<TurnPlan, BrainError> {
        let request = serde_json::to_vec(&input)
            .map_err(|e| failed(format!("cannot encode the input: {e}")))?;
        // One process per step, within the daemon's bound: past it the
        // step waits (within its turn's deadline) rather than fails.
        let _slot = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| failed("the daemon is shutting down".into()))?;
        let tmp = self
            .sandbox
            .tmp_dir(input.agent_id)
            .map_err(|e| failed(format!("cannot make the brain's directory: {e}")))?;
        let spec = self
            .sandbox
            .spec(vec![tmp.clone()], self.own_files(), Duration::ZERO);
        let mut command = self
            .sandbox
            .command(&spec, &self.program, &self.args)
            .map_err(|e| failed(format!("cannot describe the brain's unit: {e}")))?;
        command.current_dir(&tmp);
        crate::process::scrub(&mut command, &self.env, Some(&tmp));
        let mut child = command
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| failed(format!("cannot start `{}`: {e}", self.program)))?;
        // Whatever happens to this step (answered, timed out, turn
        // aborted), nothing of it outlives it.
        let mut unit = crate::sandbox::UnitHangup::new(child.id());
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| failed("no stdout".into()))?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| failed("no stderr".into()))?;
        let writer = tokio::spawn(async move {
            if let Some(mut stdin) = stdin {
                // A program may answer without reading all of it.
                let _ = stdin.write_all(&request).await;
            }
        });
        let out = tokio::spawn(drain(stdout, MAX_STDOUT));
        let err = tokio::spawn(drain(stderr, 0));
        let status = tokio::time::timeout(self.timeout, child.wait()).await;
        writer.abort();
        let status = match status {
            Ok(status) => {
                unit.disarm();
                Some(status.map_err(|e| failed(format!("waiting for `{}`: {e}", self.program)))?)
            }
            Err(_) => {
                // The program's tree is killed now, before its pipes are
                // drained: a program still printing (or a child of it
                // holding the pipes) would keep the drains reading past
                // their grace, and the failure would lose what it printed.
                drop(unit);
                None
            }
        };
        let (stdout, stdout_tail, too_much) = tokio::time::timeout(DRAIN_GRACE, out)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        let (_, stderr_tail, _) = tokio::time::timeout(DRAIN_GRACE, err)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        let ends = format!(
            "stdout: {}; stderr: {}",
            text(&stdout_tail),
            text(&stderr_tail)
        );
        let Some(status) = status else {
            return Err(failed(format!(
                "`{}` did not answer within {:?}; {ends}",
                self.program, self.timeout
            )));
        };
        if !status.success() {
            return Err(failed(format!(
                "`{}` exited with {status}; {ends}",
                self.program
            )));
        }
        if too_much {
            return Err(failed(format!(
                "`{}` printed more than {MAX_STDOUT} bytes; {ends}",
                self.program
            )));
        }
        let decision: Decision = serde_json::from_slice(&stdout).map_err(|e| {
            failed(format!(
                "`{}` printed no decision ({e}); {ends}",
                self.program
            ))
        })?;
        Ok(TurnPlan {
            reply: decision.reply,
            tool_calls: decision.tool_calls.unwrap_or_default(),
            done: decision.done.unwrap_or(false),
            decision: decision.decision,
        })
    }
}

impl CommandBrain {
    /// The program's own files, which it may read: the program if named
    /// by path, and every argument that is an existing absolute path.
    fn own_files(&self) -> Vec<PathBuf> {
        std::iter::once(&self.program)
            .chain(&self.args)
            .map(Path::new)
            .filter(|path| path.is_absolute() && path.exists())
            .map(Path::to_path_buf)
            .collect()
    }
}

impl Brain for CommandBrain {
    fn name(&self) -> &'static str {
        "command"
    }

    fn decide(&self, input: TurnInput) -> BrainFuture {
        Box::pin(self.clone().run(input))
    }
}
