//! The figures of a `bench turns` run, as JSON and as a table. A figure
//! that was not measured is null in the JSON and `n/a` in the table, never
//! 0, so a broken measurement cannot pass for a cheap turn.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::drive::Sent;
use super::watch::Seen;
use crate::cli::bench::table::fixed;

/// What a process spent during the run.
#[derive(Debug, Clone, Copy)]
pub struct Spent {
    pub cpu_s: f64,
    pub write_bytes: Option<u64>,
    pub context_switches: Option<u64>,
}

/// The raw material of the report.
#[derive(Debug)]
pub struct Figures<'a> {
    /// Just before the first message was sent.
    pub t0: Instant,
    /// The same moment on the wall clock, in milliseconds since the epoch,
    /// to place the daemon's event stamps (`at_ms`) on this run's time
    /// line: right on the Unix socket (one host, one clock), skewed by the
    /// hosts' clock difference over TCP.
    pub t0_ms: i64,
    pub sent: &'a [Sent],
    pub seen: &'a Seen,
    /// The daemon's spending, when its `/proc` was readable.
    pub daemon: Option<Spent>,
    /// This process's, for comparison: the client shares the machine.
    pub client: Option<Spent>,
    /// Growth of the store's size on disk (the status's `store_bytes`);
    /// None if it shrank (sled reclaimed space during the run).
    pub store_growth: Option<u64>,
    /// The store's flushes and transactions during the run (status).
    pub store_work: (u64, u64),
}

/// The wall clock now, in milliseconds since the epoch.
pub fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// p50, p90, p99 and max of `samples` in microseconds; null figures for
/// no samples.
fn spread(mut samples: Vec<Duration>) -> Value {
    samples.sort();
    let at = |p: f64| -> Value {
        if samples.is_empty() {
            return Value::Null;
        }
        let i = ((samples.len() - 1) as f64 * p).round() as usize;
        json!(samples[i].as_secs_f64() * 1e6)
    };
    json!({ "p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": at(1.0), "samples": samples.len() })
}

/// `total / turns`, or null when the total is unknown or nothing ran.
fn per(total: Option<f64>, turns: usize) -> Value {
    match total {
        Some(t) if turns > 0 => json!(t / turns as f64),
        _ => Value::Null,
    }
}

impl Figures<'_> {
    pub fn to_json(&self) -> Value {
        let turns = self.seen.ended.len();
        let last_ack = self.sent.iter().map(|s| s.acknowledged).max();
        let last_end = self.seen.ended.values().map(|e| e.at).max();
        let rate = |n: usize, last: Option<Instant>| -> Value {
            match last {
                Some(last) if n > 0 => {
                    json!(n as f64 / last.duration_since(self.t0).as_secs_f64().max(1e-9))
                }
                _ => Value::Null,
            }
        };
        let acknowledged: Vec<Duration> = self.sent.iter().map(|s| s.acknowledged - s.at).collect();
        // From the send to the turn's end on the stream; a turn can be seen
        // ending before its caller sees the acknowledgement, as the
        // turn starts before the reply is sent.
        let to_end: Vec<Duration> = self
            .sent
            .iter()
            .filter_map(|s| {
                let end = self.seen.ended.get(&s.message_id)?;
                Some(end.at.saturating_duration_since(s.at))
            })
            .collect();
        // The same, to the daemon's stamp on the event: how long the turn
        // took to end, without the time the stream took to deliver it.
        // Stamps are whole milliseconds, so a figure can be up to 1 ms
        // short; below zero it reads 0.
        let since_t0_us = |ms: i64| (ms - self.t0_ms) as f64 * 1e3;
        let to_stamp: Vec<Duration> = self
            .sent
            .iter()
            .filter_map(|s| {
                let end = self.seen.ended.get(&s.message_id)?;
                let sent_us = s.at.duration_since(self.t0).as_secs_f64() * 1e6;
                let us = (since_t0_us(end.stamped_ms) - sent_us).max(0.0);
                Some(Duration::from_secs_f64(us / 1e6))
            })
            .collect();
        // How late the stream delivered each end after the daemon stamped
        // it.
        let stream_lag: Vec<Duration> = self
            .seen
            .ended
            .values()
            .map(|e| {
                let seen_us = e.at.duration_since(self.t0).as_secs_f64() * 1e6;
                let us = (seen_us - since_t0_us(e.stamped_ms)).max(0.0);
                Duration::from_secs_f64(us / 1e6)
            })
            .collect();
        let last_stamp = self.seen.ended.values().map(|e| e.stamped_ms).max();
        let handled_stamped_per_s = match last_stamp {
            Some(ms) if turns > 0 && ms > self.t0_ms => {
                json!(turns as f64 / (since_t0_us(ms) / 1e6))
            }
            _ => Value::Null,
        };
        let not_completed = self
            .seen
            .ended
            .values()
            .filter(|e| e.outcome != "completed")
            .count();
        let daemon = self.daemon;
        let client = self.client;
        json!({
            "acknowledged": self.sent.len(),
            "handled": turns,
            "not_completed": not_completed,
            "acknowledged_per_s": rate(self.sent.len(), last_ack),
            "handled_per_s": rate(turns, last_end),
            "handled_per_s_daemon_stamps": handled_stamped_per_s,
            "elapsed_s": last_end.map(|l| l.duration_since(self.t0).as_secs_f64()),
            "ack_latency_us": spread(acknowledged),
            "send_to_turn_end_us": spread(to_end),
            "send_to_turn_end_stamped_us": spread(to_stamp),
            "stream_lag_us": spread(stream_lag),
            "events_per_turn": per(Some(self.seen.events as f64), turns),
            "daemon_cpu_s": daemon.map(|d| d.cpu_s),
            "daemon_cpu_us_per_turn": per(daemon.map(|d| d.cpu_s * 1e6), turns),
            "daemon_cores_busy": daemon.zip(last_end).map(|(d, l)| d.cpu_s / l.duration_since(self.t0).as_secs_f64().max(1e-9)),
            "daemon_write_bytes_per_turn": per(daemon.and_then(|d| d.write_bytes).map(|b| b as f64), turns),
            "daemon_context_switches_per_turn": per(daemon.and_then(|d| d.context_switches).map(|n| n as f64), turns),
            "store_growth_bytes_per_turn": per(self.store_growth.map(|b| b as f64), turns),
            "client_cpu_us_per_turn": per(client.map(|c| c.cpu_s * 1e6), turns),
            "flushes_per_turn": per(Some(self.store_work.0 as f64), turns),
            "transactions_per_turn": per(Some(self.store_work.1 as f64), turns),
        })
    }
}

