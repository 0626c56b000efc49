//! Roles, scoped tokens and the audit trail, against the real daemon over
//! TCP:
//! - a viewer token calling every write of the API, found by the daemon's
//!   own reflection service, is refused each time, and nothing changes;
//!   its reads answer;
//! - an operator may write but not manage tokens; a revoked or expired
//!   token is refused; the bootstrap token and the Unix socket are admins;
//! - 10,000 mixed operator calls leave exactly 10,000 audit entries, each
//!   naming its caller, and they survive `kill -9`;
//! - the console takes the same tokens: a viewer's reads contents and is
//!   refused every write route, an operator's writes, recorded.

mod common;
#[path = "console/support.rs"]
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use common::reflect::{call, methods, Method};
use common::{data_dir, Daemon};
use holarchy::api::pb;
use holarchy::client::Clients;
use prost::Message as _;
use tonic::transport::Channel;
use tonic::Code;

/// A request whose field 1 is `text`: the agent, approval, instance, task
/// or token most writes name first.
fn naming(text: &str) -> Vec<u8> {
    pb::PauseAgentRequest {
        agent_id: text.to_owned(),
    }
    .encode_to_vec()
}

async fn tcp_daemon(root: &tempfile::TempDir) -> (Daemon, String, String) {
    let listen = common::free_addr();
    let daemon = Daemon::start_with(&data_dir(root), &["--listen", &listen]).await;
    let token = daemon.token();
    (daemon, listen, token)
}

async fn channel(listen: &str) -> Channel {
    holarchy::client::channel(&holarchy::client::Target::Tcp {
        url: format!("http://{listen}"),
        token: None,
        tls: Default::default(),
    })
    .await
    .expect("connects")
}

/// The reads only an admin may make.
const ADMIN_READS: [&str; 3] = ["ListTokens", "ListAudit", "ListNamespaces"];

async fn make_token(admin: &mut Clients, role: &str, expires_in_ms: u64) -> (String, String) {
    let made = admin
        .access
        .create_token(pb::CreateTokenRequest {
            role: role.into(),
            namespace: String::new(),
            name: format!("{role} for tests"),
            expires_in_ms,
        })
        .await
        .expect("token made")
        .into_inner();
    (made.token.expect("info").id, made.secret)
}

/// Everything a write could have changed, read by the admin.
async fn snapshot(admin: &mut Clients, agent_id: &str) -> String {
    let agent = common::get_agent(admin, agent_id).await;
    let messages = common::messages(admin, agent_id).await.len();
    let events = common::events(admin, 0).await.len();
    let tokens = admin
        .access
        .list_tokens(pb::ListTokensRequest {})
        .await
        .expect("tokens")
        .into_inner()
        .tokens;
    let instances = admin
        .instances
        .list_instances(pb::ListInstancesRequest {})
        .await
        .expect("instances")
        .into_inner();
    let workspaces = admin
        .workspaces
        .list_workspaces(pb::ListWorkspacesRequest {
            agent_id: agent_id.into(),
            page_token: String::new(),
        })
        .await
        .expect("workspaces")
        .into_inner();
    format!(
        "{} {} {} messages={messages} events={events} tokens={tokens:?} instances={instances:?} workspaces={workspaces:?}",
        agent.state, agent.activity, agent.queue_length
    )
}

