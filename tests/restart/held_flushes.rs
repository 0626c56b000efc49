//! Nothing is answered before it is on disk. The writer flushes at once,
//! so a test could not tell "answered after the flush" from "just before
//! it"; the daemon's flush latch (`HOLARCHY_TEST_HOLD_FLUSHES`) holds every
//! flush while its file exists and counts the writes it holds. A send
//! whose write is applied and held must stay unanswered, and a `kill -9`
//! in that state loses nothing that was answered. A flush held past
//! `--max-flush-stall-ms` plays a disk that stalls: new writes are shed
//! with UNAVAILABLE instead of queueing behind it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use holarchy::api::pb;

use crate::common::{self, create, messages, send, Daemon};

/// How long a held send is watched after its write was seen applied: an
/// answer that did not wait for the flush comes within a millisecond or
/// two of the apply.
const WATCHED: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_is_not_answered_while_its_flush_is_held_and_a_kill_then_loses_nothing_answered() {
    let held_flushes = Latched::new();
    let (dir, latch) = (held_flushes.dir.clone(), held_flushes.latch.clone());
    let mut daemon = held_flushes.start(&[]).await;
    let mut c = daemon.clients().await;
    let agent = create(&mut c, "held", None).await;
    // Paused: no turn writes beside the send, so the one write held is
    // the send's.
    c.agents
        .pause_agent(pb::PauseAgentRequest {
            agent_id: agent.clone(),
        })
        .await
        .expect("paused");
    let answered = send(&mut c, &agent, "answered before the hold").await;

    std::fs::write(&latch, b"").expect("flushes held");
    let mut sender = c.clone();
    let target = agent.clone();
    let held = tokio::spawn(async move {
        sender
            .agents
            .send_message(pb::SendMessageRequest {
                agent_id: target,
                text: "held".into(),
                dedupe_key: String::new(),
            })
            .await
    });
    let seen = Instant::now();
    while held_writes(&latch) == 0 {
        assert!(
            !held.is_finished(),
            "SendMessage answered before its write was flushed: {:?}",
            held.await
        );
        assert!(
            seen.elapsed() < Duration::from_secs(30),
            "the send's write never applied"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    tokio::time::sleep(WATCHED).await;
    assert!(
        !held.is_finished(),
        "SendMessage answered while its flush was held: {:?}",
        held.await
    );

    // A crash now loses nothing that was answered; the held send was not.
    daemon.kill9();
    assert!(held.await.expect("sender task").is_err());
    std::fs::remove_file(&latch).expect("latch removed");
    drop(c);
    let daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let kept = messages(&mut c, &agent).await;
    assert!(
        kept.iter().any(|m| m.message_id == answered),
        "an answered message was lost: {kept:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_send_is_answered_once_the_flush_is_let_go() {
    let held_flushes = Latched::new();
    let latch = held_flushes.latch.clone();
    let daemon = held_flushes.start(&[]).await;
    let mut c = daemon.clients().await;
    let agent = create(&mut c, "released", None).await;
    std::fs::write(&latch, b"").expect("flushes held");
    let mut sender = c.clone();
    let target = agent.clone();
    let held = tokio::spawn(async move { send(&mut sender, &target, "let go").await });
    while held_writes(&latch) == 0 {
        assert!(!held.is_finished(), "answered before its flush");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    std::fs::remove_file(&latch).expect("flushes let go");
    let id = held.await.expect("answered once flushed");
    let found = common::handled(&c, &agent, 1).await;
    assert!(found.iter().any(|m| m.message_id == id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_flush_sheds_new_writes_and_work_resumes_when_it_ends() {
    let held_flushes = Latched::new();
    let latch = held_flushes.latch.clone();
    let http = common::free_addr();
    let daemon = held_flushes
        .start(&["--max-flush-stall-ms", "300", "--http-listen", &http])
        .await;
    let mut c = daemon.clients().await;
    let agent = create(&mut c, "stalled", None).await;
    std::fs::write(&latch, b"").expect("flushes held");
    let mut sender = c.clone();
    let target = agent.clone();
    let waiting = tokio::spawn(async move { send(&mut sender, &target, "behind the stall").await });
    while held_writes(&latch) == 0 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // Past the mark, a new write is told at once, not queued.
    let refused = common::eventually("a write shed while the flush stalls", || {
        let mut c = c.clone();
        let agent = agent.clone();
        async move {
            let sent = tokio::time::timeout(
                Duration::from_secs(2),
                c.agents.send_message(pb::SendMessageRequest {
                    agent_id: agent,
                    text: "shed".into(),
                    dedupe_key: String::new(),
                }),
            )
            .await;
            match sent {
                Ok(Err(status)) => Some(status),
                // Queued behind the stall: asked again once the guard has
                // seen it.
                Err(_) => None,
                Ok(Ok(answer)) => panic!("answered while the flush stalls: {answer:?}"),
            }
        }
    })
    .await;
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(refused.message().contains("flush"), "{refused:?}");
    assert_eq!(common::readyz(&http).await, 503);
    assert!(!waiting.is_finished());

    std::fs::remove_file(&latch).expect("the disk answers again");
    waiting.await.expect("the waiting send is answered");
    common::eventually("writes taken again", || {
        let mut c = c.clone();
        let agent = agent.clone();
        async move {
            c.agents
                .send_message(pb::SendMessageRequest {
                    agent_id: agent,
                    text: "after the stall".into(),
                    dedupe_key: String::new(),
                })
                .await
                .ok()
        }
    })
    .await;
    assert_eq!(common::readyz(&http).await, 200);
}

/// A data directory and the latch file its daemon's flushes wait on.
pub(super) struct Latched {
    _root: tempfile::TempDir,
    pub(super) dir: PathBuf,
    pub(super) latch: PathBuf,
}

impl Latched {
    pub(super) fn new() -> Self {
        let root = tempfile::tempdir().expect("tempdir");
        Self {
            dir: common::data_dir(&root),
            latch: root.path().join("hold-flushes"),
            _root: root,
        }
    }

    pub(super) async fn start(&self, extra: &[&str]) -> Daemon {
        let latch = self.latch.to_str().expect("utf-8 path");
        Daemon::start_with_env(&self.dir, extra, &[("HOLARCHY_TEST_HOLD_FLUSHES", latch)]).await
    }
}

/// The writes the latch holds, as the daemon last wrote them.
pub(super) fn held_writes(latch: &Path) -> u64 {
    let mut held = latch.as_os_str().to_owned();
    held.push(".held");
    std::fs::read_to_string(held)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(0)
}
