//! Grouped commits: each caller answered as if it had committed alone, a
//! close that applies and flushes what was queued, and a refused batch
//! that sinks only itself.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouped_commits_answer_each_caller_as_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SledStore::open(dir.path(), &StoreConfig::default()).expect("opens"));
    store.commit(created(&agent("taken"))).expect("first");
    // Many callers at once, one of them with a taken name: it alone fails,
    // even when its batch was grouped with the others.
    let mut tasks = Vec::new();
    for i in 0..300 {
        let store = store.clone();
        let name = if i == 150 {
            "taken".to_owned()
        } else {
            format!("g{i}")
        };
        tasks.push(tokio::spawn(async move {
            let record = agent(&name);
            let applied = store.commit_grouped(created(&record)).await;
            (name, record.id, applied)
        }));
    }
    for task in tasks {
        let (name, id, applied) = task.await.expect("joins");
        if name == "taken" {
            assert!(matches!(applied, Err(StoreError::NameTaken(n)) if n == "taken"));
            assert_eq!(store.agent(id).expect("reads"), None);
        } else {
            applied.expect("applied").await.expect("durable");
            assert!(store.agent(id).expect("reads").is_some());
        }
    }
    store.durable().await.expect("flushes");
    // One event per created agent, cursors dense from 1.
    let events = store.events_after(0, 1000).expect("events");
    assert_eq!(events.len(), 300);
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event.cursor, i as u64 + 1);
    }
    store.close().await;
    assert!(matches!(
        store.commit_grouped(created(&agent("late"))).await,
        Err(StoreError::Closed)
    ));
}

#[tokio::test]
async fn grouped_commits_queued_before_a_close_are_applied_and_flushed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let records: Vec<_> = (0..600).map(|i| agent(&format!("q{i}"))).collect();
    {
        let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
        // More than one group holds, all queued before the close and none
        // awaited: the close applies them and flushes them before it ends.
        let pending: Vec<_> = records
            .iter()
            .map(|record| store.commit_grouped(created(record)))
            .collect();
        store.close().await;
        for applied in pending {
            applied.await.expect("applied").await.expect("durable");
        }
    }
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("reopens");
    for record in &records {
        assert!(store.agent(record.id).expect("reads").is_some());
    }
    assert_eq!(store.events_after(0, 1000).expect("events").len(), 600);
    store.close().await;
}

#[tokio::test]
async fn a_refused_batch_in_a_group_sinks_only_itself() {
    use super::super::grouped::apply_all;
    use super::writer::Job;
    use super::writer::Prepared;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SledStore::open(dir.path(), &StoreConfig::default()).expect("opens");
    let first = agent("dup");
    let second = agent("dup");
    let (a, c) = (agent("a"), agent("c"));
    let mut unknown = agent("never-created");
    unknown.name = None;
    // In order: fine, fine, a name the group itself took, a guard on an
    // agent that does not exist, fine.
    let batches = vec![
        created(&a),
        created(&first),
        created(&second),
        Batch::new().write(Write::PutLiveAgent(unknown.clone())),
        created(&c),
    ];
    let mut answers = Vec::new();
    let jobs = batches
        .into_iter()
        .map(|batch| {
            let (answer, rx) = tokio::sync::oneshot::channel();
            answers.push(rx);
            Job {
                batch: Prepared::new(batch).expect("encodes"),
                answer,
            }
        })
        .collect();
    apply_all(&store.writer, jobs, &mut |n| {
        store.group.durable_for_writers(n)
    });
    let mut results = Vec::new();
    for rx in answers {
        results.push(rx.await.expect("answered"));
    }
    assert!(matches!(&results[2], Err(StoreError::NameTaken(n)) if n == "dup"));
    assert!(matches!(&results[3], Err(StoreError::Precondition(_))));
    for (i, result) in results.into_iter().enumerate() {
        if [0, 1, 4].contains(&i) {
            result.expect("applied").await.expect("durable");
        }
    }
    for record in [&a, &first, &c] {
        assert!(store.agent(record.id).expect("reads").is_some());
    }
    assert_eq!(store.agent(second.id).expect("reads"), None);
    assert_eq!(store.agent(unknown.id).expect("reads"), None);
    assert_eq!(
        store.agent_id_by_name("dup").expect("reads"),
        Some(first.id)
    );
    store.durable().await.expect("flushes");
    // Three agents created, three events, cursors dense.
    let events = store.events_after(0, 10).expect("events");
    let cursors: Vec<u64> = events.iter().map(|e| e.cursor).collect();
    assert_eq!(cursors, vec![1, 2, 3]);
}
