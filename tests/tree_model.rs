//! Model test of the supervision tree: random sequences of spawn, send,
//! stop, archive, actor kill ("panic"), waits, commands and daemon
//! restart, run in-process over the real sled store. After every step the
//! actor tree must settle to mirror the stored ownership tree, no private
//! agent may be live without a live supervisor, operator ingress never
//! reaches a private agent, and the process of every command that is no
//! longer running is gone. Each step's outcome is counted, and the run
//! fails unless enough of them succeeded: a model whose every spawn failed
//! would prove nothing.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use holarchy::store::sled_store::StoreConfig;
use holarchy::store::SledStore;
use holarchy_actors::spawn::{spawn_agent, SpawnRequest};
use holarchy_actors::{
    command_plane, task_plane, tree, wait_plane, DeliverError, Runtime, RuntimeConfig,
    ScriptedBrain, Store,
};
use holarchy_supervision::restart::RestartPolicy;
use holarchy_supervision::{
    AgentRecord, Ownership, Preset, Refusal, TaskId, TaskStatus, ToolFamily, Visibility,
};
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestRunner};

#[derive(Debug, Clone)]
enum Step {
    CreatePublic,
    Spawn { parent: usize, delegator: bool },
    Send { agent: usize },
    Stop { task: usize },
    Archive { agent: usize },
    Kill { agent: usize },
    Wait { agent: usize, trigger: bool },
    Exec { agent: usize },
    Restart,
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => Just(Step::CreatePublic),
        4 => (any::<usize>(), any::<bool>()).prop_map(|(parent, delegator)| Step::Spawn { parent, delegator }),
        2 => any::<usize>().prop_map(|agent| Step::Send { agent }),
        1 => any::<usize>().prop_map(|task| Step::Stop { task }),
        1 => any::<usize>().prop_map(|agent| Step::Archive { agent }),
        2 => any::<usize>().prop_map(|agent| Step::Kill { agent }),
        2 => (any::<usize>(), any::<bool>()).prop_map(|(agent, trigger)| Step::Wait { agent, trigger }),
        1 => any::<usize>().prop_map(|agent| Step::Exec { agent }),
        1 => Just(Step::Restart),
    ]
}

struct World {
    dir: tempfile::TempDir,
    /// Both `None` only while the daemon restarts.
    store: Option<Arc<SledStore>>,
    runtime: Option<Runtime>,
    names: usize,
    /// Every command started, with the marker that finds its process.
    commands: Vec<(TaskId, String)>,
    tally: Tally,
}

/// What one kind of step achieved: how often it had something to act on,
/// and how often it then succeeded.
#[derive(Debug, Default, Clone, Copy)]
struct Count {
    tried: u32,
    done: u32,
}

impl Count {
    fn record(&mut self, done: bool) {
        self.tried += 1;
        self.done += u32::from(done);
    }

    fn add(&mut self, other: Count) {
        self.tried += other.tried;
        self.done += other.done;
    }
}

/// Outcomes of a run's steps, by kind.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    spawns: Count,
    sends: Count,
    stops: Count,
    archives: Count,
    kills: Count,
    waits: Count,
    commands: Count,
    restarts: Count,
    /// Commands seen running, then checked gone once no longer running.
    processes_gone: u32,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        for (mine, theirs) in self.counts_mut().into_iter().zip(other.counts()) {
            mine.add(theirs);
        }
        self.processes_gone += other.processes_gone;
    }

    fn counts(&self) -> [Count; 8] {
        [
            self.spawns,
            self.sends,
            self.stops,
            self.archives,
            self.kills,
            self.waits,
            self.commands,
            self.restarts,
        ]
    }

    fn counts_mut(&mut self) -> [&mut Count; 8] {
        [
            &mut self.spawns,
            &mut self.sends,
            &mut self.stops,
            &mut self.archives,
            &mut self.kills,
            &mut self.waits,
            &mut self.commands,
            &mut self.restarts,
        ]
    }
}

/// Shows why a step failed when `MODEL_TRACE` is set.
fn trace_failure<E: std::fmt::Debug>(what: &str, result: &Result<(), E>) {
    if let (Err(err), Ok(_)) = (result, std::env::var("MODEL_TRACE")) {
        eprintln!("{what} failed: {err:?}");
    }
}

