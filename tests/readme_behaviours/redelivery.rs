//! At-least-once across a real `kill -9` mid-turn: the message whose turn
//! was cut short runs again after the restart, and one handled before the
//! kill does not.

use std::path::Path;

use holarchy::api::pb;
use holarchy::client::Clients;

use crate::common::{
    create_on, data_dir, eventually, handled, messages, processes_with, send, Daemon,
};

/// A brain that leaves a marker per turn it starts (`quick.*` or
/// `slow.*`) and, for `slow`, holds the turn until a `release` file
/// appears; both in its private directory, its working directory.
const BRAIN: &str = r#"#!/bin/sh
text=$(jq -r .message.text)
if [ "$text" = slow ]; then
  mktemp ./slow.XXXXXX >/dev/null
  while [ ! -e release ]; do sleep 0.05; done
else
  mktemp ./quick.XXXXXX >/dev/null
fi
echo "{\"reply\":\"handled $text\"}"
"#;

/// Turns started on `kind` messages, as the brain's markers count them.
fn markers(dir: &Path, kind: &str) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(kind))
                .count()
        })
        .unwrap_or(0)
}

async fn message(c: &mut Clients, agent_id: &str, message_id: &str) -> pb::Message {
    messages(c, agent_id)
        .await
        .into_iter()
        .find(|m| m.message_id == message_id)
        .expect("the message is kept")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_cut_short_by_kill_9_runs_again_and_a_handled_one_does_not() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let script = root.path().join("blocking.sh");
    let brain = crate::shell_brain(&script, BRAIN);
    let id = create_on(&mut c, "worker", brain).await;
    let private = crate::private_dir(&dir, &id);

    // One message fully handled before the kill, so "not again" is tested.
    let quick = send(&mut c, &id, "quick").await;
    handled(&c, &id, 1).await;
    assert_eq!(markers(&private, "quick"), 1);

    let slow = send(&mut c, &id, "slow").await;
    eventually("the slow turn in flight", || {
        let found = markers(&private, "slow") == 1;
        async move { found.then_some(()) }
    })
    .await;
    let in_flight = message(&mut c, &id, &slow).await;
    assert_eq!(in_flight.status, pb::MessageStatus::Handling as i32);
    daemon.kill9();
    drop(c);

    let daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    // The cut turn starts again on its own; let it finish.
    eventually("the slow turn started again", || {
        let found = markers(&private, "slow") >= 2;
        async move { found.then_some(()) }
    })
    .await;
    // The cut turn's brain died with the daemon: only the new one runs.
    let brain_shell = format!("sh {}", script.display());
    eventually("one brain left running", || {
        let running = processes_with(&brain_shell);
        async move { (running.len() == 1).then_some(()) }
    })
    .await;
    std::fs::write(private.join("release"), "").expect("release");
    let all = handled(&c, &id, 2).await;

    let redone = message(&mut c, &id, &slow).await;
    assert_eq!(redone.reply, "handled slow");
    assert!(redone.attempts >= 2, "attempts {}", redone.attempts);
    let once = all
        .iter()
        .find(|m| m.message_id == quick)
        .expect("quick kept");
    assert_eq!((once.attempts, once.reply.as_str()), (1, "handled quick"));
    assert_eq!(markers(&private, "quick"), 1, "the handled turn ran again");
    let status = crate::common::status(&mut c).await;
    assert!(status.interrupted_runs >= 1, "{status:?}");
    eventually("no brain left behind", || {
        let running = processes_with(&script.display().to_string());
        async move { running.is_empty().then_some(()) }
    })
    .await;
}
