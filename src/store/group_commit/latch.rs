//! A test hook that holds every flush: with `HOLARCHY_TEST_HOLD_FLUSHES`
//! naming a file in the daemon's environment, the writer does not flush
//! while that file exists. The writes it has applied but not flushed are
//! counted in `<file>.held`, so an end-to-end test can see a write applied
//! and held, and check that nothing waiting on it was answered (the
//! writer flushes at once otherwise, so "answered after the flush" and
//! "just before it" could not be told apart). Agents cannot set the
//! daemon's environment; an operator who sets it holds their own writes.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::WriteCounters;

/// The variable naming the latch file.
pub const VARIABLE: &str = "HOLARCHY_TEST_HOLD_FLUSHES";

/// How often a held writer looks at the latch.
const POLL: Duration = Duration::from_millis(2);

#[derive(Debug)]
pub(super) struct Latch {
    path: PathBuf,
    held: PathBuf,
}

impl Latch {
    /// The latch named in the environment, if any.
    pub(super) fn from_env() -> Option<Self> {
        let path = PathBuf::from(std::env::var_os(VARIABLE)?);
        tracing::warn!(latch = %path.display(), "test hook: flushes are held while this file exists");
        let mut held = path.clone().into_os_string();
        held.push(".held");
        Some(Self {
            path,
            held: held.into(),
        })
    }

    /// Blocks while the latch file exists, saying how many writes wait.
    pub(super) fn hold(&self, counters: &WriteCounters) {
        let mut said = None;
        while self.path.exists() {
            let unflushed = counters
                .done
                .load(Ordering::SeqCst)
                .saturating_sub(counters.flushed.load(Ordering::SeqCst));
            if said != Some(unflushed) {
                // Written whole, then renamed: a reader never sees half.
                let next = self.held.with_extension("next");
                if std::fs::write(&next, format!("{unflushed}\n")).is_ok() {
                    let _ = std::fs::rename(&next, &self.held);
                }
                said = Some(unflushed);
            }
            std::thread::sleep(POLL);
        }
        if said.is_some() {
            let _ = std::fs::remove_file(&self.held);
        }
    }
}
