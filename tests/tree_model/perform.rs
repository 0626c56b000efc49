//! The model's steps performed against the runtime, each counted by kind;
//! they touch no bookkeeping of the world, so two can run at once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use holarchy_actors::plane::spawn::{spawn_agent, SpawnRequest};
use holarchy_actors::plane::{command, task, wait};
use holarchy_actors::{DeliverError, Runtime};
use holarchy_supervision::{AgentId, AgentRecord, Preset, Refusal, TaskId, TaskStatus, Visibility};

use super::common;
use super::tally::Kind;

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
/// A step with its target picked.
#[derive(Debug)]
pub enum Action {
    Nothing,
    Spawn { parent: AgentRecord, preset: Preset },
    Send(AgentRecord),
    Stop(TaskId),
    Archive(AgentId),
    Kill(AgentId),
    Wait(AgentId, bool),
    Exec(AgentId),
}

/// What performing an action did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Its kind and whether it succeeded; `None` when there was nothing
    /// to count.
    pub count: Option<(Kind, bool)>,
    /// A command it started, with the marker that finds its process.
    pub command: Option<(TaskId, String)>,
}

impl Outcome {
    fn of(kind: Kind, done: bool) -> Self {
        Self {
            count: Some((kind, done)),
            command: None,
        }
    }
}

/// Performs `action` without touching the world's bookkeeping, so two can
/// run at once.
pub async fn perform(runtime: &Runtime, action: Action) -> Outcome {
    let ctx = runtime.ctx();
    match action {
        Action::Nothing => Outcome::default(),
        Action::Spawn { parent, preset } => {
            let request = SpawnRequest {
                fork: false,
                preset,
                initial_message: Some("work".into()),
                name: None,
                workspace_mode: Default::default(),
                root: None,
                role: None,
            };
            let spawned = spawn_agent(ctx, parent.id, parent.profile, request).await;
            trace_failure("spawn", &spawned.as_ref().map(|_| ()));
            Outcome::of(Kind::Spawn, spawned.is_ok())
        }
        Action::Send(agent) => {
            let sent = runtime.send_message(agent.id, "hello".into(), None).await;
            if agent.profile.visibility == Visibility::Private {
                assert!(
                    matches!(sent, Err(DeliverError::Refused(Refusal::PrivateTarget))),
                    "operator ingress reached private agent {}: {sent:?}",
                    agent.id
                );
                return Outcome::default();
            }
            trace_failure("send", &sent.as_ref().map(|_| ()));
            Outcome::of(Kind::Send, sent.is_ok())
        }
        Action::Stop(task_id) => {
            let stopped = task::stop(ctx, task_id, None, "model test").await;
            let ended = ctx
                .reads()
                .task(task_id)
                .expect("read")
                .is_some_and(|t| t.status != TaskStatus::Running);
            Outcome::of(Kind::Stop, stopped.is_ok() && ended)
        }
        Action::Archive(agent_id) => {
            let archived = runtime.archive_agent(agent_id).await;
            trace_failure("archive", &archived.as_ref().map(|_| ()));
            Outcome::of(Kind::Archive, archived.is_ok())
        }
        Action::Kill(agent_id) => {
            let Some(entry) = ctx.directory.get(agent_id) else {
                return Outcome::of(Kind::Kill, false);
            };
            let killed = entry.actor.get_id();
            entry.actor.kill();
            // Let the kill land before the tree is checked, or the check
            // could pass on the doomed actor.
            let begun = Instant::now();
            while ctx.directory.get(agent_id).map(|e| e.actor.get_id()) == Some(killed) {
                assert!(
                    begun.elapsed() < Duration::from_secs(10),
                    "kill never landed"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Outcome::of(Kind::Kill, true)
        }
        Action::Wait(agent_id, trigger) => {
            let armed = if trigger {
                wait::create_trigger(ctx, agent_id, "model".into(), None)
                    .await
                    .map(|_| ())
            } else {
                wait::sleep(ctx, agent_id, 3_600_000, "model".into(), None)
                    .await
                    .map(|_| ())
            };
            Outcome::of(Kind::Wait, armed.is_ok())
        }
        Action::Exec(agent_id) => {
            // A long command: it must die with its agent's actor, when
            // stopped, and when its agent is archived.
            let marker = command_marker();
            let started = command::exec(ctx, agent_id, marker.clone(), Vec::new(), 0).await;
            trace_failure("exec", &started.as_ref().map(|_| ()));
            let Ok(started) = started else {
                return Outcome::of(Kind::Command, false);
            };
            // It really runs: its process shows up (unless its agent went
            // in the meantime, which a concurrent step may do).
            let begun = Instant::now();
            while common::processes_with(&marker).is_empty() {
                let running = ctx
                    .reads()
                    .task(started.task.id)
                    .expect("read")
                    .is_some_and(|t| t.status == TaskStatus::Running);
                assert!(
                    !running || begun.elapsed() < Duration::from_secs(10),
                    "command {} never showed a process",
                    started.task.id
                );
                if !running {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Outcome {
                count: Some((Kind::Command, true)),
                command: Some((started.task.id, marker)),
            }
        }
    }
}
