//! The disk under the data directory fills up (a small tmpfs the test
//! mounts; it needs root and says it skipped otherwise): below
//! `--min-free-disk` writes are refused with UNAVAILABLE and `/readyz`
//! says not ready, nothing acknowledged is lost, no agent is given up on
//! for the disk's fault, and once space returns the daemon serves again by
//! itself, without being restarted.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use holarchy::api::pb;

use crate::common::{self, create, handled, messages, Daemon};

/// Room for the store and a few hundred messages.
const DISK: &str = "64m";
/// Bodies large enough to fill the disk in a few hundred sends.
const BODY: usize = 32 * 1024;
/// A generous bound for the test; the figure itself is printed (and
/// recorded in docs/reliability.md).
const SERVING_AGAIN_WITHIN: Duration = Duration::from_secs(30);
/// The daemon's `--min-free-disk`, in MiB.
const MIN_FREE_MIB: &str = "8";
/// Room left when the sends begin: 2 MiB over the mark, so some sends
/// are taken and the next ones meet the mark (each write reads the disk
/// before it is let in, so none reaches the reserve under it).
const HEADROOM: u64 = 10 << 20;
/// Sends tried at most while the disk is full.
const MAX_SENDS: usize = 4_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_loses_nothing_and_the_daemon_recovers_by_itself() {
    let root = tempfile::tempdir().expect("tempdir");
    // The data directory is the mount itself: the daemon's log lies
    // beside it, on the real disk.
    let dir = root.path().join("data");
    let Some(_mount) = Tmpfs::mount(&dir) else {
        eprintln!("skipped: mounting a tmpfs needs root (run as root to try a full disk)");
        return;
    };
    let http = common::free_addr();
    let mut daemon = Daemon::start_with(
        &dir,
        &["--min-free-disk", MIN_FREE_MIB, "--http-listen", &http],
    )
    .await;
    assert_eq!(common::readyz(&http).await, 200);
    let mut c = daemon.clients().await;
    let mut agents = Vec::new();
    for i in 0..4 {
        agents.push(create(&mut c, &format!("filler-{i}"), None).await);
    }

    let ballast = dir.join("ballast");
    fill(&ballast);
    let mut acked: Vec<(String, String)> = Vec::new();
    let mut refused = Vec::new();
    for i in 0..MAX_SENDS {
        let agent_id = agents[i % agents.len()].clone();
        let sent = c
            .agents
            .send_message(pb::SendMessageRequest {
                agent_id: agent_id.clone(),
                text: format!("m{i} {}", "x".repeat(BODY)),
                dedupe_key: format!("k{i}"),
            })
            .await;
        match sent {
            Ok(reply) => acked.push((agent_id, reply.into_inner().message_id)),
            Err(status) => {
                assert!(
                    matches!(
                        status.code(),
                        tonic::Code::Unavailable | tonic::Code::ResourceExhausted
                    ),
                    "a full disk answers UNAVAILABLE or RESOURCE_EXHAUSTED: {status:?}\n{}",
                    daemon.log()
                );
                refused.push(status);
                if refused.len() >= 3 {
                    break;
                }
            }
        }
    }
    assert!(
        !refused.is_empty(),
        "{MAX_SENDS} sends of {BODY} bytes all fitted on a full {DISK} disk"
    );
    assert!(
        !acked.is_empty(),
        "no send was taken with room over the mark:\n{}",
        daemon.log()
    );
    // The daemon holds: alive, reads served, not ready.
    assert!(daemon.running(), "{}", daemon.log());
    assert_eq!(common::readyz(&http).await, 503);
    assert_eq!(
        common::http_status(&http, "POST", "/ingress/generic/nobody").await,
        503,
        "a webhook is held back with the gRPC writes"
    );
    common::get_agent(&mut c, &agents[0]).await;

    std::fs::remove_file(&ballast).expect("space returns");
    let freed = Instant::now();
    // Ready again: a write is taken.
    loop {
        let sent = c
            .agents
            .send_message(pb::SendMessageRequest {
                agent_id: agents[0].clone(),
                text: "space returned".into(),
                dedupe_key: "space-returned".into(),
            })
            .await;
        match sent {
            Ok(_) => break,
            Err(status) => assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}"),
        }
        assert!(
            freed.elapsed() < SERVING_AGAIN_WITHIN,
            "writes still refused {SERVING_AGAIN_WITHIN:?} after space returned:\n{}",
            daemon.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ready_again = freed.elapsed();
    let status = common::status(&mut c).await;
    eprintln!(
        "disk full: {} sends acknowledged, {} refused; writes taken again {} ms after space returned",
        acked.len(),
        refused.len(),
        ready_again.as_millis()
    );
    assert_eq!(status.agents_given_up, 0, "{status:?}");
    assert!(
        daemon.log().contains("writes are refused and turns held"),
        "the log says why it stopped taking work:\n{}",
        daemon.log()
    );
    assert!(
        !daemon.log().contains("the disk refused a write"),
        "the store met the full disk:\n{}",
        daemon.log()
    );
    common::eventually("ready again", || async {
        (common::readyz(&http).await == 200).then_some(())
    })
    .await;

    for agent_id in &agents {
        let summary = common::get_agent(&mut c, agent_id).await;
        assert_eq!(
            summary.state,
            pb::LifecycleState::Active as i32,
            "{summary:?}"
        );
    }
    for (agent_id, message_id) in &acked {
        let found = messages(&mut c, agent_id).await;
        assert!(
            found.iter().any(|m| &m.message_id == message_id),
            "acknowledged message {message_id} of {agent_id} is lost"
        );
    }
    // Every agent works again: its queue drains and a new message is
    // handled.
    for agent_id in &agents {
        let before = messages(&mut c, agent_id).await.len();
        common::send(&mut c, agent_id, "after the disk freed").await;
        handled(&c, agent_id, before + 1).await;
    }
}

/// A tmpfs mounted for the test, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).expect("mount point");
        let mounted = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={DISK},mode=700"),
                "tmpfs",
            ])
            .arg(at)
            .output()
            .ok()?;
        mounted.status.success().then(|| Tmpfs(at.to_owned()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazily: the daemon may still hold files open until it is reaped.
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Writes `path` until the file system refuses more, then gives back
/// [`HEADROOM`]: the sends fill that, so some are acknowledged just
/// before the disk is full.
fn fill(path: &Path) {
    let mut file = std::fs::File::create(path).expect("ballast");
    let chunk = vec![0u8; 1 << 20];
    while file
        .write_all(&chunk)
        .and_then(|()| file.sync_data())
        .is_ok()
    {}
    let len = file.metadata().expect("ballast size").len();
    file.set_len(len.saturating_sub(HEADROOM))
        .expect("headroom");
}
