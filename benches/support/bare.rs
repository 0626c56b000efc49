//! The reference every idle-agent figure is compared with: bare ractor 0.16
//! actors (no state, no messages), measured in the same run.

use std::time::{Duration, Instant};

use holarchy::api::runtime_service::rss_bytes;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::{json, Value};

/// The reference: an actor with no state that handles nothing.
struct Bare;

impl Actor for Bare {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<()>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }
}

/// Lets allocator and runtime settle before reading RSS.
pub async fn settle() -> u64 {
    tokio::time::sleep(Duration::from_millis(300)).await;
    rss_bytes()
}

pub async fn phase_bare(n: usize) -> Value {
    let before = settle().await;
    let started = Instant::now();
    let mut actors = Vec::with_capacity(n);
    for _ in 0..n {
        let (actor, _) = Actor::spawn(None, Bare, ())
            .await
            .expect("bare actor spawns");
        actors.push(actor);
    }
    let elapsed = started.elapsed();
    let after = settle().await;
    json!({
        "bytes_per_actor": super::figure::per_item(before, after, n),
        "spawn_per_s": super::figure::rate(n, elapsed.as_secs_f64()),
    })
}
