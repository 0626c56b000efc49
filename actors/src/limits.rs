//! Bounds on what agents (and the brains that drive them, which the
//! operator does not control) can make the daemon do, and the counting that
//! enforces them daemon-wide ([`quota`](crate::quota) counts per agent).
//! A bound hit by a brain is a tool error it can read; one
//! hit by a gRPC client is a status. Nothing here takes a daemon-wide lock:
//! daemon totals are atomics, per-agent counts come from the agent's own
//! linked actors or the store's indexes, read under the supervisor's guard
//! the structural change already holds.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
            max_tool_input_bytes: holarchy_supervision::bounds::MAX_MESSAGE_LEN,
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

/// Which of the daemon's input bounds a tool's calls are held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputBound {
    /// `--max-tool-input-bytes`, every tool's unless it says otherwise.
    Standard,
    /// `--max-patch-input-bytes`: a patch carries whole hunks of files.
    Patch,
}

impl Limits {
    /// The bytes a call's input may take under `bound`. A patch bound set
    /// below the standard one never makes patches smaller than any input.
    pub fn input_bytes(&self, bound: InputBound) -> usize {
        match bound {
            InputBound::Patch => self.max_patch_input_bytes.max(self.max_tool_input_bytes),
            InputBound::Standard => self.max_tool_input_bytes,
        }
    }
}

/// Bytes `value` takes as compact JSON, as `to_string` writes it, counted
/// without building the text: the measure of every bound on a tool's
/// output.
pub fn json_len(value: &serde_json::Value) -> usize {
    let mut counter = Counter(0);
    // A `Value` always serializes and the counter never refuses a write;
    // were either to fail, the value counts as too large for any bound.
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => usize::MAX,
    }
}

/// A writer that only counts what it is given.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
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
    #[error(transparent)]
    Namespace(#[from] crate::namespaces::QuotaError),
}

/// Daemon-wide counts kept beside the directory of running actors.
#[derive(Debug, Default)]
pub struct Usage {
    /// Agents reserved by creations and not yet in the directory (or
    /// given up), shared with the slots that hold them.
    creating: Arc<AtomicUsize>,
    /// Commands running, shared with the slots that hold them.
    commands: Arc<AtomicUsize>,
}

impl Usage {
    /// Agents reserved by creations and not yet registered.
    pub fn creating(&self) -> usize {
        self.creating.load(Ordering::SeqCst)
    }

    /// Commands running now.
    pub fn commands(&self) -> usize {
        self.commands.load(Ordering::SeqCst)
    }

    /// Reserves `count` agents about to be created. Returns the
    /// reservation and how many agents are being created now, this
    /// reservation included.
    pub fn reserve_agents(&self, count: usize) -> (AgentSlots, usize) {
        let creating = self.creating.fetch_add(count, Ordering::SeqCst) + count;
        let slots = AgentSlots {
            creating: self.creating.clone(),
            count,
            namespaces: Vec::new(),
        };
        (slots, creating)
    }

    /// Takes one of `limit` daemon-wide command slots.
    pub fn take_command(&self, limit: usize) -> Result<CommandSlot, LimitError> {
        self.commands
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            })
            .map_err(|_| LimitError::Commands { limit })?;
        Ok(CommandSlot(self.commands.clone(), None))
    }
}

/// One running command's place under `--max-commands` (and its
/// namespace's quota); given back when dropped (when the command ends or
/// its actor dies).
#[must_use]
#[derive(Debug)]
pub struct CommandSlot(
    Arc<AtomicUsize>,
    Option<crate::namespaces::NamespaceCommand>,
);

impl CommandSlot {
    /// Holds the namespace's slot with this one.
    pub fn hold(&mut self, namespace: crate::namespaces::NamespaceCommand) {
        self.1 = Some(namespace);
    }
}

impl Drop for CommandSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Room for agents about to be created. Each slot is given back as its
/// agent is put in the directory, under the directory's lock, which the
/// limit check reads both counts under: an agent counts once, reserved or
/// registered. A slot whose agent could not start is given back after, and
/// whatever is left on drop. (Given back only on drop, a batch
/// of 1,000 counted twice for as long as it took to start them all, and
/// creations at the bound were refused thousands of agents early.)
#[must_use]
#[derive(Debug)]
pub struct AgentSlots {
    creating: Arc<AtomicUsize>,
    count: usize,
    /// The namespaces' own reservations, held whole until the creation
    /// ends (see [`crate::namespaces::NamespaceUse::reserve_agents`]).
    namespaces: Vec<crate::namespaces::NamespaceSlots>,
}

impl AgentSlots {
    /// Splits off `n` of these slots (fewer if fewer are left), for a part
    /// of the creation that starts its agents elsewhere.
    pub fn split(&mut self, n: usize) -> AgentSlots {
        let n = n.min(self.count);
        self.count -= n;
        AgentSlots {
            creating: self.creating.clone(),
            count: n,
            namespaces: Vec::new(),
        }
    }

    /// Holds `slots` of a namespace with these.
    pub fn hold(&mut self, slots: crate::namespaces::NamespaceSlots) {
        self.namespaces.push(slots);
    }

    /// How many slots are still held.
    pub fn remaining(&self) -> usize {
        self.count
    }

    /// Gives back one slot: its agent is in the directory now, or could
    /// not start.
    pub fn release_one(&mut self) {
        if self.count > 0 {
            self.count -= 1;
            self.creating.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for AgentSlots {
    fn drop(&mut self) {
        self.creating.fetch_sub(self.count, Ordering::SeqCst);
    }
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
        let theoretical = self.theoretical.map_or(now, |t| t.max(now));
        let ahead = crate::namespaces::pace_step(theoretical - now, per_minute)?;
        self.theoretical = Some(now + ahead);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_len_is_the_length_of_the_compact_text() {
        let value = serde_json::json!({ "a": "x\n\"é", "b": [1, 2.5, null, true], "c": {} });
        assert_eq!(json_len(&value), value.to_string().len());
    }

    #[test]
    fn agent_slots_give_back_each_slot_once_whether_released_split_or_dropped() {
        let usage = Usage::default();
        let creating = || usage.creating.load(Ordering::SeqCst);
        let (mut slots, now) = usage.reserve_agents(10);
        assert_eq!(now, 10);
        let mut part = slots.split(4);
        part.release_one();
        assert_eq!(creating(), 9);
        drop(part);
        assert_eq!(creating(), 6);
        let more = slots.split(100);
        assert_eq!(more.count, 6, "no more than are left");
        slots.release_one();
        assert_eq!(creating(), 6, "an empty reservation gives nothing back");
        drop(slots);
        drop(more);
        assert_eq!(creating(), 0);
    }

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

    #[test]
    fn patches_get_more_room_than_other_tools() {
        let limits = Limits::default();
        let bound_of = |tool| limits.input_bytes(crate::tools::input_bound(tool));
        assert_eq!(bound_of("Enqueue"), 64 * 1024);
        assert_eq!(bound_of("ApplyPatch"), 1024 * 1024);
        assert_eq!(bound_of("mcp__fs__write"), 64 * 1024);
    }
}
