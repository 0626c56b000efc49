//! Counting what runs under one agent, and what the daemon is creating,
//! against the [`limits`](crate::limits). Per-agent counts come from the
//! agent's own linked actors or the store's indexes, read under the
//! supervisor's structure lock the change already holds: no daemon-wide
//! lock.

use holarchy_supervision::AgentId;

use crate::directory::Member;
use crate::limits::{AgentSlots, CommandSlot, LimitError};
use crate::store::StoreError;
use crate::Ctx;

/// Reserves room for new agents, one per namespace named in
/// `namespaces`, under `--max-agents` and each namespace's quota.
pub fn reserve_agents<'a>(
    ctx: &Ctx,
    namespaces: impl IntoIterator<Item = &'a str>,
) -> Result<AgentSlots, LimitError> {
    let mut by_namespace: std::collections::BTreeMap<&str, usize> = Default::default();
    for namespace in namespaces {
        *by_namespace.entry(namespace).or_default() += 1;
    }
    let count = by_namespace.values().sum();
    let mut slots = reserve_daemon_wide(ctx, count)?;
    for (namespace, count) in by_namespace {
        slots.hold(ctx.namespaces.get(namespace).reserve_agents(count)?);
    }
    Ok(slots)
}

fn reserve_daemon_wide(ctx: &Ctx, count: usize) -> Result<AgentSlots, LimitError> {
    let limit = ctx.config.limits.max_agents;
    // Reserve first, then read the directory and the reservations together
    // under its lock: a slot is given back under that lock as its agent is
    // registered, so every agent is seen once, reserved or registered.
    let (slots, _) = ctx.stats.usage.reserve_agents(count);
    let (counts, creating) = ctx.directory.counts_with(|| ctx.stats.usage.creating());
    if counts.public + counts.private + creating > limit {
        return Err(LimitError::Agents { limit });
    }
    Ok(slots)
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
    let mut slot = ctx.stats.usage.take_command(limits.max_commands)?;
    if let Some(entry) = ctx.directory.get(owner) {
        slot.hold(entry.namespace.take_command()?);
    }
    Ok(slot)
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
    let children = ctx.reads().children_of(supervisor)?.len();
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
        match ctx.reads().agent(at)?.and_then(|r| r.supervisor_agent_id) {
            Some(supervisor) => {
                depth += 1;
                at = supervisor;
            }
            None => return Ok(depth),
        }
    }
    Ok(depth)
}
