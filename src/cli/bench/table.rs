//! The bench's human-readable table. A figure missing from the report
//! (null: not measured, or not reported by the daemon) prints as `n/a`,
//! never as 0, so a broken measurement cannot pass for a fast one. With
//! `--compare-tcp`, every latency has a Unix socket and a TCP column and
//! their ratio.

use serde_json::Value;

/// The figure name column.
const NAME: usize = 48;

/// `v` with `decimals`, right-aligned in `width`, or `n/a`.
pub(super) fn fixed(v: &Value, width: usize, decimals: usize) -> String {
    match v.as_f64() {
        Some(x) => format!("{x:>width$.decimals$}"),
        None => format!("{:>width$}", "n/a"),
    }
}

/// `a / b` as `1.07x`, or `n/a` when either is missing.
fn ratio(a: &Value, b: &Value) -> String {
    match (a.as_f64(), b.as_f64()) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:>8.2}x", a / b),
        _ => format!("{:>9}", "n/a"),
    }
}

/// Prints latency rows: one transport, or two side by side.
struct Latencies<'a> {
    /// The other transport's figures (`report["tcp"]`), when compared.
    compared: Option<&'a Value>,
}

impl Latencies<'_> {
    fn header(&self) {
        if self.compared.is_some() {
            println!(
                "{:<NAME$} {:>10} {:>10} {:>9} {:>10} {:>10} {:>9}",
                "latency (us)",
                "unix p50",
                "tcp p50",
                "tcp/unix",
                "unix p99",
                "tcp p99",
                "tcp/unix"
            );
        }
    }

    /// `ours` is the figure in the main report, `path` where the compared
    /// transport keeps the same figure.
    fn row(&self, name: &str, ours: &Value, theirs: impl Fn(&Value) -> &Value) {
        match self.compared {
            None => println!(
                "{name:<NAME$} {} us p50 {} us p99",
                fixed(&ours["p50"], 9, 0),
                fixed(&ours["p99"], 9, 0)
            ),
            Some(compared) => {
                let tcp = theirs(compared);
                println!(
                    "{name:<NAME$} {} {} {} {} {} {}",
                    fixed(&ours["p50"], 10, 0),
                    fixed(&tcp["p50"], 10, 0),
                    ratio(&tcp["p50"], &ours["p50"]),
                    fixed(&ours["p99"], 10, 0),
                    fixed(&tcp["p99"], 10, 0),
                    ratio(&tcp["p99"], &ours["p99"]),
                )
            }
        }
    }
}

pub fn print(report: &Value) {
    println!("{:<NAME$} {:>12}", "figure", "value");
    println!(
        "{:<NAME$} {}",
        "durable creations / s (public)",
        fixed(&report["create_per_s"], 12, 0)
    );
    if report["tree_fanout"].as_u64().unwrap_or(0) > 0 {
        println!(
            "{:<NAME$} {}",
            "tree agents (public + private) up / s",
            fixed(&report["tree_agents_per_s"], 12, 0)
        );
    }
    println!(
        "{:<NAME$} {} B",
        format!(
            "daemon RSS per idle agent ({} agents)",
            report["total_agents"]
        ),
        fixed(&report["daemon_rss_per_agent_bytes"], 10, 0)
    );
    let compared = match report["transport"].as_str() {
        Some("unix") => Some(&report["tcp"]).filter(|v| v.is_object()),
        _ => None,
    };
    let rows = Latencies { compared };
    rows.header();
    for (i, point) in report["checkpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let n = &point["agents"];
        rows.row(
            &format!("GetAgent at {n} agents"),
            &point["get_agent_us"],
            |c| &c["checkpoints"][i]["get_agent_us"],
        );
        rows.row(
            &format!("ListAgents (page of 1,000) at {n} agents"),
            &point["list_agents_1000_us"],
            |c| &c["checkpoints"][i]["list_agents_1000_us"],
        );
    }
    for (name, key) in [
        (
            "an empty call (health check): the transport",
            "empty_call_us",
        ),
        ("SendMessage, until acknowledged", "send_message_ack_us"),
        (
            "SendMessage, until the turn is seen starting",
            "send_message_to_turn_seen_us",
        ),
    ] {
        rows.row(name, &report[key], |c| &c[key]);
    }
    if let Some(archive) = report["archive"].as_object() {
        println!(
            "{:<NAME$} {}",
            "durable archives / s",
            fixed(&archive["archive_per_s"], 12, 0)
        );
        let mb = archive["daemon_rss_bytes"].as_f64().map(|b| b / 1e6);
        println!(
            "{:<NAME$} {} MB",
            format!("daemon RSS, {} left after archiving", archive["left"]),
            fixed(&mb.into(), 10, 0)
        );
        println!(
            "{:<NAME$} {}",
            format!("  vs RSS when {} had been created", archive["left"]),
            ratio(
                &archive["daemon_rss_bytes"],
                &archive["daemon_rss_bytes_when_as_many"]
            )
        );
    }
    if let Some(restart) = report["restart"].as_object() {
        println!(
            "{:<NAME$} {} s",
            format!(
                "kill -9 to answering with {} agents",
                restart["recovered_agents"]
            ),
            fixed(&restart["restart_s"], 10, 3)
        );
        println!(
            "{:<NAME$} {} s",
            "  of which the killed daemon's exit (its lock held)",
            fixed(&restart["lock_free_s"], 10, 3)
        );
        // The daemon that answers now is the bench's, started in the
        // background: say where it is, so it can be stopped or read.
        println!(
            "the daemon now serving: pid {}, logging to {}",
            restart["pid"],
            restart["log"].as_str().unwrap_or("?")
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_missing_figure_reads_n_a_never_zero() {
        assert_eq!(fixed(&Value::Null, 5, 0), "  n/a");
        assert_eq!(fixed(&json!(0.0), 5, 0), "    0");
        assert_eq!(fixed(&json!(12.4), 5, 1), " 12.4");
        assert_eq!(ratio(&json!(3.0), &Value::Null).trim(), "n/a");
        assert_eq!(ratio(&json!(3.0), &json!(0.0)).trim(), "n/a");
        assert_eq!(ratio(&json!(3.0), &json!(2.0)).trim(), "1.50x");
    }
}
