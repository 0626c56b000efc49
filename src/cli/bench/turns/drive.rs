//! Sending the load: `messages` SendMessage calls spread round-robin over
//! the agents, `concurrency` of them in flight, each caller sending its
//! next message as soon as the last one is acknowledged.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use tokio::task::JoinSet;

use crate::api::pb;
use crate::client::Clients;

/// One acknowledged message.
#[derive(Debug)]
pub struct Sent {
    pub message_id: String,
    /// Just before the call: latencies are measured from here.
    pub at: Instant,
    pub acknowledged: Instant,
}

/// The text of message `i`: with `tool_calls` of 0, plain text the
/// scripted brain acknowledges with one reply; otherwise a script that
/// calls `AgentGet` that many times, then replies and ends the turn.
pub fn text(i: usize, tool_calls: usize) -> String {
    if tool_calls == 0 {
        return format!("turn {i}");
    }
    let calls = vec![serde_json::json!({ "name": "AgentGet", "input": {} }); tool_calls];
    serde_json::json!({ "reply": format!("turn {i}"), "tool_calls": calls, "done": true })
        .to_string()
}

/// What the callers share.
#[derive(Debug)]
pub struct Plan {
    pub agents: Arc<Vec<String>>,
    pub messages: usize,
    pub concurrency: usize,
    pub tool_calls: usize,
}

/// Starts the callers; each returns what it sent, and counts every
/// acknowledgement in `acknowledged`. Caller `w` sends messages `w`,
/// `w + concurrency`, ... over connection `w % connections.len()`, so the
/// streams are spread over the connections evenly.
pub fn start(
    plan: &Plan,
    connections: &[Clients],
    acknowledged: Arc<AtomicUsize>,
) -> JoinSet<anyhow::Result<Vec<Sent>>> {
    let mut callers = JoinSet::new();
    for w in 0..plan.concurrency.min(plan.messages) {
        let mut clients = connections[w % connections.len()].clone();
        let agents = plan.agents.clone();
        let (messages, step, tool_calls) = (plan.messages, plan.concurrency, plan.tool_calls);
        let acknowledged = acknowledged.clone();
        callers.spawn(async move {
            let mut sent = Vec::with_capacity(messages / step + 1);
            for i in (w..messages).step_by(step) {
                let request = pb::SendMessageRequest {
                    agent_id: agents[i % agents.len()].clone(),
                    text: text(i, tool_calls),
                    dedupe_key: String::new(),
                };
                let at = Instant::now();
                let reply = clients
                    .agents
                    .send_message(request)
                    .await
                    .with_context(|| format!("SendMessage {i} failed"))?
                    .into_inner();
                sent.push(Sent {
                    message_id: reply.message_id,
                    at,
                    acknowledged: Instant::now(),
                });
                acknowledged.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(sent)
        });
    }
    callers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_call_message_is_a_script_of_that_many_agent_gets() {
        assert_eq!(text(3, 0), "turn 3");
        let script: serde_json::Value = serde_json::from_str(&text(3, 2)).expect("JSON");
        assert_eq!(script["tool_calls"].as_array().map(Vec::len), Some(2));
        assert_eq!(script["tool_calls"][1]["name"], "AgentGet");
        assert_eq!(script["done"], true);
    }
}
