//! Tasks: managed execution owned by an agent. The first kind is the
//! supervision handle of a private child agent (`child_agent_task`).

use serde::{Deserialize, Serialize};

use crate::ids::{AgentId, TaskId};

/// What a task runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TaskKind {
    /// The parent's handle on a private child agent.
    ChildAgent { child_agent_id: AgentId },
}

impl TaskKind {
    pub const fn name(&self) -> &'static str {
        match self {
            TaskKind::ChildAgent { .. } => "child_agent_task",
        }
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
}

impl TaskStatus {
    pub const fn name(self) -> &'static str {
        match self {
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Stopped => "stopped",
        }
    }

    pub const fn is_terminal(self) -> bool {
        match self {
            TaskStatus::Running => false,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Stopped => true,
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
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

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
