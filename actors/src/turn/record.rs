//! Keeps what a turn's brain saw ([`crate::store::TurnInputs`]) once the
//! turn ends, so a replay can show a candidate brain the same. Only brains
//! that read context are recorded; the shared part (role, catalog) is
//! written once per incarnation per digest.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tracing::warn;

use super::steps::Fixed;
use crate::protocol::TurnOutcome;
use crate::store::turn_input::SharedRole;
use crate::store::{SharedInput, TurnInputRecord};
use crate::{now_ms, Ctx};

/// The most digests remembered as written; past it the memory starts
/// again (a digest written twice costs one more write, nothing else).
const MAX_REMEMBERED: usize = 1024;

/// How long a shared input is trusted to be stored after this daemon
/// wrote it: a store sweeps those no record uses only after far longer
/// (a day), so one written within this is never swept under a record.
const TRUSTED: Duration = Duration::from_secs(3600);

/// The digests of shared inputs this incarnation wrote, and when.
#[derive(Debug, Default)]
pub struct SharedWritten(Mutex<HashMap<String, Instant>>);

impl SharedWritten {
    /// Whether `digest` has to be written (again); remembers it as
    /// written now if so.
    fn first(&self, digest: &str) -> bool {
        let mut written = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if written.get(digest).is_some_and(|at| at.elapsed() < TRUSTED) {
            return false;
        }
        if written.len() >= MAX_REMEMBERED {
            written.clear();
        }
        written.insert(digest.to_owned(), Instant::now());
        true
    }

    /// Forgets `digest`: its write failed.
    fn forget(&self, digest: &str) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(digest);
    }
}

/// Records the input `fixed` of a turn of `brain` that ended in `outcome`.
/// A failure is logged, never the turn's: the turn happened whether or
/// not a replay can see it.
pub(super) async fn record(
    ctx: &Arc<Ctx>,
    brain: &'static str,
    fixed: &Fixed,
    outcome: &TurnOutcome,
    logs_decision: bool,
) {
    let keep = ctx.config.turn_inputs_kept;
    if keep == 0 {
        return;
    }
    let shared = SharedInput {
        role: fixed.role.as_ref().map(|role| SharedRole {
            version: role.version.clone(),
            prompt: role.prompt.clone(),
        }),
        catalog: serde_json::Value::Array(fixed.catalog.clone()).to_string(),
    };
    let digest = shared.digest();
    let record = TurnInputRecord {
        brain: brain.to_owned(),
        agent: fixed.agent.to_string(),
        context: fixed.context.to_string(),
        shared: digest.clone(),
        max_steps: fixed.max_steps,
        logs_decision,
        done: matches!(outcome, TurnOutcome::Decided { done: true, .. }),
        at_ms: now_ms(),
    };
    let first = ctx.shared_inputs.first(&digest);
    let (agent_id, run_id) = (fixed.agent_id, fixed.run_id);
    let store = ctx.clone();
    let written = tokio::task::spawn_blocking(move || {
        let shared = first.then_some(&shared);
        store
            .turn_inputs()
            .put_turn_input(agent_id, run_id, &record, shared, keep)
    })
    .await;
    let failed = match written {
        Ok(Ok(())) => return,
        Ok(Err(err)) => err.to_string(),
        Err(join) => join.to_string(),
    };
    if first {
        ctx.shared_inputs.forget(&digest);
    }
    warn!(agent_id = %agent_id, run_id = %run_id, error = %failed, "the turn's input was not recorded; a replay will not see it");
}