/// Every audit entry, oldest first.
async fn audit(admin: &mut Clients) -> Vec<pb::AuditEntry> {
    let mut all = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = admin
            .access
            .list_audit(pb::ListAuditRequest {
                page_size: 1000,
                page_token,
                ..Default::default()
            })
            .await
            .expect("audit page")
            .into_inner();
        all.extend(page.entries);
        if page.next_page_token.is_empty() {
            return all;
        }
        page_token = page.next_page_token;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_is_refused_every_write_and_its_reads_answer() {
    let root = tempfile::tempdir().expect("tempdir");
    let (daemon, listen, bootstrap) = tcp_daemon(&root).await;
    let mut admin = daemon.clients().await;
    let agent_id = common::create(&mut admin, "target", Some("hello")).await;
    common::handled(&admin, &agent_id, 1).await;
    let (viewer_id, viewer) = make_token(&mut admin, "viewer", 0).await;
    let (_, operator) = make_token(&mut admin, "operator", 0).await;
    let channel = channel(&listen).await;
    let methods = methods(channel.clone(), &viewer).await;
    assert!(
        methods.len() >= 50,
        "the reflection found {}",
        methods.len()
    );

    let before = snapshot(&mut admin, &agent_id).await;
    let audited_before = audit(&mut admin).await.len();
    let writes: Vec<&Method> = methods.iter().filter(|m| !m.reads()).collect();
    for method in &writes {
        let status = call(&channel, &viewer, method, naming(&agent_id)).await;
        assert_eq!(
            status.code(),
            Code::PermissionDenied,
            "{} as a viewer: {status:?}",
            method.path
        );
        assert!(
            status.message().contains("needs the"),
            "{}: {}",
            method.path,
            status.message()
        );
    }
    // Admins' reads too: the tokens, the trail and the namespaces.
    for name in ADMIN_READS {
        let method = methods.iter().find(|m| m.name == name).expect(name);
        for token in [&viewer, &operator] {
            let status = call(&channel, token, method, Vec::new()).await;
            assert_eq!(status.code(), Code::PermissionDenied, "{name}: {status:?}");
        }
    }
    assert_eq!(
        snapshot(&mut admin, &agent_id).await,
        before,
        "a refused write changed something"
    );

    // Every refused write is in the trail, with the viewer named.
    let trail = audit(&mut admin).await;
    let refused: Vec<_> = trail[audited_before..]
        .iter()
        .filter(|e| e.caller == format!("token:{viewer_id}"))
        .collect();
    assert_eq!(refused.len(), writes.len(), "{refused:#?}");
    assert!(refused
        .iter()
        .all(|e| e.outcome == "PERMISSION_DENIED" && e.role == "viewer"));

    // The viewer's reads answer: no read is refused for its role.
    for method in methods.iter().filter(|m| m.reads()) {
        if ADMIN_READS.contains(&method.name.as_str()) {
            continue;
        }
        let body = if method.name == "WatchEvents" || method.name == "FollowTaskOutput" {
            // A watch that ends: not following.
            Vec::new()
        } else {
            naming(&agent_id)
        };
        let status = call(&channel, &viewer, method, body).await;
        assert!(
            !matches!(
                status.code(),
                Code::PermissionDenied | Code::Unauthenticated
            ),
            "{} refused a viewer: {status:?}",
            method.path
        );
    }

    // The same write as an operator does act: the refusals were the role.
    let pause = methods
        .iter()
        .find(|m| m.name == "PauseAgent")
        .expect("PauseAgent");
    let status = call(&channel, &operator, pause, naming(&agent_id)).await;
    assert_eq!(status.code(), Code::Ok, "{status:?}");
    let state = common::get_agent(&mut admin, &agent_id).await.state;
    assert_eq!(state, pb::LifecycleState::Paused as i32);
    // But an operator makes no tokens; the bootstrap token does.
    let create = methods
        .iter()
        .find(|m| m.name == "CreateToken")
        .expect("CreateToken");
    let body = pb::CreateTokenRequest {
        role: "admin".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let status = call(&channel, &operator, create, body.clone()).await;
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    let status = call(&channel, &bootstrap, create, body).await;
    assert_eq!(status.code(), Code::Ok, "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoked_expired_and_forged_tokens_are_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    let (daemon, listen, bootstrap) = tcp_daemon(&root).await;
    let mut admin = daemon.clients().await;
    let (id, operator) = make_token(&mut admin, "operator", 0).await;
    let (_, brief) = make_token(&mut admin, "operator", 1).await;

    let mut as_operator = common::tcp_clients(&listen, Some(&operator)).await;
    let me = whoami(&mut as_operator).await;
    assert_eq!(
        (me.caller.as_str(), me.role.as_str()),
        (&*format!("token:{id}"), "operator")
    );
    let mut as_bootstrap = common::tcp_clients(&listen, Some(&bootstrap)).await;
    let me = whoami(&mut as_bootstrap).await;
    assert_eq!(
        (me.caller.as_str(), me.role.as_str()),
        ("token:bootstrap", "admin")
    );
    let me = whoami(&mut admin).await;
    assert!(
        me.caller.starts_with("uid:") && me.role == "admin",
        "{me:?}"
    );

    // Expired: made to last a millisecond.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut as_brief = common::tcp_clients(&listen, Some(&brief)).await;
    let refused = as_brief
        .access
        .who_am_i(pb::WhoAmIRequest {})
        .await
        .expect_err("expired");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");

    // A forged secret for a real id.
    let forged = format!("{}{}", &operator[..operator.len() - 4], "0000");
    let mut as_forger = common::tcp_clients(&listen, Some(&forged)).await;
    let refused = as_forger
        .access
        .who_am_i(pb::WhoAmIRequest {})
        .await
        .expect_err("forged");
    assert_eq!(refused.code(), Code::Unauthenticated);

    // Revoked: refused at once by the daemon that revoked it.
    let revoked = admin
        .access
        .revoke_token(pb::RevokeTokenRequest { id: id.clone() })
        .await
        .expect("revoked")
        .into_inner();
    assert!(revoked.revoked_at_ms > 0);
    let refused = as_operator
        .access
        .who_am_i(pb::WhoAmIRequest {})
        .await
        .expect_err("revoked");
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    assert!(refused.message().contains("revoked"), "{refused:?}");

    // Bad input changes nothing.
    for (role, namespace, name) in [
        ("root", "", ""),
        ("viewer", "Bad/ns", ""),
        ("viewer", "", "a\nb"),
    ] {
        let refused = admin
            .access
            .create_token(pb::CreateTokenRequest {
                role: role.into(),
                namespace: namespace.into(),
                name: name.into(),
                expires_in_ms: 0,
            })
            .await
            .expect_err("bad input");
        assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    }
    let missing = admin
        .access
        .revoke_token(pb::RevokeTokenRequest {
            id: ulid::Ulid::new().to_string(),
        })
        .await
        .expect_err("no such token");
    assert_eq!(missing.code(), Code::NotFound);
    let tokens = admin
        .access
        .list_tokens(pb::ListTokensRequest {})
        .await
        .expect("list")
        .into_inner();
    assert_eq!(tokens.tokens.len(), 2);
    // The list never holds a secret.
    assert!(!format!("{tokens:?}").contains(&operator[operator.len() - 64..]));
}

/// Who the daemon takes `c`'s caller for.
async fn whoami(c: &mut Clients) -> pb::WhoAmIResponse {
    c.access
        .who_am_i(pb::WhoAmIRequest {})
        .await
        .expect("whoami")
        .into_inner()
}

/// Calls made by each of the test's callers, in turn.
const CALLS: usize = 10_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_operator_calls_leave_ten_thousand_entries_that_outlive_a_kill() {
    let root = tempfile::tempdir().expect("tempdir");
    let (mut daemon, listen, bootstrap) = tcp_daemon(&root).await;
    let mut admin = daemon.clients().await;
    let mut agents = Vec::new();
    for n in 0..4 {
        agents.push(common::create(&mut admin, &format!("a{n}"), None).await);
    }
    let (operator_id, operator) = make_token(&mut admin, "operator", 0).await;
    let (viewer_id, viewer) = make_token(&mut admin, "viewer", 0).await;
    let setup = audit(&mut admin).await.len();
    assert_eq!(setup, 6, "4 creates and 2 tokens");

    let callers = [
        (
            format!("token:{operator_id}"),
            common::tcp_clients(&listen, Some(&operator)).await,
        ),
        (
            "token:bootstrap".to_owned(),
            common::tcp_clients(&listen, Some(&bootstrap)).await,
        ),
        (
            format!("token:{viewer_id}"),
            common::tcp_clients(&listen, Some(&viewer)).await,
        ),
        ("uid:".to_owned(), daemon.clients().await),
    ];
    // 8 at once, each call one of: a message, a pause, a resume, a memory
    // note, or a viewer's refused pause; with reads between that leave no
    // entry.
    let expected: Vec<(String, &'static str)> = (0..CALLS)
        .map(|i| {
            let (who, _) = &callers[i % callers.len()];
            let action = match (i % callers.len(), i / callers.len() % 3) {
                (2, _) => "AgentService/PauseAgent",
                (_, 0) => "AgentService/SendMessage",
                (_, 1) => "AgentService/PauseAgent",
                _ => "AgentService/ResumeAgent",
            };
            (who.clone(), action)
        })
        .collect();
    let work = futures::StreamExt::map(
        futures::stream::iter(expected.iter().enumerate()),
        |(i, (_, action))| {
            let mut clients = callers[i % callers.len()].1.clone();
            let agent_id = agents[i % agents.len()].clone();
            async move {
                let done = match *action {
                    "AgentService/SendMessage" => clients
                        .agents
                        .send_message(pb::SendMessageRequest {
                            agent_id: agent_id.clone(),
                            text: format!("m{i}"),
                            dedupe_key: String::new(),
                        })
                        .await
                        .map(drop),
                    "AgentService/PauseAgent" => clients
                        .agents
                        .pause_agent(pb::PauseAgentRequest {
                            agent_id: agent_id.clone(),
                        })
                        .await
                        .map(drop),
                    _ => clients
                        .agents
                        .resume_agent(pb::ResumeAgentRequest {
                            agent_id: agent_id.clone(),
                        })
                        .await
                        .map(drop),
                };
                if let Err(status) = &done {
                    assert!(
                        matches!(
                            status.code(),
                            Code::PermissionDenied
                                | Code::FailedPrecondition
                                | Code::ResourceExhausted
                        ),
                        "call {i}: {status:?}"
                    );
                }
                clients
                    .agents
                    .get_agent(pb::GetAgentRequest {
                        agent: Some(pb::get_agent_request::Agent::AgentId(agent_id)),
                    })
                    .await
                    .expect("a read between");
            }
        },
    );
    let work =
        futures::StreamExt::collect::<Vec<()>>(futures::StreamExt::buffer_unordered(work, 8));
    tokio::time::timeout(Duration::from_secs(600), work)
        .await
        .expect("calls done in time");

    let trail = audit(&mut admin).await;
    let made = &trail[setup..];
    assert_eq!(made.len(), CALLS, "one entry per call, reads none");
    let mut by_caller: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for entry in made {
        let who = if entry.caller.starts_with("uid:") {
            "uid:".to_owned()
        } else {
            entry.caller.clone()
        };
        assert!(!entry.from.is_empty(), "{entry:?}");
        *by_caller
            .entry(who)
            .or_default()
            .entry(entry.action.clone())
            .or_default() += 1;
    }
    let mut wanted: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for (who, action) in &expected {
        *wanted
            .entry(who.clone())
            .or_default()
            .entry((*action).to_owned())
            .or_default() += 1;
    }
    assert_eq!(by_caller, wanted);
    let viewer_entries = made
        .iter()
        .filter(|e| e.caller == format!("token:{viewer_id}"));
    assert!(viewer_entries
        .into_iter()
        .all(|e| e.outcome == "PERMISSION_DENIED"));
    // No message's text reached the trail.
    assert!(!made
        .iter()
        .any(|e| e.target.contains("m1") || e.detail.contains("m1")));

    // Acknowledged, so kept: a kill -9 loses none.
    daemon.kill9();
    let daemon = Daemon::start_with(
        &daemon.data_dir.clone(),
        &["--listen", &common::free_addr()],
    )
    .await;
    let mut admin = daemon.clients().await;
    assert_eq!(audit(&mut admin).await.len(), setup + CALLS);

    // The filters: by caller, by action, newest first.
    let page = admin
        .access
        .list_audit(pb::ListAuditRequest {
            caller: format!("token:{viewer_id}"),
            newest_first: true,
            page_size: 10,
            ..Default::default()
        })
        .await
        .expect("filtered")
        .into_inner();
    assert_eq!(page.entries.len(), 10);
    assert!(page.entries.windows(2).all(|w| w[0].id > w[1].id));
    assert!(page
        .entries
        .iter()
        .all(|e| e.caller == format!("token:{viewer_id}")));
}

/// Every write route of the console, for the agent `agent` and the task
/// `task`, with a body it would take.
fn console_writes(agent: &str, task: &str) -> Vec<(String, &'static str)> {
    let mut writes = vec![
        (format!("/api/agents/{agent}/messages"), r#"{"text":"hi"}"#),
        (format!("/api/tasks/{task}/input"), r#"{"text":"hi"}"#),
    ];
    for action in ["pause", "resume", "abort", "archive"] {
        writes.push((format!("/api/agents/{agent}/{action}"), "{}"));
    }
    writes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_takes_scoped_tokens_by_role_and_records_its_writes() {
    let root = tempfile::tempdir().expect("tempdir");
    let addr = common::free_addr();
    let daemon = Daemon::start_with(&data_dir(&root), &["--http-listen", &addr]).await;
    let mut admin = daemon.clients().await;
    let agent_id = common::create(&mut admin, "lead", Some("hello")).await;
    common::handled(&admin, &agent_id, 1).await;
    let (viewer_id, viewer) = make_token(&mut admin, "viewer", 0).await;
    let (operator_id, operator) = make_token(&mut admin, "operator", 0).await;

    let session = support::http(&addr, "GET", "/api/session", Some(&viewer)).await;
    assert_eq!(session.json()["role"], "viewer", "{}", session.body);
    assert_eq!(session.json()["writes"], false);
    // A viewer reads contents.
    for path in [
        format!("/api/agents/{agent_id}"),
        format!("/api/agents/{agent_id}/messages"),
        "/api/tree".to_owned(),
    ] {
        let read = support::http(&addr, "GET", &path, Some(&viewer)).await;
        assert_eq!(read.status, 200, "{path}: {}", read.body);
    }
    let before = snapshot(&mut admin, &agent_id).await;
    let audited_before = audit(&mut admin).await.len();
    let writes = console_writes(&agent_id, &ulid::Ulid::new().to_string());
    for (path, body) in &writes {
        let refused = support::post(&addr, path, Some(&viewer), "application/json", *body).await;
        assert_eq!(refused.status, 403, "{path}: {}", refused.body);
        assert!(refused.body.contains("operator"), "{}", refused.body);
    }
    // A made-up token is refused outright, like a wrong one.
    let forged = format!("{}{}", &operator[..operator.len() - 4], "0000");
    let refused = support::http(&addr, "GET", "/api/tree", Some(&forged)).await;
    assert_eq!(refused.status, 401);
    assert_eq!(snapshot(&mut admin, &agent_id).await, before);
    let trail = audit(&mut admin).await;
    let refusals = &trail[audited_before..];
    assert_eq!(refusals.len(), writes.len(), "{refusals:#?}");
    assert!(refusals
        .iter()
        .all(|e| e.caller == format!("token:{viewer_id}")
            && e.outcome == "PERMISSION_DENIED"
            && e.action.ends_with("(console)")
            && e.from.starts_with("127.0.0.1:")));

    // An operator's pause acts, and is recorded as the call it makes.
    let paused = support::post(
        &addr,
        &format!("/api/agents/{agent_id}/pause"),
        Some(&operator),
        "application/json",
        "{}",
    )
    .await;
    assert_eq!(paused.status, 200, "{}", paused.body);
    let state = common::get_agent(&mut admin, &agent_id).await.state;
    assert_eq!(state, pb::LifecycleState::Paused as i32);
    let last = audit(&mut admin).await.pop().expect("an entry");
    assert_eq!(
        (
            last.caller.as_str(),
            last.action.as_str(),
            last.target.as_str(),
            last.outcome.as_str()
        ),
        (
            &*format!("token:{operator_id}"),
            "AgentService/PauseAgent (console)",
            &*agent_id,
            "OK"
        )
    );
}

/// Runs the CLI against the daemon's socket; its stdout, required to
/// succeed, or its stderr when `fails`.
async fn cli(daemon: &Daemon, args: &[&str], fails: bool) -> String {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_holarchy"));
    command
        .arg("--data-dir")
        .arg(&daemon.data_dir)
        .args(args)
        .env_remove("HOLARCHY_TOKEN")
        .env_remove("HOLARCHY_ADDR")
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("the CLI finishes")
        .expect("the CLI runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert_eq!(
        !out.status.success(),
        fails,
        "{args:?}:\n{stdout}\n{stderr}"
    );
    if fails {
        stderr
    } else {
        stdout
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_makes_lists_and_revokes_tokens_and_prints_the_trail() {
    let root = tempfile::tempdir().expect("tempdir");
    let listen = common::free_addr();
    let daemon = Daemon::start_with(&data_dir(&root), &["--listen", &listen]).await;
    let made = cli(
        &daemon,
        &[
            "token",
            "create",
            "--role",
            "viewer",
            "--name",
            "dashboards",
            "--expires",
            "30d",
        ],
        false,
    )
    .await;
    let secret = made
        .lines()
        .find(|line| line.starts_with("hlt1_"))
        .unwrap_or_else(|| panic!("the token in:\n{made}"))
        .to_owned();
    assert!(made.contains("shown once"), "{made}");
    let listed = cli(&daemon, &["token", "list"], false).await;
    assert!(
        listed.contains("dashboards") && listed.contains("viewer"),
        "{listed}"
    );
    assert!(!listed.contains(&secret), "{listed}");
    let id = secret.split('_').nth(1).expect("an id").to_owned();

    // The token works over TCP and is a viewer's there.
    let url = format!("http://{listen}");
    let who = tokio::process::Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .args(["--addr", &url, "token", "whoami"])
        .env("HOLARCHY_TOKEN", &secret)
        .output()
        .await
        .expect("runs");
    let who = String::from_utf8_lossy(&who.stdout).into_owned();
    assert!(
        who.contains(&format!("token:{id}")) && who.contains("viewer"),
        "{who}"
    );
    let refused = tokio::process::Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .args(["--addr", &url, "agent", "create", "nope"])
        .env("HOLARCHY_TOKEN", &secret)
        .output()
        .await
        .expect("runs");
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(
        said.contains("needs the operator role"),
        "the reason is shown: {said}"
    );

    let revoked = cli(&daemon, &["token", "revoke", &id], false).await;
    assert!(revoked.contains("revoked"), "{revoked}");
    let bad = cli(&daemon, &["token", "create", "--role", "root"], true).await;
    assert!(bad.contains("viewer, operator, admin"), "{bad}");

    let trail = cli(&daemon, &["audit"], false).await;
    assert!(
        trail.contains("AccessService/CreateToken") && trail.contains("AccessService/RevokeToken"),
        "{trail}"
    );
    assert!(trail.contains("PERMISSION_DENIED"), "{trail}");
    let only_viewer = cli(
        &daemon,
        &["audit", "--caller", &format!("token:{id}"), "--json"],
        false,
    )
    .await;
    let entries: Vec<serde_json::Value> = only_viewer
        .lines()
        .map(|line| serde_json::from_str(line).expect("json"))
        .collect();
    assert_eq!(entries.len(), 1, "{only_viewer}");
    assert_eq!(entries[0]["action"], "AgentService/CreateAgent");
    assert_eq!(entries[0]["target"], "nope");
}

/// Who did what is in the agent's own event log too: a sent message's
/// sender in the commit of its `message_queued`, a pause's and a resume's
/// after them; a refused write leaves nothing there (the trail has it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_log_says_which_operator_acted_on_an_agent() {
    let root = tempfile::tempdir().expect("tempdir");
    let (daemon, listen, _) = tcp_daemon(&root).await;
    let mut admin = daemon.clients().await;
    let agent_id = common::create(&mut admin, "watched", None).await;
    let (operator_id, operator) = make_token(&mut admin, "operator", 0).await;
    let (_, viewer) = make_token(&mut admin, "viewer", 0).await;
    let mut op = common::tcp_clients(&listen, Some(&operator)).await;
    let mut view = common::tcp_clients(&listen, Some(&viewer)).await;
    let pause = || pb::PauseAgentRequest {
        agent_id: agent_id.clone(),
    };
    view.agents
        .pause_agent(pause())
        .await
        .expect_err("a viewer may not");
    op.agents.pause_agent(pause()).await.expect("paused");
    let sent = op
        .agents
        .send_message(pb::SendMessageRequest {
            agent_id: agent_id.clone(),
            text: "while paused".into(),
            dedupe_key: String::new(),
        })
        .await
        .expect("sent")
        .into_inner();
    op.agents
        .resume_agent(pb::ResumeAgentRequest {
            agent_id: agent_id.clone(),
        })
        .await
        .expect("resumed");
    common::handled(&admin, &agent_id, 1).await;

    let events: Vec<pb::Event> = common::events(&mut admin, 0)
        .await
        .into_iter()
        .filter(|e| e.agent_id == agent_id)
        .collect();
    let acts: Vec<(String, String)> = events
        .iter()
        .filter(|e| e.kind == "operator_action")
        .map(|e| {
            let detail: serde_json::Value =
                serde_json::from_str(&e.detail_json).expect("detail is JSON");
            let caller = detail["caller"].as_str().expect("a caller").to_owned();
            (caller, e.text.clone())
        })
        .collect();
    let operator = format!("token:{operator_id}");
    let expected = [
        ("uid:", "AgentService/CreateAgent"),
        (operator.as_str(), "AgentService/PauseAgent"),
        (operator.as_str(), "AgentService/SendMessage"),
        (operator.as_str(), "AgentService/ResumeAgent"),
    ];
    assert_eq!(acts.len(), expected.len(), "{acts:#?}");
    for ((caller, action), (who, what)) in acts.iter().zip(expected) {
        assert!(caller.starts_with(who) && action == what, "{acts:#?}");
    }
    // The creator's entry is in the creation's commit: next to it.
    assert_eq!(events[0].kind, "agent_created", "{events:#?}");
    assert_eq!(events[1].kind, "operator_action", "{events:#?}");

    // Writes to no agent (here, the two tokens the machine made) are in
    // the log of no agent, which the default namespace reads.
    let made_tokens = common::events(&mut admin, 0)
        .await
        .into_iter()
        .filter(|e| e.agent_id.is_empty() && e.kind == "operator_action")
        .filter(|e| e.text == "AccessService/CreateToken")
        .count();
    assert_eq!(made_tokens, 2);

    // A batch of creations names its own method on each agent.
    let made = op
        .agents
        .create_agents(pb::CreateAgentsRequest {
            agents: vec![
                pb::CreateAgentRequest {
                    name: "batch-1".into(),
                    ..Default::default()
                },
                pb::CreateAgentRequest {
                    name: "batch-2".into(),
                    ..Default::default()
                },
            ],
        })
        .await
        .expect("made")
        .into_inner()
        .agent_ids;
    let all = common::events(&mut admin, 0).await;
    for id in &made {
        let acts: Vec<&str> = all
            .iter()
            .filter(|e| &e.agent_id == id && e.kind == "operator_action")
            .map(|e| e.text.as_str())
            .collect();
        assert_eq!(acts, ["AgentService/CreateAgents"], "{id}");
    }
    // The sender's entry is in the message's own commit: next to it.
    let queued = events
        .iter()
        .position(|e| e.kind == "message_queued" && e.message_id == sent.message_id)
        .expect("the message is queued");
    assert!(
        events[queued.saturating_sub(1)..=(queued + 1).min(events.len() - 1)]
            .iter()
            .any(|e| e.kind == "operator_action" && e.text == "AgentService/SendMessage"),
        "{events:#?}"
    );
}
