//! The runtime in-process over the real sled store: public agents are
//! spread over root partitions, each their linked supervisor; a partition
//! that dies comes back with its agents (and their private subtrees),
//! which keep their queues and work on, while the other partition's agents
//! are never touched.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use common::until;
use holarchy::store::sled_store::StoreConfig;
use holarchy::store::SledStore;
use holarchy_actors::plane::spawn::{spawn_agent, SpawnRequest};
use holarchy_actors::{NewAgent, Reads, Runtime, RuntimeConfig, ScriptedBrain};
use holarchy_supervision::restart::RestartPolicy;
use holarchy_supervision::{AgentId, MessageStatus, Preset};

/// Whether `agent` runs, linked under the partition the runtime names for it.
fn under_its_partition(runtime: &Runtime, agent: AgentId) -> bool {
    let ctx = runtime.ctx();
    let (Some(entry), Some(partition)) =
        (ctx.directory.get(agent), ctx.topology.partition_for(agent))
    else {
        return false;
    };
    partition
        .get_children()
        .iter()
        .any(|c| c.get_id() == entry.actor.get_id())
}

/// `count` plain agents named `prefix-0`, `prefix-1`, ...
fn specs(prefix: &str, count: usize) -> Vec<NewAgent> {
    (0..count)
        .map(|i| NewAgent {
            name: format!("{prefix}-{i}"),
            initial_message: None,
            brain: None,
            context_tokens: None,
            mcp_servers: Vec::new(),
            network: Default::default(),
            namespace: "default".to_owned(),
            labels: Default::default(),
            created_by: None,
        })
        .collect()
}

