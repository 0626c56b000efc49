//! Per-namespace quotas against the real daemon: an admin of every
//! namespace bounds `team-a`'s live agents, commands and turns a minute;
//! past each bound a creation (public or spawned) and a command are
//! refused with the namespace's name and what lifts it, and a turn waits,
//! while `team-b` and `default` go on unbounded. The quota survives
//! `kill -9`, the CLI sets and lists it, and a namespace's own admin may
//! not lift it.

mod common;

use std::time::{Duration, Instant};

use common::{data_dir, Daemon};
use holarchy::api::pb;
use holarchy::client::{connect_in, Clients, Target};
use tonic::Code;

/// The machine's admin, acting in `namespace`.
async fn acting_in(daemon: &Daemon, namespace: &str) -> Clients {
    connect_in(&Target::Unix(daemon.socket()), Some(namespace))
        .await
        .expect("connects")
}

async fn try_create(c: &mut Clients, name: &str) -> Result<String, tonic::Status> {
    c.agents
        .create_agent(pb::CreateAgentRequest {
            name: name.into(),
            ..Default::default()
        })
        .await
        .map(|r| r.into_inner().agent_id)
}

async fn namespace(c: &mut Clients, name: &str) -> pb::NamespaceInfo {
    c.access
        .list_namespaces(pb::ListNamespacesRequest {})
        .await
        .expect("namespaces")
        .into_inner()
        .namespaces
        .into_iter()
        .find(|n| n.name == name)
        .unwrap_or_else(|| panic!("namespace {name} is not listed"))
}

