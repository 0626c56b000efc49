//! Latency probes against a loaded daemon: GetAgent, a page of ListAgents,
//! the empty health check, and SendMessage both until acknowledged and until
//! the agent's turn is seen starting on the event stream. Each probe samples
//! every transport it is given (the Unix socket and TCP, with
//! `--compare-tcp`) in turns, so both see the same daemon at the same
//! moment of a shared machine.

use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{json, Value};
use tokio_stream::StreamExt;
use tonic_health::pb::HealthCheckRequest;

use crate::api::pb;
use crate::client::Clients;

/// One connection to the daemon that latencies are sampled over.
#[derive(Debug)]
pub struct Transport {
    /// "unix" or "tcp": the key of its figures in the report.
    pub name: &'static str,
    pub clients: Clients,
}

/// Samples per transport, in the order of the transports given.
pub type PerTransport = Vec<Vec<Duration>>;

/// p50 and p99 of `samples`, in microseconds; null for a figure with no
/// sample, so a missing figure never reads as a fast one.
pub fn percentiles(mut samples: Vec<Duration>) -> Value {
    samples.sort();
    let at = |p: f64| -> Value {
        if samples.is_empty() {
            return Value::Null;
        }
        let i = ((samples.len() - 1) as f64 * p).round() as usize;
        json!(samples[i].as_secs_f64() * 1e6)
    };
    json!({ "p50": at(0.5), "p99": at(0.99), "samples": samples.len() })
}

/// A cheap spread over the created ids, without a random-number crate.
fn pick(ids: &[String], i: usize) -> &str {
    &ids[(i.wrapping_mul(2_654_435_761)) % ids.len()]
}

/// Runs `sample` `rounds` times on every transport. In each round every
/// transport takes one sample, and who goes first alternates, so a slow
/// moment falls on all of them alike and none is always the one that finds
/// the daemon's caches warm. `sample` gets a number distinct for every
/// call, to spread the calls over the agents.
async fn interleaved<F>(
    transports: &mut [Transport],
    rounds: usize,
    mut sample: F,
) -> anyhow::Result<PerTransport>
where
    F: AsyncFnMut(&mut Clients, usize) -> anyhow::Result<Duration>,
{
    let n = transports.len();
    let mut out = vec![Vec::with_capacity(rounds); n];
    for round in 0..rounds {
        for k in 0..n {
            let t = if round % 2 == 0 { k } else { n - 1 - k };
            let took = sample(&mut transports[t].clients, round * n + t)
                .await
                .with_context(|| format!("over {}", transports[t].name))?;
            out[t].push(took);
        }
    }
    Ok(out)
}

pub async fn get_agent(
    transports: &mut [Transport],
    ids: &[String],
    samples: usize,
) -> anyhow::Result<PerTransport> {
    interleaved(transports, samples, async |c: &mut Clients, i: usize| {
        let request = pb::GetAgentRequest {
            agent: Some(pb::get_agent_request::Agent::AgentId(
                pick(ids, i).to_owned(),
            )),
        };
        let t = Instant::now();
        c.agents.get_agent(request).await?;
        Ok(t.elapsed())
    })
    .await
}

/// The gRPC health check: a call that does no work, so what GetAgent costs
/// beyond it is the daemon's own.
pub async fn empty_call(
    transports: &mut [Transport],
    samples: usize,
) -> anyhow::Result<PerTransport> {
    interleaved(transports, samples, async |c: &mut Clients, _| {
        let t = Instant::now();
        c.health
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await?;
        Ok(t.elapsed())
    })
    .await
}

/// The first page of 1,000 public agents, `samples` times.
pub async fn list_agents(
    transports: &mut [Transport],
    samples: usize,
) -> anyhow::Result<PerTransport> {
    interleaved(transports, samples, async |c: &mut Clients, _| {
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
        let took = t.elapsed();
        anyhow::ensure!(!page.agents.is_empty(), "ListAgents returned no agents");
        Ok(took)
    })
    .await
}

/// What SendMessage costs, seen from a client, per transport.
#[derive(Debug)]
pub struct SendLatency {
    /// Until the call returned: the message is on disk and queued.
    pub acknowledged: PerTransport,
    /// Until the `run_started` event of that message arrived on a followed
    /// event stream. The turn starts inside the actor message that queues
    /// it, before the acknowledgement; an event is streamed only once it is
    /// durable, so this is the start as a watcher can know it.
    pub turn_seen: PerTransport,
}

/// Sends one message to each of `samples` distinct idle agents per
/// transport, one at a time, while following the event log over the same
/// transport.
pub async fn send_message(
    transports: &mut [Transport],
    ids: &[String],
    samples: usize,
) -> anyhow::Result<SendLatency> {
    let n = transports.len();
    let mut watches = Vec::with_capacity(n);
    for transport in transports.iter_mut() {
        let c = &mut transport.clients;
        let cursor = c
            .runtime
            .get_status(pb::GetStatusRequest {})
            .await?
            .into_inner()
            .event_cursor;
        let events = c
            .agents
            .watch_events(pb::WatchEventsRequest {
                after_cursor: cursor,
                follow: true,
                agent_id: String::new(),
            })
            .await?
            .into_inner();
        watches.push(events);
    }
    let mut latency = SendLatency {
        acknowledged: vec![Vec::with_capacity(samples); n],
        turn_seen: vec![Vec::with_capacity(samples); n],
    };
    // Each agent gets one message: a second one could queue behind the
    // first's turn.
    let rounds = samples.min(ids.len() / n);
    for round in 0..rounds {
        for k in 0..n {
            let t = if round % 2 == 0 { k } else { n - 1 - k };
            let request = pb::SendMessageRequest {
                agent_id: pick(ids, round * n + t).to_owned(),
                text: "ping".into(),
                dedupe_key: String::new(),
            };
            let started = Instant::now();
            let message_id = transports[t]
                .clients
                .agents
                .send_message(request)
                .await?
                .into_inner()
                .message_id;
            latency.acknowledged[t].push(started.elapsed());
            // Every watch sees every turn; each skips the others' events.
            loop {
                let event = tokio::time::timeout(Duration::from_secs(10), watches[t].next())
                    .await
                    .context("no run_started within 10 s")?
                    .context("the event stream ended")??;
                if event.kind == "run_started" && event.message_id == message_id {
                    latency.turn_seen[t].push(started.elapsed());
                    break;
                }
            }
        }
    }
    Ok(latency)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_samples_give_null_figures_not_zero() {
        let empty = percentiles(Vec::new());
        assert!(empty["p50"].is_null() && empty["p99"].is_null());
        let some = percentiles(vec![Duration::from_micros(7); 3]);
        assert_eq!(some["p50"].as_f64(), Some(7.0));
    }
}
