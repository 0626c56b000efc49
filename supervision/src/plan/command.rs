//! A command task's life, decided: started as running, failed to start,
//! its output stored into a bounded ring, and its end (completed, failed,
//! or stopped) with the owner told when the tool already yielded. The end
//! is a guarded write: a cleanup's `stopped`, committed first, stands.

use crate::effect::{Batch, Directive, Plan, Write};
use crate::task::task_label;
use crate::workspace::Place;
use crate::{
    AgentId, EventKind, ExitInfo, MessageRecord, OutputChunk, Provenance, Stream, TaskId, TaskKind,
    TaskRecord, TaskStatus,
};

/// A command `line` (already redacted) that `owner` starts in `place` at
/// `now_ms`: the running task, and the plan that records it.
pub fn start(owner: AgentId, line: String, place: Place, now_ms: u64) -> (Plan, TaskRecord) {
    let task = TaskRecord {
        command: Some(line.clone()),
        place: Some(place),
        ..TaskRecord::running(
            TaskId::generate(),
            owner,
            TaskKind::Command,
            task_label(&line),
            now_ms,
        )
    };
    let batch = Batch::new().put_task(task.clone(), task.label.clone());
    (Plan::writes(batch), task)
}

/// `task`'s process group, once it runs: recorded so a restart or a stop
/// can end the group, and never a recycled pid.
pub fn running(task: &TaskRecord, process: crate::ProcessRef) -> (Plan, TaskRecord) {
    let task = TaskRecord {
        process: Some(process),
        ..task.clone()
    };
    (
        Plan::writes(Batch::new().write(Write::PutTask(task.clone()))),
        task,
    )
}

/// `task` could not start because of `why`.
pub fn failed_to_start(task: &TaskRecord, why: &str, now_ms: u64) -> Plan {
    let failed = TaskRecord {
        status: TaskStatus::Failed,
        output: Some(format!("could not start: {why}")),
        updated_at_ms: now_ms,
        ..task.clone()
    };
    Plan::writes(Batch::new().write(Write::PutTask(failed)))
}

/// Stores new output of `task_id` on `stream`: `dropped` are the offsets of
/// stored chunks the ring lets go (oldest first), `pieces` the new chunks
/// still worth keeping. Followers are told once it lands.
pub fn output(
    task_id: TaskId,
    stream: Stream,
    dropped: &[u64],
    pieces: Vec<(u64, Vec<u8>)>,
) -> Plan {
    let mut batch = Batch::new();
    for offset in dropped {
        batch = batch.write(Write::DropOutput {
            task_id,
            offset: *offset,
        });
    }
    for (offset, data) in pieces {
        batch = batch.write(Write::PutOutput {
            task_id,
            chunk: OutputChunk {
                offset,
                stream,
                data,
            },
        });
    }
    Plan::writes(batch).then(Directive::NotifyOutput(task_id))
}

/// How a command's process ended.
#[derive(Debug, Clone, Copy)]
pub struct Exit {
    pub exit: ExitInfo,
    /// Its stop was asked for (`TaskStop`).
    pub stopping: bool,
}

impl Exit {
    /// The status the task ends in.
    pub fn status(self) -> TaskStatus {
        match (self.stopping, self.exit.success()) {
            (true, _) => TaskStatus::Stopped,
            (false, true) => TaskStatus::Completed,
            (false, false) => TaskStatus::Failed,
        }
    }
}

