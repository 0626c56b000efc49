//! The `serve` flags that bound what agents can make the daemon do; each
//! default is the one `holarchy_actors::limits::Limits` documents.

use clap::Args;
use holarchy_actors::limits::Limits;

/// Bounds on agents and their brains (see `docs/security.md`).
#[derive(Debug, Args)]
pub struct LimitArgs {
    /// Largest input of one tool call, in bytes of JSON, placeholders
    /// filled in.
    #[arg(long, default_value_t = 64 * 1024)]
    pub max_tool_input_bytes: usize,
    /// Largest `ApplyPatch` input, in bytes of JSON.
    #[arg(long, default_value_t = 1024 * 1024)]
    pub max_patch_input_bytes: usize,
    /// Most tool calls one step of a brain may ask for; past it none runs.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tool_calls_per_step: u32,
    /// Most steps (brain decisions) in one turn.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_steps_per_turn: u32,
    /// Deepest private supervision chain under a public agent.
    #[arg(long, default_value_t = 32)]
    pub max_spawn_depth: u32,
    /// Most live private children one agent may supervise.
    #[arg(long, default_value_t = 128)]
    pub max_children: usize,
    /// Most armed waits (timers and triggers) one agent may hold.
    #[arg(long, default_value_t = 256)]
    pub max_waits: usize,
    /// Most commands one agent may have running.
    #[arg(long, default_value_t = 16)]
    pub max_agent_commands: usize,
    /// Most commands running in the daemon.
    #[arg(long, default_value_t = 256)]
    pub max_commands: usize,
    /// Most command-brain steps (each a process) running at once in the
    /// daemon; past it a turn waits for a slot.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_brain_processes: u64,
    /// Most live agents (public and private) in the daemon.
    #[arg(long, default_value_t = 1_000_000)]
    pub max_agents: usize,
    /// Most turns one agent starts per minute (in bursts of as many); past
    /// it the next turn waits.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns_per_minute: u32,
    /// Turns a message gets when each is cut short by a daemon crash;
    /// then it is set aside as failed (`crashed_daemon`).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_message_attempts: u32,
    /// Largest output of one tool call kept (and stored in its event);
    /// a larger one is cut, with a marker giving its full size.
    #[arg(long, default_value_t = 256 * 1024, value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_tool_result_bytes: u64,
    /// Bytes of tool results one turn may hold; past it the turn's tool
    /// calls get a tool error and the brain can only reply.
    #[arg(long, default_value_t = 8 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(1024..))]
    pub max_turn_result_bytes: u64,
}

impl LimitArgs {
    pub fn limits(&self) -> Limits {
        Limits {
            max_tool_input_bytes: self.max_tool_input_bytes,
            max_patch_input_bytes: self.max_patch_input_bytes,
            max_tool_calls_per_step: self.max_tool_calls_per_step as usize,
            max_steps_per_turn: self.max_steps_per_turn,
            max_spawn_depth: self.max_spawn_depth,
            max_children_per_agent: self.max_children,
            max_waits_per_agent: self.max_waits,
            max_commands_per_agent: self.max_agent_commands,
            max_commands: self.max_commands,
            max_brain_processes: usize::try_from(self.max_brain_processes).unwrap_or(usize::MAX),
            max_agents: self.max_agents,
            max_turns_per_minute: self.max_turns_per_minute,
            max_message_attempts: self.max_message_attempts,
            max_tool_result_bytes: usize::try_from(self.max_tool_result_bytes)
                .unwrap_or(usize::MAX),
            max_turn_result_bytes: usize::try_from(self.max_turn_result_bytes)
                .unwrap_or(usize::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Probe {
        #[command(flatten)]
        limits: LimitArgs,
    }

    #[test]
    fn flag_defaults_are_the_library_defaults() {
        let probe = Probe::parse_from(["probe"]);
        assert_eq!(probe.limits.limits(), Limits::default());
    }
}
