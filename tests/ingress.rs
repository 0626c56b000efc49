//! Event ingress end to end, against the real `holarchy` binary: signed
//! webhooks over HTTP (with a small HTTP/1.1 client written here), and
//! schedules across a `kill -9`. One module per source.

mod common;

#[path = "ingress/example.rs"]
mod example;
#[path = "ingress/operator.rs"]
mod operator;
#[path = "ingress/schedules.rs"]
mod schedules;
#[path = "ingress/webhooks.rs"]
mod webhooks;

use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::Value;

/// The agent's messages that carry events, with their JSON.
async fn event_messages(c: &mut Clients, agent_id: &str) -> Vec<(pb::Message, Value)> {
    common::messages(c, agent_id)
        .await
        .into_iter()
        .filter(|m| m.provenance == "event")
        .map(|m| {
            let body = serde_json::from_str(&m.text).expect("an event's JSON");
            (m, body)
        })
        .collect()
}

/// Every `event_received` in the log.
async fn received(c: &mut Clients) -> Vec<Value> {
    common::events(c, 0)
        .await
        .into_iter()
        .filter(|e| e.kind == "event_received")
        .map(|e| serde_json::from_str(&e.detail_json).expect("detail"))
        .collect()
}
