//! What the console's tests share: a public agent with a three-level
//! private subtree grown by the agents' own spawns, and a small HTTP
//! client for the console's listener.

#![allow(dead_code)]

use std::time::Duration;

use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::{json, Value};

use crate::common::{self, create, eventually, script, send};

/// A public agent and its private line: a delegator, under it another
/// delegator, under that a child; ids from the top down.
pub struct Subtree {
    pub lead: String,
    pub private: Vec<String>,
}

/// Builds `lead` -> private delegator -> private delegator -> private
/// child, each spawned by its parent's scripted turn.
pub async fn private_subtree(c: &mut Clients, name: &str) -> Subtree {
    let lead = create(c, name, None).await;
    let leaf = json!({ "name": "SpawnAgent", "input": {
        "preset": "private_child", "initial_message": "level three" } });
    let middle = json!({ "name": "SpawnAgent", "input": {
        "preset": "private_delegator", "initial_message": script(json!([leaf])) } });
    let top = json!({ "name": "SpawnAgent", "input": {
        "preset": "private_delegator", "initial_message": script(json!([middle])) } });
    send(c, &lead, &script(json!([top]))).await;
    let private = eventually("a three-level private subtree", || {
        let mut c = c.clone();
        let lead = lead.clone();
        async move {
            let tree = c
                .supervision
                .get_tree(pb::GetTreeRequest {
                    agent_id: lead,
                    ..Default::default()
                })
                .await
                .ok()?
                .into_inner();
            let agents: Vec<_> = tree
                .nodes
                .iter()
                .filter(|n| n.node_type == "agent" && n.depth > 0)
                .collect();
            (agents.len() == 3).then(|| {
                let mut line: Vec<_> = agents.iter().map(|n| (n.depth, n.id.clone())).collect();
                line.sort();
                line.into_iter().map(|(_, id)| id).collect::<Vec<_>>()
            })
        }
    })
    .await;
    Subtree { lead, private }
}

/// An answer of the console's listener.
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|_| panic!("JSON from the console: {}", self.body))
    }

    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    }
}

pub async fn http(addr: &str, method: &str, path: &str, token: Option<&str>) -> Answer {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut request = client.request(method, format!("http://{addr}{path}"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("the console answers");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.text().await.expect("a body");
    Answer {
        status,
        headers,
        body,
    }
}

/// A POST of `body` as `content_type`, with the token if given.
pub async fn post(
    addr: &str,
    path: &str,
    token: Option<&str>,
    content_type: &str,
    body: impl Into<reqwest::Body>,
) -> Answer {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    let mut request = client
        .post(format!("http://{addr}{path}"))
        .header(reqwest::header::CONTENT_TYPE, content_type)
        .body(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("the console answers");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.text().await.expect("a body");
    Answer {
        status,
        headers,
        body,
    }
}

/// The agent's lifecycle state, through gRPC.
pub async fn state(c: &mut Clients, agent_id: &str) -> pb::LifecycleState {
    let state = common::get_agent(c, agent_id).await.state;
    pb::LifecycleState::try_from(state).expect("a known state")
}