fn quota(agents: u64, turns_per_minute: u32, commands: u64) -> pb::Quota {
    pb::Quota {
        agents: Some(agents),
        turns_per_minute: Some(turns_per_minute),
        commands: Some(commands),
        store_bytes: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_is_held_to_its_quota_and_the_others_are_not() {
    let root = tempfile::tempdir().expect("tempdir");
    let listen = common::free_addr();
    let mut daemon = Daemon::start_with(&data_dir(&root), &["--listen", &listen]).await;
    let mut machine = daemon.clients().await;
    let set = machine
        .access
        .set_quota(pb::SetQuotaRequest {
            namespace: "team-a".into(),
            quota: Some(quota(3, 4, 1)),
        })
        .await
        .expect("quota set")
        .into_inner();
    assert_eq!(set.quota, Some(quota(3, 4, 1)));
    assert!(set.quota_set_by.starts_with("uid:"), "{set:?}");

    // Agents: three live ones, then refused, the others unbounded.
    let mut a = acting_in(&daemon, "team-a").await;
    let mut a_agents = Vec::new();
    for i in 0..3 {
        a_agents.push(try_create(&mut a, &format!("a-{i}")).await.expect("fits"));
    }
    let refused = try_create(&mut a, "a-3").await.expect_err("past the quota");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("namespace `team-a`")
            && refused
                .message()
                .contains("holarchy namespace quota team-a --agents"),
        "the refusal names the namespace and what lifts it: {}",
        refused.message()
    );
    let mut b = acting_in(&daemon, "team-b").await;
    for i in 0..5 {
        try_create(&mut b, &format!("b-{i}"))
            .await
            .expect("b is unbounded");
    }
    let helper = common::create(&mut machine, "helper", None).await;
    assert_eq!(namespace(&mut machine, "team-a").await.agents, 3);

    // A spawn counts as much: the full namespace's agent cannot grow it.
    let spawn = r#"{"tool_calls":[{"name":"SpawnAgent","input":{"preset":"private_delegator","initial_message":"hello"}}]}"#;
    common::send(&mut a, &a_agents[0], spawn).await;
    common::handled(&a, &a_agents[0], 1).await;
    let (failed, output) = common::tool_call(&mut a, &a_agents[0], "SpawnAgent").await;
    assert!(
        failed && output.to_string().contains("namespace `team-a`"),
        "a spawn past the quota is a tool error naming it: {output}"
    );

    // Commands: one runs, the next is refused, the default runs two.
    let long = common::exec(&mut a, &a_agents[1], "sleep 30", 100).await;
    assert_eq!(long["task_handle"]["status"], "running", "{long}");
    let next = r#"{"tool_calls":[{"name":"ExecCommand","input":{"command":"echo second","yield_ms":1000}}]}"#;
    common::send(&mut a, &a_agents[2], next).await;
    common::handled(&a, &a_agents[2], 1).await;
    let (failed, output) = common::tool_call(&mut a, &a_agents[2], "ExecCommand").await;
    assert!(
        failed && output.to_string().contains("already runs 1 commands"),
        "a second command in team-a is refused: {output}"
    );
    common::exec(&mut machine, &helper, "sleep 30", 100).await;
    common::exec(&mut machine, &helper, "echo default-is-unbounded", 2_000).await;
    assert_eq!(namespace(&mut machine, "team-a").await.commands, 1);

    // Turns: a burst of the quota passes, then the next ones wait.
    let started = Instant::now();
    for i in 0..6 {
        common::send(&mut a, &a_agents[i % 3], "{}").await;
    }
    common::eventually("team-a's turns held back", || {
        let mut machine = machine.clone();
        async move {
            let info = namespace(&mut machine, "team-a").await;
            (info.turns_deferred > 0).then_some(())
        }
    })
    .await;
    let mut handled = 0;
    let mut queued = 0;
    for agent in &a_agents {
        for m in common::messages(&mut a, agent).await {
            if m.text == "{}" {
                if m.status == pb::MessageStatus::Handled as i32 {
                    handled += 1;
                } else {
                    queued += 1;
                }
            }
        }
    }
    // The burst had 4 turns, 3 of them spent above (the spawn, the two
    // commands); at 4 a minute the next comes 15 s after.
    assert!(
        started.elapsed() < Duration::from_secs(15) && queued >= 4,
        "handled {handled}, queued {queued}"
    );
    // Lifting the turn bound lets the waiting turns start at once, not at
    // the wake-up the old bound set (up to 15 s away at 4 a minute).
    machine
        .access
        .set_quota(pb::SetQuotaRequest {
            namespace: "team-a".into(),
            quota: Some(pb::Quota {
                turns_per_minute: None,
                ..quota(3, 4, 1)
            }),
        })
        .await
        .expect("turns unbounded");
    let lifted = Instant::now();
    for agent in &a_agents {
        let all = common::messages(&mut a, agent).await.len();
        common::handled(&a, agent, all).await;
    }
    assert!(
        lifted.elapsed() < Duration::from_secs(5),
        "the held turns waited {:?} after the bound was lifted",
        lifted.elapsed()
    );
    for i in 0..3 {
        let agent = common::create(&mut machine, &format!("free-{i}"), None).await;
        common::send(&mut machine, &agent, "{}").await;
        common::handled(&machine, &agent, 1).await;
    }

    // A namespace's own admin may not lift its quota.
    let team_a_admin = machine
        .access
        .create_token(pb::CreateTokenRequest {
            role: "admin".into(),
            namespace: "team-a".into(),
            name: "team-a's admin".into(),
            expires_in_ms: 0,
        })
        .await
        .expect("token")
        .into_inner()
        .secret;
    let mut own = common::tcp_clients(&listen, Some(&team_a_admin)).await;
    let lifted = own
        .access
        .set_quota(pb::SetQuotaRequest {
            namespace: "team-a".into(),
            quota: Some(pb::Quota::default()),
        })
        .await
        .expect_err("not its own admin's to lift");
    assert_eq!(lifted.code(), Code::PermissionDenied, "{lifted:?}");
    let seen = own
        .access
        .list_namespaces(pb::ListNamespacesRequest {})
        .await
        .expect("its own namespace")
        .into_inner()
        .namespaces;
    assert_eq!(
        seen.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
        ["team-a"],
        "an admin of one namespace sees its own"
    );

    // Through kill -9: the quota holds and the count is rebuilt.
    daemon.kill9();
    let daemon = Daemon::start_with(&data_dir(&root), &["--listen", &listen]).await;
    let mut a = acting_in(&daemon, "team-a").await;
    let again = try_create(&mut a, "a-4").await.expect_err("still full");
    assert_eq!(again.code(), Code::ResourceExhausted, "{again:?}");

    // The CLI: a bound given replaces its own only; `none` drops one.
    let shown = daemon.cli(&[
        "namespace",
        "quota",
        "team-a",
        "--agents",
        "4",
        "--commands",
        "none",
    ]);
    assert!(
        shown.contains("at most 4 agents, - turns a minute, - commands"),
        "{shown}"
    );
    let listed = daemon.cli(&["namespace", "list"]);
    let row = listed
        .lines()
        .find(|l| l.starts_with("team-a"))
        .unwrap_or_else(|| panic!("no team-a row:\n{listed}"));
    assert!(row.contains("3/4"), "{listed}");
    try_create(&mut a, "a-4").await.expect("room for a fourth");
    let cleared = daemon.cli(&["namespace", "quota", "team-a", "--clear"]);
    assert!(cleared.contains("no quota"), "{cleared}");
    try_create(&mut a, "a-5").await.expect("unbounded again");
}

/// The store quota: a namespace filled past it takes no new message or
/// agent (the others do), and takes them again once an agent is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_over_its_store_bytes_takes_nothing_new_until_it_deletes() {
    const LIMIT: u64 = 64 * 1024;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut machine = daemon.clients().await;
    let mut s = acting_in(&daemon, "team-s").await;
    let filler = try_create(&mut s, "filler").await.expect("made");
    let other = try_create(&mut s, "other").await.expect("made");
    // A trigger of team-s's, whose payloads grow its store too.
    let script = common::script(serde_json::json!([
        { "name": "CreateExternalTrigger", "input": { "reason": "a webhook" } },
        { "name": "ExecCommand", "input": {
            "command": "printf %s \"$TOKEN\" > trigger-token",
            "env": { "TOKEN": "{{results[0].token}}" }
        } }
    ]));
    common::send(&mut s, &other, &script).await;
    common::handled(&s, &other, 1).await;
    let token = std::fs::read_to_string(
        daemon
            .data_dir
            .join("workspaces")
            .join(&other)
            .join("trigger-token"),
    )
    .expect("token handed over");
    machine
        .access
        .set_quota(pb::SetQuotaRequest {
            namespace: "team-s".into(),
            quota: Some(pb::Quota {
                store_bytes: Some(LIMIT),
                ..Default::default()
            }),
        })
        .await
        .expect("quota set");

    // 8 KiB at a time until the measure finds it over: within a few
    // measures (one every 5 s at most), never past a minute.
    let body = "x".repeat(8 * 1024);
    let began = Instant::now();
    let mut taken = 0;
    let refused = loop {
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "{taken} sends of 8 KiB taken past a {LIMIT}-byte quota"
        );
        let sent = s
            .agents
            .send_message(pb::SendMessageRequest {
                agent_id: filler.clone(),
                text: body.clone(),
                dedupe_key: String::new(),
            })
            .await;
        match sent {
            Ok(_) => taken += 1,
            Err(status) => break status,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(taken * 8 * 1024 > LIMIT, "refused after {taken} sends");
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused
            .message()
            .contains("bytes in the store, over its quota of 65536")
            && refused.message().contains("agent delete"),
        "the refusal says what fills it and what frees it: {}",
        refused.message()
    );
    let info = namespace(&mut machine, "team-s").await;
    assert!(
        info.store_bytes > LIMIT && info.store_bytes_measured_at_ms > 0,
        "{info:?}"
    );
    let made = try_create(&mut s, "one-more")
        .await
        .expect_err("no new agent either");
    assert_eq!(made.code(), Code::ResourceExhausted, "{made:?}");
    let triggered = machine
        .triggers
        .deliver_trigger(pb::DeliverTriggerRequest {
            token,
            payload: body.clone(),
            dedupe_key: String::new(),
        })
        .await
        .expect_err("no trigger payload either");
    assert_eq!(triggered.code(), Code::ResourceExhausted, "{triggered:?}");
    assert!(
        triggered.message().contains("over its store quota")
            && !triggered.message().contains("team-s"),
        "says why, names nothing: {}",
        triggered.message()
    );
    // Another namespace is not held.
    let free = common::create(&mut machine, "free", None).await;
    common::send(&mut machine, &free, &body).await;

    // Deleting the filler frees the namespace at the next measure.
    s.agents
        .archive_agent(pb::ArchiveAgentRequest {
            agent_id: filler.clone(),
        })
        .await
        .expect("archived");
    s.agents
        .delete_agent(pb::DeleteAgentRequest { agent_id: filler })
        .await
        .expect("deleted");
    common::eventually("team-s takes messages again", || {
        let mut s = s.clone();
        let other = other.clone();
        async move {
            s.agents
                .send_message(pb::SendMessageRequest {
                    agent_id: other,
                    text: "room again".into(),
                    dedupe_key: "room-again".into(),
                })
                .await
                .ok()
                .map(drop)
        }
    })
    .await;
    common::handled(&s, &other, 1).await;
}
