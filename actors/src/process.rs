//! Processes the runtime starts (commands and command brains): telling
//! our process from a later one with its pid, ending a unit's whole tree,
//! and the environment they get. That environment is a short allowlist
//! from the daemon's own, the agent's private directory as `HOME` and
//! `TMPDIR`, plus what the caller set; never the rest: the daemon's
//! environment holds model API keys and the TCP token, and a command's
//! output can end up in front of a model or an operator.

use holarchy_supervision::ProcessRef;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Variables passed through from the daemon.
const PASSED: &[&str] = &[
    "PATH", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ",
];

/// Clears `command`'s environment and sets the allowlist, `private` (for
/// an agent's program, the only place outside its workspaces it may write)
/// as `HOME` and `TMPDIR`, and `extra`. Without `private` (git, run by the
/// daemon itself) the daemon's own `HOME` and `TMPDIR` pass.
pub fn scrub(
    command: &mut tokio::process::Command,
    extra: &[(String, String)],
    private: Option<&std::path::Path>,
) {
    command.env_clear();
    match private {
        Some(dir) => {
            command.env("HOME", dir).env("TMPDIR", dir);
        }
        None => {
            for name in ["HOME", "TMPDIR"] {
                if let Ok(value) = std::env::var(name) {
                    command.env(name, value);
                }
            }
        }
    }
    for name in PASSED {
        if let Ok(value) = std::env::var(name) {
            command.env(name, value);
        }
    }
    for (name, value) in extra {
        command.env(name, value);
    }
}

/// The start time of a process, in clock ticks since boot (field 22 of
/// `/proc/<pid>/stat`), to tell our process from a later one with its pid.
pub fn start_ticks(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; fields resume after its ')'.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Ends a recorded unit that is still ours: the process with the unit's
/// pid started exactly when the unit did. SIGHUP makes the unit kill its
/// whole tree at once. After a daemon crash the units died with it
/// (`PR_SET_PDEATHSIG`), so this finds nothing; and a pid reused since, by
/// any other process, never matches.
pub fn kill_group_if_ours(process: ProcessRef) {
    if start_ticks(process.pgid) == Some(process.start_ticks) {
        let _ = kill(Pid::from_raw(process.pgid), Signal::SIGHUP);
    }
}
