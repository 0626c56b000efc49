//! The command brain: one run of an external program per step. The program
//! reads one JSON object ([`TurnInput`]) on stdin and prints one JSON object
//! on stdout: `{"reply": string?, "tool_calls": [{"name", "input"}]?,
//! "done": bool?}` (see docs/brains.md). A non-zero exit, output that is
//! not such JSON, or a timeout fails the turn; the failure keeps the exit
//! status and the ends of stdout and stderr.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::{Brain, BrainError, BrainFuture, TurnInput, TurnPlan};

/// Bytes of the program's stdout read at most, and kept of each stream in
/// a failure record.
const MAX_STDOUT: usize = 1024 * 1024;
const KEPT: usize = 2048;

#[derive(Debug, Clone)]
pub struct CommandBrain {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
}

fn tail(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(KEPT);
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}

fn failed(detail: String) -> BrainError {
    BrainError {
        brain: "command",
        detail,
    }
}

impl CommandBrain {
    async fn run(self, input: TurnInput) -> Result<TurnPlan, BrainError> {
        let request = serde_json::to_vec(&input)
            .map_err(|e| failed(format!("cannot encode the input: {e}")))?;
        let mut child = Command::new(&self.program)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| failed(format!("cannot start `{}`: {e}", self.program)))?;
        let mut stdin = child
            .stdin
            .take()
            .ok_or_else(|| failed("no stdin".into()))?;
        let mut stdout = child
            .stdout
            .take()
            .ok_or_else(|| failed("no stdout".into()))?;
        let mut stderr = child
            .stderr
            .take()
            .ok_or_else(|| failed("no stderr".into()))?;
        let exchange = async {
            // Write and read at once: a program may answer before it has
            // read all its input, and pipes are finite.
            let write = async {
                let _ = stdin.write_all(&request).await;
                drop(stdin);
            };
            let mut out = Vec::new();
            let mut err = Vec::new();
            let mut limited_out = (&mut stdout).take(MAX_STDOUT as u64);
            let mut limited_err = (&mut stderr).take(MAX_STDOUT as u64);
            let read_out = limited_out.read_to_end(&mut out);
            let read_err = limited_err.read_to_end(&mut err);
            let ((), _, _) = tokio::join!(write, read_out, read_err);
            let status = child.wait().await;
            (status, out, err)
        };
        let (status, out, err) =
            tokio::time::timeout(self.timeout, exchange)
                .await
                .map_err(|_| {
                    failed(format!(
                        "`{}` did not answer within {:?}",
                        self.program, self.timeout
                    ))
                })?;
        let status = status.map_err(|e| failed(format!("waiting for `{}`: {e}", self.program)))?;
        if !status.success() {
            return Err(failed(format!(
                "`{}` exited with {status}; stdout: {}; stderr: {}",
                self.program,
                tail(&out),
                tail(&err)
            )));
        }
        serde_json::from_slice::<TurnPlan>(&out).map_err(|e| {
            failed(format!(
                "`{}` printed no decision ({e}); stdout: {}; stderr: {}",
                self.program,
                tail(&out),
                tail(&err)
            ))
        })
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
