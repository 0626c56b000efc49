//! The console's JSON routes, each one gRPC call (or a bounded few) made
//! in process:
//!
//! | route | call | token (role) |
//! |---|---|---|
//! | `GET /api/session` | whether the token given is right | - |
//! | `GET /api/tree?agent=&page=&limit=` | `GetTree`, one level (`max_depth`; the roots paged by id) | no (contents with) |
//! | `GET /api/tree?filter=&page=&limit=` | `GetTree` walked a bounded stretch per request, the nodes matching the filter (see [`tree_filter`]) | no (roots only without; every level with) |
//! | `GET /api/check?page=` | `GetTree` of the whole runtime, mismatches and counts only | yes: it walks every agent |
//! | `GET /api/search?q=` | `GetAgent` by id, name, or names from a prefix | no |
//! | `GET /api/agents/ID` | `GetAgent` | no (contents with) |
//! | `GET /api/agents/ID/messages` | `ListMessages` | yes |
//! | `GET /api/agents/ID/tasks` | `ListTasks` | yes |
//! | `GET /api/tasks/ID/output?offset=` | `ReadTaskOutput` | yes |
//! | `GET /api/agents/ID/work` | `ListWorkItems` | yes |
//! | `GET /api/agents/ID/workspaces` | `ListWorkspaces` | yes |
//! | `GET /api/agents/ID/events?after=` | `WatchEvents`, followed, as server-sent events | yes |
//! | `POST /api/agents/ID/{pause,resume,abort,archive}` | `PauseAgent`, ... | yes (operator) |
//! | `GET /api/overview?after=` | `GetActivity`, live counts by state, failures from `WatchEvents` | no (failures with) |
//! | `POST /api/agents/ID/messages` `{"text", "dedupe_key"}` | `SendMessage` | yes (operator) |
//! | `POST /api/tasks/ID/input` `{"text"}` | `SendTaskInput` | yes (operator) |
//! | `GET /api/replays` | `ListReplays`, each agent named by `GetAgent` | yes |
//! | `GET /api/replays/ID?page=&limit=&all=` | `GetReplay`, the turns that differ (every turn with `all=1`), two sides aligned (see [`replays`]) | yes |
//!
//! A "no" holds only with `serve --console-public-read`: without it, the
//! console refuses every route but `/api/session` to a caller without the
//! token before it gets here. "yes" takes any token, a viewer's too; a
//! write takes an operator's or an admin's, and is recorded in the audit
//! trail (`holarchy audit`) as the gRPC call it makes, marked `(console)`.

use std::collections::HashMap;

use hyper::body::Incoming;
use hyper::header::HeaderMap;
use hyper::{Method, Response, StatusCode};
use serde_json::{json, Value};

use crate::api::pb;
use crate::api::pb::agent_service_server::AgentService as _;
use crate::api::pb::supervision_service_server::SupervisionService as _;
use crate::api::pb::task_service_server::TaskService as _;
use crate::api::pb::work_service_server::WorkService as _;
use crate::api::pb::workspace_service_server::WorkspaceService as _;

use super::query::Query;
use super::{
    inputs, json_answer, method_is, overview, replays, stream, tree_filter, views, Body, Caller,
    Console, Refusal,
};

/// Nodes per page of the tree, by default and at most.
const TREE_PAGE: u32 = 200;
const MAX_TREE_PAGE: u32 = 1000;
/// Rows per page of the other listings, by default and at most (the
/// gRPC services bound them in bytes too).
const LIST_PAGE: u32 = 50;
const MAX_LIST_PAGE: u32 = 500;
/// Longest search text, and most agents a name prefix finds.
const MAX_SEARCH: usize = 64;
const SEARCH_HITS: usize = 20;

type Answer = Response<Body>;

/// What a route's handler ends with: its JSON, or why not.
type Outcome = Result<Value, Refusal>;

