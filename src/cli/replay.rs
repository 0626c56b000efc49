//! `holarchy replay ...`: run an agent's recorded turns through a
//! candidate (another brain, role prompt, skills folder or constraints)
//! without side effects, and read where its decisions differ
//! (docs/replay.md).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use serde_json::{json, Value};

use super::brain_args::BrainArgs;
use super::output::table::Table;
use super::output::{emit, escape, Output};
use super::resolve;
use crate::api::convert::brain as brain_pb;
use crate::api::pb;
use crate::client::Clients;

#[derive(Debug, Subcommand)]
pub enum ReplayCommand {
    /// Replay an agent's recorded turns through a candidate, in the
    /// background; prints the replay's id (with --wait, its summary once
    /// it ends).
    Start(Box<StartArgs>),
    /// Every replay, newest first.
    List,
    /// A replay's summary and, turn by turn, the recorded decision beside
    /// the candidate's.
    Show {
        /// The replay's id (`replay list`).
        replay_id: String,
        /// Every turn, not only those that differ.
        #[arg(long)]
        all: bool,
        /// The most turns to show.
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// Stop a running replay; what it replayed is kept.
    Cancel {
        /// The replay's id (`replay list`).
        replay_id: String,
    },
    /// Take up a cancelled, interrupted or stopped replay where it left
    /// off.
    Resume {
        /// The replay's id (`replay list`).
        replay_id: String,
    },
    /// Drop a replay that is not running, and its reports.
    Delete {
        /// The replay's id (`replay list`).
        replay_id: String,
    },
}

#[derive(Debug, Args)]
pub struct StartArgs {
    /// The agent whose turns to replay: its name or id.
    #[arg(required_unless_present = "instance", conflicts_with = "instance")]
    pub agent: Option<String>,
    /// Or the instance whose agent's turns to replay.
    #[arg(long, value_name = "NAME")]
    pub instance: Option<String>,
    /// The most turns (the newest chosen), 1 to 10,000.
    #[arg(long, default_value_t = 100)]
    pub turns: u32,
    /// Only this turn (`run_...`); repeat for more.
    #[arg(long = "run")]
    pub runs: Vec<String>,
    /// Only turns that started at or after this, Unix ms.
    #[arg(long, value_name = "MS")]
    pub from_ms: Option<i64>,
    /// Only turns that started before this, Unix ms.
    #[arg(long, value_name = "MS")]
    pub to_ms: Option<i64>,
    /// The candidate brain (unset: the agent's own).
    #[command(flatten)]
    pub brain: BrainArgs,
    /// The candidate role prompt, from a file.
    #[arg(long, value_name = "FILE")]
    pub role_file: Option<PathBuf>,
    /// The candidate skills, from a folder the daemon reads.
    #[arg(long, value_name = "DIR")]
    pub skills_dir: Option<PathBuf>,
    /// Only these tools may be called (repeat for more).
    #[arg(long = "allow-tool", value_name = "TOOL")]
    pub allow_tools: Vec<String>,
    /// These tools may not be called (repeat for more).
    #[arg(long = "deny-tool", value_name = "TOOL")]
    pub deny_tools: Vec<String>,
    /// A name for the candidate, shown in listings.
    #[arg(long, default_value = "")]
    pub label: String,
    /// Stop once the candidate spent this many tokens (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub max_tokens: u64,
    /// Stop after this many seconds (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub max_seconds: u64,
    /// Turns replayed at once, 1 to 16.
    #[arg(long, default_value_t = 1)]
    pub concurrency: u32,
    /// Wait for the replay to end, then print its summary.
    #[arg(long)]
    pub wait: bool,
}

pub(super) async fn replay_command(
    mut clients: Clients,
    command: &ReplayCommand,
    out: &Output,
) -> anyhow::Result<()> {
    match command {
        ReplayCommand::Start(args) => start(&mut clients, args, out).await,
        ReplayCommand::List => {
            let listed = clients
                .replays
                .list_replays(pb::ListReplaysRequest {})
                .await?
                .into_inner();
            let mut rows = Table::new(&[
                "ID",
                "AGENT",
                "STATUS",
                "DONE",
                "SAME",
                "TEXT",
                "TOOLS",
                "ERROR",
                "CANDIDATE",
            ])
            .numeric(&[3, 4, 5, 6, 7]);
            for replay in &listed.replays {
                if out.json {
                    emit(replay_json(replay));
                    continue;
                }
                let candidate = if replay.candidate_label.is_empty() {
                    replay.candidate.clone()
                } else {
                    format!("{}: {}", replay.candidate_label, replay.candidate)
                };
                rows.row(vec![
                    replay.replay_id.clone(),
                    replay.agent_id.clone(),
                    replay.status.clone(),
                    format!("{}/{}", replay.replayed, replay.selected),
                    replay.same.to_string(),
                    replay.same_tools_different_text.to_string(),
                    replay.different_tools.to_string(),
                    replay.errors.to_string(),
                    escape::one_line(&candidate).into_owned(),
                ]);
            }
            if !out.json {
                if listed.replays.is_empty() {
                    emit("no replays: `holarchy replay start AGENT ...` makes one");
                } else {
                    rows.print();
                }
            }
            Ok(())
        }
        ReplayCommand::Show {
            replay_id,
            all,
            limit,
        } => show(&mut clients, replay_id, *all, *limit, out).await,
        ReplayCommand::Cancel { replay_id } => {
            let replay = clients
                .replays
                .cancel_replay(pb::ReplayRequest {
                    replay_id: replay_id.clone(),
                })
                .await?
                .into_inner();
            summary(&replay, out);
            Ok(())
        }
        ReplayCommand::Resume { replay_id } => {
            let replay = clients
                .replays
                .resume_replay(pb::ReplayRequest {
                    replay_id: replay_id.clone(),
                })
                .await?
                .into_inner();
            summary(&replay, out);
            Ok(())
        }
        ReplayCommand::Delete { replay_id } => {
            clients
                .replays
                .delete_replay(pb::ReplayRequest {
                    replay_id: replay_id.clone(),
                })
                .await?;
            if out.json {
                emit(json!({ "replay_id": replay_id, "deleted": true }));
            } else {
                emit(format!("deleted {replay_id}"));
            }
            Ok(())
        }
    }
}

/// A command brain's program as the daemon must find it: absolute when
/// it names a file here.
fn absolute(program: &str) -> String {
    let path = Path::new(program);
    if path.is_absolute() || !program.contains('/') {
        return program.to_owned();
    }
    std::fs::canonicalize(path).map_or_else(|_| program.to_owned(), |p| p.display().to_string())
}

async fn start(clients: &mut Clients, args: &StartArgs, out: &Output) -> anyhow::Result<()> {
    let agent_id = match (&args.agent, &args.instance) {
        (Some(agent), _) => resolve(clients, agent).await?,
        (None, Some(name)) => clients
            .instances
            .get_instance(pb::GetInstanceRequest { name: name.clone() })
            .await?
            .into_inner()
            .agent
            .map(|agent| agent.agent_id)
            .with_context(|| format!("instance {name} has no agent yet: apply it again"))?,
        (None, None) => anyhow::bail!("name the agent, or --instance"),
    };
    let role_prompt = match &args.role_file {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the role file {}", path.display()))?,
        None => String::new(),
    };
    let skills_dir = match &args.skills_dir {
        Some(dir) => std::fs::canonicalize(dir)
            .with_context(|| format!("cannot find the skills folder {}", dir.display()))?
            .display()
            .to_string(),
        None => String::new(),
    };
    let brain = args.brain.config().map(|mut config| {
        if let holarchy_supervision::BrainConfig::Command { program, args, .. } = &mut config {
            *program = absolute(program);
            args.iter_mut().for_each(|a| *a = absolute(a));
        }
        brain_pb(&config)
    });
    let request = pb::StartReplayRequest {
        agent_id,
        from_ms: args.from_ms.unwrap_or(0),
        to_ms: args.to_ms.unwrap_or(0),
        run_ids: args.runs.clone(),
        max_turns: args.turns,
        candidate: Some(pb::ReplayCandidate {
            brain,
            role_prompt,
            skills_dir,
            allow_tools: args.allow_tools.clone(),
            deny_tools: args.deny_tools.clone(),
            label: args.label.clone(),
        }),
        budget: Some(pb::ReplayBudget {
            max_tokens: args.max_tokens,
            max_wall_ms: args.max_seconds.saturating_mul(1000),
            concurrency: args.concurrency,
        }),
    };
    let mut replay = clients.replays.start_replay(request).await?.into_inner();
    if args.wait {
        while replay.status == "running" {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            replay = clients
                .replays
                .get_replay(pb::GetReplayRequest {
                    replay_id: replay.replay_id.clone(),
                    page_size: 1,
                    ..Default::default()
                })
                .await?
                .into_inner()
                .replay
                .context("the daemon answered no replay")?;
        }
        summary(&replay, out);
        return Ok(());
    }
    if out.json {
        emit(replay_json(&replay));
    } else {
        emit(format!(
            "started {}: `holarchy replay show {}` reports on it",
            replay.replay_id, replay.replay_id
        ));
    }
    Ok(())
}

fn replay_json(replay: &pb::Replay) -> Value {
    json!({
        "replay_id": replay.replay_id,
        "agent_id": replay.agent_id,
        "status": replay.status,
        "reason": replay.reason,
        "selected": replay.selected,
        "replayed": replay.replayed,
        "same": replay.same,
        "same_tools_different_text": replay.same_tools_different_text,
        "different_tools": replay.different_tools,
        "errors": replay.errors,
        "unrecorded_calls": replay.unrecorded_calls,
        "recorded_tokens": replay.recorded_tokens,
        "candidate_tokens": replay.candidate_tokens,
        "candidate": replay.candidate,
        "candidate_label": replay.candidate_label,
        "created_at_ms": replay.created_at_ms,
        "updated_at_ms": replay.updated_at_ms,
    })
}

/// The replay's counts, for people: a failure's reason shown, and what to
/// do next.
fn summary(replay: &pb::Replay, out: &Output) {
    if out.json {
        emit(replay_json(replay));
        return;
    }
    emit(format!(
        "replay {} of {}: {}{}",
        replay.replay_id,
        replay.agent_id,
        replay.status,
        if replay.reason.is_empty() {
            String::new()
        } else {
            format!(" ({})", replay.reason)
        }
    ));
    let label = if replay.candidate_label.is_empty() {
        String::new()
    } else {
        format!("{}: ", replay.candidate_label)
    };
    emit(format!("  candidate: {label}{}", replay.candidate));
    emit(format!(
        "  turns: {} of {} replayed: {} same, {} same tools with other text, {} other tools, {} errors",
        replay.replayed,
        replay.selected,
        replay.same,
        replay.same_tools_different_text,
        replay.different_tools,
        replay.errors
    ));
    emit(format!(
        "  calls answered \"not recorded\": {}; tokens: {} recorded, {} candidate",
        replay.unrecorded_calls, replay.recorded_tokens, replay.candidate_tokens
    ));
    if matches!(
        replay.status.as_str(),
        "cancelled" | "interrupted" | "budget_spent" | "failed"
    ) {
        emit(format!(
            "  resume it with `holarchy replay resume {}`, or drop it with `holarchy replay delete {}`",
            replay.replay_id, replay.replay_id
        ));
    }
}

async fn show(
    clients: &mut Clients,
    replay_id: &str,
    all: bool,
    limit: u32,
    out: &Output,
) -> anyhow::Result<()> {
    let mut token = String::new();
    let mut shown = 0u32;
    let mut first = true;
    loop {
        let page = clients
            .replays
            .get_replay(pb::GetReplayRequest {
                replay_id: replay_id.to_owned(),
                page_token: token.clone(),
                page_size: limit.clamp(1, 1000),
                differences_only: !all,
            })
            .await?
            .into_inner();
        if first {
            if let Some(replay) = &page.replay {
                summary(replay, out);
            }
            first = false;
        }
        for turn in &page.turns {
            if shown >= limit {
                return Ok(());
            }
            shown += 1;
            if out.json {
                emit(turn_json(turn));
            } else {
                print_turn(turn);
            }
        }
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    if !out.json && shown == 0 && !all {
        emit("no turn differs (`--all` shows every turn)");
    }
    Ok(())
}

fn decision_json(d: Option<&pb::ReplayDecision>) -> Value {
    let Some(d) = d else { return Value::Null };
    json!({
        "steps": d.steps.iter().map(|s| json!({
            "reply": s.reply,
            "calls": s.calls.iter().map(|c| json!({"tool": c.tool, "input": c.input})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "reply": d.reply,
        "done": d.done,
        "decision": d.decision,
        "failed": d.failed,
        "prompt_tokens": d.prompt_tokens,
        "completion_tokens": d.completion_tokens,
    })
}

fn turn_json(turn: &pb::ReplayTurn) -> Value {
    json!({
        "index": turn.index,
        "run_id": turn.run_id,
        "at_ms": turn.at_ms,
        "class": turn.class,
        "recorded": decision_json(turn.recorded.as_ref()),
        "candidate": decision_json(turn.candidate.as_ref()),
        "unrecorded_calls": turn.unrecorded_calls,
        "error": turn.error,
    })
}

/// The lines of one side of a turn: each step's reply and calls.
fn side_lines(d: Option<&pb::ReplayDecision>) -> Vec<String> {
    let Some(d) = d else {
        return vec!["(none)".into()];
    };
    let mut lines = Vec::new();
    for (i, step) in d.steps.iter().enumerate() {
        if !step.reply.is_empty() {
            lines.push(format!(
                "step {}: says {}",
                i + 1,
                escape::one_line(&step.reply)
            ));
        }
        for call in &step.calls {
            lines.push(format!(
                "step {}: calls {} {}",
                i + 1,
                call.tool,
                escape::one_line(&call.input)
            ));
        }
    }
    if !d.decision.is_empty() {
        lines.push(format!("decision: {}", escape::one_line(&d.decision)));
    }
    if let Some(done) = d.done {
        lines.push(format!("done: {done}"));
    }
    if !d.failed.is_empty() {
        lines.push(format!("failed: {}", escape::one_line(&d.failed)));
    }
    lines
}

/// One turn, as a unified diff of the recorded side (-) and the
/// candidate's (+).
fn print_turn(turn: &pb::ReplayTurn) {
    emit(format!(
        "\nturn {} {} — {}",
        turn.index, turn.run_id, turn.class
    ));
    if !turn.error.is_empty() {
        emit(format!("  not replayed: {}", turn.error));
        return;
    }
    let recorded = side_lines(turn.recorded.as_ref()).join("\n");
    let candidate = side_lines(turn.candidate.as_ref()).join("\n");
    let diff = similar::TextDiff::from_lines(&recorded, &candidate);
    for change in diff.iter_all_changes() {
        let sign = match change.tag() {
            similar::ChangeTag::Delete => "-",
            similar::ChangeTag::Insert => "+",
            similar::ChangeTag::Equal => " ",
        };
        emit(format!(
            "  {sign} {}",
            change.value().trim_end_matches('\n')
        ));
    }
    if turn.unrecorded_calls > 0 {
        emit(format!(
            "  ({} calls answered \"not recorded\")",
            turn.unrecorded_calls
        ));
    }
}
