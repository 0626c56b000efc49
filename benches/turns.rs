//! Turn throughput in process: durable scripted turns per second through
//! `Runtime::send_message`, next to the rate bare ractor actors answer
//! calls in the same run (the floor an actor runtime cannot beat).
//!
//! `cargo bench --bench turns -- --agents 1000 --messages 30000 --concurrency 512 [--tool-calls 1]`
//!
//! A message counts as sent when `send_message` returns (it is on disk)
//! and as handled when its `run_finished` event is durable. Prints a table
//! and one JSON line, and writes the JSON to
//! `target/bench-results/turns.json` (or `--json PATH`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use holarchy::store::sled_store::StoreConfig;
use holarchy::store::SledStore;
use holarchy_actors::{NewAgent, Runtime, RuntimeConfig, ScriptedBrain};
use holarchy_supervision::EventKind;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::{json, Value};

#[path = "support/alloc.rs"]
mod alloc;
#[path = "support/cli.rs"]
mod cli;
#[path = "support/figure.rs"]
mod figure;

struct Options {
    agents: usize,
    messages: usize,
    concurrency: usize,
    tool_calls: usize,
    json_out: PathBuf,
}

fn options() -> Options {
    let mut opts = Options {
        agents: 1_000,
        messages: 30_000,
        concurrency: 512,
        tool_calls: 0,
        json_out: cli::report_path("turns"),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--agents" => opts.agents = value().parse().expect("--agents takes a number"),
            "--messages" => opts.messages = value().parse().expect("--messages takes a number"),
            "--concurrency" => {
                opts.concurrency = value().parse().expect("--concurrency takes a number")
            }
            "--tool-calls" => {
                opts.tool_calls = value().parse().expect("--tool-calls takes a number")
            }
            "--json" => opts.json_out = PathBuf::from(value()),
            // cargo bench passes --bench; ignore what is not ours.
            _ => {}
        }
    }
    opts
}

/// The reference: an actor that answers a call and does nothing else.
struct Echo;

impl Actor for Echo {
    type Msg = RpcReplyPort<()>;
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _: ActorRef<Self::Msg>, _: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle(
        &self,
        _: ActorRef<Self::Msg>,
        reply: Self::Msg,
        _: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        let _ = reply.send(());
        Ok(())
    }
}

/// Calls answered per second by `agents` bare actors, `messages` calls
/// round-robin with `concurrency` in flight.
async fn bare_calls(opts: &Options) -> Option<f64> {
    let mut actors = Vec::with_capacity(opts.agents);
    for _ in 0..opts.agents {
        let (actor, _) = Actor::spawn(None, Echo, ()).await.expect("echo spawns");
        actors.push(actor);
    }
    let actors = Arc::new(actors);
    let started = Instant::now();
    let workers = (0..opts.concurrency).map(|worker| {
        let actors = actors.clone();
        let (messages, concurrency) = (opts.messages, opts.concurrency);
        tokio::spawn(async move {
            let mut i = worker;
            while i < messages {
                let actor = &actors[i % actors.len()];
                actor.call(|reply| reply, None).await.expect("echo answers");
                i += concurrency;
            }
        })
    });
    for worker in workers.collect::<Vec<_>>() {
        worker.await.expect("bare worker");
    }
    let rate = figure::rate(opts.messages, started.elapsed().as_secs_f64());
    for actor in actors.iter() {
        actor.stop(None);
    }
    rate
}

/// The message each turn handles: plain text, or a script calling
/// `AgentGet` `tool_calls` times.
fn message(tool_calls: usize, i: usize) -> String {
    if tool_calls == 0 {
        return format!("event {i}");
    }
    let calls: Vec<Value> = (0..tool_calls)
        .map(|_| json!({ "name": "AgentGet", "input": {} }))
        .collect();
    json!({ "reply": format!("event {i}"), "tool_calls": calls }).to_string()
}

