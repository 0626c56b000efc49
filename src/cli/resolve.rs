//! Which agent or task a command means: a name (agents), a whole id, or,
//! as git and docker take them, any part of an id that only one agent's
//! (or task's) has: its start (`agt_01KQ8Z`, or without `agt_`) or the
//! tail the tables show.

use anyhow::Context;

use crate::api::pb;
use crate::client::Clients;

/// An id's length: a kind's prefix (`agt_`, `tsk_`) and a 26-character
/// ULID.
const ID_LEN: usize = 30;
/// The shortest part of an id looked for: shorter ones match too much.
const MIN_PART: usize = 4;
/// Candidates an ambiguity error names.
const NAMED: usize = 5;

/// Turns a name, an id or a part of one only one agent's id has into an
/// id. A whole id passes unchecked (the daemon validates it); a name is
/// asked of the daemon first; a part of an id is matched against every
/// agent, private and archived ones too.
pub(super) async fn resolve(clients: &mut Clients, agent: &str) -> anyhow::Result<String> {
    if agent.starts_with("agt_") && agent.len() == ID_LEN {
        return Ok(agent.to_owned());
    }
    if !agent.starts_with("agt_") {
        let by_name = clients
            .agents
            .get_agent(pb::GetAgentRequest {
                agent: Some(pb::get_agent_request::Agent::Name(agent.to_owned())),
            })
            .await;
        match by_name {
            Ok(found) => {
                return Ok(found
                    .into_inner()
                    .agent
                    .map(|a| a.agent_id)
                    .unwrap_or_default())
            }
            Err(status) if status.code() == tonic::Code::NotFound && looks_like_id_part(agent) => {}
            Err(status) => {
                return Err(status).with_context(|| format!("cannot find agent `{agent}`"));
            }
        }
    }
    let matching = by_id_part(clients, agent).await?;
    one_of(
        matching,
        agent,
        format!("no agent is named `{agent}`, and no agent's id starts or ends with it"),
        "agents'",
    )
}

/// Agents whose tasks a part of a task id is looked for in, at most: one
/// call each, so past this the search would load the daemon for minutes.
const MAX_TASK_SEARCH_AGENTS: usize = 10_000;

/// Turns a task's whole id, or a part only one task's id has, into its
/// id. A whole id, or text that cannot be part of one, passes unchecked:
/// the daemon validates it. A part is matched against every agent's
/// tasks: one call per agent, so it is refused on a daemon of more than
/// [`MAX_TASK_SEARCH_AGENTS`] agents, where the whole id (`--json` shows
/// it) answers at once.
pub(super) async fn resolve_task(clients: &mut Clients, task: &str) -> anyhow::Result<String> {
    let bare = task.strip_prefix("tsk_").unwrap_or(task);
    if (bare.len() != task.len() && task.len() == ID_LEN) || !looks_like_id_part(bare) {
        return Ok(task.to_owned());
    }
    let part = upper_ulid(task, "tsk_");
    let agents = agents_up_to(clients, MAX_TASK_SEARCH_AGENTS)
        .await?
        .ok_or_else(|| {
            tonic::Status::failed_precondition(format!(
                "`{task}` is part of a task id, and finding it would ask each of more than \
             {MAX_TASK_SEARCH_AGENTS} agents for its tasks: give the whole task id \
             (`holarchy --json task list AGENT` shows it)"
            ))
        })?;
    let mut matching = Vec::new();
    for agent in agents {
        let mut page_token = String::new();
        loop {
            let page = clients
                .tasks
                .list_tasks(pb::ListTasksRequest {
                    agent_id: agent.agent_id.clone(),
                    page_size: 1000,
                    page_token,
                })
                .await;
            let page = match page {
                Ok(page) => page.into_inner(),
                // Deleted between the two reads: it has no task left.
                Err(status) if status.code() == tonic::Code::NotFound => break,
                Err(status) => return Err(status.into()),
            };
            matching.extend(
                page.tasks
                    .into_iter()
                    .filter(|t| id_has(&t.task_id, &part))
                    .map(|t| (t.task_id, t.label)),
            );
            if page.next_page_token.is_empty() {
                break;
            }
            page_token = page.next_page_token;
        }
    }
    one_of(
        matching,
        task,
        format!("no task's id starts or ends with `{task}`"),
        "tasks'",
    )
}

