//! Model test of the supervision tree: random sequences of spawn, send,
//! stop, archive, actor kill ("panic") and daemon restart, run in-process
//! over the real sled store. After every step the actor tree must settle
//! to mirror the stored ownership tree, no private agent may be live
//! without a live supervisor, and operator ingress never reaches a private
//! agent.

use std::sync::Arc;
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
    AgentRecord, Ownership, Preset, Refusal, TaskStatus, ToolFamily, Visibility,
};
use proptest::prelude::*;

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
    let config = RuntimeConfig {
        restart_policy: RestartPolicy {
            max_restarts: 1000,
            period_ms: 1000,
        },
        ..RuntimeConfig::default()
    };
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
                    // The parent may be restarting after a kill; that is a
                    // refusal, not a broken invariant.
                    let _ = spawn_agent(&ctx, parent.id, parent.profile, request).await;
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
                    let _ = task_plane::stop(&ctx, task.id, None, "model test").await;
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
                }
            }
            Step::Kill { agent } => {
                if let Some(agent) = pick(&live, *agent) {
                    if let Some(entry) = ctx.directory.get(agent.id) {
                        entry.actor.kill();
                    }
                }
            }
            Step::Wait { agent, trigger } => {
                if let Some(agent) = pick(&live, *agent) {
                    // The agent may be mid-restart; a refusal is fine.
                    let _ = if *trigger {
                        wait_plane::create_trigger(&ctx, agent.id, "model".into(), None)
                            .await
                            .map(|_| ())
                    } else {
                        wait_plane::sleep(&ctx, agent.id, 3_600_000, "model".into(), None)
                            .await
                            .map(|_| ())
                    };
                }
            }
            Step::Exec { agent } => {
                if let Some(agent) = pick(&live, *agent) {
                    // A long command: it must die with its agent's actor.
                    let _ =
                        command_plane::exec(&ctx, agent.id, "sleep 30".into(), Vec::new(), 0).await;
                }
            }
            Step::Restart => {
                // Every handle on the old store must go before it reopens.
                drop(ctx);
                self.stop().await;
                let (store, runtime) = start(self.dir.path()).await;
                self.store = Some(store);
                self.runtime = Some(runtime);
            }
        }
    }

    /// Waits for the tree to settle, then checks every invariant.
    async fn check(&self) -> Result<(), String> {
        let started = Instant::now();
        loop {
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
            if problems.is_empty() {
                return Ok(());
            }
            if started.elapsed() > Duration::from_secs(10) {
                return Err(problems.join("; "));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_actor_tree_always_mirrors_the_stored_tree(steps in proptest::collection::vec(arb_step(), 1..24)) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio");
        let result: Result<(), String> = rt.block_on(async {
            let dir = tempfile::tempdir().expect("tempdir");
            let (store, runtime) = start(dir.path()).await;
            let mut world = World { dir, store: Some(store), runtime: Some(runtime), names: 0 };
            world.apply(&Step::CreatePublic).await;
            for step in &steps {
                if std::env::var("MODEL_TRACE").is_ok() {
                    let live = live_agents(world.store());
                    eprintln!("live {:?}", live.iter().map(|a| (a.id, a.supervisor_agent_id)).collect::<Vec<_>>());
                    eprintln!("step {step:?}");
                }
                world.apply(step).await;
                world.check().await.map_err(|e| format!("after {step:?}: {e}"))?;
            }
            world.stop().await;
            Ok(())
        });
        prop_assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
    }
}
