//! The runtime's own metrics, for `GET /metrics`: turns by brain kind and
//! outcome, their durations, tool calls by family, and the messages
//! waiting on every agent's queue. Every label comes from a fixed
//! vocabulary (brain kinds, outcomes, tool families); none names an agent,
//! so a million agents add no series.
//!
//! Recording is lock-free on the hot path once a series exists (a family
//! takes its read lock to find it).

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

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
    /// Off (`serve --no-metrics`): nothing is counted on the hot paths.
    on: bool,
    turns_started: Family<[Label; 1], Counter>,
    turns_finished: Family<[Label; 2], Counter>,
    turn_seconds: Timings,
    tool_calls: Family<[Label; 2], Counter>,
    tool_seconds: Timings,
    /// Messages waiting on agents' queues, summed over live agents.
    queued: Gauge,
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
            queued: Gauge::default(),
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
            self.queued.clone(),
        );
    }

    pub fn turn_started(&self, brain: &'static str) {
        if !self.on {
            return;
        }
        self.turns_started.get_or_create(&[("brain", brain)]).inc();
    }

    /// `outcome`: handled, failed or aborted.
    pub fn turn_finished(&self, brain: &'static str, outcome: &'static str, took: Duration) {
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

    /// The gauge agents' queues count themselves into.
    pub fn queued(&self) -> &Gauge {
        &self.queued
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
        metrics.turn_started("scripted");
        metrics.turn_finished("scripted", "handled", Duration::from_millis(3));
        metrics.turn_finished("scripted", "failed", Duration::from_millis(3));
        metrics.tool_called("memory", false, Duration::from_micros(300));
        metrics.queued().inc_by(4);
        let out = text(&metrics);
        for line in [
            "holarchy_turns_started_total{brain=\"scripted\"} 1",
            "holarchy_turns_finished_total{brain=\"scripted\",outcome=\"handled\"} 1",
            "holarchy_turns_finished_total{brain=\"scripted\",outcome=\"failed\"} 1",
            "holarchy_turn_duration_seconds_count{brain=\"scripted\"} 2",
            "holarchy_tool_calls_total{family=\"memory\",outcome=\"ok\"} 1",
            "holarchy_queued_messages 4",
        ] {
            assert!(out.contains(line), "{line} missing from:\n{out}");
        }
        assert!(out.ends_with("# EOF\n"), "{out}");
    }
}
