//! Bounds on what agents (and the brains that drive them, which the
//! operator does not control) can make the daemon do, and the counting that
//! enforces them. A bound hit by a brain is a tool error it can read; one
//! hit by a gRPC client is a status. Nothing here takes a daemon-wide lock:
//! daemon totals are atomics, per-agent counts come from the agent's own
//! linked actors or the store's indexes, read under the supervisor's guard
//! the structural change already holds.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use holarchy_supervision::AgentId;

use crate::directory::Member;
use crate::store::StoreError;
use crate::tools::{cap_output, ToolResult};
use crate::Ctx;

/// The bounds of one daemon, each settable on `holarchy serve`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest input of one tool call, as compact JSON bytes, after its
    /// placeholders are filled (default 64 KiB, the message limit).
    pub max_tool_input_bytes: usize,
    /// Largest `ApplyPatch` input (default 1 MiB): a patch carries whole
    /// hunks of files, so it gets more room than other tools.
    pub max_patch_input_bytes: usize,
    /// Most tool calls one decision of a brain may ask for (default 128);
    /// past it, none of that step's calls runs.
    pub max_tool_calls_per_step: usize,
    /// Most decisions one turn may take (default 64, the most a brain
    /// configuration may ask for); a brain asking for more gets this many.
    pub max_steps_per_turn: u32,
    /// Deepest private supervision chain below a public agent (default 32):
    /// a public agent's private child is at depth 1.
    pub max_spawn_depth: u32,
    /// Most live private children one agent may supervise (default 128).
    pub max_children_per_agent: usize,
    /// Most armed waits (timers and triggers) one agent may hold (default
    /// 256).
    pub max_waits_per_agent: usize,
    /// Most commands one agent may have running (default 16).
    pub max_commands_per_agent: usize,
    /// Most commands running in the whole daemon (default 256).
    pub max_commands: usize,
    /// Most command-brain steps running at once in the whole daemon
    /// (default 64): each is a process. A turn past it waits for a slot.
    pub max_brain_processes: usize,
    /// Most live agents in the daemon, public and private (default
    /// 1,000,000; idle agents are cheap, but not free).
    pub max_agents: usize,
    /// Most turns one agent starts per minute, in bursts of up to this many
    /// (default 600). Past it the next turn waits (it is not failed), so a
    /// message that queues itself again runs at a bounded rate.
    pub max_turns_per_minute: u32,
    /// How many turns a message gets before a daemon crash during its
    /// turn sets it aside (default 3): a message whose turn crashed the
    /// daemon this many times is marked failed (`crashed_daemon`).
    pub max_message_attempts: u32,
    /// Largest output of one tool call kept (default 256 KiB): a larger
    /// one is cut, its strings shortened with a marker giving the full
    /// size. Also the most output one `ToolCalled` event stores.
    pub max_tool_result_bytes: usize,
    /// Bytes of tool results (inputs as recorded, outputs as kept) one
    /// turn may hold (default 8 MiB): the turn keeps every result until
    /// it ends and shows them to its brain at each step. Once spent, the
    /// turn's further tool calls get a tool error and do not run; the
    /// brain can still reply and end the turn.
    pub max_turn_result_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_tool_input_bytes: holarchy_supervision::limits::MAX_MESSAGE_LEN,
            max_patch_input_bytes: 1024 * 1024,
            max_tool_calls_per_step: 128,
            max_steps_per_turn: holarchy_supervision::brain::MAX_STEPS,
            max_spawn_depth: 32,
            max_children_per_agent: 128,
            max_waits_per_agent: 256,
            max_commands_per_agent: 16,
            max_commands: 256,
            max_brain_processes: 64,
            max_agents: 1_000_000,
            max_turns_per_minute: 600,
            max_message_attempts: 3,
            max_tool_result_bytes: 256 * 1024,
            max_turn_result_bytes: 8 * 1024 * 1024,
        }
    }
}

impl Limits {
    /// The input bound of `tool`.
    pub fn tool_input_bytes(&self, tool: &str) -> usize {
        match tool {
            "ApplyPatch" => self.max_patch_input_bytes.max(self.max_tool_input_bytes),
            _ => self.max_tool_input_bytes,
        }
    }
}

