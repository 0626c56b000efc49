//! Tests of how the writer thread groups commits and when it flushes.

use std::sync::atomic::AtomicUsize;

use super::*;

/// A grouped commit of `writes` writes whose callers need no answer.
struct Heavy(usize);

/// Applies a group only once the test lets it (one permit per group), as
/// a large sled transaction would take its time, and counts the groups.
/// It says when a group starts, and hands the test the durability answer
/// of each group's caller.
struct Gated {
    permits: mpsc::Receiver<()>,
    started: mpsc::Sender<()>,
    answers: mpsc::Sender<DurableFuture>,
    applied: Arc<AtomicUsize>,
}

impl ApplyGroup<Heavy> for Gated {
    fn apply(&mut self, _: VecDeque<Heavy>, ask: &mut dyn FnMut(usize) -> Vec<DurableFuture>) {
        let _ = self.started.send(());
        // A test that gave up drops the sender: let the writer go on.
        let _ = self.permits.recv();
        self.applied.fetch_add(1, Ordering::SeqCst);
        for answer in ask(1) {
            let _ = self.answers.send(answer);
        }
    }

    fn writes(&self, job: &Heavy) -> usize {
        job.0
    }
}

/// The test's ends of a writer thread running [`Gated`].
struct Writer {
    group: GroupCommit<Heavy>,
    permit: mpsc::Sender<()>,
    started: mpsc::Receiver<()>,
    answers: mpsc::Receiver<DurableFuture>,
    applied: Arc<AtomicUsize>,
}

fn gated_writer() -> Writer {
    let db = sled::Config::new()
        .temporary(true)
        .open()
        .expect("a temporary db");
    let (permit, permits) = mpsc::channel();
    let (started_tx, started) = mpsc::channel();
    let (answers_tx, answers) = mpsc::channel();
    let applied = Arc::new(AtomicUsize::new(0));
    let (group, unstarted) =
        GroupCommit::new(Arc::new(AtomicU64::new(0)), Arc::new(StoreStats::default()));
    unstarted
        .start(
            db,
            Gated {
                permits,
                started: started_tx,
                answers: answers_tx,
                applied: applied.clone(),
            },
        )
        .expect("the writer starts");
    Writer {
        group,
        permit,
        started,
        answers,
        applied,
    }
}

const PATIENCE: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_reader_waits_for_one_group_not_for_every_queued_one() {
    let w = gated_writer();
    for _ in 0..4 {
        assert!(w.group.commit(Heavy(MAX_GROUP_WRITES)));
    }
    // A write made outside the groups, whose reader waits for a flush
    // while the first group is still applying; only that group may end
    // before the flush the reader needs.
    w.group.begin_write();
    w.group.end_write();
    let flushed = w.group.durable();
    w.permit.send(()).expect("the writer is up");
    tokio::time::timeout(PATIENCE, flushed)
        .await
        .expect("the reader was answered after the first group")
        .expect("flushed");
    assert_eq!(w.applied.load(Ordering::SeqCst), 1);
    for _ in 0..3 {
        w.permit.send(()).expect("the writer is up");
    }
    w.group.close().await;
    assert_eq!(w.applied.load(Ordering::SeqCst), 4, "every group applied");
}

#[tokio::test]
async fn commits_arriving_while_a_group_applies_do_not_put_off_its_flush() {
    let w = gated_writer();
    assert!(w.group.commit(Heavy(1)));
    w.started
        .recv_timeout(PATIENCE)
        .expect("the first group started");
    // Small enough to join the first group, had it not started.
    assert!(w.group.commit(Heavy(1)));
    w.permit.send(()).expect("the writer is up");
    let first = w
        .answers
        .recv_timeout(PATIENCE)
        .expect("the first group applied");
    tokio::time::timeout(PATIENCE, first)
        .await
        .expect("the first group's caller was answered before the second applied")
        .expect("flushed");
    assert_eq!(w.applied.load(Ordering::SeqCst), 1);
    w.permit.send(()).expect("the writer is up");
    w.group.close().await;
    assert_eq!(w.applied.load(Ordering::SeqCst), 2, "every group applied");
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

/// A write whose mark a flush already covered needs no flush of its own,
/// however many writes came after it: what lets the audit trail's entry
/// ride on the flush its call awaited.
#[tokio::test]
async fn a_mark_a_flush_covered_needs_no_flush_of_its_own() {
    let w = gated_writer();
    w.group.begin_write();
    let mark = w.group.end_write_marked();
    tokio::time::timeout(PATIENCE, w.group.durable())
        .await
        .expect("flushed in time")
        .expect("flushed");
    // Writes after it leave it covered.
    w.group.begin_write();
    let later = w.group.end_write_marked();
    assert!(later > mark);
    let covered = w.group.durable_through(mark);
    assert!(
        futures::FutureExt::now_or_never(covered).is_some(),
        "a covered mark answers at once"
    );
    tokio::time::timeout(PATIENCE, w.group.durable_through(later))
        .await
        .expect("the later write is flushed in time")
        .expect("flushed");
    w.group.close().await;
}
