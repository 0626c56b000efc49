//! End-to-end: brains that misbehave, through the real daemon. A command
//! brain that hangs, ignores SIGTERM, floods its stdout, dies mid-write or
//! writes what is not a decision; a model endpoint (OpenAI-compatible and
//! Anthropic) that resets connections, answers 429, 500 and 529 with and
//! without `Retry-After`, or stalls before its headers, mid-body or
//! mid-stream. Each fault ends the same way: the turn fails (or succeeds
//! on a retry) with the reason in its `run_finished` event, within a bound
//! the daemon's flags set; nothing of the brain's is left running; the
//! daemon stays up and serves the other agents.

mod common;

#[path = "brain_faults/command.rs"]
mod command;
#[path = "brain_faults/endpoint.rs"]
mod endpoint;
#[path = "brain_faults/model.rs"]
mod model;

use holarchy::api::pb;
use holarchy::client::Clients;

/// The agent's messages once none is queued or being handled.
async fn settled(c: &Clients, agent: &str, count: usize) -> Vec<pb::Message> {
    common::eventually("messages settled", || {
        let mut c = c.clone();
        let agent = agent.to_owned();
        async move {
            let all = common::messages(&mut c, &agent).await;
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

/// The `run_finished` event of the turn that handled `message`: its
/// outcome and its detail (where a failure's reason is).
async fn finished(c: &mut Clients, message: &pb::Message) -> (String, String) {
    common::events(c, 0)
        .await
        .into_iter()
        .find(|e| e.kind == "run_finished" && e.message_id == message.message_id)
        .map(|e| (e.text, e.detail_json))
        .unwrap_or_else(|| panic!("no run_finished for {}", message.message_id))
}

/// Another agent (on the scripted brain) is served: the daemon is up and
/// its turns run.
async fn others_are_served(c: &mut Clients, name: &str) {
    let other = common::create(c, name, None).await;
    common::send(c, &other, "still there?").await;
    common::handled(c, &other, 1).await;
}
