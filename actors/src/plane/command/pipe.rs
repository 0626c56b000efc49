//! Reading a command's pipes into its actor: redacted where a secret cut
//! across two reads is still whole, paced to the task's output rate, and
//! each piece stored before the next is read (backpressure).

use std::sync::Arc;
use std::time::Duration;

use holarchy_supervision::Stream;
use ractor::ActorRef;
use tokio::io::AsyncReadExt;
use tokio::task::AbortHandle;

use crate::protocol::CommandMsg;
use crate::secrets::Secrets;

/// Bytes read from a pipe at a time.
pub(super) const READ_SIZE: usize = 64 * 1024;

#[derive(Debug)]
pub(super) struct Helper(pub(super) AbortHandle);

impl Drop for Helper {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Reads one of the command's pipes into the actor. Each piece waits until
/// the actor has stored it, and the reader keeps to the task's output
/// rate, so a command that prints without end fills its pipe and waits:
/// the daemon holds at most one piece per stream. Secrets are redacted
/// here, where a secret cut across two reads can still be seen whole.
pub(super) fn spawn_reader(
    myself: ActorRef<CommandMsg>,
    stream: Stream,
    mut pipe: impl AsyncReadExt + Unpin + Send + 'static,
    secrets: Arc<Secrets>,
    pace: Arc<tokio::sync::Mutex<Pace>>,
) -> Helper {
    let task = tokio::spawn(async move {
        let mut buf = vec![0u8; READ_SIZE];
        let mut held = Vec::new();
        loop {
            let n = match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            held.extend_from_slice(&buf[..n]);
            let ready = secrets.redact_stream(&mut held, false);
            if !deliver(&myself, stream, ready).await {
                return;
            }
            // Both streams keep to one rate: the lock is the task's own,
            // held while this reader waits its turn.
            pace.lock().await.took(n as u64).await;
        }
        let rest = secrets.redact_stream(&mut held, true);
        if deliver(&myself, stream, rest).await {
            let _ = myself.cast(CommandMsg::Eof(stream));
        }
    });
    Helper(task.abort_handle())
}

/// Hands a piece of output to the actor and waits until it is stored;
/// `false` once the actor is gone.
async fn deliver(myself: &ActorRef<CommandMsg>, stream: Stream, data: Vec<u8>) -> bool {
    if data.is_empty() {
        return true;
    }
    myself
        .call(|reply| CommandMsg::Output(stream, data, reply), None)
        .await
        .is_ok_and(|result| result.is_success())
}

/// Keeps a reader to a rate: after each read, waits until the bytes taken
/// are within the rate since the pace last restarted. A reader that fell
/// behind (a quiet command) restarts the pace rather than banking credit,
/// so it bursts at most one second's worth.
#[derive(Debug)]
pub(super) struct Pace {
    bytes_per_sec: u64,
    started: tokio::time::Instant,
    taken: u64,
}

impl Pace {
    pub(super) fn new(bytes_per_sec: u64) -> Self {
        Self {
            bytes_per_sec: bytes_per_sec.max(1),
            started: tokio::time::Instant::now(),
            taken: 0,
        }
    }

    async fn took(&mut self, bytes: u64) {
        let now = tokio::time::Instant::now();
        let earned = now.duration_since(self.started).as_secs_f64() * self.bytes_per_sec as f64;
        if earned - self.taken as f64 > self.bytes_per_sec as f64 {
            self.started = now;
            self.taken = 0;
        }
        self.taken = self.taken.saturating_add(bytes);
        let due = Duration::from_secs_f64(self.taken as f64 / self.bytes_per_sec as f64);
        tokio::time::sleep_until(self.started + due).await;
    }
}
