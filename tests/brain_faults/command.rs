//! Command brains that misbehave: each is a shell script written to the
//! test's own directory, so its path marks every process of its steps (the
//! unit's command line names it too) and the test can tell that none is
//! left.

use std::path::Path;
use std::time::{Duration, Instant};

use holarchy::api::pb;

use crate::common::{self, create_on, data_dir, eventually, processes_with, send, Daemon};
use crate::{finished, others_are_served, settled};

/// Ignores every signal it can and waits for ever, as does the child it
/// starts (named after the script, so the test can see it).
const HANG: &str = r#"#!/bin/sh
trap '' TERM INT HUP
sh -c 'trap "" TERM INT HUP; while :; do sleep 1; done' "$0-child" &
while :; do sleep 1; done
"#;

/// Prints 64 MiB and exits 0; told `FLOOD-FOREVER`, prints until it is
/// killed.
const FLOOD: &str = r#"#!/bin/sh
input=$(cat)
case "$input" in
  *FLOOD-FOREVER*) exec yes "flooding from $0" ;;
  *) yes 0123456789abcdef | head -c 67108864; exit 0 ;;
esac
"#;

/// Fails each message its own way, then answers. Each turn's input may
/// hold the earlier messages, so the latest marker is matched first.
const BROKEN: &str = r#"#!/bin/sh
input=$(cat)
case "$input" in
  *LAST*) printf '{"reply":"fine after all"}' ;;
  *KILLED*) printf '{"reply":"half an ans'; kill -9 $$ ;;
  *GARBAGE*) printf 'not json at all' ;;
  *SHAPE*) printf '[1, 2, 3]' ;;
  *CUT*) printf '{"reply":"half an ans' ;;
esac
"#;

/// Writes `text` to `dir/name`, executable; its path.
fn script(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("script written");
    let made = std::process::Command::new("chmod")
        .arg("+x")
        .arg(&path)
        .status()
        .expect("chmod runs");
    assert!(made.success());
    path.to_str().expect("UTF-8").to_owned()
}

/// A command brain running `program`, each step within `timeout_ms`.
fn brain(program: &str, timeout_ms: u64) -> pb::BrainConfig {
    pb::BrainConfig {
        kind: Some(pb::brain_config::Kind::Command(pb::CommandBrain {
            program: program.into(),
            args: Vec::new(),
            env: Default::default(),
            timeout_ms,
        })),
    }
}

/// The daemon's peak resident memory (VmHWM), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM")
        * 1024
}

async fn none_left(marker: &str) {
    eventually("nothing of the brain's steps left", || async {
        processes_with(marker).is_empty().then_some(())
    })
    .await;
}

async fn running(marker: &str) {
    eventually("the brain's step running", || async {
        (!processes_with(marker).is_empty()).then_some(())
    })
    .await;
}

/// A step that never answers and shrugs off SIGTERM is killed at its
/// timeout with everything it started; the turn fails saying so and other
/// agents are served meanwhile. A graceful stop of the daemon while such
/// a step runs is not held up by it either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_brain_that_hangs_and_ignores_sigterm_is_killed_at_its_step_timeout() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let program = script(root.path(), "hang.sh", HANG);
    let child = format!("{program}-child");
    let id = create_on(&mut c, "hung", brain(&program, 3000)).await;

    let started = Instant::now();
    send(&mut c, &id, "think").await;
    running(&child).await;
    others_are_served(&mut c, "bystander").await;
    let all = settled(&c, &id, 1).await;
    let took = started.elapsed();
    assert_eq!(all[0].status, pb::MessageStatus::Failed as i32);
    let (outcome, detail) = finished(&mut c, &all[0]).await;
    assert_eq!(outcome, "failed");
    assert!(detail.contains("did not answer within 3s"), "{detail}");
    assert!(
        took < Duration::from_secs(13),
        "the step timed out after {took:?}"
    );
    none_left(&program).await;

    // The agent carries on; a stop mid-step ends the step too, and the
    // message it was handling waits for the next start.
    send(&mut c, &id, "think again").await;
    running(&child).await;
    let status = daemon.terminate(Duration::from_secs(20)).await;
    assert!(status.success(), "{status}");
    none_left(&program).await;
    let mut daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let kept = common::messages(&mut c, &id).await;
    assert!(
        [pb::MessageStatus::Queued, pb::MessageStatus::Handling]
            .map(|s| s as i32)
            .contains(&kept[1].status),
        "{kept:?}"
    );
    // Its step runs again; a `kill -9` of the daemon takes it down too.
    running(&child).await;
    daemon.kill9();
    none_left(&program).await;
}