fn handled(store: &SledStore, agent: AgentId) -> usize {
    store
        .list_messages(agent, None, 100)
        .expect("messages")
        .iter()
        .filter(|m| matches!(m.status, MessageStatus::Handled { .. }))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_partition_comes_back_with_its_agents_and_the_other_is_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SledStore::open(dir.path(), &StoreConfig::default()).expect("store"));
    let config = RuntimeConfig {
        partitions: 2,
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::start(store.clone(), Arc::new(ScriptedBrain), config)
        .await
        .expect("runtime starts");
    let specs = specs("agent", 40);
    let agents = runtime.create_agents(specs).await.expect("created");
    let ctx = runtime.ctx().clone();
    assert_eq!(ctx.topology.partition_count(), 2);

    // Both partitions hold a share, each agent linked under its own.
    let mut cells = HashSet::new();
    for agent in &agents {
        assert!(under_its_partition(&runtime, *agent), "{agent}");
        cells.insert(
            ctx.topology
                .partition_for(*agent)
                .expect("partition")
                .get_id(),
        );
    }
    assert_eq!(cells.len(), 2, "all agents went to one partition");

    // An agent of the partition about to die supervises a private child.
    let victim = ctx.topology.partition_for(agents[0]).expect("partition");
    let parent = agents[0];
    let child = spawn_agent(
        &ctx,
        parent,
        Preset::PublicNamed.profile(),
        SpawnRequest {
            preset: Preset::PrivateChild,
            initial_message: Some("wait for me".into()),
            name: None,
            fork: false,
            workspace_mode: Default::default(),
            root: None,
            role: None,
        },
    )
    .await
    .expect("child spawned")
    .agent_id;
    let (doomed, spared): (Vec<AgentId>, Vec<AgentId>) = agents.iter().partition(|a| {
        ctx.topology.partition_for(**a).expect("partition").get_id() == victim.get_id()
    });
    let spared_actors: Vec<_> = spared
        .iter()
        .map(|a| ctx.directory.get(*a).expect("running").actor.get_id())
        .collect();
    let old_child = ctx.directory.get(child).expect("child runs").actor.get_id();

    victim.kill();
    until("the partition and its agents to come back", || {
        ctx.topology
            .partition_for(parent)
            .is_some_and(|p| p.get_id() != victim.get_id())
            && doomed.iter().all(|a| under_its_partition(&runtime, *a))
            && ctx
                .directory
                .get(child)
                .is_some_and(|c| c.actor.get_id() != old_child)
    })
    .await;
    // The other partition's agents kept their actors.
    for (agent, actor) in spared.iter().zip(&spared_actors) {
        let now = ctx.directory.get(*agent).expect("running").actor.get_id();
        assert_eq!(
            now, *actor,
            "{agent} was restarted though its partition lived"
        );
    }
    // The agents that came back work.
    for agent in doomed.iter().take(3) {
        runtime
            .send_message(*agent, "still here?".into(), None)
            .await
            .expect("accepted");
    }
    until("the revived agents to answer", || {
        doomed.iter().take(3).all(|a| handled(&store, *a) == 1)
    })
    .await;
    runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_tree_shows_which_root_partition_holds_each_public_agent() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = common::Daemon::start_with(&common::data_dir(&root), &["--partitions", "3"]).await;
    let mut c = daemon.clients().await;
    let mut ids = HashSet::new();
    for i in 0..30 {
        ids.insert(common::create(&mut c, &format!("a{i}"), None).await);
    }
    let tree = common::workspaces::tree(&mut c).await;
    assert_eq!(tree.partitions, 3);
    let mut used = HashSet::new();
    for node in tree.nodes.iter().filter(|n| ids.contains(&n.id)) {
        let partition = node.partition.expect("a public agent's partition");
        assert!(partition < 3, "{node:?}");
        used.insert(partition);
    }
    assert!(used.len() >= 2, "30 agents all went to partition {used:?}");
    assert!(tree.mismatches.is_empty(), "{:?}", tree.mismatches);

    // No partitions at all is refused before anything starts.
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .args(["serve", "--partitions", "0", "--data-dir"])
        .arg(root.path().join("other"))
        .output()
        .expect("runs");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--partitions"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_creation_while_another_starts_its_agents_counts_none_twice_against_the_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SledStore::open(dir.path(), &StoreConfig::default()).expect("store"));
    let mut config = RuntimeConfig {
        partitions: 2,
        ..RuntimeConfig::default()
    };
    let (big, small) = (3_000, 10);
    config.limits.max_agents = big + small;
    let runtime = Arc::new(
        Runtime::start(store, Arc::new(ScriptedBrain), config)
            .await
            .expect("runtime starts"),
    );
    let batch = {
        let runtime = runtime.clone();
        let specs = specs("big", big);
        tokio::spawn(async move { runtime.create_agents(specs).await })
    };
    // Once a hundred of the big batch's agents run and most are still to
    // start, the small batch fits exactly: each agent counts once. Watched
    // from a thread of its own: the runtime's workers are busy starting.
    let watcher = {
        let runtime = runtime.clone();
        let small_specs = specs("small", small);
        let handle = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || {
            loop {
                let started = runtime.ctx().directory.counts().public;
                assert!(
                    started < big / 2,
                    "missed the big batch's start: {started} running"
                );
                if started > 100 {
                    break;
                }
                std::thread::yield_now();
            }
            handle.block_on(runtime.create_agents(small_specs))
        })
    };
    watcher
        .await
        .expect("watcher")
        .expect("the last room under the limit");
    batch.await.expect("task").expect("the big batch passes");
    assert_eq!(runtime.ctx().directory.counts().public, big + small);
    let refused = runtime
        .create_agents(specs("one-too-many", 1))
        .await
        .expect_err("past the limit");
    assert!(refused.to_string().contains("--max-agents"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_that_keeps_dying_stops_the_runtime_instead_of_looping() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SledStore::open(dir.path(), &StoreConfig::default()).expect("store"));
    let config = RuntimeConfig {
        partitions: 2,
        restart_policy: RestartPolicy {
            max_restarts: 2,
            period_ms: 60_000,
        },
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::start(store, Arc::new(ScriptedBrain), config)
        .await
        .expect("runtime starts");
    let agent = runtime
        .create_agent("steady".into(), None)
        .await
        .expect("created");
    let ctx = runtime.ctx().clone();
    // Within its budget a partition comes back each time.
    for _ in 0..2 {
        let victim = ctx.topology.partition_for(agent).expect("partition");
        victim.kill();
        until("the partition to come back", || {
            ctx.topology
                .partition_for(agent)
                .is_some_and(|p| p.get_id() != victim.get_id())
                && under_its_partition(&runtime, agent)
        })
        .await;
    }
    // One death past it: the root gives up and stops, and the daemon
    // built on it shuts down rather than answer with a dead partition.
    ctx.topology.partition_for(agent).expect("partition").kill();
    tokio::time::timeout(Duration::from_secs(10), runtime.stopped())
        .await
        .expect("the runtime stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_killed_again_while_it_respawns_brings_every_agent_back_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SledStore::open(dir.path(), &StoreConfig::default()).expect("store"));
    let config = RuntimeConfig {
        partitions: 2,
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::start(store, Arc::new(ScriptedBrain), config)
        .await
        .expect("runtime starts");
    let agents = runtime
        .create_agents(specs("agent", 400))
        .await
        .expect("created");
    let ctx = runtime.ctx().clone();
    let first = ctx.topology.partition_for(agents[0]).expect("partition");
    let doomed: Vec<AgentId> = agents
        .iter()
        .copied()
        .filter(|a| ctx.topology.partition_for(*a).map(|p| p.get_id()) == Some(first.get_id()))
        .collect();

    // The second death lands while the first restart is bringing the
    // partition's agents back.
    first.kill();
    until("the partition's first restart", || {
        ctx.topology
            .partition_for(agents[0])
            .is_some_and(|p| p.get_id() != first.get_id())
    })
    .await;
    let second = ctx.topology.partition_for(agents[0]).expect("partition");
    second.kill();
    until("every agent back under the partition's third actor", || {
        ctx.topology
            .partition_for(agents[0])
            .is_some_and(|p| p.get_id() != first.get_id() && p.get_id() != second.get_id())
            && doomed.iter().all(|a| under_its_partition(&runtime, *a))
    })
    .await;
    // Once each: the partition links exactly its agents, no stray copies.
    // A stray could only come from a restart still respawning: every task
    // the runtime started (both restarts) has to end first.
    until("both restarts to end", || ctx.lifecycle.tasks.is_empty()).await;
    let partition = ctx.topology.partition_for(agents[0]).expect("partition");
    assert_eq!(partition.get_children().len(), doomed.len());
    runtime.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_created_while_their_partition_restarts_get_one_actor_each() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SledStore::open(dir.path(), &StoreConfig::default()).expect("store"));
    // Room for the eight deaths below within the root's budget.
    let config = RuntimeConfig {
        partitions: 2,
        restart_policy: RestartPolicy {
            max_restarts: 20,
            period_ms: 60_000,
        },
        ..RuntimeConfig::default()
    };
    let runtime = Arc::new(
        Runtime::start(store.clone(), Arc::new(ScriptedBrain), config)
            .await
            .expect("runtime starts"),
    );
    let base = runtime
        .create_agents(specs("base", 200))
        .await
        .expect("created");
    let ctx = runtime.ctx().clone();

    // Creators keep committing and starting agents, one by one, while the
    // partition of `base[0]` is killed again and again: some creations
    // commit before a restart lists its share and start after.
    let mut creators = tokio::task::JoinSet::new();
    for worker in 0..16 {
        let runtime = runtime.clone();
        creators.spawn(async move {
            for i in 0..100 {
                // A creation that met its partition dead fails, recorded
                // failed: allowed, and checked below like every other.
                let _ = runtime
                    .create_agent(format!("new-{worker}-{i}"), None)
                    .await;
            }
        });
    }
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(15)).await;
        let victim = ctx.topology.partition_for(base[0]).expect("partition");
        victim.kill();
        until("the partition restarted", || {
            ctx.topology
                .partition_for(base[0])
                .is_some_and(|p| p.get_id() != victim.get_id())
        })
        .await;
    }
    while creators.join_next().await.is_some() {}

    let live: Vec<AgentId> = store
        .public_agent_ids()
        .expect("ids")
        .into_iter()
        .filter(|id| {
            store
                .agent(*id)
                .ok()
                .flatten()
                .is_some_and(|r| r.state.is_live())
        })
        .collect();
    assert!(live.len() > 200, "creations went through");
    until("every live agent runs under its partition", || {
        live.iter().all(|a| under_its_partition(&runtime, *a))
    })
    .await;
    // One actor each: a partition links exactly its share of live agents,
    // no copy a respawn started beside its creator's. Such a copy could
    // only come from a restart or a creation still under way: every task
    // the runtime started has to end first.
    until("every restart and creation to end", || {
        ctx.lifecycle.tasks.is_empty()
    })
    .await;
    let mut partitions: Vec<ractor::ActorCell> = Vec::new();
    for agent in &live {
        let partition = ctx.topology.partition_for(*agent).expect("partition");
        if !partitions.iter().any(|p| p.get_id() == partition.get_id()) {
            partitions.push(partition);
        }
    }
    for partition in partitions {
        let share = live
            .iter()
            .filter(|a| {
                ctx.topology
                    .partition_for(**a)
                    .is_some_and(|p| p.get_id() == partition.get_id())
            })
            .count();
        assert_eq!(
            partition.get_children().len(),
            share,
            "a partition links a stray actor"
        );
    }
    runtime.shutdown(Duration::from_secs(5)).await;
}
