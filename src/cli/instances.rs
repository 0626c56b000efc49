//! `holarchy instance ...`: operators apply, list, read and delete
//! instances. `apply` reads the manifest and the files it names (inside
//! the manifest's folder, bounded: see [`beside`]) here, on the operator's
//! side, and sends their text.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Subcommand;
use holarchy_composition::manifest::MAX_MANIFEST_BYTES;
use holarchy_composition::role::MAX_ROLE_BYTES;
use serde_json::{json, Value};

use super::output::table::{self, Table};
use super::output::{agent_json, brain_json, emit, Output};
use crate::api::pb;
use crate::client::Clients;

mod beside;

#[derive(Debug, Subcommand)]
pub enum InstanceCommand {
    /// Create or update the instance a manifest (TOML) describes; applying
    /// the same file twice changes nothing.
    Apply {
        /// The manifest; files it names are read from beside it.
        file: PathBuf,
    },
    /// Every instance.
    List,
    /// One instance: its role, brain, skills, context budget, MCP servers,
    /// ingress, constraints, agent.
    Get {
        /// The instance's name.
        name: String,
    },
    /// Archive the instance's agent and its private subtree, and forget
    /// the instance.
    Delete {
        /// The instance's name.
        name: String,
    },
    /// Publish an event to an instance that takes `publish` ingress;
    /// stored once per dedupe key (a retry with the same key is delivered
    /// once) and queued for its agent.
    Publish {
        /// The instance's name.
        name: String,
        /// The event's type, e.g. `release.cut`.
        #[arg(long = "type", value_name = "TYPE")]
        kind: String,
        /// Required: the same key again is the same event.
        #[arg(long)]
        dedupe_key: String,
        /// What the event is about (the contract's `subject`).
        #[arg(long, default_value = "")]
        subject: String,
        /// Empty: the instance.
        #[arg(long, default_value = "")]
        scope: String,
        /// The payload, as JSON (default `{}`).
        #[arg(long, default_value = "{}")]
        payload: String,
    },
}

pub(super) async fn instance_command(
    mut clients: Clients,
    command: &InstanceCommand,
    out: &Output,
) -> anyhow::Result<()> {
    match command {
        InstanceCommand::Apply { file } => {
            let request = read_manifest(file)?;
            let applied = clients
                .instances
                .apply_instance(request)
                .await?
                .into_inner();
            let instance = applied.instance.unwrap_or_default();
            if out.json {
                let mut value = instance_json(&instance);
                value["change"] = json!(applied.change);
                emit(value);
            } else {
                let agent = instance.agent.as_ref().map_or("-", |a| a.agent_id.as_str());
                emit(format_args!(
                    "{} {} (agent {agent}, digest {})",
                    applied.change,
                    instance.name,
                    short(&instance.digest)
                ));
            }
            applied.warnings.iter().for_each(|w| out.warn(w));
        }
        InstanceCommand::List => {
            let list = clients
                .instances
                .list_instances(pb::ListInstancesRequest {})
                .await?
                .into_inner();
            if out.json {
                list.instances.iter().for_each(|i| emit(instance_json(i)));
            } else {
                let tail = table::tail_len(
                    list.instances
                        .iter()
                        .filter_map(|i| i.agent.as_ref().map(|a| a.agent_id.as_str())),
                );
                let mut rows = Table::new(&["NAME", "AGENT", "STATE", "ROLE", "INGRESS"]);
                for i in &list.instances {
                    let (agent, state) = match &i.agent {
                        Some(a) => (
                            table::tail(&a.agent_id, tail).to_owned(),
                            agent_json(a)["state"].as_str().unwrap_or("-").to_owned(),
                        ),
                        None => ("-".to_owned(), "-".to_owned()),
                    };
                    let sources: Vec<&str> = i.ingress.iter().map(|s| s.source.as_str()).collect();
                    let role = if i.role_version.is_empty() {
                        "-".to_owned()
                    } else {
                        i.role_version.clone()
                    };
                    rows.row(vec![i.name.clone(), agent, state, role, sources.join(",")]);
                }
                rows.print();
            }
        }
        InstanceCommand::Get { name } => {
            let request = pb::GetInstanceRequest { name: name.clone() };
            let instance = clients.instances.get_instance(request).await?.into_inner();
            print_instance(&instance, out);
        }
        InstanceCommand::Delete { name } => {
            let request = pb::DeleteInstanceRequest { name: name.clone() };
            let instance = clients
                .instances
                .delete_instance(request)
                .await?
                .into_inner();
            if out.json {
                emit(instance_json(&instance));
            } else {
                emit(format_args!("deleted {}", instance.name));
            }
        }
        InstanceCommand::Publish {
            name,
            kind,
            dedupe_key,
            subject,
            scope,
            payload,
        } => {
            let request = pb::PublishEventRequest {
                instance: name.clone(),
                r#type: kind.clone(),
                subject: subject.clone(),
                scope: scope.clone(),
                dedupe_key: dedupe_key.clone(),
                payload_json: payload.clone(),
            };
            let published = clients.instances.publish_event(request).await?.into_inner();
            if out.json {
                emit(json!({
                    "event_id": published.event_id,
                    "duplicate": published.duplicate,
                }));
            } else if published.duplicate {
                emit(format_args!("{} (duplicate)", published.event_id));
            } else {
                emit(format_args!("{}", published.event_id));
            }
        }
    }
    Ok(())
}

