//! `holarchy export --since CURSOR DIR`: the controller logs of the
//! composition model, read from the event log over gRPC and appended to
//! three NDJSON files, one JSON object per line:
//!
//! - `events.ndjson`: every inbound event (`event_received`);
//! - `decisions.ndjson`: every turn's decision (`decided`);
//! - `actions.ndjson`: every tool call and its result (`tool_called`).
//!
//! Each line carries its event's `cursor`, so an export resumes where the
//! last one stopped (`--since` the cursor it printed) and a reader can drop
//! a line it already has. The log is streamed (the daemon reads it in
//! pages) and each line goes straight to its file: memory stays flat
//! whatever the log's length. Secrets were redacted before the events were
//! committed, and the daemon redacts an inbound event's stored payload
//! before it answers `GetInboundEvent`: no secret reaches the files.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use chrono::{DateTime, SecondsFormat};
use clap::Args;
use serde_json::{json, Map, Value};
use tokio_stream::StreamExt;

use super::output::{emit, Output};
use crate::api::pb;
use crate::client::Clients;

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Export the events after this cursor (0: the whole log); resume with
    /// the last cursor an export printed.
    #[arg(long, default_value_t = 0)]
    since: u64,
    /// The directory of the three files: created if missing; each file is
    /// appended to, so exports into one directory add up.
    dir: PathBuf,
}

/// One output file and how many lines this export added to it.
struct Sink {
    file: BufWriter<File>,
    path: PathBuf,
    lines: u64,
}

impl Sink {
    fn open(dir: &Path, name: &str) -> anyhow::Result<Self> {
        let path = dir.join(name);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        Ok(Self {
            file: BufWriter::new(file),
            path,
            lines: 0,
        })
    }

    fn write(&mut self, line: &Value) -> anyhow::Result<()> {
        let failed = || format!("cannot write {}", self.path.display());
        serde_json::to_writer(&mut self.file, line).with_context(failed)?;
        self.file.write_all(b"\n").with_context(failed)?;
        self.lines += 1;
        Ok(())
    }

    /// Written through to the disk: the cursor printed after this is one
    /// a resumed export may trust.
    fn finish(self) -> anyhow::Result<u64> {
        self.file
            .into_inner()
            .map_err(|err| err.into_error())
            .and_then(|file| file.sync_all())
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        Ok(self.lines)
    }
}

pub(super) async fn export(
    mut clients: Clients,
    args: &ExportArgs,
    out: &Output,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    let mut events = Sink::open(&args.dir, "events.ndjson")?;
    let mut decisions = Sink::open(&args.dir, "decisions.ndjson")?;
    let mut actions = Sink::open(&args.dir, "actions.ndjson")?;
    // Not followed: the stream ends at the end of the log.
    let mut stream = clients
        .agents
        .watch_events(pb::WatchEventsRequest {
            after_cursor: args.since,
            follow: false,
            agent_id: String::new(),
        })
        .await?
        .into_inner();
    let mut last = args.since;
    while let Some(event) = stream.next().await {
        let event = event?;
        last = last.max(event.cursor);
        match event.kind.as_str() {
            "event_received" => {
                let mut line = line(&event);
                contract(&mut clients, &mut line).await?;
                events.write(&line)?;
            }
            "decided" => decisions.write(&line(&event))?,
            "tool_called" => actions.write(&line(&event))?,
            _ => continue,
        }
    }
    let summary = json!({
        "events": events.finish()?,
        "decisions": decisions.finish()?,
        "actions": actions.finish()?,
        "last_cursor": last,
        "dir": args.dir.display().to_string(),
    });
    if out.json {
        emit(summary);
    } else {
        emit(format_args!(
            "exported {} events, {} decisions, {} actions to {} (last cursor {last}; resume with --since {last})",
            summary["events"], summary["decisions"], summary["actions"], args.dir.display()
        ));
    }
    Ok(())
}