/// One request to the API, its caller known.
pub struct Call<'a> {
    pub method: &'a Method,
    pub path: &'a str,
    pub query: &'a Query,
    pub caller: Caller,
    /// Who gave the token, for the audit trail; `None` without one.
    pub who: Option<&'a crate::access::Caller>,
    pub headers: &'a HeaderMap,
    /// Unread: only a write of the operator's reads it, bounded.
    pub body: Incoming,
}

pub async fn answer(console: &Console, call: Call<'_>) -> Answer {
    let Call {
        method,
        path,
        query,
        caller,
        who,
        headers,
        body,
    } = call;
    let mut parts: Vec<&str> = path.trim_end_matches('/').split('/').skip(2).collect();
    let audited = audited(method, &parts);
    // An agent or task of another namespace is answered as one that does
    // not exist: the call names a stand-in, and the answer the caller's id.
    let stand_in = match stand_in_for(console, &parts) {
        Ok(stand_in) => stand_in,
        Err(refusal) => return refusal.answer(),
    };
    if let Some((fake, _)) = &stand_in {
        parts[1] = fake.as_str();
    }
    let outcome = match parts.as_slice() {
        ["session"] => read(
            method,
            Ok(json!({
                "operator": caller.signed_in(),
                "writes": caller == Caller::Operator,
                "role": who.map(|w| w.role.as_str()),
            })),
        ),
        ["tree"] => match check_read(method) {
            Ok(()) => tree(console, query, caller).await,
            Err(refusal) => Err(refusal),
        },
        // The whole-runtime walk reads every agent: not for anyone who can
        // reach the listener.
        ["check"] => match operator_read(method, caller) {
            Ok(()) => check(console, query).await,
            Err(refusal) => Err(refusal),
        },
        ["search"] => match check_read(method) {
            Ok(()) => search(console, query).await,
            Err(refusal) => Err(refusal),
        },
        ["agents", id] => match check_read(method) {
            Ok(()) => agent(console, id, caller).await,
            Err(refusal) => Err(refusal),
        },
        ["agents", id, "events"] => {
            let checked = operator_read(method, caller)
                .and_then(|()| query.number("after").map_err(Refusal::from));
            return match checked {
                Ok(after) => stream::events(console, id, after).await,
                Err(refusal) => refusal.answer(),
            };
        }
        ["overview"] => match check_read(method) {
            Ok(()) => overview::answer(console, query, caller).await,
            Err(refusal) => Err(refusal),
        },
        ["agents", id, "messages"] if method == Method::POST => {
            match operator_write(method, caller) {
                Ok(()) => inputs::send_message(console, id, headers, body).await,
                Err(refusal) => Err(refusal),
            }
        }
        ["tasks", id, "input"] => match operator_write(method, caller) {
            Ok(()) => inputs::task_input(console, id, headers, body).await,
            Err(refusal) => Err(refusal),
        },
        ["agents", id, action @ ("pause" | "resume" | "abort" | "archive")] => {
            match operator_write(method, caller) {
                Ok(()) => write(console, id, action).await,
                Err(refusal) => Err(refusal),
            }
        }
        ["agents", id, listing @ ("messages" | "tasks" | "work" | "workspaces")] => {
            match operator_read(method, caller) {
                Ok(()) => list(console, id, listing, query).await,
                Err(refusal) => Err(refusal),
            }
        }
        ["tasks", id, "output"] => match operator_read(method, caller) {
            Ok(()) => output(console, id, query).await,
            Err(refusal) => Err(refusal),
        },
        // What agents said and called, replayed: contents. A replay of
        // another namespace is one that does not exist, as over gRPC.
        ["replays"] => match operator_read(method, caller) {
            Ok(()) => replays::list(console).await,
            Err(refusal) => Err(refusal),
        },
        ["replays", id] => match operator_read(method, caller) {
            Ok(()) => replays::one(console, id, query).await,
            Err(refusal) => Err(refusal),
        },
        _ => Err(Refusal::new(StatusCode::NOT_FOUND, "no such route")),
    };
    let outcome = match (outcome, &stand_in) {
        (Err(mut refusal), Some((fake, original))) => {
            refusal.why = refusal.why.replace(fake.as_str(), original);
            Err(refusal)
        }
        (outcome, _) => outcome,
    };
    if let (Some((action, target)), Some(who)) = (audited, who) {
        record(console, who, action, target, &outcome).await;
    }
    match outcome {
        Ok(body) => json_answer(StatusCode::OK, &body),
        Err(refusal) => refusal.answer(),
    }
}

