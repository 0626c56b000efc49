//! Tasks: managed execution owned by an agent. The first kind is the
//! supervision handle of a private child agent (`child_agent_task`).

use serde::{Deserialize, Serialize};

use crate::ids::{AgentId, TaskId};

/// What a task runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TaskKind {
    /// The parent's handle on a private child agent.
    ChildAgent { child_agent_id: AgentId },
    /// A shell command in the agent's workspace, in its own process group.
    Command,
}

impl TaskKind {
    pub const fn name(&self) -> &'static str {
        match self {
            TaskKind::ChildAgent { .. } => "child_agent_task",
            TaskKind::Command => "command",
        }
    }
}

/// Where a command's process group runs, so a restart can find it and make
/// sure it is gone. The start time (clock ticks since boot, from
/// `/proc/<pid>/stat`) tells a recycled pid from ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRef {
    pub pgid: i32,
    pub start_ticks: u64,
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExitInfo {
    Code(i32),
    Signal(i32),
}

impl ExitInfo {
    pub fn describe(&self) -> String {
        match self {
            ExitInfo::Code(code) => format!("exit code {code}"),
            ExitInfo::Signal(signal) => format!("signal {signal}"),
        }
    }

    pub const fn success(&self) -> bool {
        matches!(self, ExitInfo::Code(0))
    }
}

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TaskStatus {
    Running,
    /// Finished its work; `output` holds the result.
    Completed,
    /// Its supervisor gave up on it.
    Failed,
    /// Stopped on purpose: `TaskStop`, or its owner was cleaned up.
    Stopped,
    /// The daemon stopped or crashed while it ran; its process is gone.
    Interrupted,
}

impl TaskStatus {
    pub const fn name(self) -> &'static str {
        match self {
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Stopped => "stopped",
            TaskStatus::Interrupted => "interrupted",
        }
    }

    /// Ends a running task with `to`; `None` if it already ended (or `to`
    /// is not an end): a task ends once.
    pub fn end(self, to: TaskStatus) -> Option<TaskStatus> {
        (self == TaskStatus::Running && to.is_terminal()).then_some(to)
    }

    pub const fn is_terminal(self) -> bool {
        match self {
            TaskStatus::Running => false,
            TaskStatus::Completed
            | TaskStatus::Failed
            | TaskStatus::Stopped
            | TaskStatus::Interrupted => true,
        }
    }
}

/// One task as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub id: TaskId,
    pub owner_agent_id: AgentId,
    pub kind: TaskKind,
    /// A stable, short label for the parent, from the spawn text.
    pub label: String,
    pub status: TaskStatus,
    /// The result, or why it failed or stopped.
    pub output: Option<String>,
    /// The command line, for a command task.
    pub command: Option<String>,
    /// The running process group, for a command task.
    pub process: Option<ProcessRef>,
    /// How the command ended.
    pub exit: Option<ExitInfo>,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
    /// Where a command ran: its agent's active workspace when it started.
    pub place: Option<crate::workspace::Place>,
    /// The git worktree this task owns (a child in `worktree` mode).
    pub worktree: Option<crate::workspace::Worktree>,
}

impl TaskRecord {
    /// A task that starts running now, with nothing yet to report.
    pub fn running(id: TaskId, owner: AgentId, kind: TaskKind, label: String, now_ms: u64) -> Self {
        Self {
            id,
            owner_agent_id: owner,
            kind,
            label,
            status: TaskStatus::Running,
            output: None,
            command: None,
            process: None,
            exit: None,
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
            place: None,
            worktree: None,
        }
    }

    /// The worktree this task still has on disk: owned, not yet removed.
    pub fn pending_worktree(&self) -> Option<&crate::workspace::Worktree> {
        self.worktree.as_ref().filter(|w| !w.removed)
    }
}

/// Which stream a piece of command output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub const fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// A piece of output at a byte offset of the task's combined output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputChunk {
    pub offset: u64,
    pub stream: Stream,
    /// As one run of bytes: the same encoding as a sequence of `u8` (a
    /// length, then the bytes) written in one go instead of byte by byte.
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
}

/// What the ring buffer should drop so that at most `capacity` bytes
/// stay: the offsets of the oldest chunks to delete. `chunks` are the
/// retained (offset, len) pairs in order; `end` the offset after the last.
/// The newest chunk always stays, even if it alone is larger.
pub fn chunks_to_drop(chunks: &[(u64, u64)], end: u64, capacity: u64) -> Vec<u64> {
    let mut drop = Vec::new();
    for (offset, _) in chunks.iter().take(chunks.len().saturating_sub(1)) {
        // Keep a chunk once what follows it fits.
        if end.saturating_sub(*offset) <= capacity {
            break;
        }
        drop.push(*offset);
    }
    drop
}