/// A bound that refused an action; the text is what the brain or client
/// reads, so it names the bound and its flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error("the daemon holds {limit} live agents, its limit (--max-agents)")]
    Agents { limit: usize },
    #[error(
        "a private child here would be at depth {depth}; the limit is {limit} (--max-spawn-depth)"
    )]
    Depth { depth: u32, limit: u32 },
    #[error("this agent already supervises {limit} live children, its limit (--max-children)")]
    Children { limit: usize },
    #[error("this agent already holds {limit} armed waits, its limit (--max-waits)")]
    Waits { limit: usize },
    #[error("this agent already runs {limit} commands, its limit (--max-agent-commands)")]
    AgentCommands { limit: usize },
    #[error("the daemon already runs {limit} commands, its limit (--max-commands)")]
    Commands { limit: usize },
    #[error(
        "this turn's tool results already hold {spent} bytes; the limit is {limit} (--max-turn-result-bytes), so no more tool calls run in this turn: reply without tool calls to finish it"
    )]
    TurnResults { spent: usize, limit: usize },
}

/// The least room a result is cut to near the end of a turn's budget, so
/// its marker still fits and says what happened.
const MIN_RESULT_ROOM: usize = 4 * 1024;

/// What one turn's tool results have used of `--max-turn-result-bytes`,
/// and the cut of each to `--max-tool-result-bytes`. A turn holds at most
/// about the budget (plus one result's marker room): every result is
/// charged as kept, and cut to the room left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResultBudget {
    spent: usize,
    limit: usize,
    per_result: usize,
}

impl ResultBudget {
    pub fn new(limits: &Limits) -> Self {
        Self {
            spent: 0,
            limit: limits.max_turn_result_bytes,
            per_result: limits.max_tool_result_bytes,
        }
    }

    /// Refuses a tool call once the budget is spent.
    pub fn check(&self) -> Result<(), LimitError> {
        if self.spent >= self.limit {
            return Err(LimitError::TurnResults {
                spent: self.spent,
                limit: self.limit,
            });
        }
        Ok(())
    }

    /// Cuts `result`'s output to its bound (and the room left) and charges
    /// what is kept.
    pub fn charge(&mut self, result: &mut ToolResult) {
        let room = self
            .per_result
            .min(self.limit.saturating_sub(self.spent).max(MIN_RESULT_ROOM));
        result.output = cap_output(std::mem::take(&mut result.output), room);
        self.spent = self
            .spent
            .saturating_add(result.output.len() + result.input.len() + result.tool.len());
    }

    /// Bytes charged so far.
    pub fn spent(&self) -> usize {
        self.spent
    }
}

/// Daemon-wide counts kept beside the directory of running actors.
#[derive(Debug, Default)]
pub struct Usage {
    /// Agents reserved by a creation that has not yet registered them all
    /// in the directory (or given up).
    creating: AtomicUsize,
    /// Commands running, shared with the slots that hold them.
    commands: Arc<AtomicUsize>,
}

impl Usage {
    /// Commands running now.
    pub fn commands(&self) -> usize {
        self.commands.load(Ordering::SeqCst)
    }
}

/// Room for agents about to be created; released on drop, once they are in
/// the directory (or failed to start). While both the reservation and the
/// directory count an agent it counts twice: a creation racing another may
/// be refused a little early, never let past the bound.
#[must_use]
#[derive(Debug)]
pub struct AgentSlots<'a> {
    usage: &'a Usage,
    count: usize,
}

impl Drop for AgentSlots<'_> {
    fn drop(&mut self) {
        self.usage.creating.fetch_sub(self.count, Ordering::SeqCst);
    }
}

/// Reserves room for `count` new agents under `--max-agents`.
pub fn reserve_agents(ctx: &Ctx, count: usize) -> Result<AgentSlots<'_>, LimitError> {
    let limit = ctx.config.limits.max_agents;
    // Reserve first, then read the directory: a creation that released
    // its reservation had registered its agents before, so one of the two
    // reads always sees them.
    let creating = ctx.usage.creating.fetch_add(count, Ordering::SeqCst) + count;
    let slots = AgentSlots {
        usage: &ctx.usage,
        count,
    };
    let counts = ctx.directory.counts();
    if counts.public + counts.private + creating > limit {
        return Err(LimitError::Agents { limit });
    }
    Ok(slots)
}

/// One running command's place under `--max-commands`; given back when
/// dropped (when the command ends or its actor dies).
#[must_use]
#[derive(Debug)]
pub struct CommandSlot(Arc<AtomicUsize>);

