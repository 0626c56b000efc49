//! Inbound events: an inbound event (a webhook delivery, a schedule's
//! firing, a published event) is checked against its instance's ingress,
//! stored once per dedupe key, and queued for the instance's agent.
//!
//! Delivery is at-least-once from the sender's side and exactly-once to
//! the agent:
//! - the event is kept by an insert-if-absent on `<instance>\0<dedupe_key>`
//!   (the first one kept wins; a replay gets the first one's id back);
//! - it is then *always* routed, with the message dedupe key
//!   `event:<dedupe_key>`: a crash between storing and queuing is healed by
//!   the sender's retry, and a replay after queuing finds the message and
//!   queues nothing;
//! - `event_received` is logged in the same commit as the message, so the
//!   log shows an event exactly when its message is queued;
//! - the answer waits until both are on disk.
//!
//! A GitHub delivery's dedupe key is its `X-GitHub-Delivery`, a header its
//! signature does not cover (nor `X-GitHub-Event`): whoever captured a
//! signed body could send it again under new headers. So an instance's
//! GitHub webhook also remembers each body it took (its SHA-256, with the
//! event it came with) for its replay window
//! ([`InstanceSpec::replay_window_s`]): the same body again within it, under
//! whatever headers, is that first event again, answered and routed as a
//! duplicate of it.
//!
//! The agent reads the event's contract JSON ([`InboundEvent::to_json`]).
//! Its messages are at most [`MAX_MESSAGE_LEN`] bytes, and a payload may be
//! up to 1 MiB: a larger event is not refused (the sender did nothing
//! wrong, and a refusal would only make it retry), the agent gets a view
//! with the payload cut to a prefix, as a string, marked
//! `payload_truncated` with the payload's full size; the whole event stays
//! in the store under its id.

use std::sync::Arc;

use holarchy_composition::event::{
    EventError, InboundEvent, SOURCE_GENERIC, SOURCE_GITHUB, SOURCE_PUBLISH, SOURCE_SCHEDULE,
};
use holarchy_composition::manifest::{InstanceSpec, Provider};
use holarchy_supervision::bounds::{head as prefix, MAX_DEDUPE_KEY_LEN, MAX_MESSAGE_LEN};
use holarchy_supervision::{EventKind, InboundId, Provenance};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::compose::instance::{self, LookupError};
use crate::directory;
use crate::protocol::{DeliverError, NewMessage};
use crate::store::{ReplayGuard, StoreError};
use crate::Ctx;

pub mod scheduler;