fn read(method: &Method, body: Outcome) -> Outcome {
    check_read(method)?;
    body
}

fn check_read(method: &Method) -> Result<(), Refusal> {
    if method_is(method, &Method::GET) {
        Ok(())
    } else {
        Err(Refusal::new(StatusCode::METHOD_NOT_ALLOWED, "use GET"))
    }
}

fn operator_read(method: &Method, caller: Caller) -> Result<(), Refusal> {
    check_read(method)?;
    signed_in(caller)
}

fn operator_write(method: &Method, caller: Caller) -> Result<(), Refusal> {
    if method != Method::POST {
        return Err(Refusal::new(StatusCode::METHOD_NOT_ALLOWED, "use POST"));
    }
    signed_in(caller)?;
    if caller != Caller::Operator {
        return Err(Refusal::new(
            StatusCode::FORBIDDEN,
            "a viewer's token reads only: this needs an operator's (holarchy token create --role operator)",
        ));
    }
    Ok(())
}

fn signed_in(caller: Caller) -> Result<(), Refusal> {
    if caller.signed_in() {
        Ok(())
    } else {
        Err(Refusal::new(
            StatusCode::UNAUTHORIZED,
            "log in with a token to see this",
        ))
    }
}

/// The gRPC call a write route makes, and what it names, for the audit
/// trail; `None` for a read.
fn audited(method: &Method, parts: &[&str]) -> Option<(&'static str, String)> {
    if method == Method::GET || method == Method::HEAD {
        return None;
    }
    let action = match parts {
        ["agents", _, "messages"] => "AgentService/SendMessage (console)",
        ["tasks", _, "input"] => "TaskService/SendTaskInput (console)",
        ["agents", _, "pause"] => "AgentService/PauseAgent (console)",
        ["agents", _, "resume"] => "AgentService/ResumeAgent (console)",
        ["agents", _, "abort"] => "AgentService/AbortRun (console)",
        ["agents", _, "archive"] => "AgentService/ArchiveAgent (console)",
        _ => return None,
    };
    let target: String = parts[1]
        .chars()
        .take(crate::access::target::MAX_TARGET)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    Some((action, target))
}

/// For a path naming an agent or a task (`agents/ID/...`, `tasks/ID/...`)
/// of another namespace than the caller's: the stand-in id to call with
/// and the id the caller gave.
fn stand_in_for(console: &Console, parts: &[&str]) -> Result<Option<(String, String)>, Refusal> {
    let kind = match parts.first() {
        Some(&"agents") => crate::api::scope::Kind::Agent,
        Some(&"tasks") => crate::api::scope::Kind::Task,
        _ => return Ok(None),
    };
    let Some(id) = parts.get(1) else {
        return Ok(None);
    };
    let fake = console
        .keys
        .scopes
        .stand_in(kind, id, &super::acting_namespace())
        .map_err(|_| Refusal::new(StatusCode::SERVICE_UNAVAILABLE, "try again later"))?;
    Ok(fake.map(|fake| (fake, (*id).to_owned())))
}

/// How far back from the log's end a messages page looks for its runs'
/// problems: the same window `agent get` reads for a last error.
const PROBLEM_WINDOW: u64 = 100_000;

