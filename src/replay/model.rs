//! What a replay is, as it is stored: its spec (which turns, which
//! candidate, which budget), its status and counts, and one report per
//! replayed turn. Kept apart from the agents' records, events and memory.

use holarchy_actors::replay::{Class, Decided};
use holarchy_supervision::{AgentId, BrainConfig, ReplayId, RunId, TokenUsage};
use serde::{Deserialize, Serialize};

/// The most turns one replay may choose.
pub const MAX_TURNS: u32 = 10_000;
/// The most concurrent turns one replay may run.
pub const MAX_CONCURRENCY: u32 = 16;
/// The most replays stored at once (each its reports): past it, a new one
/// waits for an operator to delete one.
pub const MAX_STORED: usize = 64;
/// The most replays running at once, daemon-wide.
pub const MAX_RUNNING: usize = 4;
/// Bytes of each text a report keeps (a reply, a call's input).
pub const REPORT_TEXT_BYTES: usize = 4096;
/// Steps of each side a report keeps.
pub const REPORT_STEPS: usize = 32;
/// Calls of each step a report keeps.
pub const REPORT_CALLS: usize = 64;

/// Which turns, through which candidate, within which budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplaySpec {
    pub agent_id: AgentId,
    /// Turns that started at or after this (Unix ms), if set.
    pub from_ms: Option<u64>,
    /// Turns that started before this (Unix ms), if set.
    pub to_ms: Option<u64>,
    /// Only these turns, if any are named.
    pub run_ids: Vec<RunId>,
    /// At most this many, the newest of those chosen.
    pub max_turns: u32,
    pub candidate: CandidateSpec,
    pub budget: Budget,
    /// When the replay started, Unix ms: the turns chosen are those that
    /// started before, the same on a resume.
    pub until_ms: u64,
}

/// What the candidate changes; unset fields keep the agent's own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CandidateSpec {
    pub brain: Option<BrainConfig>,
    /// A role prompt's whole text.
    pub role_prompt: Option<String>,
    /// A folder of skills, read by the daemon.
    pub skills_dir: Option<String>,
    /// Tools its calls may use (all, when unset) and may not.
    pub allow_tools: Option<Vec<String>>,
    pub deny_tools: Vec<String>,
    /// The operator's name for it, shown in listings.
    pub label: String,
}

/// What a replay may spend. Zero means no limit for tokens and wall time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    pub max_tokens: u64,
    pub max_wall_ms: u64,
    /// Turns replayed at once, 1 to [`MAX_CONCURRENCY`].
    pub concurrency: u32,
}

/// Where a replay is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReplayStatus {
    Running,
    /// Every chosen turn was replayed.
    Completed,
    /// An operator cancelled it; what was replayed is kept.
    Cancelled,
    /// The daemon stopped (or was killed) while it ran; it may be resumed.
    Interrupted,
    /// It stopped at its budget (tokens or wall time); `reason` says which.
    BudgetSpent,
    /// It could not go on (the store failed); `reason` says why.
    Failed,
}

impl ReplayStatus {
    pub const fn name(self) -> &'static str {
        match self {
            ReplayStatus::Running => "running",
            ReplayStatus::Completed => "completed",
            ReplayStatus::Cancelled => "cancelled",
            ReplayStatus::Interrupted => "interrupted",
            ReplayStatus::BudgetSpent => "budget_spent",
            ReplayStatus::Failed => "failed",
        }
    }

    /// Whether a resume may take it up again.
    pub const fn resumable(self) -> bool {
        matches!(
            self,
            ReplayStatus::Cancelled
                | ReplayStatus::Interrupted
                | ReplayStatus::BudgetSpent
                | ReplayStatus::Failed
        )
    }
}

/// Counts over a replay's reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    pub same: u32,
    pub same_tools_different_text: u32,
    pub different_tools: u32,
    pub errors: u32,
    /// Calls answered "not recorded", over every turn.
    pub unrecorded_calls: u64,
    pub recorded_tokens: u64,
    pub candidate_tokens: u64,
}

impl Summary {
    pub fn add(&mut self, report: &TurnReport) {
        match Class::parse(&report.class) {
            Some(Class::Same) => self.same += 1,
            Some(Class::SameToolsDifferentText) => self.same_tools_different_text += 1,
            Some(Class::DifferentTools) => self.different_tools += 1,
            Some(Class::Error) | None => self.errors += 1,
        }
        self.unrecorded_calls += u64::from(report.unrecorded_calls);
        let total = |u: &Option<TokenUsage>| {
            u.map_or(0, |u| u.prompt_tokens.saturating_add(u.completion_tokens))
        };
        self.recorded_tokens = self
            .recorded_tokens
            .saturating_add(total(&report.recorded_usage));
        self.candidate_tokens = self
            .candidate_tokens
            .saturating_add(total(&report.candidate_usage));
    }

    pub fn replayed(&self) -> u32 {
        self.same + self.same_tools_different_text + self.different_tools + self.errors
    }
}

/// One replay, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayRecord {
    pub id: ReplayId,
    /// The namespace of its agent: only callers of it see the replay.
    pub namespace: String,
    pub spec: ReplaySpec,
    pub status: ReplayStatus,
    /// Why it stopped, when it stopped short.
    pub reason: String,
    /// Turns chosen (known once the log was read).
    pub selected: u32,
    pub summary: Summary,
    pub created_ms: u64,
    pub updated_ms: u64,
}

/// One replayed turn: the recorded decision beside the candidate's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnReport {
    /// Its place among the chosen turns, oldest first.
    pub index: u32,
    pub run_id: RunId,
    pub agent_id: AgentId,
    /// When the recorded turn started, Unix ms.
    pub at_ms: u64,
    /// A [`Class`] name.
    pub class: String,
    pub recorded: Decided,
    pub candidate: Decided,
    pub unrecorded_calls: u32,
    pub recorded_usage: Option<TokenUsage>,
    pub candidate_usage: Option<TokenUsage>,
    /// Why the turn could not be replayed, if it could not.
    pub error: Option<String>,
}
