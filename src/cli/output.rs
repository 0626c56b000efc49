//! How the CLI prints results: aligned text for people, one JSON object per
//! line for scripts.

use std::fmt::Display;
use std::io::Write as _;

use serde_json::{json, Value};

use crate::api::pb;

/// Prints one line to stdout, its control characters (but for line
/// breaks and tabs) escaped: see [`escape`]. A closed pipe (`holarchy
/// events | head`) ends the program quietly instead of panicking like
/// `println!`.
pub(super) fn emit(line: impl Display) {
    let line = line.to_string();
    let mut stdout = std::io::stdout().lock();
    if let Err(err) = writeln!(stdout, "{}", escape::block(&line)) {
        if err.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("holarchy: cannot write output: {err}");
        std::process::exit(1);
    }
}

macro_rules! say {
    ($($arg:tt)*) => { emit(format_args!($($arg)*)) };
}

// After the macro, so the printers there can `say!` too.
pub use crate::escape;
mod planes;
pub mod table;

pub use planes::OutputStream;

use escape::{indented, one_line};

#[derive(Debug, Clone, Copy)]
pub struct Output {
    pub json: bool,
}

fn enum_name<E: TryFrom<i32>>(
    value: i32,
    name: impl Fn(&E) -> &'static str,
    prefix: &str,
) -> String {
    E::try_from(value)
        .map(|e| name(&e).trim_start_matches(prefix).to_lowercase())
        .unwrap_or_else(|_| value.to_string())
}

fn visibility(v: i32) -> String {
    enum_name(v, pb::Visibility::as_str_name, "VISIBILITY_")
}
fn ownership(v: i32) -> String {
    enum_name(v, pb::Ownership::as_str_name, "OWNERSHIP_")
}
fn lifecycle(v: i32) -> String {
    enum_name(v, pb::LifecycleState::as_str_name, "LIFECYCLE_STATE_")
}
fn activity(v: i32) -> String {
    enum_name(v, pb::Activity::as_str_name, "ACTIVITY_")
}
fn message_status(v: i32) -> String {
    enum_name(v, pb::MessageStatus::as_str_name, "MESSAGE_STATUS_")
}

/// When an event happened, to the second, in UTC (`Z`): the date too, as
/// a log spans days. The client has no time zone database to say it in
/// local time.
fn event_time(at_ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(at_ms)
        .map(|at| at.format("%m-%d %H:%M:%SZ").to_string())
        .unwrap_or_else(|| "-".to_owned())
}

fn or_dash(text: &str) -> &str {
    if text.is_empty() {
        "-"
    } else {
        text
    }
}

pub fn agent_json(a: &pb::AgentSummary) -> Value {
    json!({
        "agent_id": a.agent_id,
        "name": a.name,
        "preset": a.profile.as_ref().map(|p| p.preset.clone()),
        "tool_families": a.profile.as_ref().map(|p| p.tool_families.clone()),
        "visibility": visibility(a.visibility),
        "ownership": ownership(a.ownership),
        "lineage_parent_agent_id": a.lineage_parent_agent_id,
        "supervisor_agent_id": a.supervisor_agent_id,
        "state": lifecycle(a.state),
        "activity": activity(a.activity),
        "queue_length": a.queue_length,
        "current_run_id": a.current_run_id,
        "turns_completed": a.turns_completed,
        "turn_deferred": a.turn_deferred,
        "created_at_ms": a.created_at_ms,
        "waiting_on": a.waiting_on,
        "current_work_item": a.current_work_item.as_ref().map(|w| json!({ "work_item_id": w.work_item_id, "objective": w.objective })),
        "brain": a.brain.as_ref().and_then(|b| b.kind.as_ref()).map(brain_json),
        "instance": a.instance,
        "role_version": a.role_version,
        "skills": a.skills,
        "mcp_servers": a.mcp_servers,
        "network": a.network,
        "labels": a.labels,
    })
}

/// What decides the agent's turns, as `agent get` shows it to people. A
/// command brain's `env` is left out: it is the operator's, and may hold
/// what a script should not print.
pub(super) fn brain_json(kind: &pb::brain_config::Kind) -> Value {
    match kind {
        pb::brain_config::Kind::Scripted(_) => json!({ "kind": "scripted" }),
        pb::brain_config::Kind::Command(c) => json!({
            "kind": "command",
            "program": c.program,
            "args": c.args,
            "timeout_ms": c.timeout_ms,
        }),
        pb::brain_config::Kind::Openai(o) => json!({
            "kind": "openai",
            "base_url": o.base_url,
            "model": o.model,
            "api_key_env": o.api_key_env,
        }),
        pb::brain_config::Kind::Anthropic(a) => json!({
            "kind": "anthropic",
            "base_url": a.base_url,
            "model": a.model,
            "api_key_env": a.api_key_env,
            "max_tokens": a.max_tokens,
        }),
    }
}