/// The problems (a failed run's reason, tool errors) of the runs of
/// `messages`, by run id, read off the agent's recent events; nothing is
/// read when no message of the page has run yet.
async fn run_problems(
    console: &Console,
    agent_id: &str,
    messages: &[pb::Message],
) -> HashMap<String, Vec<String>> {
    use tokio_stream::StreamExt as _;
    let mut found: HashMap<String, Vec<String>> = HashMap::new();
    let runs: std::collections::HashSet<&str> = messages
        .iter()
        .filter(|m| !m.run_id.is_empty())
        .map(|m| m.run_id.as_str())
        .collect();
    if runs.is_empty() {
        return found;
    }
    let end = *console.store.event_watermark().borrow();
    let watched = console
        .agents
        .watch_events(super::req(pb::WatchEventsRequest {
            after_cursor: end.saturating_sub(PROBLEM_WINDOW),
            follow: false,
            agent_id: agent_id.to_owned(),
        }))
        .await;
    let Ok(stream) = watched else {
        return found;
    };
    let mut stream = stream.into_inner();
    while let Some(Ok(event)) = stream.next().await {
        if !runs.contains(event.run_id.as_str()) {
            continue;
        }
        if let Some(problem) = crate::problems::problem(&event) {
            found.entry(event.run_id).or_default().push(problem);
        }
    }
    found
}

/// Records a console write in the audit trail before it is answered.
async fn record(
    console: &Console,
    who: &crate::access::Caller,
    action: &str,
    target: String,
    outcome: &Outcome,
) {
    let (code, detail) = match outcome {
        Ok(_) => ("OK", String::new()),
        Err(refusal) => (refusal.code_name(), refusal.why.clone()),
    };
    let call = crate::access::audit::Call {
        caller: who,
        action,
        target,
        outcome: code,
        detail: &detail,
        namespace: crate::daemon::gate::DEFAULT_NAMESPACE,
    };
    if let Err(err) = console.audit().record(call).await {
        tracing::error!(error = %err, action, "cannot record a console write in the audit trail");
    }
}

/// The message of a gRPC call, or the HTTP refusal of its status.
pub(super) fn called<T>(result: Result<tonic::Response<T>, tonic::Status>) -> Result<T, Refusal> {
    result
        .map(tonic::Response::into_inner)
        .map_err(|s| Refusal::of(&s))
}

/// One level of the tree: the roots, or what hangs right under `agent`
/// (its tasks, waits and children), a page at a time.
async fn tree(console: &Console, query: &Query, caller: Caller) -> Outcome {
    let limit = query
        .limit(TREE_PAGE, MAX_TREE_PAGE)
        .map_err(Refusal::from)?;
    let page_token = query.page().map_err(Refusal::from)?;
    let filter = query.text("filter");
    if !filter.is_empty() {
        return tree_filter::matches(console, filter, page_token, limit, caller).await;
    }
    let asked = query.text("agent").to_owned();
    // Another namespace's agent is walked as one that does not exist.
    let stand_in = stand_in_for(console, &["agents", asked.as_str()])?;
    let agent_id = stand_in
        .as_ref()
        .map_or(asked.clone(), |(fake, _)| fake.clone());
    let under_agent = !agent_id.is_empty();
    let first_page = page_token.is_empty();
    // Under an agent, the walk's first node is the agent itself: one more
    // so the page still holds `limit` of what is below it.
    let max_nodes = if under_agent && first_page {
        limit + 1
    } else {
        limit
    };
    let page = called(
        console
            .tree
            .get_tree(super::req(pb::GetTreeRequest {
                agent_id,
                page_token,
                max_nodes,
                max_depth: Some(u32::from(under_agent)),
            }))
            .await,
    )
    .map_err(|mut refusal| {
        if let Some((fake, original)) = &stand_in {
            refusal.why = refusal.why.replace(fake.as_str(), original);
        }
        refusal
    })?;
    let full = caller.signed_in();
    let mut root = Value::Null;
    let mut nodes = Vec::with_capacity(page.nodes.len());
    for node in &page.nodes {
        if under_agent && node.depth == 0 {
            root = views::tree_node(node, full);
        } else {
            nodes.push(views::tree_node(node, full));
        }
    }
    Ok(json!({
        "root": root,
        "nodes": nodes,
        "next": page.next_page_token,
        "mismatches": page.mismatches,
        "agents": page.agents,
        "tasks": page.tasks,
        "waits": page.waits,
        "partitions": page.partitions,
    }))
}