/// Ends `task` at `now_ms` with `tail`, the end of its output, as result;
/// when the tool already yielded (`tell_owner`), a message tells the owner
/// and wakes it once the batch lands.
pub fn end(task: &TaskRecord, exit: Exit, tail: String, tell_owner: bool, now_ms: u64) -> Plan {
    let status = exit.status();
    let owner = task.owner_agent_id;
    let ended = TaskRecord {
        status,
        exit: Some(exit.exit),
        output: Some(tail.clone()),
        updated_at_ms: now_ms,
        ..task.clone()
    };
    let mut batch = Batch::new()
        .event(
            owner,
            EventKind::TaskUpdated {
                task_id: task.id,
                kind: task.kind.name().into(),
                status,
                detail: exit.exit.describe(),
            },
        )
        .write(Write::EndTask(ended));
    let mut told = None;
    if tell_owner {
        let label = task.command.clone().unwrap_or_else(|| task.label.clone());
        let body = format!(
            "command `{label}` {} with {}\n{tail}",
            status.name(),
            exit.exit.describe(),
        );
        let provenance = Provenance::TaskResult { task_id: task.id };
        let message = MessageRecord::queued(owner, provenance, body, None, now_ms);
        told = Some(message.id);
        batch = batch.put_queued(message);
    }
    Plan::writes(batch).wake(owner, told)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use proptest::prelude::*;

    use super::*;

    fn place() -> Place {
        Place {
            workspace_id: "agent_home".into(),
            dir: PathBuf::from("/tmp/w"),
        }
    }

    proptest! {
        /// A command ends once, by a guarded write, in the status its exit
        /// and a stop say; its owner is told (and woken) exactly when the
        /// tool yielded, by a message naming the command and its tail.
        #[test]
        fn a_command_ends_once_and_tells_only_after_a_yield(
            code in proptest::option::of(-3i32..4),
            stopping in any::<bool>(),
            tell in any::<bool>(),
            tail in "\\PC{0,40}",
            now in any::<u64>(),
        ) {
            let (_, task) = start(AgentId::generate(), "make -j2".into(), place(), 1);
            let exit = Exit {
                exit: code.map_or(ExitInfo::Signal(9), ExitInfo::Code),
                stopping,
            };
            let plan = end(&task, exit, tail.clone(), tell, now);
            let ends: Vec<&TaskRecord> = plan.batch.writes.iter().filter_map(|w| match w {
                Write::EndTask(t) => Some(t),
                _ => None,
            }).collect();
            prop_assert_eq!(ends.len(), 1);
            let want = if stopping {
                TaskStatus::Stopped
            } else if code == Some(0) {
                TaskStatus::Completed
            } else {
                TaskStatus::Failed
            };
            prop_assert_eq!(ends[0].status, want);
            prop_assert_eq!(ends[0].output.as_deref(), Some(tail.as_str()));
            let told: Vec<&MessageRecord> = plan.batch.writes.iter().filter_map(|w| match w {
                Write::PutMessage(m) => Some(m),
                _ => None,
            }).collect();
            prop_assert_eq!(told.len(), usize::from(tell));
            prop_assert_eq!(told.first().map(|m| m.id), plan.woken());
            if let Some(message) = told.first() {
                prop_assert!(message.body.contains("make -j2"));
                prop_assert!(message.body.ends_with(tail.as_str()));
            }
        }

        /// Output drops exactly the offsets the ring let go and stores the
        /// pieces kept, then tells the followers.
        #[test]
        fn output_drops_and_stores_what_the_ring_says(
            dropped in proptest::collection::vec(any::<u64>(), 0..5),
            pieces in proptest::collection::vec((any::<u64>(), proptest::collection::vec(any::<u8>(), 0..8)), 0..5),
        ) {
            let task_id = TaskId::generate();
            let plan = output(task_id, Stream::Stdout, &dropped, pieces.clone());
            let drops: Vec<u64> = plan.batch.writes.iter().filter_map(|w| match w {
                Write::DropOutput { offset, .. } => Some(*offset),
                _ => None,
            }).collect();
            prop_assert_eq!(drops, dropped);
            let puts = plan.batch.writes.iter().filter(|w| matches!(w, Write::PutOutput { .. })).count();
            prop_assert_eq!(puts, pieces.len());
            prop_assert_eq!(plan.directives, vec![Directive::NotifyOutput(task_id)]);
        }
    }
}
