//! Schedules across restarts: a slot that passes while the daemon is
//! down (`kill -9`) fires once when it starts again, and a start after
//! that fires nothing more.
//!
//! The schedule is every minute, so the test waits for the wall clock to
//! pass the next minute boundary while the daemon is down (up to a
//! minute): that wait is the behaviour under test, not synchronisation.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{event_messages, received};
use crate::common::apply_instance as apply;
use crate::common::{data_dir, eventually, handled, Daemon};

const TICKER: &str = r#"
name = "ticker"

[[ingress]]
source = "schedule"
cron = "* * * * *"
payload = { kind = "tick" }
"#;

const MINUTE_MS: u64 = 60_000;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after the epoch")
        .as_millis() as u64
}

/// Sleeps until the wall clock is past `at_ms`.
async fn sleep_past(at_ms: u64) {
    let now = now_ms();
    if now <= at_ms {
        tokio::time::sleep(Duration::from_millis(at_ms - now + 1)).await;
    }
}

/// The log line of each start's first scan of the schedules: how many
/// there are and how many were due.
fn scans(daemon: &Daemon) -> Vec<String> {
    daemon
        .log()
        .lines()
        .filter(|line| line.contains("schedules loaded"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_missed_while_down_fires_once_after_restart_and_never_again() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    // Apply and kill within one minute, so no slot passes while it runs.
    if now_ms() % MINUTE_MS > MINUTE_MS - 10_000 {
        sleep_past(now_ms() / MINUTE_MS * MINUTE_MS + MINUTE_MS).await;
    }
    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let agent = apply(&mut c, TICKER).await;
    drop(c);
    daemon.kill9();
    let slot = now_ms() / MINUTE_MS * MINUTE_MS + MINUTE_MS;
    sleep_past(slot).await;

    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    handled(&c, &agent, 1).await;
    let fired = event_messages(&mut c, &agent).await;
    assert_eq!(fired.len(), 1, "{fired:?}");
    let (message, event) = &fired[0];
    assert_eq!(event["source"], "schedule");
    assert_eq!(event["type"], "schedule");
    // Named by what the schedule is (its cron, timezone and payload),
    // not by its place in the manifest.
    let subject = event["subject"].as_str().expect("subject");
    let id = subject
        .strip_prefix("schedule#")
        .expect("a schedule subject");
    assert_eq!(id.len(), 12, "{subject}");
    assert_eq!(
        event["at_ms"], slot,
        "the missed slot, not the restart time"
    );
    assert_eq!(event["dedupe_key"], format!("schedule:ticker:{id}:{slot}"));
    assert_eq!(event["payload"]["kind"], "tick");
    assert_eq!(message.reply, format!("ack: {}", message.text));
    // One scan per start so far: the first start's (nothing applied yet)
    // and this one's, which found the missed slot.
    let restarted = scans(&daemon);
    assert_eq!(restarted.len(), 2, "{restarted:?}");
    assert!(restarted[1].contains("due=1"), "{restarted:?}");

    // A second start, within the same minute: the slot fired is recorded,
    // so nothing is due and nothing is delivered again.
    drop(c);
    daemon.terminate(Duration::from_secs(20)).await;
    assert!(
        now_ms() < slot + MINUTE_MS,
        "the test ran past the next slot; it cannot tell a refire from it"
    );
    let daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let second = eventually("the second start's scan", || {
        let lines = scans(&daemon);
        async move { (lines.len() == 3).then_some(lines) }
    })
    .await;
    assert!(second[2].contains("schedules=1 due=0"), "{second:?}");
    assert_eq!(event_messages(&mut c, &agent).await.len(), 1);
    let logged = received(&mut c).await;
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0]["source"], "schedule");
}
