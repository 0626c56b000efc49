//! Namespaces against the real daemon over TCP: two teams' tokens, each
//! in a namespace of its own, beside the machine's operator in `default`.
//! - names are unique per namespace: each makes an agent named `shared`;
//! - every method the daemon's reflection lists that names an agent or a
//!   task answers team B for team A's exactly as for an id nobody has
//!   (same code, same message), and changes nothing of A's;
//! - every listing (agents, the tree, events, activity, approvals) and
//!   the console show B nothing of A's;
//! - an admin of B makes and sees tokens of B only, and reads B's audit
//!   entries only.

mod common;
#[path = "console/support.rs"]
mod support;

use common::reflect::{call, methods};
use common::{data_dir, Daemon};
use holarchy::api::pb;
use holarchy::client::Clients;
use prost::Message as _;
use tonic::Code;

async fn make_token(admin: &mut Clients, namespace: &str, role: &str) -> String {
    admin
        .access
        .create_token(pb::CreateTokenRequest {
            role: role.into(),
            namespace: namespace.into(),
            name: format!("{role} of {namespace}"),
            expires_in_ms: 0,
        })
        .await
        .expect("token made")
        .into_inner()
        .secret
}

/// A request naming `text` in field `number`.
fn naming(number: u32, text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    prost::encoding::encode_key(number, prost::encoding::WireType::LengthDelimited, &mut out);
    prost::encoding::encode_varint(text.len() as u64, &mut out);
    out.extend_from_slice(text.as_bytes());
    out
}