/// The longest task label, in characters.
pub const MAX_LABEL_CHARS: usize = 80;

/// The label a parent sees for a delegated task: the first line of the
/// initial message, cut to [`MAX_LABEL_CHARS`] characters.
pub fn task_label(initial_message: &str) -> String {
    let first = initial_message
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if first.chars().count() <= MAX_LABEL_CHARS {
        first.to_owned()
    } else {
        let mut cut: String = first.chars().take(MAX_LABEL_CHARS - 1).collect();
        cut.push('…');
        cut
    }
}

impl TaskRecord {
    /// Calls `f` on the task's free texts (label, command line, output), for
    /// redaction.
    pub fn texts_mut(&mut self, f: &mut dyn FnMut(&mut String)) {
        f(&mut self.label);
        self.command
            .iter_mut()
            .chain(self.output.iter_mut())
            .for_each(f);
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn arb_status() -> impl Strategy<Value = TaskStatus> {
        prop::sample::select(vec![
            TaskStatus::Running,
            TaskStatus::Completed,
            TaskStatus::Failed,
            TaskStatus::Stopped,
            TaskStatus::Interrupted,
        ])
    }

    proptest! {
        #[test]
        fn a_task_ends_once(steps in proptest::collection::vec(arb_status(), 0..20)) {
            let mut status = TaskStatus::Running;
            let mut ends = 0;
            for to in steps {
                if let Some(next) = status.end(to) {
                    status = next;
                    ends += 1;
                }
            }
            prop_assert!(ends <= 1);
            prop_assert_eq!(ends == 1, status.is_terminal());
        }

        /// Writes chunks of arbitrary sizes the way a command's actor does
        /// (append, then drop what `chunks_to_drop` names from the front)
        /// and checks after every write that the ring holds exactly the
        /// last bytes of everything written: as many of the newest whole
        /// chunks as fit, never fewer, and the dropped count is the rest.
        #[test]
        fn the_ring_keeps_the_newest_output_within_capacity(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..600), 1..60),
            capacity in 1u64..4_000,
        ) {
            let mut written: Vec<u8> = Vec::new();
            let mut ring: std::collections::VecDeque<(u64, Vec<u8>)> = Default::default();
            let mut dropped_bytes = 0u64;
            let mut starts = Vec::new();
            for data in chunks {
                let offset = written.len() as u64;
                starts.push(offset);
                written.extend_from_slice(&data);
                ring.push_back((offset, data));
                let end = written.len() as u64;
                let spans: Vec<(u64, u64)> =
                    ring.iter().map(|(o, d)| (*o, d.len() as u64)).collect();
                let dropped = chunks_to_drop(&spans, end, capacity);
                for offset in dropped {
                    let (oldest, data) = ring.pop_front().expect("drops only retained chunks");
                    // Dropped chunks are the oldest ones, in order.
                    prop_assert_eq!(offset, oldest);
                    dropped_bytes += data.len() as u64;
                }
                let kept: Vec<u8> = ring.iter().flat_map(|(_, d)| d.iter().copied()).collect();
                let first = ring.front().map(|(o, _)| *o).expect("the newest chunk always stays");
                // The kept bytes are the tail of everything written.
                prop_assert_eq!(&kept[..], &written[first as usize..]);
                prop_assert_eq!(dropped_bytes, first, "dropped count");
                prop_assert_eq!(dropped_bytes + kept.len() as u64, end);
                // What stays fits, unless the newest chunk alone is larger.
                prop_assert!(kept.len() as u64 <= capacity || ring.len() == 1);
                // Nothing was dropped that would have fitted: the chunk
                // before the oldest kept one would overflow the capacity.
                if let Some(before) = starts.iter().rev().find(|o| **o < first) {
                    prop_assert!(end - before > capacity, "dropped a chunk that fitted");
                }
            }
        }
    }

    #[test]
    fn labels_come_from_the_first_line() {
        assert_eq!(task_label("\n  fix the build\nthen test"), "fix the build");
        assert_eq!(task_label(""), "");
    }

    proptest! {
        #[test]
        fn labels_are_bounded_and_single_line(text in "\\PC{0,300}") {
            let label = task_label(&text);
            prop_assert!(label.chars().count() <= MAX_LABEL_CHARS);
            prop_assert!(!label.contains('\n'));
        }
    }
}
