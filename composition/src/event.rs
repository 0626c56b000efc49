//! The inbound event contract: every event, whatever its source, becomes
//! `{id, source, type, scope, at, subject, dedupe_key, payload}` before it
//! is stored (once per dedupe key) and routed.
//!
//! One normaliser per source turns what arrived into an [`InboundEvent`] or
//! an [`EventError`] whose message can go back to the HTTP client or gRPC
//! caller as is. Every accepted event is within bounds:
//! - the payload is valid JSON text of at most the caller's limit
//!   ([`DEFAULT_MAX_PAYLOAD_BYTES`] unless configured);
//! - `type`, `scope`, `subject` and `dedupe_key` are at most
//!   [`MAX_FIELD_BYTES`] bytes and hold no control characters.
//!
//! Fields a sender *names* (a header, a generic body's `type`, a publish
//! call's arguments) are refused when too long: silently cutting a type or a
//! key would change routing or deduplication. Fields *derived* from a
//! provider's payload (GitHub's scope and subject) are only descriptive, so
//! they are truncated at a char boundary instead.
//!
//! `dedupe_key` is prefixed by its source (`github:`, `generic:`,
//! `schedule:`, `publish:`), so sources never collide. Two deliveries with
//! the same key are the same event; keeping the first is the store's job.

use chrono::{DateTime, SecondsFormat};
use holarchy_supervision::InboundId;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use thiserror::Error;

/// The payload limit when the operator configures none: 1 MiB.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 1 << 20;
/// The bound on `type`, `scope`, `subject` and `dedupe_key`, in bytes.
pub const MAX_FIELD_BYTES: usize = 256;

pub const SOURCE_GITHUB: &str = "webhook:github";
pub const SOURCE_GENERIC: &str = "webhook:generic";
pub const SOURCE_SCHEDULE: &str = "schedule";
pub const SOURCE_PUBLISH: &str = "publish";

/// One normalised event, as the store keeps it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct InboundEvent {
    /// A fresh [`InboundId`] (`evt_<ULID>`), unique per normalisation
    /// (not per dedupe key).
    pub id: String,
    pub source: String,
    /// The contract's `type`, e.g. `issues.opened`.
    #[serde(rename = "type")]
    pub kind: String,
    pub scope: String,
    /// When it arrived (or, for a schedule, the slot it is for), ms since
    /// the Unix epoch.
    pub at_ms: u64,
    pub subject: String,
    pub dedupe_key: String,
    /// Valid JSON text, kept as received.
    pub payload: String,
}