/// An event the store holds and the agent has (or had) on its queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The id of the event as first stored: a replay answers the same id.
    pub event_id: String,
    /// An event with this dedupe key was already stored.
    pub duplicate: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum InboundError {
    #[error("no instance named `{0}`")]
    NotFound(String),
    /// The instance declares no ingress for this source (or provider).
    #[error("instance `{instance}` takes no {origin} events")]
    NotDeclared { instance: String, origin: String },
    /// The instance takes this source, but not this type: nothing is kept.
    #[error("instance `{instance}` does not take `{kind}` events")]
    Ignored { instance: String, kind: String },
    #[error(transparent)]
    Invalid(#[from] EventError),
    /// The instance's agent has ended or is not there: not worth a retry
    /// until the instance is applied again.
    #[error("{0}")]
    NoAgent(String),
    /// The agent could not take the message now (restarting, queue full,
    /// a timeout): the event is kept, and a retry delivers it.
    #[error("the instance's agent did not take the event: {0}")]
    Unavailable(DeliverError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<LookupError> for InboundError {
    fn from(err: LookupError) -> Self {
        match err {
            LookupError::NotFound(name) => InboundError::NotFound(name),
            LookupError::Store(err) => InboundError::Store(err),
            other => InboundError::NoAgent(other.to_string()),
        }
    }
}

/// How an instance's ingress treats an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Take,
    /// The source is declared, the type filtered out.
    Ignore,
    /// The instance declares no ingress for the event's source.
    Undeclared,
}

/// Whether `spec` takes `event`: a webhook event only through a webhook of
/// its provider, and only if that webhook lists no events or lists the
/// event's name (its type before the `.action`); a schedule's or a
/// publish's through an ingress of that source.
pub fn route(spec: &InstanceSpec, event: &InboundEvent) -> Route {
    let provider = match event.source.as_str() {
        SOURCE_GITHUB => Some(Provider::Github),
        SOURCE_GENERIC => Some(Provider::Generic),
        SOURCE_SCHEDULE | SOURCE_PUBLISH => None,
        _ => return Route::Undeclared,
    };
    match provider {
        Some(provider) => match spec.webhook(provider) {
            None => Route::Undeclared,
            Some((_, events)) => {
                let name = event.kind.split('.').next().unwrap_or_default();
                if events.is_empty() || events.iter().any(|e| e == name) {
                    Route::Take
                } else {
                    Route::Ignore
                }
            }
        },
        None if spec.has(&event.source) => Route::Take,
        None => Route::Undeclared,
    }
}

/// Stores `event` for instance `instance_name` (once per dedupe key) and
/// queues it for the instance's agent; answers once both are durable.
pub async fn publish(
    ctx: &Arc<Ctx>,
    instance_name: &str,
    event: InboundEvent,
) -> Result<Published, InboundError> {
    let view = instance::get(ctx.instances(), ctx.reads(), instance_name)?;
    match route(&view.record.spec, &event) {
        Route::Take => {}
        Route::Ignore => {
            return Err(InboundError::Ignored {
                instance: instance_name.to_owned(),
                kind: event.kind,
            })
        }
        Route::Undeclared => {
            return Err(InboundError::NotDeclared {
                instance: instance_name.to_owned(),
                origin: event.source,
            })
        }
    }
    let agent = view
        .agent
        .filter(|agent| agent.state.is_live())
        .ok_or_else(|| {
            InboundError::NoAgent(format!("instance `{instance_name}` has no live agent"))
        })?;
    let stored = match replay_window_ms(&view.record.spec, &event) {
        Some(window_ms) => {
            let digest = body_digest(&event);
            let guard = ReplayGuard {
                digest: &digest,
                window_ms,
            };
            ctx.inbound()
                .put_inbound_unless_replayed(instance_name, &event, guard)?
        }
        None => ctx.inbound().put_inbound(instance_name, &event)?,
    };
    let event = stored.event;
    let event_id: InboundId = event.id.parse().map_err(|_| StoreError::Corrupt {
        tree: "inbound",
        detail: format!("event id `{}`", event.id),
    })?;
    let entry = ctx.directory.get(agent.id).ok_or_else(|| {
        InboundError::Unavailable(DeliverError::Unavailable(
            "the agent is not running right now".into(),
        ))
    })?;
    let message = NewMessage {
        cause: None,
        provenance: Provenance::Event { event_id },
        body: message_text(&event),
        dedupe_key: Some(message_dedupe_key(&event.dedupe_key)),
        events: vec![EventKind::EventReceived {
            event_id,
            instance: instance_name.to_owned(),
            source: event.source.clone(),
            kind: event.kind.clone(),
            subject: event.subject.clone(),
            dedupe_key: event.dedupe_key.clone(),
        }],
    };
    // `deliver` answers once the message (or its earlier twin) is durable,
    // and the event was written before it: one flush covers both.
    directory::deliver(&entry.actor, message, ctx.config.call_timeout)
        .await
        .map_err(|err| match err {
            DeliverError::Store(err) => InboundError::Store(err),
            DeliverError::NotFound(_) | DeliverError::Refused(_) => {
                InboundError::NoAgent(err.to_string())
            }
            other => InboundError::Unavailable(other),
        })?;
    Ok(Published {
        event_id: event.id,
        duplicate: stored.duplicate,
    })
}

/// The replay window of the webhook `event` came through, in
/// milliseconds; `None` when there is none (not a GitHub event, or its
/// window is off).
fn replay_window_ms(spec: &InstanceSpec, event: &InboundEvent) -> Option<u64> {
    if event.source != SOURCE_GITHUB {
        return None;
    }
    spec.replay_window_s(Provider::Github)
        .map(|seconds| seconds.saturating_mul(1000))
}

/// What names a webhook body: the SHA-256 of the bytes its signature
/// covers (the payload is kept as those bytes).
fn body_digest(event: &InboundEvent) -> String {
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(event.payload.as_bytes()))
    )
}

/// The agent's message dedupe key for an event: `event:<dedupe_key>`, or,
/// past the message key's bound, `event:sha256:<hex of the key>`.
pub fn message_dedupe_key(dedupe_key: &str) -> String {
    let plain = format!("event:{dedupe_key}");
    if plain.len() <= MAX_DEDUPE_KEY_LEN {
        return plain;
    }
    format!("event:sha256:{}", hex::encode(Sha256::digest(dedupe_key)))
}

/// The text the agent reads: the event's contract JSON, whole when it fits
/// in a message, else with the payload cut (see the module's doc).
pub fn message_text(event: &InboundEvent) -> String {
    let whole = event.to_json().to_string();
    if whole.len() <= MAX_MESSAGE_LEN {
        return whole;
    }
    // Escaping can grow a prefix up to six times, so shrink until it fits.
    let mut room = MAX_MESSAGE_LEN.saturating_sub(1024);
    loop {
        let mut view = event.to_json();
        if let Value::Object(fields) = &mut view {
            fields.insert(
                "payload".into(),
                Value::String(prefix(&event.payload, room).to_owned()),
            );
            fields.insert("payload_truncated".into(), Value::Bool(true));
            fields.insert("payload_bytes".into(), Value::from(event.payload.len()));
        }
        let text = view.to_string();
        if text.len() <= MAX_MESSAGE_LEN || room == 0 {
            return text;
        }
        room /= 2;
    }
}

#[cfg(test)]
#[path = "inbound/tests.rs"]
mod tests;