/// The request for `file`: its text and the text of the role file it
/// names, read from the manifest's folder (see [`beside`]).
fn read_manifest(file: &Path) -> anyhow::Result<pb::ApplyInstanceRequest> {
    let opened =
        std::fs::File::open(file).with_context(|| format!("cannot read {}", file.display()))?;
    let manifest = beside::read_at_most(opened, MAX_MANIFEST_BYTES)
        .with_context(|| format!("cannot read {}", file.display()))?
        .with_context(|| {
            format!(
                "{} is over {MAX_MANIFEST_BYTES} bytes, the limit for a manifest",
                file.display()
            )
        })?;
    let manifest = String::from_utf8(manifest)
        .with_context(|| format!("{} is not UTF-8 text", file.display()))?;
    let parsed: toml::Table = toml::from_str(&manifest)
        .with_context(|| format!("{} is not valid TOML", file.display()))?;
    let folder = file.parent().unwrap_or(Path::new("."));
    let mut files = BTreeMap::new();
    let prompt_file = parsed
        .get("role")
        .and_then(|role| role.get("prompt_file"))
        .and_then(toml::Value::as_str);
    if let Some(path) = prompt_file {
        let text = beside::read_beside(folder, "role.prompt_file", path, MAX_ROLE_BYTES)?;
        files.insert(path.to_owned(), text);
    } else if parsed
        .get("role")
        .is_some_and(|r| r.get("prompt_file").is_some())
    {
        bail!("role.prompt_file must be a path");
    }
    let manifest = with_program_beside(manifest, parsed, folder)?;
    Ok(pb::ApplyInstanceRequest {
        manifest,
        files: files.into_iter().collect(),
    })
}

/// A command brain's `program` written as `./...` or `../...` names a
/// file beside the manifest, like `prompt_file`: it is sent as an
/// absolute path, since the brain runs in a folder of its own. Any other
/// program (a name on the PATH, an absolute path) is sent as written, and
/// so is the manifest when nothing needs changing.
fn with_program_beside(
    text: String,
    mut parsed: toml::Table,
    base: &Path,
) -> anyhow::Result<String> {
    let program = parsed
        .get_mut("brain")
        .and_then(|b| b.get_mut("command"))
        .and_then(|c| c.get_mut("program"));
    let Some(toml::Value::String(program)) = program else {
        return Ok(text);
    };
    if !(program.starts_with("./") || program.starts_with("../")) {
        return Ok(text);
    }
    let full = std::path::absolute(base.join(&*program))
        .with_context(|| format!("cannot resolve the brain program {program}"))?;
    *program = full.to_string_lossy().into_owned();
    Ok(toml::to_string(&parsed)?)
}

fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

fn instance_json(i: &pb::Instance) -> Value {
    let constraints = i.constraints.clone().unwrap_or_default();
    json!({
        "name": i.name,
        "digest": i.digest,
        "role_version": i.role_version,
        "brain": i.brain.as_ref().and_then(|b| b.kind.as_ref()).map(brain_json),
        "skills": i.skills,
        "ingress": i.ingress.iter().map(|s| json!({
            "source": s.source,
            "provider": s.provider,
            "secret_env": s.secret_env,
            "events": s.events,
            "cron": s.cron,
            "timezone": s.timezone,
        })).collect::<Vec<_>>(),
        "constraints": {
            "allow_tools": constraints.allow_list.then_some(&constraints.allow_tools),
            "deny_tools": constraints.deny_tools,
            "require_approval": constraints.require_approval,
            "max_turns_per_hour": constraints.max_turns_per_hour,
        },
        "context_tokens": (i.context_tokens > 0).then_some(i.context_tokens),
        "mcp_servers": i.mcp_servers,
        "network": i.network,
        "agent": i.agent.as_ref().map(agent_json),
        "created_at_ms": i.created_at_ms,
        "updated_at_ms": i.updated_at_ms,
    })
}

fn print_instance(i: &pb::Instance, out: &Output) {
    if out.json {
        emit(instance_json(i));
        return;
    }
    let dash = |s: &str| {
        if s.is_empty() {
            "-".to_owned()
        } else {
            s.to_owned()
        }
    };
    emit(format_args!("instance     {}", i.name));
    emit(format_args!("digest       {}", i.digest));
    emit(format_args!("role         {}", dash(&i.role_version)));
    emit(format_args!("skills       {}", dash(&i.skills.join(", "))));
    if i.context_tokens > 0 {
        emit(format_args!("context      {} tokens", i.context_tokens));
    }
    if !i.network.is_empty() && i.network != "full" {
        emit(format_args!("network      {}", i.network));
    }
    if !i.mcp_servers.is_empty() {
        emit(format_args!("mcp servers  {}", i.mcp_servers.join(", ")));
    }
    for s in &i.ingress {
        let detail = match s.source.as_str() {
            "webhook" => format!("{} (secret in ${})", s.provider, s.secret_env),
            "schedule" => format!(
                "{} {}",
                s.cron,
                if s.timezone.is_empty() {
                    "UTC"
                } else {
                    &s.timezone
                }
            ),
            _ => String::new(),
        };
        emit(format_args!("ingress      {} {detail}", s.source));
    }
    if let Some(c) = &i.constraints {
        if c.allow_list {
            emit(format_args!("allow        {}", c.allow_tools.join(", ")));
        }
        if !c.deny_tools.is_empty() {
            emit(format_args!("deny         {}", c.deny_tools.join(", ")));
        }
        if !c.require_approval.is_empty() {
            emit(format_args!(
                "approval     {}",
                c.require_approval.join(", ")
            ));
        }
        if c.max_turns_per_hour > 0 {
            emit(format_args!("turns/hour   {}", c.max_turns_per_hour));
        }
    }
    match &i.agent {
        Some(a) => emit(format_args!(
            "agent        {} ({})",
            a.agent_id,
            agent_json(a)["state"].as_str().unwrap_or("-")
        )),
        None => emit("agent        -"),
    }
}
