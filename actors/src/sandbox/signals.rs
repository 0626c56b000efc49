//! The signal state of a unit and of the program it starts. A unit blocks
//! the signals it waits for (it reads them from a signalfd), and whatever
//! started the daemon may have left signals ignored (`nohup` ignores
//! SIGHUP). Both pass through `fork` and `exec`: neither the spawn of the
//! second stage nor its `exec` clears a blocked mask, so without a reset
//! a program would start deaf to `kill -TERM` and `timeout(1)` would not
//! work inside it. One helper serves every program a unit runs (commands,
//! command brains, MCP stdio servers, git), since all of them become
//! their program through [`super::confine`].

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

/// The signals a unit waits for: blocked in it, read from its signalfd.
pub const UNIT_SIGNALS: [Signal; 5] = [
    Signal::SIGCHLD,
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// Gives each of `signals` its default action. An ignored signal is
/// dropped when sent, so a signalfd never sees it and a program inherits
/// it ignored across `exec`.
pub fn default_actions(signals: impl IntoIterator<Item = Signal>) -> nix::Result<()> {
    let default = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    for signal in signals {
        if matches!(signal, Signal::SIGKILL | Signal::SIGSTOP) {
            continue;
        }
        set_action(signal, &default)?;
    }
    Ok(())
}

#[allow(unsafe_code)]
fn set_action(signal: Signal, action: &SigAction) -> nix::Result<()> {
    // SAFETY: the action is SIG_DFL, which runs no code of ours, so no
    // handler can break async-signal safety; callers are single-threaded
    // (a unit or its second stage before `exec`).
    unsafe { sigaction(signal, action) }.map(drop)
}

/// Unblocks every signal and gives every signal its default action: the
/// state a program expects to start from. Called by the second stage just
/// before it becomes the program.
pub fn reset_for_exec() -> nix::Result<()> {
    default_actions(Signal::iterator())?;
    SigSet::empty().thread_set_mask()
}
