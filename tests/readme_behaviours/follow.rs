//! `WatchEvents` with `follow` and an agent filter together: the stream
//! carries that agent's events only, old ones and ones appended after it
//! opened, while other agents' events go by.

use holarchy::api::pb;
use tokio_stream::StreamExt;

use crate::common::{create, data_dir, events, handled, send, Daemon, DEADLINE};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filtered_follower_sees_its_agents_events_only_old_and_new() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let watched = create(&mut c, "watched", None).await;
    let noise = create(&mut c, "noise", None).await;
    let before = send(&mut c, &watched, "before").await;
    send(&mut c, &noise, "noise before").await;
    handled(&c, &watched, 1).await;
    handled(&c, &noise, 1).await;

    let mut stream = c
        .agents
        .watch_events(pb::WatchEventsRequest {
            after_cursor: 0,
            follow: true,
            agent_id: watched.clone(),
        })
        .await
        .expect("watch")
        .into_inner();
    // Both agents keep working after the stream opened; the other one first,
    // so its events land between the watched agent's.
    send(&mut c, &noise, "noise after").await;
    handled(&c, &noise, 2).await;
    let after = send(&mut c, &watched, "after").await;

    let mut got = Vec::new();
    loop {
        let event = tokio::time::timeout(DEADLINE, stream.next())
            .await
            .expect("the watched agent's new events arrive")
            .expect("stream open")
            .expect("event");
        let last = event.kind == "run_finished" && event.message_id == after;
        got.push(event);
        if last {
            break;
        }
    }

    assert!(
        got.iter().all(|e| e.agent_id == watched),
        "another agent's event came through: {got:?}"
    );
    let cursors: Vec<u64> = got.iter().map(|e| e.cursor).collect();
    assert!(cursors.windows(2).all(|w| w[0] < w[1]), "{cursors:?}");
    let has = |kind: &str, message: &str| {
        got.iter()
            .any(|e| e.kind == kind && e.message_id == message)
    };
    assert!(got.iter().any(|e| e.kind == "agent_created"), "{got:?}");
    assert!(has("replied", &before), "old events: {got:?}");
    assert!(
        has("message_queued", &after) && has("replied", &after),
        "new events: {got:?}"
    );

    // The filter had something to leave out: the other agent's events sit
    // among the watched one's in the log.
    let first = cursors[0];
    let last = *cursors.last().expect("events");
    let skipped = events(&mut c, 0)
        .await
        .into_iter()
        .filter(|e| e.agent_id == noise && e.cursor > first && e.cursor < last)
        .count();
    assert!(skipped > 0, "no event of the other agent in between");
}
