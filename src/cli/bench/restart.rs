//! `--restart`: kills the daemon with SIGKILL and starts it again with the
//! command line it was started with, then times how long until it answers
//! with every agent recovered. Only for a daemon on this host: the pid comes
//! from its status and the command line from `/proc`.

use std::os::unix::process::CommandExt;
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
    /// From SIGKILL until the killed daemon's lock on its data directory
    /// was free: the kernel tearing the process down, before the new one
    /// can start.
    pub lock_free: Duration,
    pub status: pb::GetStatusResponse,
    /// Where the new daemon's output goes.
    pub log: PathBuf,
}

/// A NUL-separated `/proc` file (cmdline, environ) as its entries; only the
/// terminating NUL is dropped, so empty arguments survive.
fn proc_list(pid: u32, file: &str) -> anyhow::Result<Vec<std::ffi::OsString>> {
    use std::os::unix::ffi::OsStrExt;
    let raw = std::fs::read(format!("/proc/{pid}/{file}"))
        .with_context(|| format!("cannot read /proc/{pid}/{file}"))?;
    let body = raw.strip_suffix(&[0]).unwrap_or(&raw);
    if body.is_empty() {
        return Ok(Vec::new());
    }
    Ok(body
        .split(|b| *b == 0)
        .map(|a| std::ffi::OsStr::from_bytes(a).to_owned())
        .collect())
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
    // The pid is only meaningful on this host, in this pid namespace: go on
    // only for a Unix socket and a data directory whose lock names that pid
    // and is held, so no other process is ever killed.
    anyhow::ensure!(
        matches!(target, Target::Unix(_)),
        "--restart needs the daemon's Unix socket (a daemon on this host)"
    );
    let pid = before.pid;
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd"))
        .with_context(|| format!("cannot read the working directory of pid {pid}"))?;
    let data_dir = cwd.join(&before.data_dir);
    let lock = data_dir.join(LOCK_FILE);
    let holder = std::fs::read_to_string(&lock)
        .with_context(|| format!("cannot read {}", lock.display()))?;
    anyhow::ensure!(
        holder.trim() == pid.to_string() && !lock_free(&data_dir)?,
        "{} does not name a running daemon with pid {pid}; not killing anything",
        lock.display()
    );
    // Everything that can fail is read before the kill, so a failure never
    // leaves the operator's daemon down.
    let argv = proc_list(pid, "cmdline")?;
    anyhow::ensure!(!argv.is_empty(), "pid {pid} has an empty command line");
    let environ: Vec<(std::ffi::OsString, std::ffi::OsString)> = proc_list(pid, "environ")?
        .into_iter()
        .filter_map(|pair| {
            let bytes = std::os::unix::ffi::OsStrExt::as_bytes(pair.as_os_str()).to_vec();
            let at = bytes.iter().position(|b| *b == b'=')?;
            Some((
                std::os::unix::ffi::OsStringExt::from_vec(bytes[..at].to_vec()),
                std::os::unix::ffi::OsStringExt::from_vec(bytes[at + 1..].to_vec()),
            ))
        })
        .collect();
    let log = std::env::temp_dir().join(format!("holarchy-bench-restart-{pid}.log"));
    let output =
        std::fs::File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
    let output_err = output.try_clone()?;

    let started = Instant::now();
    let raw = i32::try_from(pid).context("pid out of range")?;
    kill(Pid::from_raw(raw), Signal::SIGKILL).with_context(|| format!("cannot kill pid {pid}"))?;
    while !lock_free(&data_dir)? {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(30),
            "pid {pid} still holds its data directory 30 s after SIGKILL"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let lock_free = started.elapsed();
    // As it was started: same program, arguments, directory and
    // environment; in its own process group so a Ctrl-C of this tool does
    // not reach it.
    let mut daemon = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(cwd)
        .env_clear()
        .envs(environ)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(output)
        .stderr(output_err)
        .spawn()
        .with_context(|| format!("cannot start {:?}", argv))?;
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
                    lock_free,
                    status: status.into_inner(),
                    log,
                });
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
