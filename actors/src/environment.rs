//! The environment a program started by the runtime gets (commands and
//! command brains): a short allowlist from the daemon's own environment,
//! plus what the caller set. Never the rest: the daemon's environment holds
//! model API keys and the TCP token, and a command's output can end up in
//! front of a model or an operator.

/// Variables passed through from the daemon.
const PASSED: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ",
    "TMPDIR",
];

/// Clears `command`'s environment and sets the allowlist and `extra`.
pub fn scrub(command: &mut tokio::process::Command, extra: &[(String, String)]) {
    command.env_clear();
    for name in PASSED {
        if let Ok(value) = std::env::var(name) {
            command.env(name, value);
        }
    }
    for (name, value) in extra {
        command.env(name, value);
    }
}