/// A marker unique to one command in this test process: the argument of
/// its `sleep`, which shows in the process's command line.
fn command_marker() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("sleep 30.{:07}{n:05}", std::process::id())
}

async fn start(dir: &std::path::Path) -> (Arc<SledStore>, Runtime) {
    // In-process, the previous runtime's last handles on the database drop
    // a moment after its shutdown; a real restart is a new process.
    let started = Instant::now();
    let store = loop {
        match SledStore::open(dir, &StoreConfig::default()) {
            Ok(store) => break Arc::new(store),
            Err(err) if started.elapsed() < Duration::from_secs(10) => {
                let _ = err;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(err) => panic!("store: {err}"),
        }
    };
    // A generous budget: kills restart; giving up is covered elsewhere.
    let mut config = RuntimeConfig {
        restart_policy: RestartPolicy {
            max_restarts: 1000,
            period_ms: 1000,
        },
        // Stopped commands go quickly, so their processes can be checked.
        stop_grace: Duration::from_millis(200),
        ..RuntimeConfig::default()
    };
    // Commands run in units of the real binary, not of this test program.
    config.sandbox.unit_program = env!("CARGO_BIN_EXE_holarchy").into();
    let runtime = Runtime::start(store.clone(), Arc::new(ScriptedBrain), config)
        .await
        .expect("runtime");
    (store, runtime)
}

fn live_agents(store: &SledStore) -> Vec<AgentRecord> {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let page = store.list_agents(after, 1000, true).expect("list");
        after = page.last().map(|r| r.id);
        let done = page.len() < 1000;
        out.extend(page.into_iter().filter(|r| r.state.is_live()));
        if done {
            return out;
        }
    }
}

fn pick<T: Clone>(items: &[T], index: usize) -> Option<T> {
    (!items.is_empty()).then(|| items[index % items.len()].clone())
}

impl World {
    fn store(&self) -> &Arc<SledStore> {
        self.store.as_ref().expect("store open")
    }

    fn runtime(&self) -> &Runtime {
        self.runtime.as_ref().expect("runtime running")
    }

    async fn stop(&mut self) {
        if let (Some(runtime), Some(store)) = (self.runtime.take(), self.store.take()) {
            runtime.shutdown(Duration::from_secs(10)).await;
            store.close().await;
        }
    }

