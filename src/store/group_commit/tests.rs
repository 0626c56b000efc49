//! Tests of how the writer thread groups commits and when it flushes.

use std::sync::atomic::AtomicUsize;

use super::*;

/// A grouped commit of `writes` writes whose callers need no answer.
struct Heavy(usize);

/// Applies each group slowly, as a large sled transaction would, and
/// counts the groups.
struct Slow(Arc<AtomicUsize>);

impl ApplyGroup<Heavy> for Slow {
    fn apply(&mut self, _: VecDeque<Heavy>, _: &mut dyn FnMut(usize) -> Vec<DurableFuture>) {
        std::thread::sleep(Duration::from_millis(40));
        self.0.fetch_add(1, Ordering::SeqCst);
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
    let applied = Arc::new(AtomicUsize::new(0));
    let (group, unstarted) =
        GroupCommit::new(Arc::new(AtomicU64::new(0)), Arc::new(StoreStats::default()));
    unstarted
        .start(db, Slow(applied.clone()))
        .expect("the writer starts");
    for _ in 0..4 {
        assert!(group.commit(Heavy(MAX_GROUP_WRITES)));
    }
    // A write made outside the groups, whose reader waits for a flush.
    group.begin_write();
    group.end_write();
    group.durable().await.expect("flushed");
    let seen = applied.load(Ordering::SeqCst);
    assert!(seen < 4, "the reader waited for all {seen} groups");
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
