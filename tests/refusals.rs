//! End-to-end: bad input gets a clear status and changes nothing.

mod common;

use common::{create, data_dir, events, Daemon};
use holarchy::api::pb;
use tonic::Code;

fn code<T: std::fmt::Debug>(result: Result<T, tonic::Status>) -> (Code, String) {
    let status = result.expect_err("call is refused");
    (status.code(), status.message().to_owned())
}

#[tokio::test]
async fn bad_input_is_refused_with_a_clear_status_and_changes_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "ops", None).await;
    let before = events(&mut c, 0).await.len();

    let create_named = |name: &str| pb::CreateAgentRequest {
        context_tokens: None,
        mcp_servers: Vec::new(),
        network: String::new(),
        name: name.into(),
        initial_message: None,
        brain: None,
        labels: Default::default(),
    };
    let cases_create = [
        (create_named(""), Code::InvalidArgument, "empty"),
        (
            create_named(&"a".repeat(65)),
            Code::InvalidArgument,
            "limit is 64",
        ),
        (
            create_named("Has Space"),
            Code::InvalidArgument,
            "may only hold",
        ),
        (create_named("ops"), Code::AlreadyExists, "already exists"),
        (
            pb::CreateAgentRequest {
                context_tokens: None,
                mcp_servers: Vec::new(),
                network: String::new(),
                name: "big".into(),
                initial_message: Some("x".repeat(64 * 1024 + 1)),
                brain: None,
                labels: Default::default(),
            },
            Code::InvalidArgument,
            "limit is 65536",
        ),
    ];
    for (request, want, words) in cases_create {
        let (got, message) = code(c.agents.create_agent(request).await);
        assert_eq!(got, want, "{message}");
        assert!(
            message.contains(words),
            "`{message}` should mention `{words}`"
        );
    }

    let send = |agent_id: &str, text: &str| pb::SendMessageRequest {
        agent_id: agent_id.into(),
        text: text.into(),
        dedupe_key: String::new(),
    };
    let unknown = "agt_01KAAAAAAAAAAAAAAAAAAAAAAA";
    let cases_send = [
        (
            send("", "hi"),
            Code::InvalidArgument,
            "agent_id is required",
        ),
        (
            send("agt_nope", "hi"),
            Code::InvalidArgument,
            "not a valid id",
        ),
        (
            send("msg_01KAAAAAAAAAAAAAAAAAAAAAAA", "hi"),
            Code::InvalidArgument,
            "agt_",
        ),
        (send(unknown, "hi"), Code::NotFound, "not found"),
        (send(&id, ""), Code::InvalidArgument, "must not be empty"),
        (
            send(&id, &"x".repeat(64 * 1024 + 1)),
            Code::InvalidArgument,
            "limit is 65536",
        ),
        (
            pb::SendMessageRequest {
                agent_id: id.clone(),
                text: "hi".into(),
                dedupe_key: "k".repeat(129),
            },
            Code::InvalidArgument,
            "dedupe key",
        ),
    ];
    for (request, want, words) in cases_send {
        let (got, message) = code(c.agents.send_message(request).await);
        assert_eq!(got, want, "{message}");
        assert!(
            message.contains(words),
            "`{message}` should mention `{words}`"
        );
    }

    let get = |agent| pb::GetAgentRequest { agent };
    let unknown_id = Some(pb::get_agent_request::Agent::AgentId(unknown.into()));
    let (got, message) = code(c.agents.get_agent(get(unknown_id)).await);
    assert_eq!(got, Code::NotFound, "{message}");
    assert!(message.contains("not found"), "{message}");
    let nobody = Some(pb::get_agent_request::Agent::Name("nobody".into()));
    let (got, message) = code(c.agents.get_agent(get(nobody)).await);
    assert_eq!(got, Code::NotFound, "{message}");
    assert!(message.contains("nobody"), "{message}");
    let (got, message) = code(c.agents.get_agent(get(None)).await);
    assert_eq!(got, Code::InvalidArgument, "{message}");
    assert!(message.contains("agent_id or name"), "{message}");
    let (got, message) = code(
        c.agents
            .list_agents(pb::ListAgentsRequest {
                page_size: 10,
                page_token: "garbage".into(),
                include_private: false,
            })
            .await,
    );
    assert_eq!(got, Code::InvalidArgument, "{message}");
    assert!(message.contains("page token"), "{message}");
    let (got, message) = code(
        c.agents
            .list_messages(pb::ListMessagesRequest {
                agent_id: unknown.into(),
                page_size: 0,
                page_token: String::new(),
            })
            .await,
    );
    assert_eq!(got, Code::NotFound, "{message}");
    assert!(message.contains("not found"), "{message}");

    // Nothing above wrote anything.
    assert_eq!(events(&mut c, 0).await.len(), before);
    let listed = c
        .agents
        .list_agents(pb::ListAgentsRequest {
            page_size: 0,
            page_token: String::new(),
            include_private: true,
        })
        .await
        .expect("list")
        .into_inner();
    assert_eq!(listed.agents.len(), 1);
    assert!(common::messages(&mut c, &id).await.is_empty());
}

#[tokio::test]
async fn a_full_queue_refuses_with_resource_exhausted() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with(&data_dir(&root), &["--max-queue", "0"]).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "tiny", None).await;
    let (got, message) = code(
        c.agents
            .send_message(pb::SendMessageRequest {
                agent_id: id,
                text: "hi".into(),
                dedupe_key: String::new(),
            })
            .await,
    );
    assert_eq!(got, Code::ResourceExhausted, "{message}");
    assert!(message.contains("queue is full"), "{message}");
}