/// Why an event is refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EventError {
    #[error("the payload is {size} bytes, over the limit of {limit}")]
    PayloadTooLarge { size: usize, limit: usize },
    #[error("the payload is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("the payload must be a JSON object")]
    NotAnObject,
    #[error("the body's {0:?} field must be a string")]
    NotAString(&'static str),
    #[error("{0} must not be empty")]
    Empty(&'static str),
    #[error("{field} is {len} bytes, over the limit of {MAX_FIELD_BYTES}")]
    TooLong { field: &'static str, len: usize },
    #[error("{0} must not contain control characters")]
    ControlCharacters(&'static str),
    #[error("{0} must not contain whitespace")]
    Whitespace(&'static str),
}

impl InboundEvent {
    /// The contract's JSON view, for export and watchers: the contract's
    /// field names (`type`, not `kind`); `at` as RFC 3339 in UTC with
    /// milliseconds, plus `at_ms` for programs; the payload embedded as
    /// JSON, not as a string.
    pub fn to_json(&self) -> Value {
        let at = i64::try_from(self.at_ms)
            .ok()
            .and_then(DateTime::from_timestamp_millis)
            .map(|at| at.to_rfc3339_opts(SecondsFormat::Millis, true));
        // Stored payloads were checked on the way in; a string is only a
        // fallback that keeps the export whole if a record was damaged.
        let payload = serde_json::from_str(&self.payload)
            .unwrap_or_else(|_| Value::String(self.payload.clone()));
        serde_json::json!({
            "id": self.id,
            "source": self.source,
            "type": self.kind,
            "scope": self.scope,
            "at": at,
            "at_ms": self.at_ms,
            "subject": self.subject,
            "dedupe_key": self.dedupe_key,
            "payload": payload,
        })
    }
}

/// A GitHub delivery: `event` is `X-GitHub-Event`, `delivery` is
/// `X-GitHub-Delivery`, `body` the (already verified) raw body.
///
/// `type` is the event name, with `.action` when the body has a string
/// `action` (`issues.opened`); `scope` is `repository.full_name`, else
/// `github`; `subject` is `pull_request#N` or `issue#N`, else the sender's
/// login, else the event name; `dedupe_key` is `github:<delivery>`.
pub fn from_github(
    event: &str,
    delivery: &str,
    body: &[u8],
    max_payload: usize,
    now_ms: u64,
) -> Result<InboundEvent, EventError> {
    named_identifier("the X-GitHub-Event header", event)?;
    named_text("the X-GitHub-Delivery header", delivery, false)?;
    let dedupe_key = format!("github:{delivery}");
    named_text("the X-GitHub-Delivery header", &dedupe_key, false)?;
    let (payload, object) = json_object(body, max_payload)?;

    let kind = match object.get("action").and_then(Value::as_str) {
        Some(action) if !action.is_empty() => format!("{event}.{action}"),
        _ => event.to_string(),
    };
    named_identifier("type", &kind)?;
    let scope = object
        .get("repository")
        .and_then(|repository| repository.get("full_name"))
        .and_then(Value::as_str)
        .map(derived)
        .filter(|scope| !scope.is_empty())
        .unwrap_or_else(|| "github".to_string());
    let subject = github_subject(&object).unwrap_or_else(|| event.to_string());

    Ok(InboundEvent {
        id: fresh_id(),
        source: SOURCE_GITHUB.to_string(),
        kind,
        scope,
        at_ms: now_ms,
        subject,
        dedupe_key,
        payload,
    })
}

fn github_subject(object: &Map<String, Value>) -> Option<String> {
    let numbered = ["pull_request", "issue"].into_iter().find_map(|field| {
        let number = object.get(field)?.get("number")?.as_u64()?;
        Some(format!("{field}#{number}"))
    });
    numbered.or_else(|| {
        let login = object.get("sender")?.get("login")?.as_str()?;
        Some(derived(login)).filter(|login| !login.is_empty())
    })
}

/// A generic webhook: a JSON object with optional string fields `type`
/// (default `generic`), `scope` (default `generic`), `subject` (default:
/// the type) and `dedupe_key`. The key is the body's, else
/// `sha256:<hex of the body>` (so a resent identical body is one event),
/// prefixed with `generic:`. Only what the signature covers makes the key:
/// a delivery header could be changed by whoever replays a captured body.
/// A `null` field counts as absent.
pub fn from_generic(
    body: &[u8],
    max_payload: usize,
    now_ms: u64,
) -> Result<InboundEvent, EventError> {
    let (payload, object) = json_object(body, max_payload)?;
    let field = |name: &'static str| match object.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(value)) => Ok(Some(value.as_str())),
        Some(_) => Err(EventError::NotAString(name)),
    };
    let kind = field("type")?.unwrap_or("generic").to_string();
    named_identifier("type", &kind)?;
    let scope = field("scope")?.unwrap_or("generic").to_string();
    named_text("scope", &scope, true)?;
    let subject = field("subject")?.unwrap_or(&kind).to_string();
    named_text("subject", &subject, true)?;
    let key = match field("dedupe_key")? {
        Some(key) => key.to_string(),
        None => format!("sha256:{}", hex::encode(Sha256::digest(body))),
    };
    named_text("dedupe_key", &key, false)?;
    let dedupe_key = format!("generic:{key}");
    named_text("dedupe_key", &dedupe_key, false)?;

    Ok(InboundEvent {
        id: fresh_id(),
        source: SOURCE_GENERIC.to_string(),
        kind,
        scope,
        at_ms: now_ms,
        subject,
        dedupe_key,
        payload,
    })
}

/// The event for slot `slot_ms` of schedule number `index` of `instance`.
/// The key names the slot, so a slot fired twice (say, before and after a
/// crash) is one event. `payload_json` is any JSON value, at most
/// [`DEFAULT_MAX_PAYLOAD_BYTES`].
pub fn from_schedule(
    instance: &str,
    schedule: &str,
    slot_ms: u64,
    payload_json: &str,
) -> Result<InboundEvent, EventError> {
    let payload = json_text(payload_json, DEFAULT_MAX_PAYLOAD_BYTES)?;
    named_text("instance", instance, false)?;
    let dedupe_key = format!("schedule:{instance}:{schedule}:{slot_ms}");
    named_text("dedupe_key", &dedupe_key, false)?;
    Ok(InboundEvent {
        id: fresh_id(),
        source: SOURCE_SCHEDULE.to_string(),
        kind: "schedule".to_string(),
        scope: instance.to_string(),
        at_ms: slot_ms,
        subject: format!("schedule#{schedule}"),
        dedupe_key,
        payload,
    })
}

/// The event a program publishes to `instance` over gRPC. The caller's
/// `dedupe_key` is required (programs retry; the key makes a retry
/// harmless) and is scoped to the instance: `publish:<instance>:<key>`.
/// An empty `scope` means the instance. `payload_json` is any JSON value,
/// at most [`DEFAULT_MAX_PAYLOAD_BYTES`]; an empty string is not JSON.
pub fn from_publish(
    instance: &str,
    kind: &str,
    subject: &str,
    scope: &str,
    dedupe_key: &str,
    payload_json: &str,
    now_ms: u64,
) -> Result<InboundEvent, EventError> {
    named_identifier("type", kind)?;
    named_text("subject", subject, true)?;
    named_text("scope", scope, true)?;
    named_text("dedupe_key", dedupe_key, false)?;
    named_text("instance", instance, false)?;
    let payload = json_text(payload_json, DEFAULT_MAX_PAYLOAD_BYTES)?;
    let prefixed = format!("publish:{instance}:{dedupe_key}");
    named_text("dedupe_key", &prefixed, false)?;
    let scope = if scope.is_empty() { instance } else { scope };
    Ok(InboundEvent {
        id: fresh_id(),
        source: SOURCE_PUBLISH.to_string(),
        kind: kind.to_string(),
        scope: scope.to_string(),
        at_ms: now_ms,
        subject: subject.to_string(),
        dedupe_key: prefixed,
        payload,
    })
}

fn fresh_id() -> String {
    InboundId::generate().to_string()
}

/// The body as text, and as a JSON object.
fn json_object(body: &[u8], limit: usize) -> Result<(String, Map<String, Value>), EventError> {
    if body.len() > limit {
        return Err(EventError::PayloadTooLarge {
            size: body.len(),
            limit,
        });
    }
    let text = std::str::from_utf8(body)
        .map_err(|_| EventError::InvalidJson("the body is not UTF-8".to_string()))?;
    match serde_json::from_str(text) {
        Ok(Value::Object(object)) => Ok((text.to_string(), object)),
        Ok(_) => Err(EventError::NotAnObject),
        Err(error) => Err(EventError::InvalidJson(error.to_string())),
    }
}

/// `text` checked to be one JSON value within `limit`.
fn json_text(text: &str, limit: usize) -> Result<String, EventError> {
    if text.len() > limit {
        return Err(EventError::PayloadTooLarge {
            size: text.len(),
            limit,
        });
    }
    serde_json::from_str::<serde::de::IgnoredAny>(text)
        .map_err(|error| EventError::InvalidJson(error.to_string()))?;
    Ok(text.to_string())
}

/// A name that routing matches on: non-empty, bounded, one token.
fn named_identifier(field: &'static str, value: &str) -> Result<(), EventError> {
    named_text(field, value, false)?;
    if value.chars().any(char::is_whitespace) {
        return Err(EventError::Whitespace(field));
    }
    Ok(())
}

/// A value a sender chose: bounded, printable, non-empty unless allowed.
fn named_text(field: &'static str, value: &str, may_be_empty: bool) -> Result<(), EventError> {
    if value.is_empty() && !may_be_empty {
        return Err(EventError::Empty(field));
    }
    if value.len() > MAX_FIELD_BYTES {
        return Err(EventError::TooLong {
            field,
            len: value.len(),
        });
    }
    if value.chars().any(char::is_control) {
        return Err(EventError::ControlCharacters(field));
    }
    Ok(())
}

/// A descriptive value taken from a payload: control characters dropped,
/// cut to [`MAX_FIELD_BYTES`] at a char boundary.
fn derived(value: &str) -> String {
    let mut out = String::new();
    for c in value.chars().filter(|c| !c.is_control()) {
        if out.len() + c.len_utf8() > MAX_FIELD_BYTES {
            break;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
#[path = "event/tests.rs"]
mod tests;