/// The one id of `matching`, or why there is not one: not found, or the
/// candidates (with their names or labels) when `part` names several.
fn one_of(
    matching: Vec<(String, String)>,
    part: &str,
    none: String,
    whose: &str,
) -> anyhow::Result<String> {
    match matching.as_slice() {
        [(id, _)] => Ok(id.clone()),
        [] => Err(tonic::Status::not_found(none).into()),
        many => {
            let named: Vec<String> = many
                .iter()
                .take(NAMED)
                .map(|(id, name)| match name.is_empty() {
                    true => id.clone(),
                    false => format!("{id} ({name})"),
                })
                .collect();
            let more = many.len().saturating_sub(NAMED);
            let more = if more > 0 {
                format!(", and {more} more")
            } else {
                String::new()
            };
            Err(tonic::Status::invalid_argument(format!(
                "`{part}` is part of {} {whose} ids: {}{more}; give more of the id",
                many.len(),
                named.join(", ")
            ))
            .into())
        }
    }
}

/// Whether `text` could be part of an id: ULID characters (any case),
/// long enough to mean something.
fn looks_like_id_part(text: &str) -> bool {
    text.len() >= MIN_PART && text.chars().all(|c| c.is_ascii_alphanumeric())
}

/// Whether `id` starts (with or without its kind's prefix, `agt_` or
/// `tsk_`) or ends with `part`.
fn id_has(id: &str, part: &str) -> bool {
    let bare = id.split_once('_').map_or(id, |(_, rest)| rest);
    id.starts_with(part) || bare.starts_with(part) || id.ends_with(part)
}

/// `part` as ids spell it: ULIDs are upper case, people type either; the
/// kind's `prefix` stays lower case.
fn upper_ulid(part: &str, prefix: &str) -> String {
    match part.strip_prefix(prefix) {
        Some(rest) => format!("{prefix}{}", rest.to_ascii_uppercase()),
        None => part.to_ascii_uppercase(),
    }
}

/// Every agent (id and name) whose id has `part`, reading all pages.
async fn by_id_part(clients: &mut Clients, part: &str) -> anyhow::Result<Vec<(String, String)>> {
    let part = upper_ulid(part, "agt_");
    Ok(agents_where(clients, true, |a| id_has(&a.agent_id, &part))
        .await?
        .into_iter()
        .map(|a| (a.agent_id, a.name))
        .collect())
}

/// Every agent, private and archived ones too, if there are at most
/// `max`; `None` once the pages go past it.
async fn agents_up_to(
    clients: &mut Clients,
    max: usize,
) -> anyhow::Result<Option<Vec<pb::AgentSummary>>> {
    read_agents(clients, true, max, |_| true).await
}

/// Every agent `keep` picks, reading all pages of `ListAgents` (private
/// ones too with `include_private`).
pub async fn agents_where(
    clients: &mut Clients,
    include_private: bool,
    keep: impl FnMut(&pb::AgentSummary) -> bool,
) -> anyhow::Result<Vec<pb::AgentSummary>> {
    let all = read_agents(clients, include_private, usize::MAX, keep).await?;
    Ok(all.unwrap_or_default())
}

/// The agents `keep` picks, page by page; `None` once more than `max`
/// agents were read.
async fn read_agents(
    clients: &mut Clients,
    include_private: bool,
    max: usize,
    mut keep: impl FnMut(&pb::AgentSummary) -> bool,
) -> anyhow::Result<Option<Vec<pb::AgentSummary>>> {
    let mut found = Vec::new();
    let mut read = 0usize;
    let mut page_token = String::new();
    loop {
        let page = clients
            .agents
            .list_agents(pb::ListAgentsRequest {
                page_size: 1000,
                page_token,
                include_private,
            })
            .await?
            .into_inner();
        read = read.saturating_add(page.agents.len());
        if read > max {
            return Ok(None);
        }
        found.extend(page.agents.into_iter().filter(|a| keep(a)));
        if page.next_page_token.is_empty() {
            return Ok(Some(found));
        }
        page_token = page.next_page_token;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_matched_by_its_start_or_its_tail() {
        let id = "agt_01KQ8Z3V5W0000000000ABCDEF";
        assert!(id_has(id, "agt_01KQ8Z"));
        assert!(id_has(id, "01KQ8Z"));
        assert!(id_has(id, "ABCDEF"));
        assert!(!id_has(id, "KQ8Z3V"), "the middle is not a part people see");
        let task = "tsk_01KQ8Z3V5W0000000000ABCDEF";
        assert!(id_has(task, "01KQ8Z") && id_has(task, "tsk_01KQ8Z"));
        assert_eq!(upper_ulid("tsk_01kq8z", "tsk_"), "tsk_01KQ8Z");
        assert_eq!(upper_ulid("abcdef", "tsk_"), "ABCDEF");
        assert!(looks_like_id_part("abcdef"));
        assert!(!looks_like_id_part("ops"));
        assert!(!looks_like_id_part("build-1"));
    }
}
