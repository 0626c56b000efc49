//! `--restart`: kills the daemon with SIGKILL and starts it again with the
//! command line it was started with, then times how long until it answers
//! with every agent recovered. Only for a daemon on this host: the pid comes
//! from its status and the command line from `/proc`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::api::pb;
use crate::client::{self, Clients, Target};
use crate::daemon::LOCK_FILE;

/// What a restart measured.
pub struct Restarted {
    /// From SIGKILL to the first status answered (the daemon answers only
    /// once every agent's actor is live again).
    pub elapsed: Duration,
    pub status: pb::GetStatusResponse,
    /// Where the new daemon's output goes.
    pub log: PathBuf,
}

fn command_line(pid: u32) -> anyhow::Result<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).with_context(|| {
        format!("cannot read the command line of pid {pid}: is the daemon on this host?")
    })?;
    let args: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    anyhow::ensure!(!args.is_empty(), "pid {pid} has an empty command line");
    Ok(args)
}

/// Whether the data directory's lock is free: the killed daemon's last
/// thread has closed its files. (Its pid can linger as a zombie for as long
/// as its parent does not reap it, so the pid says nothing.)
fn lock_free(data_dir: &Path) -> anyhow::Result<bool> {
    let path = data_dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    match file.try_lock() {
        // Dropping the file releases the lock at once.
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(err)) => {
            Err(err).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
}

pub async fn kill_and_restart(clients: &mut Clients, target: &Target) -> anyhow::Result<Restarted> {
    let before = clients
        .runtime
        .get_status(pb::GetStatusRequest {})
        .await?
        .into_inner();
    anyhow::ensure!(before.pid != 0, "the daemon did not report its pid");
    let pid = before.pid;
    let argv = command_line(pid)?;
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd"))
        .with_context(|| format!("cannot read the working directory of pid {pid}"))?;
    let log = std::env::temp_dir().join(format!("holarchy-bench-restart-{pid}.log"));

    let started = Instant::now();
    let raw = i32::try_from(pid).context("pid out of range")?;
    kill(Pid::from_raw(raw), Signal::SIGKILL).with_context(|| format!("cannot kill pid {pid}"))?;
    let data_dir = PathBuf::from(&before.data_dir);
    while !lock_free(&data_dir)? {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(30),
            "pid {pid} still holds its data directory 30 s after SIGKILL"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let output =
        std::fs::File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
    let mut daemon = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(output.try_clone()?)
        .stderr(output)
        .spawn()
        .with_context(|| format!("cannot start {}", argv.join(" ")))?;
    let deadline = Duration::from_secs(600);
    loop {
        anyhow::ensure!(
            started.elapsed() < deadline,
            "the daemon did not answer within {deadline:?}; see {}",
            log.display()
        );
        if let Some(exit) = daemon.try_wait()? {
            anyhow::bail!(
                "the restarted daemon exited ({exit}): {}",
                std::fs::read_to_string(&log).unwrap_or_default().trim()
            );
        }
        // A refused connection or a missing socket means not up yet.
        if let Ok(mut fresh) = client::connect(target).await {
            if let Ok(status) = fresh.runtime.get_status(pb::GetStatusRequest {}).await {
                let elapsed = started.elapsed();
                *clients = fresh;
                return Ok(Restarted {
                    elapsed,
                    status: status.into_inner(),
                    log,
                });
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
