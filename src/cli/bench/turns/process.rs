//! What a process on this host has spent, read from `/proc`: CPU seconds
//! (user + system, every thread, living or exited), bytes it sent to the
//! storage layer, and context switches of its live threads. The bench reads
//! the daemon's and its own before and after a run and divides the
//! difference by the turns handled.

use std::path::PathBuf;

/// One reading of a process's counters. A counter `/proc` would not give
/// (another user's process, a kernel without task I/O accounting) is `None`,
/// never 0.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    pub cpu_s: f64,
    /// `write_bytes` of `/proc/<pid>/io`: bytes this process caused to be
    /// written to storage (page-cache writes count when dirtied), so the
    /// store's appends and rewrites, not only what it ended up keeping.
    pub write_bytes: Option<u64>,
    /// Voluntary plus involuntary switches, summed over the live threads:
    /// the thread wake-ups and handoffs a turn costs.
    pub context_switches: Option<u64>,
}

/// A process to read: the daemon by its pid, or this process.
#[derive(Debug, Clone)]
pub struct Process {
    dir: PathBuf,
}

impl Process {
    pub fn pid(pid: u32) -> Self {
        Self {
            dir: PathBuf::from(format!("/proc/{pid}")),
        }
    }

    pub fn current() -> Self {
        Self {
            dir: PathBuf::from("/proc/self"),
        }
    }

    /// Whether this is a holarchy daemon running here: a pid from a
    /// daemon's status means nothing in another pid namespace or host, and
    /// reading a stranger's counters would report a wrong figure as if it
    /// were right.
    pub fn is_daemon(&self) -> bool {
        let Ok(cmdline) = std::fs::read(self.dir.join("cmdline")) else {
            return false;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let named = args
            .first()
            .is_some_and(|a| String::from_utf8_lossy(a).contains("holarchy"));
        named && args.iter().any(|a| *a == b"serve")
    }

    /// The counters now; `None` when the process is gone or unreadable.
    pub fn read(&self) -> Option<Reading> {
        let stat = std::fs::read_to_string(self.dir.join("stat")).ok()?;
        let ticks = cpu_ticks(&stat)?;
        Some(Reading {
            cpu_s: ticks as f64 / clock_ticks_per_s(),
            write_bytes: std::fs::read_to_string(self.dir.join("io"))
                .ok()
                .and_then(|io| field(&io, "write_bytes:")),
            context_switches: self.context_switches(),
        })
    }

    fn context_switches(&self) -> Option<u64> {
        let mut total = 0;
        for task in std::fs::read_dir(self.dir.join("task")).ok()?.flatten() {
            // A thread that ended between the listing and the read is
            // skipped: its switches are lost either way.
            let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
                continue;
            };
            total += field(&status, "voluntary_ctxt_switches:")?;
            total += field(&status, "nonvoluntary_ctxt_switches:")?;
        }
        Some(total)
    }
}

/// utime + stime of a `/proc/<pid>/stat` line, in clock ticks: the
/// process's own threads, not children it reaped (a scripted turn starts
/// none). The fields are counted after the command name's closing
/// parenthesis, since the name itself may hold spaces and parentheses.
fn cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After ")": state is field 3 of the line, utime field 14; so utime is
    // the 12th of the rest (index 11), then stime.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The number after `name` on its own line of a `/proc` key-value file.
fn field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|v| v.trim().parse().ok())
}

#[allow(unsafe_code)]
fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf only reads a system constant; it has no
    // preconditions and touches no memory of ours.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    // Linux's USER_HZ is 100 everywhere; fall back to it if sysconf fails.
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_counted_after_a_name_with_spaces() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 2 1 20 0 9 0";
        assert_eq!(cpu_ticks(stat), Some(7 + 3));
    }

    #[test]
    fn this_process_can_be_read_and_is_not_a_daemon() {
        let me = Process::current();
        let reading = me.read().expect("own /proc readable");
        assert!(reading.cpu_s >= 0.0);
        assert!(reading.context_switches.is_some());
        assert!(!me.is_daemon());
    }
}