/// Completes an inbound event's line with what the log does not carry
/// (its `scope`, its own `at` and its `payload`), from the event store.
/// An event no longer stored keeps the log's fields.
async fn contract(clients: &mut Clients, line: &mut Value) -> anyhow::Result<()> {
    let (Some(instance), Some(key)) = (
        line["instance"].as_str().map(str::to_owned),
        line["dedupe_key"].as_str().map(str::to_owned),
    ) else {
        return Ok(());
    };
    let request = pb::GetInboundEventRequest {
        instance,
        dedupe_key: key,
    };
    let stored = match clients.instances.get_inbound_event(request).await {
        Ok(found) => found.into_inner(),
        Err(status) if status.code() == tonic::Code::NotFound => return Ok(()),
        Err(status) => return Err(status.into()),
    };
    line["scope"] = json!(stored.scope);
    line["type"] = json!(stored.r#type);
    line["payload"] = serde_json::from_str(&stored.payload_json).unwrap_or(Value::Null);
    // The contract's `at` is when the event happened; `logged_at` when
    // the log recorded it.
    line["logged_at"] = line["at"].take();
    line["at"] = json!(rfc3339(stored.at_ms));
    line["at_ms"] = json!(stored.at_ms);
    Ok(())
}

/// One event's line: the fields of its detail, the event's place in the
/// log (`cursor`, `agent_id`, `at`, `at_ms`), and for an action its input
/// and output as JSON. An event the log cut (over its per-record budget)
/// has no whole detail: its line keeps what the event carries outside it,
/// and says how large it was.
fn line(event: &pb::Event) -> Value {
    let mut line = match serde_json::from_str::<Value>(&event.detail_json) {
        Ok(Value::Object(detail)) if event.truncated_from_bytes == 0 => detail,
        _ => {
            let mut kept = Map::new();
            kept.insert("run_id".into(), json!(event.run_id));
            kept.insert("text".into(), json!(event.text));
            kept.insert(
                "truncated_from_bytes".into(),
                json!(event.truncated_from_bytes),
            );
            kept
        }
    };
    // The inbound event's own id is the contract's `id`.
    if let Some(id) = line.remove("event_id") {
        line.insert("id".into(), id);
    }
    // Tool inputs and outputs are JSON text in the log: embedded here as
    // JSON, or kept as text when they are not whole JSON (an output the
    // runtime cut).
    for field in ["input", "output"] {
        if let Some(Value::String(text)) = line.get(field) {
            if let Ok(value) = serde_json::from_str::<Value>(text) {
                line.insert(field.into(), value);
            }
        }
    }
    line.insert("cursor".into(), json!(event.cursor));
    line.insert(
        "agent_id".into(),
        Some(event.agent_id.as_str())
            .filter(|id| !id.is_empty())
            .map_or(Value::Null, |id| json!(id)),
    );
    line.insert("at".into(), json!(rfc3339(event.at_ms)));
    line.insert("at_ms".into(), json!(event.at_ms));
    Value::Object(line)
}

/// `at_ms` as RFC 3339 in UTC with milliseconds, as the event contract
/// writes times.
fn rfc3339(at_ms: i64) -> Option<String> {
    DateTime::from_timestamp_millis(at_ms).map(|at| at.to_rfc3339_opts(SecondsFormat::Millis, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, detail: Value) -> pb::Event {
        pb::Event {
            cursor: 7,
            at_ms: 1_700_000_000_123,
            agent_id: "a1".into(),
            kind: kind.into(),
            detail_json: detail.to_string(),
            ..Default::default()
        }
    }

    #[test]
    fn an_action_embeds_its_input_and_output_as_json() {
        let got = line(&event(
            "tool_called",
            json!({"run_id": "r", "tool": "AgentGet", "input": "{\"x\":1}", "output": "cut {", "is_error": false}),
        ));
        assert_eq!(got["input"], json!({"x": 1}));
        assert_eq!(got["output"], json!("cut {"), "not JSON: kept as text");
        assert_eq!(got["cursor"], json!(7));
        assert_eq!(got["agent_id"], json!("a1"));
        assert_eq!(got["at"], json!("2023-11-14T22:13:20.123Z"));
    }

    #[test]
    fn an_inbound_event_is_named_by_its_id() {
        let got = line(&event(
            "event_received",
            json!({"event_id": "evt_1", "type": "issues.opened"}),
        ));
        assert_eq!(got["id"], json!("evt_1"));
        assert!(got.get("event_id").is_none());
    }

    #[test]
    fn a_cut_event_keeps_what_it_carries_outside_its_detail() {
        let mut cut = event("tool_called", json!({}));
        cut.detail_json = "{\"run_id\":\"r\",\"out".into();
        cut.truncated_from_bytes = 2_000_000;
        cut.text = "ExecCommand".into();
        let got = line(&cut);
        assert_eq!(got["text"], json!("ExecCommand"));
        assert_eq!(got["truncated_from_bytes"], json!(2_000_000));
        assert_eq!(got["cursor"], json!(7));
    }
}
