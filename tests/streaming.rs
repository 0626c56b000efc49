//! End-to-end: model brains that stream, through the real daemon, against
//! loopback stub servers speaking each API's streaming format (written in
//! awkward pieces, a few milliseconds apart). Replies reach `WatchReplies`
//! as they are written, before the turn ends; a stream that breaks off is
//! asked again and nothing half-written is kept; each turn's token usage
//! is recorded and summed in `GetAgent`; `agent send --follow` prints the
//! reply as it comes.

mod common;

#[path = "streaming/anthropic.rs"]
mod anthropic;
#[path = "streaming/follow.rs"]
mod follow;
#[path = "streaming/openai.rs"]
mod openai;
#[path = "streaming/stub.rs"]
mod stub;

use common::{data_dir, eventually, Daemon, DEADLINE};
use holarchy::api::pb;
use holarchy::client::Clients;
use tokio_stream::StreamExt;

/// The Anthropic key the daemon holds, in a variable it treats as secret.
pub(crate) const ANTHROPIC_KEY: &str = "sk-ant-stub-0123456789abcdef";

/// A daemon that holds both stub keys and retries quickly.
pub(crate) async fn daemon(root: &tempfile::TempDir) -> Daemon {
    Daemon::start_with_env(
        &data_dir(root),
        &["--model-retries", "2", "--model-retry-base-ms", "10"],
        &[
            ("TEST_MODEL_KEY", "test-key"),
            ("TEST_ANTHROPIC_KEY", ANTHROPIC_KEY),
        ],
    )
    .await
}

pub(crate) async fn openai_agent(c: &mut Clients, name: &str, stub: &stub::Stub) -> String {
    let brain = pb::BrainConfig {
        kind: Some(pb::brain_config::Kind::Openai(pb::OpenAiBrain {
            base_url: format!("http://{}/v1", stub.addr),
            model: "stub-model".into(),
            api_key_env: "TEST_MODEL_KEY".into(),
            temperature: None,
            max_steps: Some(4),
        })),
    };
    common::create_on(c, name, brain).await
}

pub(crate) async fn anthropic_agent(c: &mut Clients, name: &str, stub: &stub::Stub) -> String {
    let brain = pb::BrainConfig {
        kind: Some(pb::brain_config::Kind::Anthropic(pb::AnthropicBrain {
            base_url: format!("http://{}", stub.addr),
            model: "claude-stub".into(),
            api_key_env: "TEST_ANTHROPIC_KEY".into(),
            max_tokens: Some(1024),
            temperature: None,
            max_steps: Some(4),
        })),
    };
    common::create_on(c, name, brain).await
}

/// A watch of one agent's replies.
#[derive(Debug)]
pub(crate) struct Replies(tonic::Streaming<pb::ReplyEvent>);

impl Replies {
    pub async fn open(c: &mut Clients, agent_id: &str) -> Self {
        let stream = c
            .agents
            .watch_replies(pb::WatchRepliesRequest {
                agent_id: agent_id.into(),
            })
            .await
            .expect("watch opens")
            .into_inner();
        Self(stream)
    }

    pub async fn next(&mut self) -> pb::ReplyEvent {
        tokio::time::timeout(DEADLINE, self.0.next())
            .await
            .expect("a reply event in time")
            .expect("the watch stays open")
            .expect("an event")
    }

    /// Events until `count` deltas came.
    pub async fn deltas(&mut self, count: usize) -> Vec<pb::ReplyEvent> {
        let mut events = Vec::new();
        while deltas_in(&events).len() < count {
            events.push(self.next().await);
        }
        events
    }

    /// Events until the end of `message_id`'s turn, that one included.
    pub async fn until_end(&mut self, message_id: &str) -> Vec<pb::ReplyEvent> {
        let mut events = Vec::new();
        loop {
            let event = self.next().await;
            let end = event.message_id == message_id
                && matches!(event.kind, Some(pb::reply_event::Kind::End(_)));
            events.push(event);
            if end {
                return events;
            }
        }
    }
}

/// The delta texts among `events`, in order.
pub(crate) fn deltas_in(events: &[pb::ReplyEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(pb::reply_event::Kind::Delta(text)) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// The end among `events`.
pub(crate) fn end_of(events: &[pb::ReplyEvent]) -> pb::ReplyEnd {
    events
        .iter()
        .find_map(|e| match &e.kind {
            Some(pb::reply_event::Kind::End(end)) => Some(end.clone()),
            _ => None,
        })
        .expect("an end")
}

/// Waits until the agent has `count` messages, none queued or handling.
pub(crate) async fn settled(c: &Clients, agent_id: &str, count: usize) -> Vec<pb::Message> {
    eventually("messages settled", || {
        let mut c = c.clone();
        let agent_id = agent_id.to_owned();
        async move {
            let all = common::messages(&mut c, &agent_id).await;
            (all.len() >= count
                && all.iter().all(|m| {
                    m.status != pb::MessageStatus::Queued as i32
                        && m.status != pb::MessageStatus::Handling as i32
                }))
            .then_some(all)
        }
    })
    .await
}

/// The agent's token totals, as `GetAgent` answers them.
pub(crate) async fn usage(c: &mut Clients, agent_id: &str) -> pb::AgentUsage {
    c.agents
        .get_agent(pb::GetAgentRequest {
            agent: Some(pb::get_agent_request::Agent::AgentId(agent_id.into())),
        })
        .await
        .expect("agent")
        .into_inner()
        .usage
        .expect("GetAgent reports usage")
}

/// The agent's events in the log, oldest first.
pub(crate) async fn events_of(c: &mut Clients, agent_id: &str) -> Vec<pb::Event> {
    common::events(c, 0)
        .await
        .into_iter()
        .filter(|e| e.agent_id == agent_id)
        .collect()
}

/// The piece of a stub stream (`piece` bytes each) in which `marker`
/// starts.
pub(crate) fn piece_of(body: &str, marker: &str, piece: usize) -> usize {
    body.find(marker).expect("marker in the stream") / piece
}