impl Drop for CommandSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Takes a command slot for `owner`: refused past the agent's or the
/// daemon's bound. The per-agent count reads the owner's linked command
/// actors, so callers hold the owner's structure lock (as starting a
/// command does).
pub fn command_slot(ctx: &Ctx, owner: AgentId) -> Result<CommandSlot, LimitError> {
    let limits = &ctx.config.limits;
    if members_of(ctx, owner).commands >= limits.max_commands_per_agent {
        return Err(LimitError::AgentCommands {
            limit: limits.max_commands_per_agent,
        });
    }
    let limit = limits.max_commands;
    ctx.usage
        .commands
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n < limit).then_some(n + 1)
        })
        .map_err(|_| LimitError::Commands { limit })?;
    Ok(CommandSlot(ctx.usage.commands.clone()))
}

/// What runs linked under one agent's actor, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Members {
    pub agents: usize,
    pub tasks: usize,
    pub waits: usize,
    pub commands: usize,
}

/// Counts the actors linked under `agent`'s actor. Bounded by the limits
/// themselves, so it costs no more than the bounds allow; no store read.
pub fn members_of(ctx: &Ctx, agent: AgentId) -> Members {
    let mut members = Members::default();
    let Some(entry) = ctx.directory.get(agent) else {
        return members;
    };
    for child in entry.actor.get_cell().get_children() {
        match ctx.directory.member(child.get_id()) {
            Some(Member::Agent(_)) => members.agents += 1,
            Some(Member::Task(_)) => members.tasks += 1,
            Some(Member::Wait(_)) => members.waits += 1,
            Some(Member::Command(_)) => members.commands += 1,
            // Starting or stopping: not registered (any more).
            None => {}
        }
    }
    members
}

/// Refuses a new armed wait for `owner` past `--max-waits`. Callers hold
/// the owner's structure lock, as arming a wait does.
pub fn check_waits(ctx: &Ctx, owner: AgentId) -> Result<(), LimitError> {
    let limit = ctx.config.limits.max_waits_per_agent;
    if members_of(ctx, owner).waits >= limit {
        return Err(LimitError::Waits { limit });
    }
    Ok(())
}

/// Refuses a new private child of `supervisor` past `--max-children` or
/// `--max-spawn-depth`. Reads the store's index of live children and walks
/// at most `max_spawn_depth` supervisors up; callers hold the
/// supervisor's structure lock.
pub fn check_private_child(ctx: &Ctx, supervisor: AgentId) -> Result<(), SpawnLimitError> {
    let limits = &ctx.config.limits;
    let depth = depth_of(ctx, supervisor, limits.max_spawn_depth)? + 1;
    if depth > limits.max_spawn_depth {
        return Err(LimitError::Depth {
            depth,
            limit: limits.max_spawn_depth,
        }
        .into());
    }
    let children = ctx.store.children_of(supervisor)?.len();
    if children >= limits.max_children_per_agent {
        return Err(LimitError::Children {
            limit: limits.max_children_per_agent,
        }
        .into());
    }
    Ok(())
}

/// Why a spawn bound could not be checked, or refused.
#[derive(Debug, thiserror::Error)]
pub enum SpawnLimitError {
    #[error(transparent)]
    Limit(#[from] LimitError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// How many supervisors stand between `agent` and its public root (0 for
/// a public agent), counting no further than `cap + 1`.
fn depth_of(ctx: &Ctx, agent: AgentId, cap: u32) -> Result<u32, StoreError> {
    let mut depth = 0;
    let mut at = agent;
    while depth <= cap {
        match ctx.store.agent(at)?.and_then(|r| r.supervisor_agent_id) {
            Some(supervisor) => {
                depth += 1;
                at = supervisor;
            }
            None => return Ok(depth),
        }
    }
    Ok(depth)
}

/// An agent's turn pace, in the generic cell rate algorithm: one instant
/// per agent (no timer, no history), the earliest moment the bucket is
/// empty again. Up to `per_minute` turns may start at once; after that one
/// every `60 s / per_minute`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnPace {
    theoretical: Option<Instant>,
}

impl TurnPace {
    /// Takes a turn at `now`, or says how long until one may start.
    pub fn take(&mut self, now: Instant, per_minute: u32) -> Result<(), Duration> {
        let window = Duration::from_secs(60);
        let per_turn = window / per_minute.max(1);
        let tolerance = window.saturating_sub(per_turn);
        let theoretical = self.theoretical.map_or(now, |t| t.max(now));
        let ahead = theoretical - now;
        if ahead > tolerance {
            return Err(ahead - tolerance);
        }
        self.theoretical = Some(theoretical + per_turn);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_the_limit_passes_then_turns_are_spaced() {
        let start = Instant::now();
        let mut pace = TurnPace::default();
        for _ in 0..6 {
            assert_eq!(pace.take(start, 6), Ok(()));
        }
        let wait = pace.take(start, 6).expect_err("the seventh turn waits");
        assert_eq!(wait, Duration::from_secs(10));
        // Not taken while refused: the wait does not grow by asking.
        assert_eq!(pace.take(start, 6), Err(wait));
        assert_eq!(pace.take(start + wait, 6), Ok(()));
        assert!(pace.take(start + wait, 6).is_err());
    }

    #[test]
    fn an_idle_agent_gets_its_whole_burst_back() {
        let start = Instant::now();
        let mut pace = TurnPace::default();
        for _ in 0..3 {
            assert_eq!(pace.take(start, 3), Ok(()));
        }
        let later = start + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(pace.take(later, 3), Ok(()));
        }
        assert!(pace.take(later, 3).is_err());
    }

