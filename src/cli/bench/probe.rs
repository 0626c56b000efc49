//! Latency probes against a loaded daemon: GetAgent, a page of ListAgents,
//! and SendMessage both until acknowledged and until the agent's turn is
//! seen starting on the event stream.

use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{json, Value};
use tokio_stream::StreamExt;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

use crate::api::pb;
use crate::client::Clients;

/// p50 and p99 of `samples`, in microseconds.
pub fn percentiles(mut samples: Vec<Duration>) -> Value {
    samples.sort();
    let at = |p: f64| {
        if samples.is_empty() {
            return 0.0;
        }
        let i = ((samples.len() - 1) as f64 * p).round() as usize;
        samples[i].as_secs_f64() * 1e6
    };
    json!({ "p50": at(0.5), "p99": at(0.99), "samples": samples.len() })
}

/// A cheap spread over the created ids, without a random-number crate.
fn pick(ids: &[String], i: usize) -> &str {
    &ids[(i.wrapping_mul(2_654_435_761)) % ids.len()]
}

pub async fn get_agent(
    c: &mut Clients,
    ids: &[String],
    samples: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples {
        let request = pb::GetAgentRequest {
            agent: Some(pb::get_agent_request::Agent::AgentId(
                pick(ids, i).to_owned(),
            )),
        };
        let t = Instant::now();
        c.agents.get_agent(request).await?;
        out.push(t.elapsed());
    }
    Ok(out)
}

/// The gRPC health check: a call that does no work, so what GetAgent costs
/// beyond it is the daemon's own.
pub async fn empty_call(c: &Clients, samples: usize) -> anyhow::Result<Vec<Duration>> {
    let mut health = HealthClient::new(c.channel.clone());
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t = Instant::now();
        health
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await?;
        out.push(t.elapsed());
    }
    Ok(out)
}

/// The first page of 1,000 public agents, `samples` times.
pub async fn list_agents(c: &mut Clients, samples: usize) -> anyhow::Result<Vec<Duration>> {
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t = Instant::now();
        let page = c
            .agents
            .list_agents(pb::ListAgentsRequest {
                page_size: 1000,
                page_token: String::new(),
                include_private: false,
            })
            .await?
            .into_inner();
        out.push(t.elapsed());
        anyhow::ensure!(!page.agents.is_empty(), "ListAgents returned no agents");
    }
    Ok(out)
}

/// What SendMessage costs, seen from a client.
pub struct SendLatency {
    /// Until the call returned: the message is on disk and queued.
    pub acknowledged: Vec<Duration>,
    /// Until the `run_started` event of that message arrived on a followed
    /// event stream. The turn starts inside the actor message that queues
    /// it, before the acknowledgement; an event is streamed only once it is
    /// durable, so this is the start as a watcher can know it.
    pub turn_seen: Vec<Duration>,
}

/// Sends one message to each of `samples` distinct idle agents, one at a
/// time, while following the event log.
pub async fn send_message(
    c: &mut Clients,
    ids: &[String],
    samples: usize,
) -> anyhow::Result<SendLatency> {
    let cursor = c
        .runtime
        .get_status(pb::GetStatusRequest {})
        .await?
        .into_inner()
        .event_cursor;
    let mut events = c
        .agents
        .watch_events(pb::WatchEventsRequest {
            after_cursor: cursor,
            follow: true,
            agent_id: String::new(),
        })
        .await?
        .into_inner();
    let mut latency = SendLatency {
        acknowledged: Vec::with_capacity(samples),
        turn_seen: Vec::with_capacity(samples),
    };
    for i in 0..samples.min(ids.len()) {
        let request = pb::SendMessageRequest {
            agent_id: pick(ids, i).to_owned(),
            text: "ping".into(),
            dedupe_key: String::new(),
        };
        let t = Instant::now();
        let message_id = c
            .agents
            .send_message(request)
            .await?
            .into_inner()
            .message_id;
        latency.acknowledged.push(t.elapsed());
        loop {
            let event = tokio::time::timeout(Duration::from_secs(10), events.next())
                .await
                .context("no run_started within 10 s")?
                .context("the event stream ended")??;
            if event.kind == "run_started" && event.message_id == message_id {
                latency.turn_seen.push(t.elapsed());
                break;
            }
        }
    }
    Ok(latency)
}
