//! The environment a program started by the runtime gets (commands and
//! command brains): a short allowlist from the daemon's own environment,
//! its agent's private directory as `HOME` and `TMPDIR`, plus what the
//! caller set. Never the rest: the daemon's environment holds
//! model API keys and the TCP token, and a command's output can end up in
//! front of a model or an operator.

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
