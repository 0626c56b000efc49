//! A command's unit as its actor holds it: the guard that ends the unit's
//! whole tree when the actor goes, and the script file the unit runs.

use std::path::PathBuf;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// The command's unit (see [`crate::sandbox`]): the process that owns the
/// command's whole tree. Asked to end it when dropped before the command
/// ended (the actor was killed with its agent's subtree, or failed).
#[derive(Debug)]
pub(super) struct UnitGuard {
    /// The unit's pid (and its process group).
    pub(super) pid: i32,
    pub(super) ended: bool,
    pub(super) _script: ScriptFile,
}

/// The command's script in its agent's private directory, removed with the
/// task. The shell keeps it open, so removing it early is harmless.
#[derive(Debug)]
pub(super) struct ScriptFile(pub(super) PathBuf);

impl Drop for ScriptFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The shell script of a command: `export` lines for the agent's
/// variables (names checked by the tool), then its command line.
pub(super) fn script_text(env: &[(String, String)], line: &str) -> String {
    let mut text = String::new();
    for (name, value) in env {
        text.push_str(&format!(
            "export {name}='{}'\n",
            value.replace('\'', "'\\''")
        ));
    }
    text.push_str(line);
    text
}

/// Writes a new file only its owner may read.
pub(super) fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

impl UnitGuard {
    /// SIGTERM: the unit passes it on to the command and kills the whole
    /// tree after its grace. Never SIGKILL first: a unit killed outright
    /// could not reach what the command moved out of its group.
    pub(super) fn terminate(&self) {
        self.signal(Signal::SIGTERM);
    }

    /// SIGHUP: the unit kills the whole tree at once.
    pub(super) fn kill(&self) {
        self.signal(Signal::SIGHUP);
    }

    /// Only while the unit is not reaped: after, its pid may be another
    /// process's.
    fn signal(&self, signal: Signal) {
        if !self.ended {
            let _ = kill(Pid::from_raw(self.pid), signal);
        }
    }
}

impl Drop for UnitGuard {
    fn drop(&mut self) {
        self.terminate();
    }
}