/// The names of an agent's creator and supervisor, where known, for
/// `agent get` (the summary carries their ids only).
#[derive(Debug, Default)]
pub struct Kin {
    pub lineage: Option<String>,
    pub supervisor: Option<String>,
}

/// Another agent as `agent get` names it: by its name and the tail of its
/// id a table would show (which any command takes for it, see
/// `resolve`), or by its whole id when it has no name (a private child)
/// or its name is not known; `-` for none.
fn relative(id: &str, name: Option<&str>) -> String {
    match name.filter(|n| !n.is_empty()) {
        _ if id.is_empty() => "-".to_owned(),
        Some(name) => format!("{} ({})", one_line(name), table::tail(id, table::MIN_TAIL)),
        None => id.to_owned(),
    }
}

impl Output {
    /// A warning: the command did its work, but something will not go as
    /// the user expects. On stderr, as JSON under `--json`.
    pub fn warn(&self, warning: &str) {
        if self.json {
            eprintln!("{}", json!({ "warning": warning }));
        } else {
            eprintln!("holarchy: warning: {}", escape::block(warning));
        }
    }

    pub fn created(&self, name: &str, agent_id: &str) {
        if self.json {
            say!("{}", json!({ "agent_id": agent_id, "name": name }));
        } else {
            say!("created {name} {agent_id}");
        }
    }

    /// Agents as a table, names first (`agent list`); under `--json`,
    /// one object per agent.
    pub fn agents(&self, agents: &[pb::AgentSummary]) {
        if self.json {
            agents.iter().for_each(|a| say!("{}", agent_json(a)));
            return;
        }
        let tail = table::tail_len(agents.iter().map(|a| a.agent_id.as_str()));
        let now = table::now_ms();
        let mut rows = table::Table::new(&[
            "NAME", "ID", "PROFILE", "STATE", "ACTIVITY", "QUEUE", "CREATED",
        ])
        .numeric(&[5]);
        for a in agents {
            let preset = a.profile.as_ref().map(|p| p.preset.as_str()).unwrap_or("");
            rows.row(vec![
                one_line(or_dash(&a.name)).into_owned(),
                table::tail(&a.agent_id, tail).to_owned(),
                or_dash(preset).to_owned(),
                lifecycle(a.state),
                activity(a.activity),
                a.queue_length.to_string(),
                table::age(a.created_at_ms, now),
            ]);
        }
        rows.print();
    }

    /// One agent, with the tokens its turns spent when the answer has
    /// them (`agent get`).
    pub fn agent_detail(
        &self,
        a: &pb::AgentSummary,
        usage: Option<&pb::AgentUsage>,
        last_error: Option<&str>,
        kin: &Kin,
    ) {
        if self.json {
            let mut value = agent_json(a);
            if let Some(u) = usage {
                value["usage"] = json!({
                    "prompt_tokens": u.prompt_tokens,
                    "completion_tokens": u.completion_tokens,
                    "cached_tokens": u.cached_tokens,
                    "turns": u.turns,
                });
            }
            say!("{value}");
            return;
        }
        let families = a
            .profile
            .as_ref()
            .map(|p| p.tool_families.join(", "))
            .unwrap_or_default();
        let preset = a.profile.as_ref().map(|p| p.preset.as_str()).unwrap_or("");
        say!("agent        {}", a.agent_id);
        say!("name         {}", one_line(or_dash(&a.name)));
        say!(
            "profile      {} ({}, {})",
            or_dash(preset),
            visibility(a.visibility),
            ownership(a.ownership)
        );
        say!("tools        {families}");
        say!(
            "lineage      {}",
            relative(&a.lineage_parent_agent_id, kin.lineage.as_deref())
        );
        say!(
            "supervisor   {}",
            relative(&a.supervisor_agent_id, kin.supervisor.as_deref())
        );
        say!(
            "state        {} / {}",
            lifecycle(a.state),
            activity(a.activity)
        );
        let deferred = if a.turn_deferred {
            " (next turn deferred by a turn limit)"
        } else {
            ""
        };
        say!("queue        {}{deferred}", a.queue_length);
        say!("current run  {}", or_dash(&a.current_run_id));
        // The stored total outlives restarts; the actor's own count does not.
        match usage.filter(|u| u.turns > 0) {
            Some(u) => say!(
                "turns        {} ({} since the daemon started)",
                u.turns,
                a.turns_completed
            ),
            None => say!("turns        {}", a.turns_completed),
        }
        if let Some(kind) = a.brain.as_ref().and_then(|b| b.kind.as_ref()) {
            let brain = match kind {
                pb::brain_config::Kind::Scripted(_) => "scripted".to_owned(),
                pb::brain_config::Kind::Command(c) => {
                    format!("command: {} {}", c.program, c.args.join(" "))
                }
                pb::brain_config::Kind::Openai(o) => {
                    format!("openai: {} at {}", o.model, o.base_url)
                }
                pb::brain_config::Kind::Anthropic(a) => {
                    format!("anthropic: {} at {}", a.model, a.base_url)
                }
            };
            say!("brain        {}", one_line(&brain));
        }
        if !a.instance.is_empty() {
            say!("instance     {}", one_line(&a.instance));
        }
        if !a.role_version.is_empty() {
            say!("role         {}", a.role_version);
        }
        if !a.skills.is_empty() {
            say!("skills       {}", one_line(&a.skills.join(", ")));
        }
        if !a.mcp_servers.is_empty() {
            say!("mcp servers  {}", one_line(&a.mcp_servers.join(", ")));
        }
        if !a.network.is_empty() && a.network != "full" {
            say!("network      {}", one_line(&a.network));
        }
        if !a.labels.is_empty() {
            let mut labels: Vec<String> =
                a.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            labels.sort();
            say!("labels       {}", one_line(&labels.join(", ")));
        }
        if let Some(work) = &a.current_work_item {
            say!(
                "working on   {} ({})",
                one_line(&work.objective),
                work.work_item_id
            );
        }
        for wait in &a.waiting_on {
            say!("waiting on   {}", one_line(wait));
        }
        if let Some(error) = last_error {
            say!("last error   ! {error}");
        }
        if let Some(u) = usage.filter(|u| u.turns > 0) {
            say!(
                "tokens       {} prompt ({} cached), {} completion, over {} turn(s)",
                u.prompt_tokens,
                u.cached_tokens,
                u.completion_tokens,
                u.turns
            );
        }
    }