    #[test]
    fn over_any_minute_at_most_twice_the_rate_starts() {
        // A bucket drained at the end of one minute and refilled over the
        // next lets at most 2 * per_minute through in any 60 s span.
        let start = Instant::now();
        let mut pace = TurnPace::default();
        let mut starts = Vec::new();
        let mut now = start;
        while now < start + Duration::from_secs(300) {
            if pace.take(now, 10).is_ok() {
                starts.push(now);
            }
            now += Duration::from_millis(250);
        }
        for (i, first) in starts.iter().enumerate() {
            let within = starts[i..]
                .iter()
                .take_while(|t| **t < *first + Duration::from_secs(60))
                .count();
            assert!(within <= 20, "{within} turns within a minute");
        }
        assert!(starts.len() >= 50, "{} turns in five minutes", starts.len());
    }

    fn result(output: String) -> ToolResult {
        ToolResult {
            tool: "TaskOutput".into(),
            input: "{}".into(),
            output,
            is_error: false,
        }
    }

    #[test]
    fn a_turn_is_refused_tools_once_its_results_spend_the_budget() {
        let limits = Limits {
            max_tool_result_bytes: 64 * 1024,
            max_turn_result_bytes: 256 * 1024,
            ..Limits::default()
        };
        let mut budget = ResultBudget::new(&limits);
        let mut calls = 0;
        while budget.check().is_ok() {
            let mut big = result(serde_json::json!({ "output": "x".repeat(1 << 20) }).to_string());
            budget.charge(&mut big);
            assert!(big.output.len() <= 64 * 1024, "each result is cut");
            assert!(big.output.contains("cut: 1048576 bytes here"));
            calls += 1;
            assert!(calls < 10, "the budget ends the calls");
        }
        // Four results cut to just under 64 KiB nearly fill 256 KiB; the
        // fifth is cut to what is left, and then the budget is spent.
        assert_eq!(calls, 5);
        assert!(budget.spent() <= 256 * 1024 + MIN_RESULT_ROOM);
        let refused = budget.check().expect_err("spent").to_string();
        assert!(
            refused.contains("--max-turn-result-bytes") && refused.contains("262144"),
            "{refused}"
        );
    }

    #[test]
    fn the_last_result_is_cut_to_the_room_left() {
        let limits = Limits {
            max_tool_result_bytes: 64 * 1024,
            max_turn_result_bytes: 100 * 1024,
            ..Limits::default()
        };
        let mut budget = ResultBudget::new(&limits);
        for _ in 0..2 {
            let mut big = result(serde_json::json!({ "output": "y".repeat(200_000) }).to_string());
            budget.charge(&mut big);
        }
        // The room left bounds the output; its input and name are extra.
        assert!(budget.spent() <= 100 * 1024 + 64, "{}", budget.spent());
        // Small results cost what they are.
        let mut small = result("{\"ok\":true}".into());
        let before = budget.spent();
        budget.charge(&mut small);
        assert_eq!(small.output, "{\"ok\":true}");
        assert_eq!(budget.spent(), before + small.output.len() + 2 + 10);
    }

    #[test]
    fn patches_get_more_room_than_other_tools() {
        let limits = Limits::default();
        assert_eq!(limits.tool_input_bytes("Enqueue"), 64 * 1024);
        assert_eq!(limits.tool_input_bytes("ApplyPatch"), 1024 * 1024);
    }
}
