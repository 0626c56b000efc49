//! The runtime's own metrics, for `GET /metrics`: turns by brain kind and
//! outcome, their durations, tool calls by family, and the messages
//! waiting on every agent's queue. Every label comes from a fixed
//! vocabulary (brain kinds, outcomes, tool families); none names an agent,
//! so a million agents add no series.
//!
//! Recording is lock-free on the hot path once a series exists (a family
//! takes its read lock to find it), but for the hot set ([`activity`]):
//! one shard's lock for one insert, and only for agents with work.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use holarchy_supervision::AgentId;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

pub mod activity;

use activity::Activity;

/// One label of a fixed vocabulary.
type Label = (&'static str, &'static str);
type Timings = Family<[Label; 1], Histogram, fn() -> Histogram>;

/// Turns take from a millisecond (a script) to minutes (a model with
/// tools): 1 ms to about 9 minutes, doubling.
fn turn_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 20))
}

/// Tool calls: 100 us (a read) to about 7 minutes (a command), doubling.
fn tool_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 22))
}

#[derive(Debug)]
pub struct RuntimeMetrics {
    /// Off (`serve --no-metrics`): the Prometheus series count nothing;
    /// the totals and queues that `GetActivity` reads still do.
    on: bool,
    turns_started: Family<[Label; 1], Counter>,
    turns_finished: Family<[Label; 2], Counter>,
    turn_seconds: Timings,
    tool_calls: Family<[Label; 2], Counter>,
    tool_seconds: Timings,
    /// What agents' queues report to.
    queues: Arc<QueueMeters>,
    /// Turns since start, whatever the brain, for rates between reads.
    totals: TurnTotals,
}

/// What an agent's queue counts itself into: one pointer per agent.
#[derive(Debug, Default)]
pub struct QueueMeters {
    /// Messages waiting on agents' queues, summed over live agents.
    pub depth: Gauge,
    /// Agents with a queue or a recent turn.
    pub hot: Activity,
}

#[derive(Debug, Default)]
struct TurnTotals {
    started: AtomicU64,
    finished: AtomicU64,
    failed: AtomicU64,
}

/// Turns since start: started, finished (handled or failed), failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnCounts {
    pub started: u64,
    pub finished: u64,
    pub failed: u64,
}

/// `agent_queue_max`, read from the hot set at each scrape.
#[derive(Debug)]
struct QueueMax(Arc<QueueMeters>);

impl Collector for QueueMax {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let longest = i64::try_from(self.0.hot.queue_max()).unwrap_or(i64::MAX);
        let metric = ConstGauge::new(longest);
        metric.encode(encoder.encode_descriptor(
            "agent_queue_max",
            "Messages on the longest queue of a live agent",
            None,
            metric.metric_type(),
        )?)
    }
}

impl Default for RuntimeMetrics {
    fn default() -> Self {
        Self {
            on: true,
            turns_started: Family::default(),
            turns_finished: Family::default(),
            turn_seconds: Family::new_with_constructor(turn_buckets),
            tool_calls: Family::default(),
            tool_seconds: Family::new_with_constructor(tool_buckets),
            queues: Arc::default(),
            totals: TurnTotals::default(),
        }
    }
}

impl RuntimeMetrics {
    /// Metrics that count nothing, for a daemon that exports none.
    pub fn off() -> Self {
        Self {
            on: false,
            ..Self::default()
        }
    }

