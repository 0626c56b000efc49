//! A `Sleep` timer firing while the daemon stays up: the wake turn comes
//! after the duration, never before, and once.

use std::time::{Duration, Instant};

use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::json;

use crate::common::workspaces::run;
use crate::common::{create, data_dir, eventually, messages, tool_output, Daemon};

const SLEEP: Duration = Duration::from_millis(1000);

async fn wakes(c: &mut Clients, agent_id: &str) -> Vec<pb::Message> {
    messages(c, agent_id)
        .await
        .into_iter()
        .filter(|m| m.provenance == "timer")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sleep_timer_wakes_its_agent_once_after_its_duration() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "napper", None).await;
    let asked = Instant::now();
    run(
        &mut c,
        &id,
        json!([{ "name": "Sleep", "input": { "duration_ms": SLEEP.as_millis() as u64, "reason": "the build" } }]),
    )
    .await;
    let wait = tool_output(&mut c, &id, "Sleep").await;
    assert_eq!(wait["status"], "armed", "{wait}");
    let deadline_ms = wait["deadline_ms"].as_i64().expect("a deadline");

    let wake = eventually("the wake turn", || {
        let mut c = c.clone();
        let id = id.clone();
        async move {
            let all = messages(&mut c, &id).await;
            all.into_iter()
                .find(|m| m.provenance == "timer" && m.status == pb::MessageStatus::Handled as i32)
        }
    })
    .await;
    let woke_after = asked.elapsed();
    // Not before: neither by the daemon's clock nor by ours.
    assert!(
        wake.created_at_ms >= deadline_ms,
        "woke at {} before the deadline {deadline_ms}",
        wake.created_at_ms
    );
    assert!(woke_after >= SLEEP, "woke after {woke_after:?}");
    assert_eq!(wake.text, "wake: the build");
    assert_eq!(wake.reply, "ack: wake: the build");
    assert!(crate::common::get_agent(&mut c, &id)
        .await
        .waiting_on
        .is_empty());

    // Once: watch until two more whole durations have passed, well beyond
    // when a timer that re-armed itself would have fired again.
    let watch_until = Instant::now() + 2 * SLEEP + Duration::from_millis(500);
    while Instant::now() < watch_until {
        let fired = wakes(&mut c, &id).await;
        assert_eq!(fired.len(), 1, "the timer fired again: {fired:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
