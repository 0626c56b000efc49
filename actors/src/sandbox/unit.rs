//! The unit: a small process between the daemon and one program an agent
//! runs (a command, a command brain's step). It makes the program and
//! everything it starts one killable whole:
//! - it is a child subreaper, so descendants that `setsid` or double-fork
//!   away are re-parented to it, not to init, and stay in reach;
//! - it dies with the daemon (`PR_SET_PDEATHSIG`: SIGHUP, which it turns
//!   into killing its whole tree at once), so a `kill -9` of the daemon
//!   leaves no process behind;
//! - asked to stop (SIGTERM), it passes SIGTERM on to the command's group
//!   and kills the whole tree when the command ends or its grace is over;
//!   SIGHUP (the daemon died, or wants the tree gone now) kills at once.
//!   The daemon never SIGKILLs a unit: a unit killed outright could no
//!   longer reach what the program moved out of its group;
//! - when the program exits, it kills whatever the program left running;
//! - it enforces the task's wall time.
//!
//! The program itself starts as [`super::confine`] (a second run of this
//! binary) which confines itself before it becomes the program, so the
//! unit stays outside the program's Landlock domain: the program can
//! neither signal nor ptrace it.
//!
//! Plain synchronous code: it runs before any runtime or thread starts.

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::time::Instant;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::prctl;
use nix::sys::signal::{kill, killpg, SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{getppid, Pid};

use super::signals::{self, UNIT_SIGNALS};
use super::{UnitSpec, CONFINE_ARG};

/// The exit code of a unit that ended its program for a reason of its own.
const KILLED_BY_UNIT: i32 = 137;

/// Runs the unit: `args` is `[spec, "--", program, program args...]`.
pub fn main(args: &[OsString]) -> i32 {
    let Some((spec, _program)) = super::parse_args(args) else {
        eprintln!("holarchy unit: bad arguments");
        return 125;
    };
    match run(&spec, args) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("holarchy unit: {err}");
            kill_tree();
            125
        }
    }
}

/// Why the unit could not run its program; it then kills what it started
/// and exits 125, the message on its stderr.
#[derive(Debug, thiserror::Error)]
enum UnitError {
    #[error("pdeathsig: {0}")]
    DeathSignal(Errno),
    #[error("subreaper: {0}")]
    Subreaper(Errno),
    #[error("core limit: {0}")]
    CoreLimit(Errno),
    #[error("signal actions: {0}")]
    SignalActions(Errno),
    #[error("blocking signals: {0}")]
    BlockSignals(Errno),
    #[error("signalfd: {0}")]
    SignalFd(Errno),
    #[error("finding this program: {0}")]
    FindSelf(std::io::Error),
    #[error("starting the program: {0}")]
    Start(std::io::Error),
    #[error("waiting: {0}")]
    Wait(Errno),
}

/// Why the unit stopped waiting for its program.
enum End {
    /// The program exited: its status.
    Exited(WaitStatus),
    /// The daemon asked (or died): the signal it sent.
    Signalled(Signal),
    /// The wall time ran out.
    WallTime,
}

