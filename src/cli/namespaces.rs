//! `holarchy namespace ...`: what each namespace holds against its quota,
//! and setting a quota.

use clap::Subcommand;
use serde_json::json;

use super::output::table::Table;
use super::output::{emit, Output};
use crate::api::pb;
use crate::client::Clients;

#[derive(Debug, Subcommand)]
pub enum NamespaceCommand {
    /// Each namespace with agents or a quota: live agents, commands
    /// running and turns held back by its quota, against the quota.
    List,
    /// Set a namespace's quota (an admin of every namespace only). The
    /// bounds given replace those of the same name; the others stay.
    /// Past a bound, a creation or a command is refused and a turn waits.
    Quota {
        namespace: String,
        /// Most live agents, public and private (`none`: unbounded).
        #[arg(long, value_parser = parse_bound)]
        agents: Option<Bound>,
        /// Most turns started per minute across the namespace; past it
        /// the next turn waits, it is not failed (`none`: unbounded).
        #[arg(long, value_parser = parse_bound)]
        turns_per_minute: Option<Bound>,
        /// Most commands running at once across the namespace (`none`:
        /// unbounded).
        #[arg(long, value_parser = parse_bound)]
        commands: Option<Bound>,
        /// Remove every bound: the daemon's own limits hold alone.
        #[arg(long, conflicts_with_all = ["agents", "turns_per_minute", "commands"])]
        clear: bool,
    },
}

/// A bound as given: a number, or `none`.
#[derive(Debug, Clone, Copy)]
pub struct Bound(Option<u64>);

fn parse_bound(text: &str) -> Result<Bound, String> {
    if text == "none" {
        return Ok(Bound(None));
    }
    match text.parse::<u64>() {
        Ok(0) => Err("0 would stop the namespace: give at least 1, or `none`".into()),
        Ok(n) => Ok(Bound(Some(n))),
        Err(_) => Err(format!("`{text}` is neither a number nor `none`")),
    }
}

fn bound(value: Option<u64>) -> String {
    value.map_or_else(|| "-".into(), |n| n.to_string())
}

fn against(used: u64, limit: Option<u64>) -> String {
    match limit {
        Some(limit) => format!("{used}/{limit}"),
        None => used.to_string(),
    }
}

fn info_json(n: &pb::NamespaceInfo) -> serde_json::Value {
    let quota = n.quota.unwrap_or_default();
    json!({
        "name": n.name,
        "agents": n.agents,
        "commands": n.commands,
        "turns_deferred": n.turns_deferred,
        "quota": {
            "agents": quota.agents,
            "turns_per_minute": quota.turns_per_minute,
            "commands": quota.commands,
        },
        "quota_set_by": n.quota_set_by,
        "quota_set_at_ms": n.quota_set_at_ms,
    })
}

fn describe(n: &pb::NamespaceInfo) -> String {
    let quota = n.quota.unwrap_or_default();
    if quota == pb::Quota::default() {
        return format!("namespace {}: no quota (the daemon's limits hold)", n.name);
    }
    format!(
        "namespace {}: at most {} agents, {} turns a minute, {} commands",
        n.name,
        bound(quota.agents),
        bound(quota.turns_per_minute.map(u64::from)),
        bound(quota.commands)
    )
}

pub(super) async fn namespace_command(
    mut clients: Clients,
    command: &NamespaceCommand,
    out: &Output,
) -> anyhow::Result<()> {
    match command {
        NamespaceCommand::List => {
            let list = clients
                .access
                .list_namespaces(pb::ListNamespacesRequest {})
                .await?
                .into_inner();
            if out.json {
                list.namespaces.iter().for_each(|n| emit(info_json(n)));
                return Ok(());
            }
            let mut rows = Table::new(&[
                "NAMESPACE",
                "AGENTS",
                "COMMANDS",
                "TURNS/MIN",
                "TURNS HELD",
                "QUOTA SET BY",
            ]);
            for n in &list.namespaces {
                let quota = n.quota.unwrap_or_default();
                rows.row(vec![
                    n.name.clone(),
                    against(n.agents, quota.agents),
                    against(n.commands, quota.commands),
                    bound(quota.turns_per_minute.map(u64::from)),
                    n.turns_deferred.to_string(),
                    if n.quota_set_by.is_empty() {
                        "-".into()
                    } else {
                        n.quota_set_by.clone()
                    },
                ]);
            }
            rows.print();
        }
        NamespaceCommand::Quota {
            namespace,
            agents,
            turns_per_minute,
            commands,
            clear,
        } => {
            let current = if *clear {
                pb::Quota::default()
            } else {
                clients
                    .access
                    .list_namespaces(pb::ListNamespacesRequest {})
                    .await?
                    .into_inner()
                    .namespaces
                    .into_iter()
                    .find(|n| &n.name == namespace)
                    .and_then(|n| n.quota)
                    .unwrap_or_default()
            };
            let turns = match turns_per_minute {
                Some(Bound(Some(n))) => {
                    Some(Bound(Some(u64::from(u32::try_from(*n).map_err(|_| {
                        anyhow::anyhow!("--turns-per-minute is at most {}", u32::MAX)
                    })?))))
                }
                other => *other,
            };
            let quota = pb::Quota {
                agents: agents.map_or(current.agents, |b| b.0),
                turns_per_minute: turns.map_or(current.turns_per_minute, |b| {
                    b.0.and_then(|n| u32::try_from(n).ok())
                }),
                commands: commands.map_or(current.commands, |b| b.0),
            };
            let set = clients
                .access
                .set_quota(pb::SetQuotaRequest {
                    namespace: namespace.clone(),
                    quota: Some(quota),
                })
                .await?
                .into_inner();
            if out.json {
                emit(info_json(&set));
            } else {
                emit(describe(&set));
            }
        }
    }
    Ok(())
}
