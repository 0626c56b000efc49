//! Model test of the supervision tree: random sequences of spawn, send,
//! stop, archive, actor kill ("panic"), waits, commands and daemon
//! restart, run in-process over the real sled store (over PostgreSQL with
//! `HOLARCHY_TEST_STORE=postgres`, each case on a database of its own).
//! After every step the
//! actor tree must settle to mirror the stored ownership tree, no private
//! agent may be live without a live supervisor, operator ingress never
//! reaches a private agent, and the process of every command that is no
//! longer running is gone. Structural steps also run two at once, on the
//! same subtree or different ones, so the per-agent structure locks are
//! exercised against each other. Each step's outcome is counted, and the run
//! fails unless enough of them succeeded: a model whose every spawn failed
//! would prove nothing.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use holarchy::store::sled_store::StoreConfig;
use holarchy::store::{Opened, PgStore, SledStore};
use holarchy_actors::{tree, Runtime, RuntimeConfig, ScriptedBrain, Store};
use holarchy_supervision::restart::RestartPolicy;
use holarchy_supervision::{
    AgentId, AgentRecord, Ownership, Preset, TaskId, TaskStatus, ToolFamily, Visibility,
};
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestRunner};

#[path = "tree_model/tally.rs"]
mod tally;
use tally::Tally;
#[path = "tree_model/perform.rs"]
mod perform;
use perform::{perform, Action};

#[derive(Debug, Clone)]
enum Step {
    CreatePublic,
    Spawn {
        parent: usize,
        delegator: bool,
    },
    Send {
        agent: usize,
    },
    Stop {
        task: usize,
    },
    Archive {
        agent: usize,
    },
    Kill {
        agent: usize,
    },
    Wait {
        agent: usize,
        trigger: bool,
    },
    Exec {
        agent: usize,
    },
    Restart,
    /// Two structural steps at once, on the same subtree or different ones.
    Together(Box<Step>, Box<Step>),
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => arb_single(),
        2 => (arb_structural(), arb_structural()).prop_map(|(a, b)| Step::Together(Box::new(a), Box::new(b))),
    ]
}

/// Steps that change the tree's structure and may run beside another.
fn arb_structural() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (any::<usize>(), any::<bool>()).prop_map(|(parent, delegator)| Step::Spawn { parent, delegator }),
        1 => any::<usize>().prop_map(|task| Step::Stop { task }),
        1 => any::<usize>().prop_map(|agent| Step::Archive { agent }),
        1 => any::<usize>().prop_map(|agent| Step::Kill { agent }),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(agent, trigger)| Step::Wait { agent, trigger }),
        1 => any::<usize>().prop_map(|agent| Step::Exec { agent }),
    ]
}