/// Durable turns: sent per second and handled per second.
async fn turns(opts: &Options) -> (Option<f64>, Option<f64>) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(
        SledStore::open(&tmp.path().join("db"), &StoreConfig::default()).expect("store opens"),
    );
    let config = RuntimeConfig {
        workspace_root: tmp.path().join("workspaces"),
        worktree_root: tmp.path().join("worktrees"),
        ..RuntimeConfig::default()
    };
    let runtime = Arc::new(
        Runtime::start(store.clone(), Arc::new(ScriptedBrain), config)
            .await
            .expect("runtime starts"),
    );
    let specs = (0..opts.agents)
        .map(|i| NewAgent {
            name: format!("turns-{i}"),
            initial_message: None,
            brain: None,
            context_tokens: None,
            mcp_servers: Vec::new(),
            network: Default::default(),
            namespace: "default".to_owned(),
            labels: Default::default(),
            created_by: None,
        })
        .collect::<Vec<_>>();
    let mut agents = Vec::with_capacity(opts.agents);
    for chunk in specs.chunks(1_000) {
        agents.extend(
            runtime
                .create_agents(chunk.to_vec())
                .await
                .expect("agents created"),
        );
    }
    let agents = Arc::new(agents);
    let cursor = *store.event_watermark().borrow();
    let started = Instant::now();
    let workers = (0..opts.concurrency).map(|worker| {
        let (runtime, agents) = (runtime.clone(), agents.clone());
        let (messages, concurrency, tool_calls) =
            (opts.messages, opts.concurrency, opts.tool_calls);
        tokio::spawn(async move {
            let mut i = worker;
            while i < messages {
                let agent = agents[i % agents.len()];
                runtime
                    .send_message(agent, message(tool_calls, i), None)
                    .await
                    .expect("message sent");
                i += concurrency;
            }
        })
    });
    for worker in workers.collect::<Vec<_>>() {
        worker.await.expect("sender");
    }
    let sent = figure::rate(opts.messages, started.elapsed().as_secs_f64());
    let handled = wait_handled(&store, cursor, opts.messages).await;
    let handled =
        handled.and_then(|_| figure::rate(opts.messages, started.elapsed().as_secs_f64()));
    runtime.shutdown(Duration::from_secs(30)).await;
    store.close().await;
    (sent, handled)
}

/// Waits until `count` turns have finished, counting durable
/// `run_finished` events after `cursor`; `None` if they do not within a
/// minute of quiet.
async fn wait_handled(store: &SledStore, mut cursor: u64, count: usize) -> Option<()> {
    let mut finished = 0;
    let mut last_progress = Instant::now();
    while finished < count {
        let events = store.events_after(cursor, 4_096).expect("events read");
        if events.is_empty() {
            if last_progress.elapsed() > Duration::from_secs(60) {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        last_progress = Instant::now();
        for event in &events {
            cursor = event.cursor;
            if matches!(event.kind, EventKind::RunFinished { .. }) {
                finished += 1;
            }
        }
    }
    Some(())
}

fn main() {
    let opts = options();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    eprintln!(
        "measuring {} messages over {} agents ({} in flight, {} tool calls each)",
        opts.messages, opts.agents, opts.concurrency, opts.tool_calls
    );
    let bare = runtime.block_on(bare_calls(&opts));
    let (sent, handled) = runtime.block_on(turns(&opts));

    println!(
        "turns: {} messages over {} agents, {} in flight, {} tool calls each",
        opts.messages, opts.agents, opts.concurrency, opts.tool_calls
    );
    println!(
        "{:<44} {:>12} {:>12} {:>8}",
        "figure", "holarchy", "bare ractor", "ratio"
    );
    for (name, ours) in [
        ("durable sends / s vs bare calls / s", sent),
        ("handled turns / s vs bare calls / s", handled),
    ] {
        println!(
            "{:<44} {} /s {} /s {}x",
            name,
            figure::show(ours, 9, 0),
            figure::show(bare, 9, 0),
            figure::show(figure::ratio(ours, bare), 7, 3),
        );
    }
    let report = json!({
        "bench": "turns",
        "agents": opts.agents,
        "messages": opts.messages,
        "concurrency": opts.concurrency,
        "tool_calls": opts.tool_calls,
        "bare_calls_per_s": bare,
        "sent_per_s": sent,
        "handled_per_s": handled,
        "handled_vs_bare": figure::ratio(handled, bare),
    });
    println!("{report}");
    cli::write_report(&opts.json_out, &report);
}
