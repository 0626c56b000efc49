//! End-to-end: agents created, messaged and watched through the real
//! daemon over its Unix socket.

mod common;

use std::collections::HashSet;

use common::{create, data_dir, events, handled, send, Daemon};
use holarchy::api::pb;
use tokio_stream::StreamExt;

#[tokio::test]
async fn agent_replies_to_messages_and_the_log_tells_the_story() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;

    let id = create(&mut c, "ops", Some("hello")).await;
    // The first turn ends before the second message arrives, so the event
    // log below has one order, not an interleaving.
    handled(&c, &id, 1).await;
    send(&mut c, &id, "second").await;
    let all = handled(&c, &id, 2).await;
    let replies: Vec<_> = all.iter().map(|m| m.reply.as_str()).collect();
    assert_eq!(replies, ["ack: hello", "ack: second"]);
    assert!(all
        .iter()
        .all(|m| m.provenance == "operator" && m.attempts == 1));

    // The story, in order: created, then each message queued, run and
    // answered before the next starts. Other events may come between.
    let log = events(&mut c, 0).await;
    let kinds: Vec<_> = log.iter().map(|e| e.kind.as_str()).collect();
    let turn = ["message_queued", "run_started", "replied", "run_finished"];
    let story: Vec<_> = std::iter::once("agent_created")
        .chain(turn)
        .chain(turn)
        .collect();
    common::contract::assert_in_order(&kinds, &story);
    let replied: Vec<_> = log.iter().filter(|e| e.kind == "replied").collect();
    assert_eq!(replied.len(), 2, "one reply per message: {kinds:?}");
    let cursors: Vec<_> = log.iter().map(|e| e.cursor).collect();
    common::contract::assert_dense(&cursors);

    let got = c
        .agents
        .get_agent(pb::GetAgentRequest {
            agent: Some(pb::get_agent_request::Agent::Name("ops".into())),
        })
        .await
        .expect("get by name")
        .into_inner()
        .agent
        .expect("summary");
    assert_eq!(got.agent_id, id);
    assert_eq!(got.visibility, pb::Visibility::Public as i32);
    assert_eq!(got.ownership, pb::Ownership::SelfOwned as i32);
    assert_eq!(got.state, pb::LifecycleState::Active as i32);
    assert_eq!(got.activity, pb::Activity::Idle as i32);
    assert_eq!(got.turns_completed, 2);
    assert!(got.supervisor_agent_id.is_empty() && got.lineage_parent_agent_id.is_empty());
    let profile = got.profile.expect("profile");
    assert_eq!(profile.preset, "public_named");
    // A public agent has every family; their order is no promise.
    for family in [
        "core",
        "local_environment",
        "agent_creation",
        "authority_expansion",
        "external_trigger",
        "memory",
    ] {
        assert!(
            profile.tool_families.iter().any(|f| f == family),
            "{family} missing from {:?}",
            profile.tool_families
        );
    }
}

