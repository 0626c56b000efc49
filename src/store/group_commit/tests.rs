//! Tests of how the writer thread groups commits and when it flushes.

use std::sync::atomic::AtomicUsize;

use super::*;

/// A grouped commit of `writes` writes whose callers need no answer.
struct Heavy(usize);

/// Applies a group only once the test lets it (one permit per group), as
/// a large sled transaction would take its time, and counts the groups.
struct Gated {
    permits: mpsc::Receiver<()>,
    applied: Arc<AtomicUsize>,
}

impl ApplyGroup<Heavy> for Gated {
    fn apply(&mut self, _: VecDeque<Heavy>, _: &mut dyn FnMut(usize) -> Vec<DurableFuture>) {
        // A test that gave up drops the sender: let the writer go on.
        let _ = self.permits.recv();
        self.applied.fetch_add(1, Ordering::SeqCst);
    }

    fn writes(&self, job: &Heavy) -> usize {
        job.0
    }
}

#[tokio::test]
async fn a_reader_waits_for_one_group_not_for_every_queued_one() {
    let db = sled::Config::new()
        .temporary(true)
        .open()
        .expect("a temporary db");
    let (permit, permits) = mpsc::channel();
    let applied = Arc::new(AtomicUsize::new(0));
    let (group, unstarted) =
        GroupCommit::new(Arc::new(AtomicU64::new(0)), Arc::new(StoreStats::default()));
    unstarted
        .start(
            db,
            Gated {
                permits,
                applied: applied.clone(),
            },
        )
        .expect("the writer starts");
    for _ in 0..4 {
        assert!(group.commit(Heavy(MAX_GROUP_WRITES)));
    }
    // A write made outside the groups, whose reader waits for a flush
    // while the first group is still applying; only that group may end
    // before the flush the reader needs.
    group.begin_write();
    group.end_write();
    let flushed = group.durable();
    permit.send(()).expect("the writer is up");
    tokio::time::timeout(Duration::from_secs(10), flushed)
        .await
        .expect("the reader was answered after the first group")
        .expect("flushed");
    assert_eq!(applied.load(Ordering::SeqCst), 1);
    for _ in 0..3 {
        permit.send(()).expect("the writer is up");
    }
    group.close().await;
    assert_eq!(applied.load(Ordering::SeqCst), 4, "every group applied");
}

fn len(writes: &[usize]) -> usize {
    group_len(writes.iter(), |w| *w)
}

#[test]
fn a_group_stops_before_the_write_bound() {
    assert_eq!(len(&[200, 200, 200, 1]), 2);
    assert_eq!(len(&[MAX_GROUP_WRITES, 1]), 1);
    assert_eq!(len(&[MAX_GROUP_WRITES - 1, 1, 1]), 2);
}

#[test]
fn a_commit_larger_than_the_bound_goes_alone() {
    assert_eq!(len(&[10_000, 1]), 1);
    assert_eq!(len(&[1, 10_000]), 1);
}

#[test]
fn small_commits_group_up_to_the_job_bound() {
    assert_eq!(len(&vec![1; MAX_GROUP * 2]), MAX_GROUP);
    assert_eq!(len(&[3; 5]), 5);
}
