//! One chaos run: the real daemon started, loaded by several clients, and
//! killed with `kill -9` at a random moment, again and again; after each
//! restart the load stops while every promise is checked against the
//! ledger, then it resumes. The run ends with a graceful stop and a last
//! check after the daemon comes back.

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::check::{self, Checks};
use crate::check_ops;
use crate::common::Daemon;
use crate::ledger::Ledger;
use crate::load::{Load, Rng};
use crate::{fixtures, worktrees};

#[derive(Debug, Clone)]
pub struct Options {
    pub kills: usize,
    pub clients: usize,
    /// Load before a kill: uniform between these, in milliseconds.
    pub load_ms: (u64, u64),
    pub seed: u64,
}

impl Options {
    /// `kills` by default, or `CHAOS_KILLS`; the seed from `CHAOS_SEED`
    /// (printed, so a failing run can be replayed) or the clock.
    pub fn from_env(kills: usize) -> Self {
        let number = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
        let clock = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        Self {
            kills: number("CHAOS_KILLS").map_or(kills, |k| k as usize),
            clients: number("CHAOS_CLIENTS").map_or(4, |c| c.max(1) as usize),
            load_ms: (200, 1500),
            seed: number("CHAOS_SEED").unwrap_or(clock) | 1,
        }
    }
}

#[derive(Debug)]
pub struct Report {
    pub kills: usize,
    pub seed: u64,
    pub elapsed: Duration,
    pub acked: std::collections::BTreeMap<&'static str, u64>,
    pub lost: std::collections::BTreeMap<&'static str, u64>,
    pub agents: usize,
    pub checks: Checks,
}

impl Report {
    /// Every broken promise: the clients' own and the checks'.
    pub fn violations(&self) -> &[String] {
        &self.checks.violations
    }
}

/// The daemon as every life of the run starts it: one webhook listener
/// and MCP configuration throughout, and the desk's secret.
struct Serve {
    args: Vec<String>,
}

impl Serve {
    fn new(data_dir: &Path) -> Self {
        let mcp = fixtures::mcp_config(data_dir);
        let args = [
            "--max-turns-per-minute",
            "100000",
            "--http-listen",
            &crate::common::free_addr(),
            "--mcp-config",
            mcp.to_str().expect("a UTF-8 path"),
        ];
        Self {
            args: args.iter().map(|a| (*a).to_owned()).collect(),
        }
    }

    fn http(&self) -> &str {
        &self.args[3]
    }

    async fn start(&self, data_dir: &Path) -> Daemon {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        Daemon::start_with_env(data_dir, &args, &[(fixtures::SECRET_ENV, fixtures::SECRET)]).await
    }
}

pub async fn run(data_dir: &Path, opts: &Options) -> Report {
    eprintln!(
        "chaos: seed {} (CHAOS_SEED replays it), {} kills",
        opts.seed, opts.kills
    );
    let started = Instant::now();
    let mut rng = Rng(opts.seed);
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let seq = Arc::new(AtomicU64::new(0));
    let mut checks = Checks::default();
    let serve = Serve::new(data_dir);
    let mut daemon = serve.start(data_dir).await;
    let fixtures = {
        let mut c = daemon.clients().await;
        let fixtures = fixtures::set_up(&mut c, data_dir, serve.http()).await;
        let mut ledger = ledger.lock().unwrap_or_else(PoisonError::into_inner);
        ledger.fixture(&fixtures.desk, fixtures::DESK);
        ledger.fixture(&fixtures.guard, fixtures::GUARD);
        ledger.fixture(&fixtures.tools, fixtures::TOOLS);
        ledger.fixture(&fixtures.lead, "lead");
        ledger.fixture(&fixtures.waker, "chaos-waker");
        Arc::new(fixtures)
    };
    for kill in 1..=opts.kills {
        let clients = daemon.clients().await;
        let load = Load::start(&clients, &ledger, opts.clients, &mut rng, &seq, &fixtures);
        let (low, high) = opts.load_ms;
        let span = high.saturating_sub(low).max(1);
        tokio::time::sleep(Duration::from_millis(low + rng.next() % span)).await;
        load.halt();
        daemon.kill9();
        load.join().await;
        daemon = serve.start(data_dir).await;
        let mut c = daemon.clients().await;
        check::after_restart(&mut c, &ledger, kill, &mut checks, daemon.pid()).await;
        check_ops::after_restart(&mut c, &ledger, &fixtures, kill, &mut checks).await;
        worktrees::none_stray(&mut c, &fixtures, kill, &mut checks).await;
        if kill % 10 == 0 {
            eprintln!(
                "chaos: {kill} kills, {} s, {} violations so far",
                started.elapsed().as_secs(),
                checks.violations.len()
            );
        }
    }
    // A graceful stop loses nothing either.
    daemon.terminate(Duration::from_secs(30)).await;
    let mut daemon = serve.start(data_dir).await;
    let mut c = daemon.clients().await;
    // The last checks search for every note, not only the newest.
    checks.notes_found = 0;
    checks.full = true;
    check::after_restart(&mut c, &ledger, opts.kills + 1, &mut checks, daemon.pid()).await;
    check_ops::after_restart(&mut c, &ledger, &fixtures, opts.kills + 1, &mut checks).await;
    worktrees::none_stray(&mut c, &fixtures, opts.kills + 1, &mut checks).await;
    check::timers_fired(&mut c, &ledger, opts.kills + 1, &mut checks).await;
    drop(c);
    daemon.terminate(Duration::from_secs(30)).await;
    check_ops::cleanups_finished(data_dir, opts.kills + 1, &mut checks).await;
    let ledger = std::mem::take(&mut *ledger.lock().unwrap_or_else(PoisonError::into_inner));
    checks.violations.extend(ledger.violations);
    Report {
        kills: opts.kills,
        seed: opts.seed,
        elapsed: started.elapsed(),
        acked: ledger.acked,
        lost: ledger.lost,
        agents: ledger.agents.len(),
        checks,
    }
}

/// The report as people read it.
pub fn print(report: &Report) {
    println!(
        "chaos: {} kills in {:.1} s, seed {}",
        report.kills,
        report.elapsed.as_secs_f64(),
        report.seed
    );
    println!("{:<16} {:>10} {:>10}", "operation", "acked", "lost");
    let kinds: std::collections::BTreeSet<&&str> =
        report.acked.keys().chain(report.lost.keys()).collect();
    for kind in kinds {
        println!(
            "{:<16} {:>10} {:>10}",
            kind,
            report.acked.get(*kind).copied().unwrap_or(0),
            report.lost.get(*kind).copied().unwrap_or(0)
        );
    }
    println!("agents created   {:>10}", report.agents);
    println!("checks run       {:>10}", report.checks.run);
    println!(
        "longest drain    {:>9.2}s",
        report.checks.longest_drain.as_secs_f64()
    );
    println!("violations       {:>10}", report.violations().len());
    for violation in report.violations() {
        println!("  {violation}");
    }
}