#[tokio::test]
async fn scripted_messages_call_tools_and_unknown_tools_are_tool_errors() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "scripted", None).await;
    send(
        &mut c,
        &id,
        r#"{"reply":"checked","tool_calls":[{"name":"AgentGet","input":{}},{"name":"LaunchRockets","input":{"n":1}}]}"#,
    )
    .await;
    let all = handled(&c, &id, 1).await;
    assert_eq!(all[0].reply, "checked");

    let tools: Vec<serde_json::Value> = events(&mut c, 0)
        .await
        .into_iter()
        .filter(|e| e.kind == "tool_called")
        .map(|e| serde_json::from_str(&e.detail_json).expect("detail is JSON"))
        .collect();
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[0]["tool"], "AgentGet");
    assert_eq!(tools[0]["is_error"], false);
    let output: serde_json::Value =
        serde_json::from_str(tools[0]["output"].as_str().expect("text")).expect("json");
    assert_eq!(output["agent"]["agent_id"], id.as_str());
    assert_eq!(output["agent"]["visibility"], "public");
    assert_eq!(output["agent"]["ownership"], "self_owned");
    assert_eq!(output["agent"]["profile"]["preset"], "public_named");
    // Asked mid-turn: the turn in flight is the one calling the tool.
    assert!(output["agent"]["current_run_id"]
        .as_str()
        .is_some_and(|r| r.starts_with("run_")));
    assert!(output["agent"]["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|n| n == "SpawnAgent")));
    assert_eq!(tools[1]["tool"], "LaunchRockets");
    assert_eq!(tools[1]["is_error"], true);
    assert!(
        tools[1]["output"]
            .as_str()
            .is_some_and(|o| o.contains("tool catalog")),
        "{}",
        tools[1]
    );
}

#[tokio::test]
async fn a_dedupe_key_sends_a_message_once() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "dedupe", None).await;
    let request = pb::SendMessageRequest {
        agent_id: id.clone(),
        text: "pay once".into(),
        dedupe_key: "invoice-7".into(),
    };
    let first = c
        .agents
        .send_message(request.clone())
        .await
        .expect("first")
        .into_inner();
    let again = c
        .agents
        .send_message(request)
        .await
        .expect("retry")
        .into_inner();
    assert!(!first.duplicate);
    assert!(again.duplicate);
    assert_eq!(first.message_id, again.message_id);
    let all = handled(&c, &id, 1).await;
    assert_eq!(all.len(), 1);
}

#[tokio::test]
async fn list_agents_pages_through_every_agent_once_in_creation_order() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let mut created = Vec::new();
    for i in 0..25 {
        created.push(create(&mut c, &format!("agent-{i:02}"), None).await);
    }
    let mut seen = Vec::new();
    let mut page_token = String::new();
    let mut pages = 0;
    loop {
        let page = c
            .agents
            .list_agents(pb::ListAgentsRequest {
                page_size: 10,
                page_token,
                include_private: false,
            })
            .await
            .expect("page")
            .into_inner();
        pages += 1;
        assert!(page.agents.len() <= 10);
        seen.extend(page.agents.into_iter().map(|a| a.agent_id));
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, created);
}

#[tokio::test]
async fn a_follower_that_reconnects_with_its_cursor_misses_nothing_and_sees_nothing_twice() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;

    let mut stream = c
        .agents
        .watch_events(pb::WatchEventsRequest {
            after_cursor: 0,
            follow: true,
            agent_id: String::new(),
        })
        .await
        .expect("watch")
        .into_inner();
    let id = create(&mut c, "watched", Some("one")).await;
    let mut cursors = Vec::new();
    let mut kinds = Vec::new();
    // Read a few live events, then hang up mid-stream.
    while cursors.len() < 3 {
        let event = stream.next().await.expect("stream open").expect("event");
        cursors.push(event.cursor);
        kinds.push(event.kind);
    }
    drop(stream);

    for i in 0..5 {
        send(&mut c, &id, &format!("while away {i}")).await;
    }
    let last = *cursors.last().expect("some");
    let mut resumed = c
        .agents
        .watch_events(pb::WatchEventsRequest {
            after_cursor: last,
            follow: true,
            agent_id: String::new(),
        })
        .await
        .expect("watch again")
        .into_inner();
    // Read on until all six turns (the first message and the five sent
    // while away) have finished.
    let mut finished = kinds.iter().filter(|k| *k == "run_finished").count();
    while finished < 6 {
        let event = tokio::time::timeout(common::DEADLINE, resumed.next())
            .await
            .expect("events keep coming")
            .expect("stream open")
            .expect("event");
        cursors.push(event.cursor);
        finished += usize::from(event.kind == "run_finished");
    }
    // Nothing missed, nothing twice: the cursors run on without a gap or
    // a repeat across the reconnection, from the first event on.
    assert_eq!(cursors.first(), Some(&1));
    common::contract::assert_dense(&cursors);
    let unique: HashSet<_> = cursors.iter().collect();
    assert_eq!(unique.len(), cursors.len());
}