async fn ids_in_listings(c: &mut Clients) -> String {
    let agents = c
        .agents
        .list_agents(pb::ListAgentsRequest {
            page_size: 1000,
            page_token: String::new(),
            include_private: true,
        })
        .await
        .expect("agents")
        .into_inner();
    let tree = c
        .supervision
        .get_tree(pb::GetTreeRequest::default())
        .await
        .expect("tree")
        .into_inner();
    let events = common::events(c, 0).await;
    let activity = c
        .runtime
        .get_activity(pb::GetActivityRequest { limit: 100 })
        .await
        .expect("activity")
        .into_inner();
    let approvals = c
        .approvals
        .list_approvals(pb::ListApprovalsRequest {
            agent_id: String::new(),
            include_decided: true,
        })
        .await
        .expect("approvals")
        .into_inner();
    format!("{agents:?}\n{tree:?}\n{events:?}\n{activity:?}\n{approvals:?}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_sees_nothing_of_another() {
    let root = tempfile::tempdir().expect("tempdir");
    let listen = common::free_addr();
    let http = common::free_addr();
    let daemon = Daemon::start_with(
        &data_dir(&root),
        &["--listen", &listen, "--http-listen", &http],
    )
    .await;
    let mut machine = daemon.clients().await;
    let team_a = make_token(&mut machine, "team-a", "admin").await;
    let team_b = make_token(&mut machine, "team-b", "admin").await;
    let mut a = common::tcp_clients(&listen, Some(&team_a)).await;
    let mut b = common::tcp_clients(&listen, Some(&team_b)).await;

    // One name in three namespaces.
    let a_agent = common::create(&mut a, "shared", None).await;
    let b_agent = common::create(&mut b, "shared", None).await;
    let default_agent = common::create(&mut machine, "shared", None).await;
    assert!(a_agent != b_agent && b_agent != default_agent);
    let found = b
        .agents
        .get_agent(pb::GetAgentRequest {
            agent: Some(pb::get_agent_request::Agent::Name("shared".into())),
        })
        .await
        .expect("b's own")
        .into_inner();
    assert_eq!(found.agent.expect("an agent").agent_id, b_agent);
    // A's agent runs a command: a task of A's to name.
    common::exec(&mut a, &a_agent, "echo a-secret-output", 5_000).await;
    let a_task = a
        .tasks
        .list_tasks(pb::ListTasksRequest {
            agent_id: a_agent.clone(),
            ..Default::default()
        })
        .await
        .expect("a's tasks")
        .into_inner()
        .tasks
        .first()
        .expect("a task")
        .task_id
        .clone();
    let mut machine_in_a = holarchy::client::connect_in(
        &holarchy::client::Target::Unix(daemon.socket()),
        Some("team-a"),
    )
    .await
    .expect("connects");
    let before = format!("{:?}", common::get_agent(&mut machine_in_a, &a_agent).await);
    let a_messages = common::messages(&mut machine_in_a, &a_agent).await.len();

    // Every method that names an agent or a task: B's answer for A's id
    // is its answer for an id nobody has.
    let channel = holarchy::client::channel(&holarchy::client::Target::Tcp {
        url: format!("http://{listen}"),
        token: None,
        tls: Default::default(),
    })
    .await
    .expect("connects");
    let methods = methods(channel.clone(), &team_b).await;
    let mut checked = 0;
    for method in &methods {
        let named = method
            .strings
            .iter()
            .find(|(name, _)| name == "agent_id" || name == "task_id");
        let Some((field, number)) = named else {
            continue;
        };
        let (foreign, missing) = if field == "agent_id" {
            (a_agent.clone(), "agt_01ARZ3NDEKTSV4RRFFQ69G5FAV".to_owned())
        } else {
            (a_task.clone(), "tsk_01ARZ3NDEKTSV4RRFFQ69G5FAV".to_owned())
        };
        // Streams that would follow: not followed.
        let mut extra = Vec::new();
        if method.name == "FollowTaskOutput" || method.name == "WatchReplies" {
            continue;
        }
        if method.name == "SendMessage" || method.name == "SendTaskInput" {
            extra = naming(2, "from b");
        }
        let mut body = naming(*number, &foreign);
        body.extend_from_slice(&extra);
        let to_foreign = call(&channel, &team_b, method, body).await;
        let mut body = naming(*number, &missing);
        body.extend_from_slice(&extra);
        let to_missing = call(&channel, &team_b, method, body).await;
        assert_eq!(
            (
                to_foreign.code(),
                to_foreign.message().replace(&foreign, "ID")
            ),
            (
                to_missing.code(),
                to_missing.message().replace(&missing, "ID")
            ),
            "{}: another namespace's id answers unlike a missing one",
            method.path
        );
        checked += 1;
    }
    assert!(
        checked >= 25,
        "only {checked} methods name an agent or a task"
    );
    // Nothing of A's changed.
    assert_eq!(
        format!("{:?}", common::get_agent(&mut machine_in_a, &a_agent).await),
        before
    );
    assert_eq!(
        common::messages(&mut machine_in_a, &a_agent).await.len(),
        a_messages
    );

    // The listings show B its own, never A's.
    let seen = ids_in_listings(&mut b).await;
    assert!(seen.contains(&b_agent), "b sees its own: {seen}");
    for theirs in [&a_agent, &a_task, &default_agent] {
        assert!(!seen.contains(theirs.as_str()), "b saw {theirs}");
    }
    assert!(!seen.contains("a-secret-output"));
    // The machine's operator acts in default unless it names another.
    let seen = ids_in_listings(&mut machine).await;
    assert!(seen.contains(&default_agent) && !seen.contains(&a_agent));
    let mut machine_in_a = holarchy::client::connect_in(
        &holarchy::client::Target::Unix(daemon.socket()),
        Some("team-a"),
    )
    .await
    .expect("connects");
    let seen = ids_in_listings(&mut machine_in_a).await;
    assert!(seen.contains(&a_agent) && !seen.contains(&b_agent));

    // A scoped token cannot name another namespace.
    let mut b_as_a = holarchy::client::connect_in(
        &holarchy::client::Target::Tcp {
            url: format!("http://{listen}"),
            token: Some(team_b.clone()),
            tls: Default::default(),
        },
        Some("team-a"),
    )
    .await
    .expect("connects");
    let refused = b_as_a
        .agents
        .list_agents(pb::ListAgentsRequest::default())
        .await
        .expect_err("b in a");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");

    // The console: the same.
    let to_foreign = support::http(
        &http,
        "GET",
        &format!("/api/agents/{a_agent}"),
        Some(&team_b),
    )
    .await;
    let missing = "agt_01ARZ3NDEKTSV4RRFFQ69G5FAV";
    let to_missing = support::http(
        &http,
        "GET",
        &format!("/api/agents/{missing}"),
        Some(&team_b),
    )
    .await;
    assert_eq!(
        (to_foreign.status, to_foreign.body.replace(&a_agent, "ID")),
        (to_missing.status, to_missing.body.replace(missing, "ID"))
    );
    for path in ["/api/tree", "/api/search?q=shared", "/api/overview"] {
        let page = support::http(&http, "GET", path, Some(&team_b)).await;
        assert_eq!(page.status, 200, "{path}: {}", page.body);
        assert!(!page.body.contains(&a_agent), "{path}: {}", page.body);
        assert!(!page.body.contains(&default_agent), "{path}: {}", page.body);
    }
    let found = support::http(&http, "GET", "/api/search?q=shared", Some(&team_b)).await;
    assert!(found.body.contains(&b_agent), "{}", found.body);
    let output = support::http(
        &http,
        "GET",
        &format!("/api/tasks/{a_task}/output"),
        Some(&team_b),
    )
    .await;
    assert!(!output.body.contains("a-secret-output"), "{}", output.body);

    // Tokens and the trail: B's admin has B's only.
    let tokens = b
        .access
        .list_tokens(pb::ListTokensRequest {})
        .await
        .expect("tokens")
        .into_inner()
        .tokens;
    assert!(tokens.iter().all(|t| t.namespace == "team-b") && !tokens.is_empty());
    let refused = b
        .access
        .create_token(pb::CreateTokenRequest {
            role: "admin".into(),
            namespace: "team-a".into(),
            ..Default::default()
        })
        .await
        .expect_err("a token for a");
    assert_eq!(refused.code(), Code::PermissionDenied);
    let trail = b
        .access
        .list_audit(pb::ListAuditRequest {
            page_size: 1000,
            ..Default::default()
        })
        .await
        .expect("trail")
        .into_inner()
        .entries;
    assert!(!trail.is_empty());
    assert!(trail.iter().all(|e| e.namespace == "team-b"), "{trail:?}");
    let _ = pb::AgentSummary::default().encode_to_vec();
}

/// A deleted agent's events: its record, and so its namespace, is gone.
/// No scoped caller sees them, in its namespace or `default`; the
/// machine's operator, who may see every namespace, still does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_agents_events_show_to_no_other_namespace() {
    let root = tempfile::tempdir().expect("tempdir");
    let listen = common::free_addr();
    let daemon = Daemon::start_with(&data_dir(&root), &["--listen", &listen]).await;
    let mut machine = daemon.clients().await;
    let team_a = make_token(&mut machine, "team-a", "operator").await;
    let in_default = make_token(&mut machine, "default", "viewer").await;
    let mut a = common::tcp_clients(&listen, Some(&team_a)).await;
    let mut default = common::tcp_clients(&listen, Some(&in_default)).await;
    let gone = common::create(&mut a, "short-lived", None).await;
    common::send(&mut a, &gone, "a-private-reply-to-keep").await;
    common::handled(&a, &gone, 1).await;
    a.agents
        .archive_agent(pb::ArchiveAgentRequest {
            agent_id: gone.clone(),
        })
        .await
        .expect("archived");
    a.agents
        .delete_agent(pb::DeleteAgentRequest {
            agent_id: gone.clone(),
        })
        .await
        .expect("deleted");

    let seen_by = |events: Vec<pb::Event>| events.iter().filter(|e| e.agent_id == gone).count();
    assert_eq!(seen_by(common::events(&mut a, 0).await), 0, "team-a");
    assert_eq!(seen_by(common::events(&mut default, 0).await), 0, "default");
    assert!(
        seen_by(common::events(&mut machine, 0).await) > 0,
        "the machine's operator sees every namespace's"
    );
}

/// A caller of one namespace reads the daemon's figures, not where it
/// keeps its data, its database or its pid; the machine's operator does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_reads_status_without_the_machines_details() {
    let root = tempfile::tempdir().expect("tempdir");
    let listen = common::free_addr();
    let daemon = Daemon::start_with(&data_dir(&root), &["--listen", &listen]).await;
    let mut machine = daemon.clients().await;
    let viewer = make_token(&mut machine, "team-a", "viewer").await;
    let mut a = common::tcp_clients(&listen, Some(&viewer)).await;
    let theirs = common::status(&mut a).await;
    assert!(
        theirs.data_dir.is_empty() && theirs.store.is_empty() && theirs.pid == 0,
        "{theirs:?}"
    );
    assert!(!theirs.version.is_empty());
    let mine = common::status(&mut machine).await;
    assert!(!mine.data_dir.is_empty() && !mine.store.is_empty() && mine.pid > 0);
}
