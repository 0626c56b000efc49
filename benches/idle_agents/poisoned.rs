//! `--poisoned`: the recovery again after one agent's record is damaged on
//! disk (its first byte flipped, as `tests/restart/damaged.rs` does), so a
//! run shows a poisoned record's cost to a start as a ratio against the
//! clean recovery measured just before it.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Flips the first byte of the first public agent's record.
pub fn phase_poison(dir: &Path) -> Value {
    let db = sled::open(dir).expect("the store opens raw");
    let agents = db.open_tree("public_agents").expect("the agents' tree");
    let (key, value) = agents
        .iter()
        .next()
        .expect("an agent")
        .expect("the tree reads");
    let mut bytes = value.to_vec();
    bytes[0] ^= 0xff;
    agents.insert(key, bytes).expect("the damage is written");
    db.flush().expect("flushed");
    json!({ "poisoned": 1 })
}

/// The recovery of `n` agents one of which has the damaged record: every
/// other one comes back, and the damage is reported.
pub async fn phase_poisoned_recover(n: usize, dir: &Path) -> Value {
    let started = Instant::now();
    let (store, runtime) = super::open(dir).await;
    let elapsed = started.elapsed();
    let snapshot = runtime.snapshot().await.expect("snapshot");
    assert_eq!(snapshot.damaged_count, 1, "the damage is seen");
    assert!(
        snapshot.recovered_agents >= n - 1,
        "{} of {n} agents recovered",
        snapshot.recovered_agents
    );
    runtime.shutdown(Duration::from_secs(30)).await;
    store.close().await;
    json!({
        "recover_s": elapsed.as_secs_f64(),
        "recovered_agents": snapshot.recovered_agents,
    })
}