    async fn apply(&mut self, step: &Step) {
        let ctx = self.runtime().ctx().clone();
        let live = live_agents(self.store());
        match step {
            Step::CreatePublic => {
                self.names += 1;
                self.runtime()
                    .create_agent(format!("p{}", self.names), None)
                    .await
                    .expect("created");
            }
            Step::Spawn { parent, delegator } => {
                let creators: Vec<_> = live
                    .iter()
                    .filter(|a| a.profile.tool_families.contains(ToolFamily::AgentCreation))
                    .cloned()
                    .collect();
                if let Some(parent) = pick(&creators, *parent) {
                    let preset = if *delegator {
                        Preset::PrivateDelegator
                    } else {
                        Preset::PrivateChild
                    };
                    let request = SpawnRequest {
                        fork: false,
                        preset,
                        initial_message: Some("work".into()),
                        name: None,
                        workspace_mode: Default::default(),
                        root: None,
                    };
                    // The tree settled before this step, so the parent is
                    // running; a refusal here would be counted against the
                    // run.
                    let spawned = spawn_agent(&ctx, parent.id, parent.profile, request).await;
                    self.tally.spawns.record(spawned.is_ok());
                    trace_failure("spawn", &spawned.map(|_| ()));
                }
            }
            Step::Send { agent } => {
                if let Some(agent) = pick(&live, *agent) {
                    let sent = self
                        .runtime()
                        .send_message(agent.id, "hello".into(), None)
                        .await;
                    if agent.profile.visibility == Visibility::Private {
                        assert!(
                            matches!(sent, Err(DeliverError::Refused(Refusal::PrivateTarget))),
                            "operator ingress reached private agent {}: {sent:?}",
                            agent.id
                        );
                    } else {
                        self.tally.sends.record(sent.is_ok());
                        trace_failure("send", &sent.map(|_| ()));
                    }
                }
            }
            Step::Stop { task } => {
                let tasks: Vec<_> = live
                    .iter()
                    .flat_map(|a| self.store().tasks_of(a.id).expect("tasks"))
                    .filter(|t| t.status == TaskStatus::Running)
                    .collect();
                if let Some(task) = pick(&tasks, *task) {
                    let stopped = task_plane::stop(&ctx, task.id, None, "model test").await;
                    let ended = self
                        .store()
                        .task(task.id)
                        .expect("read")
                        .is_some_and(|t| t.status != TaskStatus::Running);
                    self.tally.stops.record(stopped.is_ok() && ended);
                }
            }
            Step::Archive { agent } => {
                let public: Vec<_> = live
                    .iter()
                    .filter(|a| a.profile.visibility == Visibility::Public)
                    .cloned()
                    .collect();
                if let Some(agent) = pick(&public, *agent) {
                    self.runtime()
                        .archive_agent(agent.id)
                        .await
                        .expect("archived");
                    self.tally.archives.record(true);
                }
            }
            Step::Kill { agent } => {
                if let Some(agent) = pick(&live, *agent) {
                    let entry = ctx.directory.get(agent.id);
                    if let Some(entry) = &entry {
                        let killed = entry.actor.get_id();
                        entry.actor.kill();
                        // Let the kill land before the tree is checked, or
                        // the check could pass on the doomed actor.
                        let begun = Instant::now();
                        while ctx.directory.get(agent.id).map(|e| e.actor.get_id()) == Some(killed)
                        {
                            assert!(
                                begun.elapsed() < Duration::from_secs(10),
                                "kill never landed"
                            );
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                    }
                    self.tally.kills.record(entry.is_some());
                }
            }
            Step::Wait { agent, trigger } => {
                if let Some(agent) = pick(&live, *agent) {
                    let armed = if *trigger {
                        wait_plane::create_trigger(&ctx, agent.id, "model".into(), None)
                            .await
                            .map(|_| ())
                    } else {
                        wait_plane::sleep(&ctx, agent.id, 3_600_000, "model".into(), None)
                            .await
                            .map(|_| ())
                    };
                    self.tally.waits.record(armed.is_ok());
                }
            }
            Step::Exec { agent } => {
                if let Some(agent) = pick(&live, *agent) {
                    // A long command: it must die with its agent's actor,
                    // when stopped, and when its agent is archived.
                    let marker = command_marker();
                    let started =
                        command_plane::exec(&ctx, agent.id, marker.clone(), Vec::new(), 0).await;
                    if let Ok(started) = &started {
                        self.commands.push((started.task.id, marker.clone()));
                        // It really runs: its process shows up.
                        let begun = Instant::now();
                        while common::processes_with(&marker).is_empty() {
                            assert!(
                                begun.elapsed() < Duration::from_secs(10),
                                "command {} never showed a process",
                                started.task.id
                            );
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    }
                    self.tally.commands.record(started.is_ok());
                    trace_failure("exec", &started.map(|_| ()));
                }
            }
            Step::Restart => {
                // Every handle on the old store must go before it reopens.
                drop(ctx);
                self.stop().await;
                let (store, runtime) = start(self.dir.path()).await;
                self.store = Some(store);
                self.runtime = Some(runtime);
                self.tally.restarts.record(true);
            }
        }
    }

    /// Waits for the tree to settle, then checks every invariant.
    async fn check(&mut self) -> Result<(), String> {
        let started = Instant::now();
        loop {
            let mut problems = self.tree_problems();
            problems.extend(self.process_problems(true));
            if problems.is_empty() {
                return Ok(());
            }
            if started.elapsed() > Duration::from_secs(10) {
                return Err(problems.join("; "));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Where the actor tree and the stored tree disagree.
    fn tree_problems(&self) -> Vec<String> {
        let live = live_agents(self.store());
        let mut problems = Vec::new();
        for agent in &live {
            match (agent.profile.ownership, agent.supervisor_agent_id) {
                (Ownership::ParentSupervised, Some(sup)) => {
                    if !self
                        .store()
                        .agent(sup)
                        .expect("read")
                        .is_some_and(|s| s.state.is_live())
                    {
                        problems.push(format!("private {} has no live supervisor", agent.id));
                    }
                }
                (Ownership::ParentSupervised, None) => {
                    problems.push(format!("private {} has no supervisor", agent.id))
                }
                (Ownership::SelfOwned, _) => {}
            }
        }
        let roots: Vec<_> = live
            .iter()
            .filter(|a| a.supervisor_agent_id.is_none())
            .cloned()
            .collect();
        let report = tree::inspect(self.runtime().ctx(), roots, true).expect("inspect");
        problems.extend(report.mismatches);
        if report.agents != live.len() {
            problems.push(format!(
                "tree reaches {} of {} live agents",
                report.agents,
                live.len()
            ));
        }
        problems
    }

    /// Commands no longer running (stopped, interrupted, taken with their
    /// agent) whose process is still there, and commands recorded running
    /// for an agent that is not live. Each command, once found gone, is
    /// counted and no longer watched. Without `running_may_live` every
    /// command must be gone whatever its record says (the runtime has
    /// stopped).
    fn process_problems(&mut self, running_may_live: bool) -> Vec<String> {
        let mut problems = Vec::new();
        let mut watched = Vec::new();
        for (task_id, marker) in std::mem::take(&mut self.commands) {
            let running = self.store.as_ref().and_then(|store| {
                let task = store.task(task_id).expect("read")?;
                (task.status == TaskStatus::Running).then_some(task.owner_agent_id)
            });
            if let (Some(owner), true) = (running, running_may_live) {
                let owner_live = self
                    .store()
                    .agent(owner)
                    .expect("read")
                    .is_some_and(|a| a.state.is_live());
                if !owner_live {
                    problems.push(format!("command {task_id} still running for gone {owner}"));
                }
                watched.push((task_id, marker));
                continue;
            }
            let left = common::processes_with(&marker);
            if left.is_empty() {
                self.tally.processes_gone += 1;
            } else {
                problems.push(format!("command {task_id} ended but left {left:?}"));
                watched.push((task_id, marker));
            }
        }
        self.commands = watched;
        problems
    }

    /// Stops the runtime; then no command of this run may be left.
    async fn finish(&mut self) -> Result<(), String> {
        self.stop().await;
        let started = Instant::now();
        loop {
            let problems = self.process_problems(false);
            if problems.is_empty() {
                return Ok(());
            }
            if started.elapsed() > Duration::from_secs(10) {
                return Err(format!("after shutdown: {}", problems.join("; ")));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Runs one case: the steps, each followed by the checks. Returns what
/// the steps achieved.
async fn run_case(steps: &[Step]) -> Result<Tally, String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, runtime) = start(dir.path()).await;
    let mut world = World {
        dir,
        store: Some(store),
        runtime: Some(runtime),
        names: 0,
        commands: Vec::new(),
        tally: Tally::default(),
    };
    world.apply(&Step::CreatePublic).await;
    for step in steps {
        if std::env::var("MODEL_TRACE").is_ok() {
            let live = live_agents(world.store());
            eprintln!(
                "live {:?}",
                live.iter()
                    .map(|a| (a.id, a.supervisor_agent_id))
                    .collect::<Vec<_>>()
            );
            eprintln!("step {step:?}");
        }
        world.apply(step).await;
        world
            .check()
            .await
            .map_err(|e| format!("after {step:?}: {e}"))?;
    }
    world.finish().await?;
    Ok(world.tally)
}

#[test]
fn the_actor_tree_always_mirrors_the_stored_tree() {
    let config = ProptestConfig {
        cases: 64,
        // Failing cases are kept beside this file and run first next time.
        source_file: Some(file!()),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    };
    let total = Mutex::new(Tally::default());
    let result =
        TestRunner::new(config).run(&proptest::collection::vec(arb_step(), 1..24), |steps| {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("tokio");
            let tally = rt.block_on(run_case(&steps));
            let tally = tally.map_err(TestCaseError::fail)?;
            total.lock().expect("total").add(&tally);
            Ok(())
        });
    if let Err(err) = result {
        panic!("{err}");
    }
    // The steps must have done something: with every spawn refused, or no
    // command ever started, the invariants above would hold trivially.
    let total = total.into_inner().expect("total");
    eprintln!("{total:?}");
    let kinds = [
        "spawns", "sends", "stops", "archives", "kills", "waits", "commands", "restarts",
    ];
    for (kind, count) in kinds.iter().zip(total.counts()) {
        assert!(
            count.done >= 5,
            "only {count:?} {kind} in the whole run: {total:?}"
        );
        // The tree settles before each step, so a step with something to
        // act on succeeds.
        assert!(
            count.done * 10 >= count.tried * 9,
            "{kind} mostly failed: {count:?}"
        );
    }
    assert!(
        total.processes_gone >= 10,
        "too few commands were checked gone: {total:?}"
    );
}
