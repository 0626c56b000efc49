//! The command actor: one per running command task, linked under the agent
//! that owns it. It owns the process group: output goes through it into a
//! bounded ring of chunks in the store, stdin goes out through it, and
//! stopping it (or killing it with its agent's subtree) kills the group, so
//! no process outlives its task.
//!
//! Nothing here awaits inside `handle`: readers, the exit waiter and the
//! stdin writer are tasks of their own that talk to the actor by message.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use holarchy_supervision::plan;
use holarchy_supervision::task::chunks_to_drop;
use holarchy_supervision::{ExitInfo, ProcessRef, Stream, TaskId, TaskRecord};
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{mpsc, watch};
use tracing::warn;

use super::pipe::{spawn_reader, Helper, Pace, READ_SIZE};
use super::unit::{script_text, write_private, ScriptFile, UnitGuard};
use crate::process::start_ticks;
use crate::protocol::{CommandMsg, StdinRefused};
use crate::store::StoreError;
use crate::{now_ms, Ctx};

/// The ring drops whole chunks, oldest first, and always keeps the newest,
/// so a stored chunk holds at most a quarter of the capacity: the ring
/// then keeps at most 1.25 times it. Within 1 KiB and a read, so a large
/// ring (the default 1 MiB) stores whole reads, as few keys as can be.
fn stored_chunk(capacity: u64) -> usize {
    usize::try_from(capacity / 4)
        .unwrap_or(READ_SIZE)
        .clamp(1024, READ_SIZE)
}
/// How much of the output the final task record keeps as its result.
const RESULT_TAIL: usize = 4 * 1024;

/// Who reports a command's end: the tool call still waiting for it, or,
/// once the tool has yielded, a task-result message to the owner. Settled
/// with one compare-and-swap, so exactly one of them does.
#[derive(Debug, Default)]
pub struct Handoff(AtomicU8);

const WAITING: u8 = 0;
const YIELDED: u8 = 1;
const FINISHED: u8 = 2;