    pub fn sent(&self, sent: &pb::SendMessageResponse) {
        if self.json {
            say!(
                "{}",
                json!({ "message_id": sent.message_id, "duplicate": sent.duplicate })
            );
        } else if sent.duplicate {
            say!("already sent {}", sent.message_id);
        } else {
            say!("sent {}", sent.message_id);
        }
    }

    /// One message; `problems` are its run's failure and tool errors
    /// (see `run_errors`, worded by `crate::problems`), shown under it
    /// for people.
    pub fn message(&self, m: &pb::Message, problems: &[String]) {
        if self.json {
            say!(
                "{}",
                json!({
                    "message_id": m.message_id,
                    "agent_id": m.agent_id,
                    "provenance": m.provenance,
                    "provenance_agent_id": m.provenance_agent_id,
                    "text": m.text,
                    "dedupe_key": m.dedupe_key,
                    "status": message_status(m.status),
                    "run_id": m.run_id,
                    "reply": m.reply,
                    "attempts": m.attempts,
                    "created_at_ms": m.created_at_ms,
                    "truncated_from_bytes": m.truncated_from_bytes,
                })
            );
        } else {
            // What an agent wrote stays indented inside its entry: a line
            // of it cannot pass for the next message.
            say!(
                "{}  [{}] {}: {}",
                m.message_id,
                message_status(m.status),
                one_line(&m.provenance),
                indented(&m.text, 34)
            );
            if !m.reply.is_empty() {
                say!("{:<30}  -> {}", "", indented(&m.reply, 35));
            }
            for problem in problems {
                say!("{:<30}  ! {problem}", "");
            }
        }
    }

    /// One event; `who` is its agent as people read it (name and id's
    /// tail, see `events`), unused under `--json`, which keeps the id
    /// whole.
    pub fn event(&self, e: &pb::Event, who: &str) {
        if self.json {
            let detail: Value = serde_json::from_str(&e.detail_json).unwrap_or(Value::Null);
            say!(
                "{}",
                json!({ "cursor": e.cursor, "at_ms": e.at_ms, "agent_id": e.agent_id, "kind": e.kind, "detail": detail, "truncated_from_bytes": e.truncated_from_bytes })
            );
        } else {
            // A failure is marked, with its reason, where the text alone
            // would say only "failed" or the tool's name.
            let text = match crate::problems::problem(e) {
                Some(problem) => format!("! {problem}"),
                None if e.kind == "agent_state_changed" => {
                    // The state alone hides why (archived, failed,
                    // deleted); the reason is in the detail.
                    let detail: Value = serde_json::from_str(&e.detail_json).unwrap_or_default();
                    match detail["reason"].as_str().filter(|r| !r.is_empty()) {
                        Some(reason) => format!("{} ({})", one_line(&e.text), one_line(reason)),
                        None => one_line(&e.text).into_owned(),
                    }
                }
                None => one_line(&e.text).into_owned(),
            };
            say!(
                "{:>8}  {}  {:<24}  {:<20}  {}",
                e.cursor,
                event_time(e.at_ms),
                or_dash(who),
                e.kind,
                text
            );
        }
    }