fn run(spec: &UnitSpec, args: &[OsString]) -> Result<i32, UnitError> {
    // Before anything else: if the daemon is already gone, so are we.
    prctl::set_pdeathsig(Signal::SIGHUP).map_err(UnitError::DeathSignal)?;
    if getppid().as_raw() != spec.daemon_pid {
        return Ok(KILLED_BY_UNIT);
    }
    prctl::set_child_subreaper(true).map_err(UnitError::Subreaper)?;
    // The unit re-raises its program's fatal signal on itself (to die
    // alike); it must not dump core into the agent's workspace doing so.
    nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0)
        .map_err(UnitError::CoreLimit)?;
    // Whatever the daemon was started with: an ignored SIGCHLD would have
    // the kernel reap the program before the unit learns how it ended.
    signals::default_actions(UNIT_SIGNALS).map_err(UnitError::SignalActions)?;
    let mut mask = SigSet::empty();
    for signal in UNIT_SIGNALS {
        mask.add(signal);
    }
    mask.thread_block().map_err(UnitError::BlockSignals)?;
    let signals =
        SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC).map_err(UnitError::SignalFd)?;

    let exe = std::env::current_exe().map_err(UnitError::FindSelf)?;
    // The second stage inherits this mask; it clears it (and every
    // ignored signal) just before it becomes the program.
    let child = std::process::Command::new(exe)
        .arg(CONFINE_ARG)
        .args(args)
        .spawn()
        .map_err(UnitError::Start)?;
    let main_pid = Pid::from_raw(child.id() as i32);
    let deadline = (spec.wall_time_ms > 0)
        .then(|| Instant::now() + std::time::Duration::from_millis(spec.wall_time_ms));

    let mut end = wait_for_end(&signals, main_pid, deadline, false).map_err(UnitError::Wait)?;
    if let End::Signalled(signal @ (Signal::SIGTERM | Signal::SIGINT | Signal::SIGQUIT)) = end {
        // A stop: the command may clean up within its grace. The program
        // leads a session and group of its own (see `confine`).
        let _ = killpg(main_pid, Signal::SIGTERM);
        let grace = Instant::now() + std::time::Duration::from_millis(spec.stop_grace_ms);
        end = match wait_for_end(&signals, main_pid, Some(grace), true) {
            Ok(End::Exited(status)) => End::Exited(status),
            _ => End::Signalled(signal),
        };
    }
    kill_tree();
    Ok(match end {
        End::Exited(WaitStatus::Exited(_, code)) => code,
        End::Exited(WaitStatus::Signaled(_, signal, _)) => die_like(signal),
        End::Exited(_) => KILLED_BY_UNIT,
        End::Signalled(signal) => die_like(signal),
        End::WallTime => {
            eprintln!(
                "holarchy: the command ran past its wall time of {} ms and was killed",
                spec.wall_time_ms
            );
            KILLED_BY_UNIT
        }
    })
}

/// Waits for the program to exit, a signal, or `deadline`. While `stopping`,
/// stop signals (our own SIGTERM to the group among them) are already
/// being acted on and only SIGHUP (the daemon died) cuts the wait short.
fn wait_for_end(
    signals: &SignalFd,
    main_pid: Pid,
    deadline: Option<Instant>,
    stopping: bool,
) -> Result<End, Errno> {
    loop {
        let timeout = match deadline {
            None => PollTimeout::NONE,
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(End::WallTime);
                }
                PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX)
            }
        };
        let mut fds = [PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(err) => return Err(err),
        }
        let Some(info) = signals.read_signal()? else {
            continue;
        };
        let signal = Signal::try_from(info.ssi_signo as i32).unwrap_or(Signal::SIGTERM);
        match signal {
            Signal::SIGCHLD => {}
            Signal::SIGTERM | Signal::SIGINT | Signal::SIGQUIT if stopping => continue,
            _ => return Ok(End::Signalled(signal)),
        }
        // Reap every child that ended: the program, or a descendant that
        // was re-parented here.
        loop {
            match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => break,
                Ok(status) if status.pid() == Some(main_pid) => return Ok(End::Exited(status)),
                Ok(_) | Err(Errno::EINTR) => continue,
                Err(err) => return Err(err),
            }
        }
    }
}

/// Exits the way the program did (killed by `signal`), so the daemon
/// reports the same end; falls back to the shell's 128 + signal.
fn die_like(signal: Signal) -> i32 {
    let mut only = SigSet::empty();
    only.add(signal);
    let _ = kill(Pid::this(), signal);
    let _ = only.thread_unblock();
    128 + signal as i32
}

/// Kills every descendant. Orphans re-parent to this subreaper as their
/// parents die, so it repeats until there is no child left.
///
/// It never blocks on a child it has not killed: the kernel's list of
/// children may miss one that is being re-parented as it is read, and a
/// blocking wait would then last as long as that child chose to live
/// (the chaos run caught a `sleep 20` outliving its daemon so). Each
/// round lists the children again and kills them, until none is left.
pub fn kill_tree() {
    loop {
        for pid in children() {
            let _ = kill(pid, Signal::SIGKILL);
        }
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Ok(_) | Err(Errno::EINTR) => continue,
            Err(_) => break,
        }
    }
}

/// This process's children, from `/proc/self/task/*/children`, or by a
/// scan of `/proc` where the kernel lacks that file.
fn children() -> Vec<Pid> {
    let me = std::process::id();
    let listed = std::fs::read_to_string(format!("/proc/{me}/task/{me}/children"));
    if let Ok(list) = listed {
        return list
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .map(Pid::from_raw)
            .collect();
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| super::parent_of(*pid) == Some(me as i32))
        .map(Pid::from_raw)
        .collect()
}