/// One page of the whole runtime's live-vs-stored check: `GetTree` over
/// everything, without its nodes; the page asks for the next until none
/// is left, and the last page's counts are the whole tree's.
async fn check(console: &Console, query: &Query) -> Outcome {
    let page_token = query.page().map_err(Refusal::from)?;
    let page = called(
        console
            .tree
            .get_tree(super::req(pb::GetTreeRequest {
                agent_id: String::new(),
                page_token,
                max_nodes: 0,
                max_depth: None,
            }))
            .await,
    )?;
    Ok(json!({
        "next": page.next_page_token,
        "mismatches": page.mismatches,
        "agents": page.agents,
        "tasks": page.tasks,
        "waits": page.waits,
    }))
}

/// Agents by id, by name, and by the start of a name.
async fn search(console: &Console, query: &Query) -> Outcome {
    let text = query.text("q").trim();
    if text.is_empty() || text.len() > MAX_SEARCH {
        return Err(Refusal::bad(format!(
            "q must be 1 to {MAX_SEARCH} bytes: an agent id or (the start of) a name"
        )));
    }
    let mut wanted = Vec::new();
    let namespace = super::acting_namespace();
    if text.starts_with("agt_") {
        // Another namespace's id finds nothing, as an id nobody has.
        if stand_in_for(console, &["agents", text])?.is_none() {
            wanted.push(pb::get_agent_request::Agent::AgentId(text.to_owned()));
        }
    } else {
        // Names are keyed `namespace/name`, bare in default (see
        // `holarchy_supervision::namespace::qualified`).
        let prefix = holarchy_supervision::namespace::qualified(&namespace, text);
        let names = console
            .store
            .names_from(&prefix, SEARCH_HITS)
            .map_err(|_| Refusal::new(StatusCode::SERVICE_UNAVAILABLE, "try again later"))?;
        let own = prefix.len() - text.len();
        wanted.extend(
            names
                .into_iter()
                .filter(|(key, _)| !key[own..].contains('/'))
                .map(|(key, _)| pb::get_agent_request::Agent::Name(key[own..].to_owned())),
        );
    }
    let mut agents = Vec::new();
    for agent in wanted {
        let result = console
            .agents
            .get_agent(super::req(pb::GetAgentRequest { agent: Some(agent) }))
            .await;
        match result {
            Ok(found) => {
                if let Some(summary) = &found.get_ref().agent {
                    agents.push(views::found(summary));
                }
            }
            // A name freed since it was listed, or an id nobody has.
            Err(status) if status.code() == tonic::Code::NotFound => {}
            Err(status) => return Err(Refusal::of(&status)),
        }
    }
    Ok(json!({ "agents": agents }))
}

async fn agent(console: &Console, id: &str, caller: Caller) -> Outcome {
    let result = called(
        console
            .agents
            .get_agent(super::req(pb::GetAgentRequest {
                agent: Some(pb::get_agent_request::Agent::AgentId((*id).to_owned())),
            }))
            .await,
    )?;
    let mut view = views::agent(&result, caller.signed_in());
    // Who owns it and who made it, by name: ids alone send the reader to
    // another page to learn what they are.
    if let Some(summary) = &result.agent {
        view["supervisor_name"] =
            json!(overview::name_of(console, &summary.supervisor_agent_id).await);
        view["lineage_parent_name"] =
            json!(overview::name_of(console, &summary.lineage_parent_agent_id).await);
    }
    Ok(view)
}