impl Handoff {
    /// The tool gives up waiting; `false` if the command already finished.
    pub fn yield_to_owner(&self) -> bool {
        self.0
            .compare_exchange(WAITING, YIELDED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The command finished; `true` if the owner must be told by message.
    fn finish(&self) -> bool {
        self.0
            .compare_exchange(WAITING, FINISHED, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
    }
}

#[derive(Debug)]
pub struct CommandArgs {
    pub task: TaskRecord,
    pub workdir: PathBuf,
    /// Where the command may write: its agent's attached workspaces.
    pub writable: Vec<PathBuf>,
    pub handoff: Arc<Handoff>,
    /// Flips to `true` when the task's record reaches its end state.
    pub done: watch::Sender<bool>,
    /// Extra environment for the process; never stored.
    pub env: Vec<(String, String)>,
    /// The command line to run. The record keeps it with secrets redacted.
    pub line: String,
    /// Its agent's network policy.
    pub network: holarchy_supervision::NetworkPolicy,
}

#[derive(Debug)]
pub struct CommandState {
    task: TaskRecord,
    guard: UnitGuard,
    stdin: Option<mpsc::Sender<Vec<u8>>>,
    /// Retained chunks (offset, len), oldest first, and the end offset.
    chunks: VecDeque<(u64, u64)>,
    end: u64,
    open_streams: u8,
    exit: Option<ExitInfo>,
    stopping: bool,
    handoff: Arc<Handoff>,
    done: watch::Sender<bool>,
    _helpers: Vec<Helper>,
}

#[derive(Debug, Clone)]
pub struct CommandActor {
    ctx: Arc<Ctx>,
}

impl CommandActor {
    pub fn new(ctx: Arc<Ctx>) -> Self {
        Self { ctx }
    }
}

fn exit_info(status: std::process::ExitStatus) -> ExitInfo {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitInfo::Code(code),
        (None, Some(signal)) => ExitInfo::Signal(signal),
        (None, None) => ExitInfo::Code(-1),
    }
}

impl CommandActor {
    fn record_output(
        &self,
        state: &mut CommandState,
        stream: Stream,
        data: Vec<u8>,
    ) -> Result<(), StoreError> {
        let task_id = state.task.id;
        let stored_before = state.chunks.len();
        let mut pieces = Vec::new();
        let capacity = self.ctx.config.output_capacity;
        for piece in data.chunks(stored_chunk(capacity)) {
            let len = piece.len() as u64;
            state.chunks.push_back((state.end, len));
            pieces.push((state.end, piece));
            state.end += len;
        }
        let retained = state.chunks.make_contiguous();
        let drop = chunks_to_drop(retained, state.end, capacity);
        state.chunks.drain(..drop.len());
        // The oldest go first: chunks stored before, then any of these
        // pieces already too old to keep, which are never written.
        let stored = &drop[..drop.len().min(stored_before)];
        let too_old = drop.len().saturating_sub(stored_before);
        let kept = pieces
            .into_iter()
            .skip(too_old)
            .map(|(offset, piece)| (offset, piece.to_vec()))
            .collect();
        let plan = plan::command::output(task_id, stream, stored, kept);
        crate::apply::apply(&self.ctx, plan)
    }

    /// Once the exit is known and both pipes are drained: the end state,
    /// the result, and (if the tool already yielded) the owner's message.
    fn finish(
        &self,
        myself: &ActorRef<CommandMsg>,
        state: &mut CommandState,
    ) -> Result<(), StoreError> {
        let Some(exit) = state.exit else {
            return Ok(());
        };
        if state.open_streams > 0 {
            return Ok(());
        }
        // The shell is gone; whatever it left behind in its group (a
        // server started with `&`) is not tracked by anyone: end it too.
        // The unit killed what the command left before it exited, and has
        // been reaped: its pid is no longer ours to signal.
        state.guard.ended = true;
        let task_id = state.task.id;
        let exit = plan::command::Exit {
            exit,
            stopping: state.stopping,
        };
        let tail = self.tail(task_id, state.end)?;
        let plan = plan::command::end(&state.task, exit, tail, state.handoff.finish(), now_ms());
        match crate::apply::apply(&self.ctx, plan) {
            Ok(()) => {}
            // A cleanup ended the task first (`stopped`); its word stands,
            // and an archived owner is told nothing.
            Err(StoreError::Precondition(_)) => {}
            Err(err) => return Err(err),
        }
        self.ctx.directory.remove_command(task_id);
        let _ = state.done.send(true);
        self.ctx.notify_output(task_id);
        myself.stop(Some(exit.status().name().into()));
        Ok(())
    }

    /// The last bytes of the output, as text, for the task's result.
    fn tail(&self, task_id: TaskId, end: u64) -> Result<String, StoreError> {
        let from = end.saturating_sub(RESULT_TAIL as u64);
        let chunks = self.ctx.reads().output_after(task_id, from, RESULT_TAIL)?;
        let bytes: Vec<u8> = chunks.into_iter().flat_map(|c| c.data).collect();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

impl CommandActor {
    /// Starts the command's confined unit: the line goes to the shell in a
    /// file of the agent's private directory, in its own process group.
    fn spawn_unit(
        &self,
        task: &TaskRecord,
        workdir: &Path,
        writable: Vec<PathBuf>,
        env: &[(String, String)],
        line: &str,
        network: holarchy_supervision::NetworkPolicy,
    ) -> Result<(tokio::process::Child, UnitGuard), ActorProcessingErr> {
        std::fs::create_dir_all(workdir)?;
        let sandbox = &self.ctx.config.sandbox;
        let tmp = sandbox.tmp_dir(task.owner_agent_id)?;
        let mut writable = writable;
        writable.push(tmp.clone());
        let mut spec = sandbox.spec(writable, Vec::new(), self.ctx.config.stop_grace);
        spec.network = network;
        // The line goes to the shell in a file of the agent's private
        // directory, not on a command line, which every process may read
        // in /proc (it may hold a trigger token).
        // The agent's variables are set by that shell too, inside the
        // confinement: in the unit's own environment, a loader variable
        // (`LD_PRELOAD`) would run the agent's code unconfined.
        let script = tmp.join(format!(".holarchy-command-{}.sh", task.id));
        write_private(&script, script_text(env, line).as_bytes())?;
        let script = ScriptFile(script);
        let mut command =
            sandbox.command(&spec, "/bin/sh", &[script.0.to_string_lossy().into_owned()])?;
        command.current_dir(workdir);
        crate::process::scrub(&mut command, &[], Some(&tmp));
        // No kill_on_drop: killing the unit outright would strand what the
        // command moved out of its group; the guard asks the unit instead.
        let child = command
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let pid = child
            .id()
            .map(|p| p as i32)
            .ok_or("the command exited before it started")?;
        let guard = UnitGuard {
            pid,
            ended: false,
            _script: script,
        };
        Ok((child, guard))
    }

    /// The helpers that read the unit's output, feed its stdin and wait for
    /// its exit, each reporting to the actor; and the stdin's sender.
    fn helpers(
        &self,
        myself: &ActorRef<CommandMsg>,
        mut child: tokio::process::Child,
    ) -> (Vec<Helper>, Option<mpsc::Sender<Vec<u8>>>) {
        let mut helpers = Vec::new();
        let secrets = &self.ctx.config.secrets;
        let sandbox = &self.ctx.config.sandbox;
        let pace = Arc::new(tokio::sync::Mutex::new(Pace::new(
            sandbox.limits.output_bytes_per_sec,
        )));
        if let Some(stdout) = child.stdout.take() {
            helpers.push(spawn_reader(
                myself.clone(),
                Stream::Stdout,
                stdout,
                secrets.clone(),
                pace.clone(),
            ));
        }
        if let Some(stderr) = child.stderr.take() {
            helpers.push(spawn_reader(
                myself.clone(),
                Stream::Stderr,
                stderr,
                secrets.clone(),
                pace.clone(),
            ));
        }
        let stdin = child.stdin.take().map(|mut pipe| {
            let (tx, mut rx) = mpsc::channel::<Vec<u8>>(64);
            helpers.push(Helper(
                tokio::spawn(async move {
                    while let Some(bytes) = rx.recv().await {
                        if pipe.write_all(&bytes).await.is_err() || pipe.flush().await.is_err() {
                            break;
                        }
                    }
                })
                .abort_handle(),
            ));
            tx
        });
        let waiter = myself.clone();
        helpers.push(Helper(
            tokio::spawn(async move {
                let exit = match child.wait().await {
                    Ok(status) => exit_info(status),
                    Err(_) => ExitInfo::Code(-1),
                };
                let _ = waiter.cast(CommandMsg::Exited(exit));
            })
            .abort_handle(),
        ));
        (helpers, stdin)
    }
}

impl Actor for CommandActor {
    type Msg = CommandMsg;
    type State = CommandState;
    type Arguments = CommandArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<CommandMsg>,
        args: CommandArgs,
    ) -> Result<CommandState, ActorProcessingErr> {
        let CommandArgs {
            mut task,
            workdir,
            writable,
            handoff,
            done,
            env,
            line,
            network,
        } = args;
        let (child, guard) = self.spawn_unit(&task, &workdir, writable, &env, &line, network)?;
        let pid = guard.pid;
        self.ctx.directory.insert_command(task.id, myself.clone());
        let process = ProcessRef {
            pgid: pid,
            start_ticks: start_ticks(pid).unwrap_or(0),
        };
        let (plan, running) = plan::command::running(&task, process);
        crate::apply::apply(&self.ctx, plan)?;
        task = running;

        let (helpers, stdin) = self.helpers(&myself, child);
        Ok(CommandState {
            task,
            guard,
            stdin,
            chunks: VecDeque::new(),
            end: 0,
            open_streams: 2,
            exit: None,
            stopping: false,
            handoff,
            done,
            _helpers: helpers,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<CommandMsg>,
        message: CommandMsg,
        state: &mut CommandState,
    ) -> Result<(), ActorProcessingErr> {
        // Its own span: ractor does not carry the sender's (a turn's) along,
        // and everything here is synchronous, so it stays entered.
        let _span = tracing::info_span!(
            "command",
            task_id = %state.task.id,
            agent_id = %state.task.owner_agent_id
        )
        .entered();
        match message {
            CommandMsg::Output(stream, data, reply) => {
                self.record_output(state, stream, data)?;
                let _ = reply.send(());
            }
            CommandMsg::Eof(_) => {
                state.open_streams = state.open_streams.saturating_sub(1);
                self.finish(&myself, state)?;
            }
            CommandMsg::Exited(exit) => {
                // Reaped: the unit's pid is no longer ours to signal.
                state.guard.ended = true;
                state.exit = Some(exit);
                // Closing stdin lets a reader of it see the end.
                state.stdin = None;
                self.finish(&myself, state)?;
            }
            CommandMsg::Input(bytes, reply) => {
                let sent = match &state.stdin {
                    Some(stdin) => stdin.try_send(bytes).map_err(|e| match e {
                        TrySendError::Full(_) => StdinRefused::Full,
                        TrySendError::Closed(_) => StdinRefused::Ended,
                    }),
                    None => Err(StdinRefused::Ended),
                };
                let _ = reply.send(sent);
            }
            CommandMsg::Stop { grace, reply } => {
                state.stopping = true;
                state.guard.terminate();
                myself.send_after(grace, || CommandMsg::Kill);
                let _ = reply.send(());
            }
            CommandMsg::Kill => {
                if !state.guard.ended {
                    state.guard.kill();
                }
            }
        }
        Ok(())
    }

    /// A command supervises nothing; never stop on a child's exit.
    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<CommandMsg>,
        _event: SupervisionEvent,
        _state: &mut CommandState,
    ) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<CommandMsg>,
        state: &mut CommandState,
    ) -> Result<(), ActorProcessingErr> {
        if !state.guard.ended {
            warn!(task_id = %state.task.id, "command actor stopped before its process ended; ending its unit");
        }
        Ok(())
    }
}
