//! Hostile agents: responses that would outgrow a gRPC message. Agents
//! write most of what the API returns, so listings page by bytes as well
//! as by count, an event stream sends no event over the budget, and a
//! record too big for any page comes back cut, with its full size.

use holarchy::api::pb;
use holarchy::client::Clients;
use prost::Message as _;
use tokio_stream::StreamExt;

use super::common::{self, create, data_dir, send, Daemon};

/// The page budget of the API (1 MiB), with room for a page's envelope.
const BUDGET: usize = 1024 * 1024 + 4096;
/// 70 messages of 60 KiB, each acknowledged with a reply as long: about
/// 8 MiB of messages, 16 MiB of events.
const MESSAGES: usize = 70;
const MESSAGE_BYTES: usize = 60 * 1024;

/// Every page of the agent's messages, each checked against the budget.
async fn message_pages(c: &mut Clients, agent_id: &str) -> Vec<pb::ListMessagesResponse> {
    let pages = crate::common::message_pages(c, agent_id).await;
    for page in &pages {
        assert!(page.encoded_len() <= BUDGET, "{} bytes", page.encoded_len());
    }
    pages
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seventy_large_messages_page_under_the_budget_and_their_events_stream() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let agent = create(&mut c, "big-talker", None).await;
    let mut sent = Vec::new();
    for i in 0..MESSAGES {
        let text = format!("{i:03}{}", "m".repeat(MESSAGE_BYTES - 3));
        sent.push(send(&mut c, &agent, &text).await);
    }
    // The scripted brain acknowledges each with `ack: <text>`.
    common::handled(&c, &agent, MESSAGES).await;

    let pages = message_pages(&mut c, &agent).await;
    assert!(pages.len() >= 5, "{} pages for ~8 MiB", pages.len());
    let listed: Vec<&pb::Message> = pages.iter().flat_map(|p| &p.messages).collect();
    let ids: Vec<&str> = listed.iter().map(|m| m.message_id.as_str()).collect();
    assert_eq!(ids, sent, "every message once, in order");
    assert!(listed
        .iter()
        .all(|m| m.truncated_from_bytes == 0 && m.text.len() == MESSAGE_BYTES));

    // The CLI follows the pages.
    let lines = daemon.cli(&["--json", "agent", "messages", &agent]);
    let shown: Vec<String> = lines
        .lines()
        .map(|l| {
            let m: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
            m["message_id"].as_str().expect("an id").to_owned()
        })
        .collect();
    assert_eq!(shown, sent);

    // The event backlog (~16 MiB) streams whole, every event under the
    // budget.
    let mut stream = c
        .agents
        .watch_events(pb::WatchEventsRequest::default())
        .await
        .expect("watch opens")
        .into_inner();
    let (mut total, mut replies) = (0, 0);
    while let Some(event) = stream.next().await {
        let event = event.expect("an event");
        assert!(event.encoded_len() <= BUDGET);
        total += event.encoded_len();
        replies += usize::from(event.kind == "replied");
    }
    assert!(total > 4 * 1024 * 1024, "the backlog is {total} bytes");
    assert_eq!(replies, MESSAGES);
    let events = daemon.cli(&["events"]);
    assert_eq!(
        events.lines().filter(|l| l.contains("replied")).count(),
        MESSAGES
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_over_the_budget_comes_back_cut_with_its_full_size() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    // A command brain whose arguments alone are 1.5 MiB: its summary
    // cannot fit a page whole. (It never runs: no message reaches it.)
    let huge = "a".repeat(1536 * 1024);
    let brain = pb::BrainConfig {
        kind: Some(pb::brain_config::Kind::Command(pb::CommandBrain {
            program: "/bin/true".into(),
            args: vec![huge.clone()],
            env: Default::default(),
            timeout_ms: 0,
        })),
    };
    let big = c
        .agents
        .create_agent(pb::CreateAgentRequest {
            context_tokens: None,
            mcp_servers: Vec::new(),
            network: String::new(),
            name: "big-brain".into(),
            initial_message: None,
            brain: Some(brain),
            labels: Default::default(),
        })
        .await
        .expect("created")
        .into_inner()
        .agent_id;
    let small = create(&mut c, "small", None).await;

    let summary = common::get_agent(&mut c, &big).await;
    assert!(summary.encoded_len() <= BUDGET);
    assert!(
        summary.truncated_from_bytes as usize > huge.len(),
        "its full size is stated: {}",
        summary.truncated_from_bytes
    );

    // Listed, it comes cut, and the pages stay under the budget.
    let mut listed = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = c
            .agents
            .list_agents(pb::ListAgentsRequest {
                page_size: 100,
                page_token,
                include_private: false,
            })
            .await
            .expect("a page of agents")
            .into_inner();
        assert!(page.encoded_len() <= BUDGET, "{} bytes", page.encoded_len());
        listed.extend(page.agents);
        page_token = page.next_page_token;
        if page_token.is_empty() {
            break;
        }
    }
    let ids: Vec<&str> = listed.iter().map(|a| a.agent_id.as_str()).collect();
    assert_eq!(ids, [big.as_str(), small.as_str()]);
    assert_eq!(listed[0].truncated_from_bytes, summary.truncated_from_bytes);
    assert_eq!(listed[1].truncated_from_bytes, 0);

    // The CLI lists both.
    let listed = daemon.cli(&["agent", "list", "--all"]);
    let row = |name: &str| listed.lines().any(|l| l.starts_with(&format!("{name} ")));
    assert!(row("big-brain") && row("small"), "{listed}");
}