/// Output past the 1 MiB a decision may take fails the step, and output
/// that never ends is cut at the step's timeout; either way the daemon
/// keeps only the ends of it, so its memory does not grow with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_brain_that_floods_stdout_fails_its_turn_and_the_daemon_stays_small() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let program = script(root.path(), "flood.sh", FLOOD);
    // Room to print 64 MiB on a loaded machine; the endless one is cut
    // sooner.
    let id = create_on(&mut c, "flooder", brain(&program, 20_000)).await;
    let endless = create_on(&mut c, "endless", brain(&program, 2000)).await;
    let before = peak_rss(daemon.pid());

    send(&mut c, &id, "a lot").await;
    let all = settled(&c, &id, 1).await;
    assert_eq!(all[0].status, pb::MessageStatus::Failed as i32);
    let (_, detail) = finished(&mut c, &all[0]).await;
    assert!(
        detail.contains("printed more than 1048576 bytes"),
        "{}",
        &detail[..detail.len().min(500)]
    );
    assert!(detail.len() < 16 * 1024, "{} bytes of detail", detail.len());

    send(&mut c, &endless, "FLOOD-FOREVER").await;
    let all = settled(&c, &endless, 1).await;
    assert_eq!(all[0].status, pb::MessageStatus::Failed as i32);
    let (_, detail) = finished(&mut c, &all[0]).await;
    assert!(
        detail.contains("did not answer within 2s") && detail.contains("flooding from"),
        "{}",
        &detail[..detail.len().min(500)]
    );
    assert!(detail.len() < 16 * 1024, "{} bytes of detail", detail.len());
    none_left(&program).await;

    let after = peak_rss(daemon.pid());
    eprintln!(
        "flooding brain: daemon peak RSS {} MiB before, {} MiB after",
        before >> 20,
        after >> 20
    );
    assert!(
        after.saturating_sub(before) < 32 * 1024 * 1024,
        "the daemon's peak grew by {} MiB reading a flood",
        after.saturating_sub(before) >> 20
    );
    others_are_served(&mut c, "bystander").await;
}

/// A decision cut short (the program exits 0, or is killed mid-write), one
/// that is not JSON, and JSON of the wrong shape each fail only their turn,
/// with the reason and what was printed; the next turn is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_brain_that_dies_mid_write_or_writes_garbage_fails_only_that_turn() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let program = script(root.path(), "broken.sh", BROKEN);
    let id = create_on(&mut c, "broken", brain(&program, 10_000)).await;

    let cases = [
        (
            "CUT",
            &["printed no decision (EOF while parsing", "half an ans"][..],
        ),
        ("SHAPE", &["printed no decision (invalid type", "[1, 2, 3]"]),
        (
            "GARBAGE",
            &["printed no decision (expected", "not json at all"],
        ),
        ("KILLED", &["exited with signal: 9", "half an ans"]),
    ];
    for (n, (text, words)) in cases.iter().enumerate() {
        send(&mut c, &id, text).await;
        let all = settled(&c, &id, n + 1).await;
        assert_eq!(all[n].status, pb::MessageStatus::Failed as i32, "{text}");
        let (outcome, detail) = finished(&mut c, &all[n]).await;
        assert_eq!(outcome, "failed", "{text}");
        for word in *words {
            assert!(detail.contains(word), "{text}: `{word}` missing: {detail}");
        }
    }
    send(&mut c, &id, "LAST").await;
    let all = settled(&c, &id, cases.len() + 1).await;
    let last = &all[cases.len()];
    assert_eq!(
        (last.status, last.reply.as_str()),
        (pb::MessageStatus::Handled as i32, "fine after all")
    );
    none_left(&program).await;
}