#[tokio::test]
async fn events_can_be_filtered_by_agent() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let a = create(&mut c, "a", Some("x")).await;
    let b = create(&mut c, "b", Some("y")).await;
    handled(&c, &a, 1).await;
    handled(&c, &b, 1).await;
    let mut stream = c
        .agents
        .watch_events(pb::WatchEventsRequest {
            after_cursor: 0,
            follow: false,
            agent_id: b.clone(),
        })
        .await
        .expect("watch")
        .into_inner();
    let mut filtered = Vec::new();
    while let Some(event) = stream.next().await {
        filtered.push(event.expect("event"));
    }
    // Exactly b's part of the whole log, in the same order.
    let whole: Vec<_> = events(&mut c, 0)
        .await
        .into_iter()
        .filter(|e| e.agent_id == b)
        .collect();
    assert_eq!(filtered, whole);
    let kinds: Vec<_> = filtered.iter().map(|e| e.kind.as_str()).collect();
    common::contract::assert_in_order(&kinds, &["agent_created", "message_queued", "run_finished"]);
}

#[tokio::test]
async fn status_counts_agents_and_reports_idle() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = data_dir(&root);
    let daemon = Daemon::start(&data).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "one", Some("hi")).await;
    create(&mut c, "two", None).await;
    handled(&c, &id, 1).await;
    let last_cursor = |log: Vec<pb::Event>| log.last().map_or(0, |e| e.cursor);
    let before = last_cursor(events(&mut c, 0).await);
    let status = common::status(&mut c).await;
    let after = last_cursor(events(&mut c, 0).await);
    assert_eq!(status.public_agents, 2);
    assert_eq!(status.private_agents, 0);
    assert_eq!(status.activity, "idle");
    assert!(status.rss_bytes > 0);
    // The store is named, whichever this run serves from.
    if std::env::var("HOLARCHY_TEST_STORE").as_deref() == Ok("postgres") {
        assert!(status.store.starts_with("PostgreSQL "), "{}", status.store);
    } else {
        assert_eq!(
            status.store,
            format!("sled at {}", data.join("db").display())
        );
    }
    // The cursor is the log's last at the time of asking.
    assert!(
        (before..=after).contains(&status.event_cursor) && before > 0,
        "{} not in {before}..={after}",
        status.event_cursor
    );
}

#[tokio::test]
async fn agents_created_in_a_batch_are_all_there_or_none_is() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let ask = |names: Vec<String>| pb::CreateAgentsRequest {
        agents: names
            .into_iter()
            .map(|name| pb::CreateAgentRequest {
                context_tokens: None,
                mcp_servers: Vec::new(),
                network: String::new(),
                name,
                initial_message: None,
                brain: None,
                labels: Default::default(),
            })
            .collect(),
    };
    let made = c
        .agents
        .create_agents(ask((0..500).map(|i| format!("batch-{i}")).collect()))
        .await
        .expect("created")
        .into_inner()
        .agent_ids;
    assert_eq!(made.len(), 500);
    // A taken name, or a name twice, refuses the whole batch.
    for names in [
        vec!["fresh-a".to_owned(), "batch-7".to_owned()],
        vec!["twin".to_owned(), "twin".to_owned()],
    ] {
        let taken = names[1].clone();
        common::contract::assert_refused(
            c.agents.create_agents(ask(names)).await,
            tonic::Code::AlreadyExists,
            &taken,
        );
    }
    let status = common::status(&mut c).await;
    assert_eq!(status.public_agents, 500);
    let listed = c
        .agents
        .list_agents(pb::ListAgentsRequest {
            page_size: 1000,
            page_token: String::new(),
            include_private: false,
        })
        .await
        .expect("list")
        .into_inner();
    let ids: Vec<_> = listed.agents.into_iter().map(|a| a.agent_id).collect();
    assert_eq!(ids, made);
}
