//! Chaos: the real daemon killed with `kill -9` at random moments while
//! several clients drive mixed work at it (single and batched creations,
//! messages with and without dedupe keys, `SendMessages` batches, private
//! spawns, commands, timers, notes, pauses, resumes and archives), and
//! after every restart each promise checked against a ledger of what was
//! acknowledged. CI runs 20 kills; `CHAOS_KILLS=200 cargo test --release
//! --test chaos -- --nocapture` is the long run (docs/reliability.md).

mod common;

#[path = "chaos/check.rs"]
mod check;
#[path = "chaos/ledger.rs"]
mod ledger;
#[path = "chaos/load.rs"]
mod load;
#[path = "chaos/run.rs"]
mod run;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_under_mixed_load_lose_nothing_acknowledged() {
    let root = tempfile::tempdir().expect("tempdir");
    let opts = run::Options::from_env(20);
    let report = run::run(&common::data_dir(&root), &opts).await;
    run::print(&report);
    assert!(report.kills >= opts.kills);
    assert!(
        ledger::Ledger::total(&report.acked) > 0,
        "nothing was acknowledged: the load never ran"
    );
    assert!(
        report.violations().is_empty(),
        "{} broken promises (seed {}): {:#?}",
        report.violations().len(),
        report.seed,
        report.violations()
    );
}
