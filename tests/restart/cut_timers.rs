//! A turn that armed a timer and was cut short by `kill -9` runs again
//! after the restart and arms its own: the first run's timer is cancelled
//! (with its event), so the agent wakes once for one sleep. The chaos run
//! found it waking twice.

use holarchy::api::pb;
use serde_json::json;

use crate::common::{self, create, data_dir, Daemon};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timer_armed_by_a_turn_cut_short_is_cancelled_and_the_rerun_wakes_once() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let agent = create(&mut c, "sleeper", None).await;
    // The turn arms a timer, then waits on a command long enough to be
    // killed in the middle of it.
    let script = json!({ "tool_calls": [
        { "name": "Sleep", "input": { "duration_ms": 1500 } },
        { "name": "ExecCommand", "input": { "command": "sleep 30", "yield_ms": 30000 } },
    ] });
    common::send(&mut c, &agent, &script.to_string()).await;
    common::eventually("the timer armed and the command running", || {
        let mut c = c.clone();
        let agent = agent.clone();
        async move {
            let armed = waits(&mut c, &agent, "armed").await >= 1;
            let running = common::command_tasks(&mut c, &agent).await > 0;
            (armed && running).then_some(())
        }
    })
    .await;

    daemon.kill9();
    drop(c);
    let daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    // The re-run's timer fires; the first run's was cancelled at the
    // restart, before it (its deadline was the earlier one), so once a
    // timer has fired and the first one has been dealt with either way,
    // the count is final.
    let (fired, cancelled) = common::eventually("the timers settled", || {
        let mut c = c.clone();
        let agent = agent.clone();
        async move {
            let fired = waits(&mut c, &agent, "fired").await;
            let cancelled = waits(&mut c, &agent, "cancelled").await;
            (fired >= 1 && (cancelled >= 1 || fired >= 2)).then_some((fired, cancelled))
        }
    })
    .await;
    assert_eq!((fired, cancelled), (1, 1), "one sleep, one wake-up");
    let wakes = common::messages(&mut c, &agent)
        .await
        .into_iter()
        .filter(|m| m.provenance == "timer")
        .count();
    assert_eq!(wakes, 1);
}

/// How many of `agent`'s `wait_updated` events say `status`.
async fn waits(c: &mut holarchy::client::Clients, agent: &str, status: &str) -> usize {
    common::events(c, 0)
        .await
        .into_iter()
        .filter(|e: &pb::Event| e.agent_id == agent && e.kind == "wait_updated" && e.text == status)
        .count()
}