    pub fn status(&self, s: &pb::GetStatusResponse) {
        if self.json {
            say!(
                "{}",
                json!({
                    "version": s.version,
                    "uptime_ms": s.uptime_ms,
                    "public_agents": s.public_agents,
                    "private_agents": s.private_agents,
                    "activity": s.activity,
                    "busy_runs": s.busy_runs,
                    "restarts": s.restarts,
                    "agents_given_up": s.agents_given_up,
                    "recovered_agents": s.recovered_agents,
                    "interrupted_runs": s.interrupted_runs,
                    "rss_bytes": s.rss_bytes,
                    "store": s.store,
                    "store_bytes": s.store_bytes,
                    "event_cursor": s.event_cursor,
                    "data_dir": s.data_dir,
                    "running_tasks": s.running_tasks,
                    "armed_waits": s.armed_waits,
                    "pid": s.pid,
                    "heap_allocated_bytes": s.heap_allocated_bytes,
                    "heap_resident_bytes": s.heap_resident_bytes,
                    "sandbox_landlock_abi": s.sandbox_landlock_abi,
                    "sandbox": s.sandbox,
                    "sandbox_network": s.sandbox_network,
                    "listeners": s.listeners,
                    "damaged_count": s.damaged_count,
                    "held_agents": s.held_agents,
                    "damaged_records": s.damaged_records.iter().map(|d| json!({
                        "tree": d.tree,
                        "key": d.key,
                        "agent_id": d.agent_id,
                        "reason": d.reason,
                    })).collect::<Vec<_>>(),
                })
            );
        } else {
            say!(
                "holarchy {} up {:.1}s, {}",
                s.version,
                s.uptime_ms as f64 / 1000.0,
                s.activity
            );
            say!(
                "agents     {} public, {} private",
                s.public_agents,
                s.private_agents
            );
            say!(
                "recovered  {} agents, {} interrupted runs",
                s.recovered_agents,
                s.interrupted_runs
            );
            say!(
                "restarts   {} (gave up on {})",
                s.restarts,
                s.agents_given_up
            );
            say!(
                "memory     {:.1} MiB rss, {:.1} MiB on disk",
                s.rss_bytes as f64 / 1048576.0,
                s.store_bytes as f64 / 1048576.0
            );
            say!("events     {}", s.event_cursor);
            // Empty for a caller of one namespace: the machine's own.
            if !s.data_dir.is_empty() {
                say!("data       {}", one_line(&s.data_dir));
            }
            if !s.store.is_empty() {
                say!("store      {}", one_line(&s.store));
            }
            say!("sandbox    {}", s.sandbox);
            for listener in &s.listeners {
                say!("listening  {}", one_line(listener));
            }
            if !s.sandbox_network.is_empty() {
                say!("network    {}", s.sandbox_network);
            }
            if s.damaged_count > 0 {
                say!(
                    "damaged    {} records could not be read at start; {} agents held down with them (restore them from a backup, or archive their agents)",
                    s.damaged_count,
                    s.held_agents
                );
                for d in &s.damaged_records {
                    say!(
                        "  {} {} agent {}: {}",
                        d.tree,
                        d.key,
                        or_dash(&d.agent_id),
                        one_line(&d.reason)
                    );
                }
            }
        }
    }

    pub fn archived(&self, agent_id: &str, done: &pb::ArchiveAgentResponse) {
        if self.json {
            say!(
                "{}",
                json!({ "agent_id": agent_id, "agents": done.agents, "tasks": done.tasks })
            );
        } else {
            say!(
                "archived {agent_id}: {} agents, {} tasks",
                done.agents,
                done.tasks
            );
        }
    }

    pub fn deleted(&self, agent_id: &str, agents: u32) {
        if self.json {
            say!("{}", json!({ "agent_id": agent_id, "agents": agents }));
        } else {
            say!("deleted {agent_id}: {agents} agents");
        }
    }

    pub fn control(&self, verb: &str, done: &pb::ControlResponse) {
        if self.json {
            say!(
                "{}",
                json!({ "state": lifecycle(done.state), "aborted_run_id": done.aborted_run_id })
            );
        } else if done.aborted_run_id.is_empty() {
            say!("{verb}: now {}", lifecycle(done.state));
        } else {
            say!(
                "{verb} {}: now {}",
                done.aborted_run_id,
                lifecycle(done.state)
            );
        }
    }
}