fn arb_single() -> impl Strategy<Value = Step> {
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

/// Where a case's store lives, across its restarts.
enum Place {
    Sled(tempfile::TempDir),
    Postgres(Box<common::pg_server::Database>),
}

impl Place {
    /// A new, empty place on the store the run is for.
    async fn new() -> Place {
        if std::env::var("HOLARCHY_TEST_STORE").ok().as_deref() == Some("postgres") {
            let database = common::pg_server::database()
                .await
                .expect("the PostgreSQL test server (HOLARCHY_TEST_STORE=postgres)");
            Place::Postgres(Box::new(database))
        } else {
            Place::Sled(tempfile::tempdir().expect("tempdir"))
        }
    }

    /// Opens the store, waiting for the previous runtime's last handles on
    /// a sled database to drop (in-process, they drop a moment after its
    /// shutdown; a real restart is a new process).
    async fn open(&self) -> Opened {
        let started = Instant::now();
        loop {
            let opened = match self {
                Place::Sled(dir) => SledStore::open(dir.path(), &StoreConfig::default())
                    .map(|store| Opened::Sled(Arc::new(store)))
                    .map_err(|err| err.to_string()),
                Place::Postgres(database) => PgStore::open(database.config.clone())
                    .map(|store| Opened::Postgres(Arc::new(store)))
                    .map_err(|err| err.to_string()),
            };
            match opened {
                Ok(store) => return store,
                Err(_) if started.elapsed() < Duration::from_secs(10) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(err) => panic!("store: {err}"),
            }
        }
    }
}

struct World {
    place: Place,
    /// Both `None` only while the daemon restarts.
    store: Option<Opened>,
    runtime: Option<Runtime>,
    names: usize,
    /// Every command started, with the marker that finds its process.
    commands: Vec<(TaskId, String)>,
    tally: Tally,
}

async fn start(place: &Place) -> (Opened, Runtime) {
    let store = place.open().await;
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
    let runtime = Runtime::start(store.actors(), Arc::new(ScriptedBrain), config)
        .await
        .expect("runtime");
    (store, runtime)
}

fn live_agents(store: &Opened) -> Vec<AgentRecord> {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let page = match store {
            Opened::Sled(store) => store.list_agents(after, 1000, true),
            Opened::Postgres(store) => store.list_agents(after, 1000, true),
        }
        .expect("list");
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
    fn opened(&self) -> &Opened {
        self.store.as_ref().expect("store open")
    }

    fn store(&self) -> Arc<dyn Store> {
        self.opened().actors()
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
        match step {
            Step::CreatePublic => {
                self.names += 1;
                self.runtime()
                    .create_agent(format!("p{}", self.names), None)
                    .await
                    .expect("created");
            }
            Step::Restart => {
                self.stop().await;
                let (store, runtime) = start(&self.place).await;
                self.store = Some(store);
                self.runtime = Some(runtime);
                self.tally.restarts.record(true);
            }
            Step::Together(first, second) => {
                let (first, second) = (self.target(first), self.target(second));
                let roots = (self.root_of(&first), self.root_of(&second));
                let runtime = self.runtime();
                let (first, second) =
                    tokio::join!(perform(runtime, first), perform(runtime, second));
                if let ((Some(a), Some(b)), Some((_, first_done)), Some((_, second_done))) =
                    (roots, first.count, second.count)
                {
                    if a != b {
                        self.tally.apart.record(first_done && second_done);
                    }
                }
                for outcome in [first, second] {
                    // Two changes at once may meet (a spawn under an agent
                    // being archived): either may be refused, so both only
                    // count towards the run's concurrent total.
                    if let Some((_, done)) = outcome.count {
                        self.tally.together.record(done);
                    }
                    self.commands.extend(outcome.command);
                }
            }
            single => {
                let action = self.target(single);
                let outcome = perform(self.runtime(), action).await;
                if let Some((kind, done)) = outcome.count {
                    self.tally.count_mut(kind).record(done);
                }
                self.commands.extend(outcome.command);
            }
        }
    }

    /// What `step` acts on in the tree as it stands (the live agents and
    /// running tasks the step's indices pick), or nothing.
    fn target(&self, step: &Step) -> Action {
        let store = self.store();
        let live = live_agents(self.opened());
        match step {
            Step::Spawn { parent, delegator } => {
                let creators: Vec<_> = live
                    .iter()
                    .filter(|a| a.profile.tool_families.contains(ToolFamily::AgentCreation))
                    .cloned()
                    .collect();
                let preset = if *delegator {
                    Preset::PrivateDelegator
                } else {
                    Preset::PrivateChild
                };
                pick(&creators, *parent)
                    .map_or(Action::Nothing, |parent| Action::Spawn { parent, preset })
            }
            Step::Send { agent } => pick(&live, *agent).map_or(Action::Nothing, Action::Send),
            Step::Stop { task } => {
                let tasks: Vec<_> = live
                    .iter()
                    .flat_map(|a| store.tasks_of(a.id).expect("tasks"))
                    .filter(|t| t.status == TaskStatus::Running)
                    .map(|t| t.id)
                    .collect();
                pick(&tasks, *task).map_or(Action::Nothing, Action::Stop)
            }
            Step::Archive { agent } => {
                let public: Vec<_> = live
                    .iter()
                    .filter(|a| a.profile.visibility == Visibility::Public)
                    .map(|a| a.id)
                    .collect();
                pick(&public, *agent).map_or(Action::Nothing, Action::Archive)
            }
            Step::Kill { agent } => {
                pick(&live, *agent).map_or(Action::Nothing, |a| Action::Kill(a.id))
            }
            Step::Wait { agent, trigger } => {
                pick(&live, *agent).map_or(Action::Nothing, |a| Action::Wait(a.id, *trigger))
            }
            Step::Exec { agent } => {
                pick(&live, *agent).map_or(Action::Nothing, |a| Action::Exec(a.id))
            }
            Step::CreatePublic | Step::Restart | Step::Together(..) => Action::Nothing,
        }
    }

    /// The public agent at the top of the subtree `action` changes.
    fn root_of(&self, action: &Action) -> Option<AgentId> {
        let store = self.store();
        let mut agent = match action {
            Action::Nothing | Action::Send(_) => return None,
            Action::Spawn { parent, .. } => parent.id,
            Action::Stop(task) => store.task(*task).ok()??.owner_agent_id,
            Action::Archive(id) | Action::Kill(id) | Action::Wait(id, _) | Action::Exec(id) => *id,
        };
        // Bounded: a tree deeper than this is a bug the checks report.
        for _ in 0..64 {
            match store.agent(agent).ok()??.supervisor_agent_id {
                Some(supervisor) => agent = supervisor,
                None => return Some(agent),
            }
        }
        None
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
        let live = live_agents(self.opened());
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
                let task = store.actors().task(task_id).expect("read")?;
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
    let place = Place::new().await;
    let (store, runtime) = start(&place).await;
    let mut world = World {
        place,
        store: Some(store),
        runtime: Some(runtime),
        names: 0,
        commands: Vec::new(),
        tally: Tally::default(),
    };
    // Two public agents from the start, so steps run together often land
    // on different subtrees.
    world.apply(&Step::CreatePublic).await;
    world.apply(&Step::CreatePublic).await;
    for step in steps {
        if std::env::var("MODEL_TRACE").is_ok() {
            let live = live_agents(world.opened());
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
    let store = std::env::var("HOLARCHY_TEST_STORE").unwrap_or_else(|_| "sled".into());
    eprintln!("the tree model runs over {store}");
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
    // Concurrent steps may meet and refuse each other, but most must go
    // through, or the concurrency would prove nothing.
    assert!(
        total.together.done >= 20 && total.together.done * 2 >= total.together.tried,
        "too few concurrent structural steps went through: {:?}",
        total.together
    );
    // Pairs on different subtrees are independent: both go through.
    assert!(
        total.apart.done >= 20 && total.apart.done * 10 >= total.apart.tried * 9,
        "too few structural changes on different subtrees went through together: {:?}",
        total.apart
    );
    assert!(
        total.processes_gone >= 10,
        "too few commands were checked gone: {total:?}"
    );
}