async fn list(console: &Console, id: &str, listing: &str, query: &Query) -> Outcome {
    let agent_id = id.to_owned();
    let page_size = query
        .limit(LIST_PAGE, MAX_LIST_PAGE)
        .map_err(Refusal::from)?;
    let page_token = query.page().map_err(Refusal::from)?;
    Ok(match listing {
        "messages" => {
            let page = called(
                console
                    .agents
                    .list_messages(super::req(pb::ListMessagesRequest {
                        agent_id,
                        page_size,
                        page_token,
                    }))
                    .await,
            )?;
            // The agents that sent them (a parent, another agent), each
            // named once however many of its messages the page holds.
            let mut names: HashMap<&str, String> = HashMap::new();
            for message in &page.messages {
                let sender = message.provenance_agent_id.as_str();
                if !sender.is_empty() && !names.contains_key(sender) {
                    names.insert(sender, overview::name_of(console, sender).await);
                }
            }
            let problems = run_problems(console, id, &page.messages).await;
            let messages: Vec<Value> = page
                .messages
                .iter()
                .map(|m| {
                    let mut view = views::message(m);
                    if let Some(name) = names.get(m.provenance_agent_id.as_str()) {
                        view["provenance_agent_name"] = json!(name);
                    }
                    if let Some(found) = problems.get(m.run_id.as_str()) {
                        view["problems"] = json!(found);
                    }
                    view
                })
                .collect();
            json!({ "messages": messages, "next": page.next_page_token })
        }
        "tasks" => {
            let page = called(
                console
                    .tasks
                    .list_tasks(super::req(pb::ListTasksRequest {
                        agent_id,
                        page_size,
                        page_token,
                    }))
                    .await,
            )?;
            json!({
                "tasks": page.tasks.iter().map(views::task).collect::<Vec<_>>(),
                "next": page.next_page_token,
            })
        }
        "work" => {
            let page = called(
                console
                    .planes
                    .list_work_items(super::req(pb::ListWorkItemsRequest {
                        agent_id,
                        page_size,
                        page_token,
                    }))
                    .await,
            )?;
            json!({
                "work_items": page.work_items.iter().map(views::work_item).collect::<Vec<_>>(),
                "next": page.next_page_token,
            })
        }
        _ => {
            let page = called(
                console
                    .workspaces
                    .list_workspaces(super::req(pb::ListWorkspacesRequest {
                        agent_id,
                        page_token,
                    }))
                    .await,
            )?;
            views::workspaces(&page)
        }
    })
}

async fn output(console: &Console, id: &str, query: &Query) -> Outcome {
    let offset = query.number("offset").map_err(Refusal::from)?.unwrap_or(0);
    let read = called(
        console
            .tasks
            .read_task_output(super::req(pb::ReadTaskOutputRequest {
                task_id: id.to_owned(),
                offset,
            }))
            .await,
    )?;
    Ok(views::output(&read))
}

/// An operator's control of a public agent, through the same calls as
/// gRPC: refused for private agents (403), answered once on disk.
async fn write(console: &Console, id: &str, action: &str) -> Outcome {
    let agent_id = id.to_owned();
    let agents = &console.agents;
    let control = match action {
        "pause" => agents.pause_agent(super::req(pb::PauseAgentRequest { agent_id })),
        "resume" => agents.resume_agent(super::req(pb::ResumeAgentRequest { agent_id })),
        "abort" => agents.abort_run(super::req(pb::AbortRunRequest {
            agent_id,
            run_id: String::new(),
        })),
        _ => {
            let archived = called(
                agents
                    .archive_agent(super::req(pb::ArchiveAgentRequest { agent_id }))
                    .await,
            )?;
            return Ok(json!({
                "state": "archived",
                "agents": archived.agents,
                "tasks": archived.tasks,
            }));
        }
    };
    Ok(views::control(&called(control.await)?))
}
