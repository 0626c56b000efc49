//! Process-wide settings made once at start: the daemon is not dumpable
//! (other processes of the same user can then not read its
//! `/proc/<pid>/environ` or memory, nor attach a debugger), and its limit
//! on open files is raised to the hard limit, so connections and command
//! pipes do not run out of descriptors at the usual soft 1,024.

use nix::sys::prctl;
use nix::sys::resource::{getrlimit, setrlimit, Resource};
use tracing::{info, warn};

/// Turns off `PR_SET_DUMPABLE`, at the start of `serve`, before any agent
/// or child starts (`main` has scrubbed the secrets from the process's
/// /proc copies by then, which needs the flag still on). Children get
/// their own flag back at `exec`, so commands are unaffected.
pub fn forbid_dumps() -> nix::Result<()> {
    prctl::set_dumpable(false)
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns (before,
/// after).
pub fn raise_open_files() -> nix::Result<(u64, u64)> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    }
    let (now, _) = getrlimit(Resource::RLIMIT_NOFILE)?;
    Ok((soft, now))
}

/// Both settings, logged; a failure is logged and the daemon goes on (a
/// kernel without prctl still serves, only less guarded).
pub fn harden() {
    match forbid_dumps().and_then(|()| prctl::get_dumpable()) {
        Ok(dumpable) => info!(dumpable, "process dumpable flag set"),
        Err(err) => {
            warn!(error = %err, "cannot turn off PR_SET_DUMPABLE; same-user processes can read this daemon's environment and memory")
        }
    }
    match raise_open_files() {
        Ok((before, after)) => info!(
            before,
            after, "open file limit (RLIMIT_NOFILE) raised to its hard limit"
        ),
        Err(err) => warn!(error = %err, "cannot raise the open file limit"),
    }
}
