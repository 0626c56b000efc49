//! A libtest-like `main` for test binaries that need their own (`harness =
//! false`): the same binary is the tests and, started by the daemon with
//! a first argument of its own, a server the tests talk to. It takes
//! libtest's name filters and `--skip`, runs each chosen test on a fresh
//! two-thread runtime, and prints the summary line CI tallies.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::process::ExitCode;
use std::time::Instant;

pub type Test = fn() -> Pin<Box<dyn Future<Output = ()>>>;

/// Runs the tests `args` (the binary's arguments) choose from `tests`.
pub fn run(tests: &[(&str, Test)], args: &[String]) -> ExitCode {
    // Words are name filters, `--skip NAME` leaves tests out; other flags
    // (and their values) are taken and ignored.
    let mut filters: Vec<&str> = Vec::new();
    let mut skips: Vec<&str> = Vec::new();
    let mut words = args.iter().map(String::as_str);
    while let Some(word) = words.next() {
        match word {
            "--skip" => skips.extend(words.next()),
            "--test-threads" | "--color" | "--format" | "--logfile" | "-Z" => {
                words.next();
            }
            flag if flag.starts_with('-') => {}
            filter => filters.push(filter),
        }
    }
    if args.iter().any(|a| a == "--list") {
        for (name, _) in tests {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    let chosen: Vec<&(&str, Test)> = tests
        .iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f)))
        .filter(|(name, _)| !skips.iter().any(|s| name.contains(s)))
        .collect();
    println!("\nrunning {} tests", chosen.len());
    let started = Instant::now();
    let mut failed = Vec::new();
    for (name, test) in &chosen {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| runtime.block_on(test())));
        drop(runtime);
        if outcome.is_ok() {
            println!("test {name} ... ok");
        } else {
            println!("test {name} ... FAILED");
            failed.push(*name);
        }
    }
    let passed = chosen.len() - failed.len();
    let verdict = if failed.is_empty() { "ok" } else { "FAILED" };
    if !failed.is_empty() {
        println!("\nfailures:\n    {}", failed.join("\n    "));
    }
    println!(
        "\ntest result: {verdict}. {passed} passed; {} failed; 0 ignored; 0 measured; {} filtered out; finished in {:.2}s\n",
        failed.len(),
        tests.len() - chosen.len(),
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(101)
    }
}