/// The figure name column.
const NAME: usize = 46;

fn row(name: &str, value: &Value, decimals: usize, unit: &str) {
    println!("{name:<NAME$} {} {unit}", fixed(value, 12, decimals));
}

fn latency(name: &str, v: &Value) {
    println!(
        "{name:<NAME$} {} {} {} {} us p50/p90/p99/max",
        fixed(&v["p50"], 8, 0),
        fixed(&v["p90"], 8, 0),
        fixed(&v["p99"], 8, 0),
        fixed(&v["max"], 8, 0),
    );
}

pub fn print(r: &Value) {
    println!(
        "turns: {} messages over {} agents, {} in flight, {} AgentGet per turn ({})",
        r["messages"], r["agents"], r["concurrency"], r["tool_calls"], r["transport"]
    );
    // (name, key, decimals, unit)
    let rates = [
        ("agents created / s", "create_per_s", 0, "/s"),
        ("acknowledged / s", "acknowledged_per_s", 0, "/s"),
        ("handled / s (run_finished seen)", "handled_per_s", 0, "/s"),
        (
            "handled / s (by the events' stamps)",
            "handled_per_s_daemon_stamps",
            0,
            "/s",
        ),
    ];
    for (name, key, decimals, unit) in rates {
        row(name, &r[key], decimals, unit);
    }
    let latencies = [
        ("SendMessage until acknowledged", "ack_latency_us"),
        ("SendMessage until run_finished seen", "send_to_turn_end_us"),
        (
            "SendMessage until run_finished stamped",
            "send_to_turn_end_stamped_us",
        ),
        ("run_finished stamped until seen", "stream_lag_us"),
    ];
    for (name, key) in latencies {
        latency(name, &r[key]);
    }
    let costs = [
        ("daemon CPU per turn", "daemon_cpu_us_per_turn", 1, "us"),
        ("daemon cores busy", "daemon_cores_busy", 2, ""),
        (
            "daemon context switches per turn",
            "daemon_context_switches_per_turn",
            1,
            "",
        ),
        (
            "daemon bytes written per turn (/proc io)",
            "daemon_write_bytes_per_turn",
            0,
            "B",
        ),
        (
            "store growth per turn (status store_bytes)",
            "store_growth_bytes_per_turn",
            0,
            "B",
        ),
        ("events per turn on the stream", "events_per_turn", 1, ""),
        ("store flushes per turn (status)", "flushes_per_turn", 2, ""),
        (
            "store transactions per turn (status)",
            "transactions_per_turn",
            2,
            "",
        ),
        (
            "client (this tool) CPU per turn",
            "client_cpu_us_per_turn",
            1,
            "us",
        ),
    ];
    for (name, key, decimals, unit) in costs {
        row(name, &r[key], decimals, unit);
    }
    println!(
        "{:<NAME$} {:>12}",
        "flushes per turn", "n/a (not in the daemon's status)"
    );
    if r["not_completed"].as_u64().unwrap_or(0) > 0 {
        println!(
            "{:<NAME$} {:>12}",
            "turns that ended not completed", r["not_completed"]
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_totals_are_null_never_zero() {
        assert!(per(None, 10).is_null());
        assert!(per(Some(5.0), 0).is_null());
        assert_eq!(per(Some(5.0), 10).as_f64(), Some(0.5));
        let none = spread(Vec::new());
        assert!(none["p50"].is_null() && none["max"].is_null());
        let some = spread((1..=100).map(Duration::from_micros).collect());
        assert_eq!(some["p90"].as_f64(), Some(90.0));
    }
}