    /// Adds every family to `registry` (which names them `holarchy_...`).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "turns_started",
            "Turns started, by brain kind",
            self.turns_started.clone(),
        );
        registry.register(
            "turns_finished",
            "Turns finished, by brain kind and outcome (handled or failed)",
            self.turns_finished.clone(),
        );
        registry.register_with_unit(
            "turn_duration",
            "Time from a turn's start to its decision, by brain kind",
            Unit::Seconds,
            self.turn_seconds.clone(),
        );
        registry.register(
            "tool_calls",
            "Tool calls run by turns, by tool family and outcome (ok or error)",
            self.tool_calls.clone(),
        );
        registry.register_with_unit(
            "tool_call_duration",
            "Time one tool call took, by tool family",
            Unit::Seconds,
            self.tool_seconds.clone(),
        );
        registry.register(
            "queued_messages",
            "Messages waiting on agents' queues, summed over live agents",
            self.queues.depth.clone(),
        );
        registry.register_collector(Box::new(QueueMax(self.queues.clone())));
    }

    /// The totals and the hot set feed `GetActivity` (`holarchy top`), so
    /// they count even with the Prometheus series off.
    pub fn turn_started(&self, brain: &'static str, agent: AgentId) {
        self.totals.started.fetch_add(1, Ordering::Relaxed);
        self.queues.hot.turn_started(agent);
        if self.on {
            self.turns_started.get_or_create(&[("brain", brain)]).inc();
        }
    }

    /// `outcome`: handled, failed or aborted.
    pub fn turn_finished(&self, brain: &'static str, outcome: &'static str, took: Duration) {
        self.totals.finished.fetch_add(1, Ordering::Relaxed);
        if outcome == "failed" {
            self.totals.failed.fetch_add(1, Ordering::Relaxed);
        }
        if !self.on {
            return;
        }
        self.turns_finished
            .get_or_create(&[("brain", brain), ("outcome", outcome)])
            .inc();
        self.turn_seconds
            .get_or_create(&[("brain", brain)])
            .observe(took.as_secs_f64());
    }

    pub fn tool_called(&self, family: &'static str, is_error: bool, took: Duration) {
        if !self.on {
            return;
        }
        let outcome = if is_error { "error" } else { "ok" };
        self.tool_calls
            .get_or_create(&[("family", family), ("outcome", outcome)])
            .inc();
        self.tool_seconds
            .get_or_create(&[("family", family)])
            .observe(took.as_secs_f64());
    }

    /// What agents' queues count themselves into.
    pub fn queues(&self) -> &Arc<QueueMeters> {
        &self.queues
    }

    /// Agents with a queue or a recent turn.
    pub fn activity(&self) -> &Activity {
        &self.queues.hot
    }

    pub fn turn_counts(&self) -> TurnCounts {
        TurnCounts {
            started: self.totals.started.load(Ordering::Relaxed),
            finished: self.totals.finished.load(Ordering::Relaxed),
            failed: self.totals.failed.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(metrics: &RuntimeMetrics) -> String {
        let mut registry = Registry::with_prefix("holarchy");
        metrics.register(&mut registry);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("encodes");
        out
    }

    #[test]
    fn series_are_labelled_by_vocabulary_only() {
        let metrics = RuntimeMetrics::default();
        let agent = AgentId::generate();
        metrics.turn_started("scripted", agent);
        metrics.turn_finished("scripted", "handled", Duration::from_millis(3));
        metrics.turn_finished("scripted", "failed", Duration::from_millis(3));
        metrics.tool_called("memory", false, Duration::from_micros(300));
        metrics.queues().depth.inc_by(4);
        metrics.activity().queue_changed(agent, 4);
        let out = text(&metrics);
        for line in [
            "holarchy_turns_started_total{brain=\"scripted\"} 1",
            "holarchy_turns_finished_total{brain=\"scripted\",outcome=\"handled\"} 1",
            "holarchy_turns_finished_total{brain=\"scripted\",outcome=\"failed\"} 1",
            "holarchy_turn_duration_seconds_count{brain=\"scripted\"} 2",
            "holarchy_tool_calls_total{family=\"memory\",outcome=\"ok\"} 1",
            "holarchy_queued_messages 4",
            "holarchy_agent_queue_max 4",
        ] {
            assert!(out.contains(line), "{line} missing from:\n{out}");
        }
        assert!(out.ends_with("# EOF\n"), "{out}");
        assert_eq!(
            metrics.turn_counts(),
            TurnCounts {
                started: 1,
                finished: 2,
                failed: 1
            }
        );
    }
}
