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
        /// The namespace bounded (it need not have agents yet).
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
        /// Most bytes the store holds for the namespace's agents: 500MiB,
        /// 2GiB (`none`: unbounded). Measured every few seconds; past it
        /// the namespace takes nothing new and its turns wait until
        /// agents are deleted or the bound raised.
        #[arg(long, value_parser = parse_size)]
        store_bytes: Option<Bound>,
        /// Remove every bound: the daemon's own limits hold alone.
        #[arg(long, conflicts_with_all = ["agents", "turns_per_minute", "commands", "store_bytes"])]
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

/// A size: bytes, or a number with KiB, MiB, GiB or TiB; or `none`.
fn parse_size(text: &str) -> Result<Bound, String> {
    if text == "none" {
        return Ok(Bound(None));
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size: write 500MiB, 2GiB, or `none`"))?;
    let scale: u64 = match unit {
        "" | "B" => 1,
        "KiB" | "K" | "k" => 1 << 10,
        "MiB" | "M" => 1 << 20,
        "GiB" | "G" => 1 << 30,
        "TiB" | "T" => 1 << 40,
        _ => return Err(format!("`{unit}` is not a unit: use KiB, MiB, GiB or TiB")),
    };
    match n.checked_mul(scale) {
        Some(0) => Err("0 would stop the namespace: give a size, or `none`".into()),
        Some(bytes) => Ok(Bound(Some(bytes))),
        None => Err(format!("`{text}` is more than this can take")),
    }
}

/// Bytes for a table: 512 B, 3.2 KiB, 12.0 MiB.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
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
        "store_bytes": n.store_bytes,
        "store_bytes_measured_at_ms": n.store_bytes_measured_at_ms,
        "quota": {
            "agents": quota.agents,
            "turns_per_minute": quota.turns_per_minute,
            "commands": quota.commands,
            "store_bytes": quota.store_bytes,
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
        "namespace {}: at most {} agents, {} turns a minute, {} commands, {} in the store",
        n.name,
        bound(quota.agents),
        bound(quota.turns_per_minute.map(u64::from)),
        bound(quota.commands),
        quota.store_bytes.map_or_else(|| "-".into(), size)
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
                "STORE",
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
                    match (n.store_bytes_measured_at_ms, quota.store_bytes) {
                        (0, None) => "-".into(),
                        (0, Some(limit)) => format!("?/{}", size(limit)),
                        (_, Some(limit)) => format!("{}/{}", size(n.store_bytes), size(limit)),
                        (_, None) => size(n.store_bytes),
                    },
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
            store_bytes,
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
                store_bytes: store_bytes.map_or(current.store_bytes, |b| b.0),
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
