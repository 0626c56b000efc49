//! One webhook delivery, `POST /ingress/<provider>/<instance>`, from the
//! request to its answer:
//! - 404: no such route or provider;
//! - 413: the body is over the limit (by `Content-Length`, unread, or
//!   while reading);
//! - 401: the signature is missing or wrong (`X-Hub-Signature-256` for
//!   `github`, `X-Holarchy-Signature-256` for `generic`, HMAC-SHA256 of
//!   the body with the secret in the daemon's variable `secret_env`, read
//!   at each delivery), or there is no such instance, or it declares no
//!   webhook of this provider: an unsigned request cannot tell an instance
//!   that exists from one that does not, so it cannot list them. The
//!   missing instance's body is checked against a random key of the
//!   process, so both take the same steps. Nothing is recorded;
//! - 400: a verified body or header the event contract refuses;
//! - 202 `{"event_id", "duplicate": false}`: stored and queued for the
//!   instance's agent, on disk;
//! - 200 `{"event_id", "duplicate": true}`: a replay; not delivered twice;
//! - 202 `{"ignored": true, "reason"}`: a verified event the instance's
//!   `events` list does not take; nothing is recorded (GitHub sends a
//!   `ping` when a hook is made, for one);
//! - 503: the agent could not take it now, or the runtime was slow: the
//!   event is kept if it got that far, and a retry delivers it.
//!
//! Nothing but the signature check runs before the body is verified, and
//! error bodies name no internals.

use holarchy_actors::inbound::InboundError;
use holarchy_actors::runtime::instance::InstanceError;
use holarchy_actors::runtime::Bounded;
use holarchy_actors::{now_ms, Runtime};
use holarchy_composition::event::{self, EventError};
use holarchy_composition::manifest::Provider;
use holarchy_composition::webhook;
use holarchy_supervision::InboundId;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;
use std::sync::OnceLock;

use tracing::{info, warn};

pub const GITHUB_SIGNATURE: &str = "x-hub-signature-256";
pub const GITHUB_EVENT: &str = "x-github-event";
pub const GITHUB_DELIVERY: &str = "x-github-delivery";
pub const GENERIC_SIGNATURE: &str = "x-holarchy-signature-256";

pub type Answer = Response<Full<Bytes>>;

/// Answers one request; never fails (every failure is an HTTP status).
pub async fn handle(runtime: &Runtime, max_body: usize, request: Request<Incoming>) -> Answer {
    let Some((provider, instance)) = route(request.uri().path()) else {
        return error(StatusCode::NOT_FOUND, "no such route");
    };
    if request.method() != Method::POST {
        return error(StatusCode::METHOD_NOT_ALLOWED, "use POST");
    }
    let Some(provider) = Provider::parse(provider) else {
        return error(StatusCode::NOT_FOUND, "no such provider");
    };
    let instance = instance.to_owned();
    let declared = match runtime.instance(&instance) {
        Ok(view) => view
            .record
            .spec
            .webhook(provider)
            .map(|(secret_env, _)| secret_env.to_owned()),
        Err(InstanceError::NotFound(_)) => None,
        Err(err) => {
            warn!(instance, error = %err, "webhook: instance unreadable");
            return error(StatusCode::SERVICE_UNAVAILABLE, "try again later");
        }
    };
    if declared_length(&request).is_some_and(|len| len > max_body as u64) {
        return too_large(max_body);
    }
    let (parts, body) = request.into_parts();
    let body = match Limited::new(body, max_body).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(err) if err.is::<http_body_util::LengthLimitError>() => return too_large(max_body),
        Err(_) => return error(StatusCode::BAD_REQUEST, "the body could not be read"),
    };
    // Read at each delivery, so a rotated secret takes effect at once.
    let secret = match &declared {
        Some(secret_env) => runtime.secret_var(secret_env).unwrap_or_default(),
        None => decoy_secret(),
    };
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
    let signature = match provider {
        Provider::Github => GITHUB_SIGNATURE,
        Provider::Generic => GENERIC_SIGNATURE,
    };
    let verified = webhook::verify(secret.as_bytes(), &body, header(signature));
    if let Err(err) = verified {
        info!(instance, provider = provider.name(), error = %err, "webhook refused");
        return unauthenticated();
    }
    if declared.is_none() {
        // Only a sender holding the process's random key gets here.
        info!(
            instance,
            provider = provider.name(),
            "webhook refused: no such instance webhook"
        );
        return unauthenticated();
    }
    let normalised = match provider {
        Provider::Github => match (header(GITHUB_EVENT), header(GITHUB_DELIVERY)) {
            (Some(kind), Some(delivery)) => {
                event::from_github(kind, delivery, &body, max_body, now_ms())
            }
            _ => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "X-GitHub-Event and X-GitHub-Delivery are required",
                )
            }
        },
        Provider::Generic => event::from_generic(&body, max_body, now_ms()),
    };
    let event = match normalised {
        Ok(event) => event,
        Err(EventError::PayloadTooLarge { .. }) => return too_large(max_body),
        Err(err) => return error(StatusCode::BAD_REQUEST, &err.to_string()),
    };
    match runtime.publish_event(instance.clone(), event).await {
        Ok(published) => {
            let status = if published.duplicate {
                StatusCode::OK
            } else {
                StatusCode::ACCEPTED
            };
            answer(
                status,
                json!({ "event_id": published.event_id, "duplicate": published.duplicate }),
            )
        }
        Err(Bounded::Failed(err)) => refused(&instance, err),
        Err(err @ (Bounded::TimedOut(_) | Bounded::Panicked(_))) => {
            warn!(instance, error = %err, "webhook: runtime slow");
            error(StatusCode::SERVICE_UNAVAILABLE, "try again later")
        }
    }
}

/// The one answer to a delivery that is not proven to be the instance's:
/// the same whether the instance exists or not.
fn unauthenticated() -> Answer {
    error(StatusCode::UNAUTHORIZED, "missing or wrong signature")
}

/// The key a delivery to a missing instance is checked against: random,
/// drawn once per process, never shown, so no signature matches it but
/// checking one costs what checking a real one costs.
fn decoy_secret() -> String {
    use std::io::Read as _;
    static DECOY: OnceLock<String> = OnceLock::new();
    DECOY
        .get_or_init(|| {
            let mut key = [0u8; 32];
            let read = std::fs::File::open("/dev/urandom")
                .and_then(|mut random| random.read_exact(&mut key));
            match read {
                Ok(()) => key.iter().map(|b| format!("{b:02x}")).collect(),
                // ULIDs carry 80 random bits each: still unknowable, and a
                // match would only answer 401 anyway (see `handle`).
                Err(_) => format!("{}{}", InboundId::generate(), InboundId::generate()),
            }
        })
        .clone()
}

/// The answer to a verified event the runtime did not take.
fn refused(instance: &str, err: InboundError) -> Answer {
    match err {
        InboundError::Ignored { .. } => answer(
            StatusCode::ACCEPTED,
            json!({ "ignored": true, "reason": err.to_string() }),
        ),
        InboundError::NotFound(_) | InboundError::NotDeclared { .. } => {
            error(StatusCode::NOT_FOUND, "no such instance webhook")
        }
        InboundError::Invalid(err) => error(StatusCode::BAD_REQUEST, &err.to_string()),
        InboundError::NoAgent(_) => {
            warn!(instance, error = %err, "webhook: the instance has no agent");
            error(StatusCode::CONFLICT, "the instance has no live agent")
        }
        InboundError::Unavailable(_) | InboundError::Store(_) => {
            warn!(instance, error = %err, "webhook not delivered");
            error(StatusCode::SERVICE_UNAVAILABLE, "try again later")
        }
    }
}

/// `(provider, instance)` from `/ingress/<provider>/<instance>`.
fn route(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/ingress/")?;
    let (provider, instance) = rest.split_once('/')?;
    let plain = |part: &str| !part.is_empty() && !part.contains('/');
    (plain(provider) && plain(instance)).then_some((provider, instance))
}

fn declared_length(request: &Request<Incoming>) -> Option<u64> {
    request
        .headers()
        .get(CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

fn too_large(max_body: usize) -> Answer {
    error(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("the body is over the limit of {max_body} bytes"),
    )
}

/// The answer when a request took longer than its bound.
pub fn timed_out() -> Answer {
    error(StatusCode::SERVICE_UNAVAILABLE, "the request took too long")
}

fn error(status: StatusCode, why: &str) -> Answer {
    answer(status, json!({ "error": why }))
}

fn answer(status: StatusCode, body: serde_json::Value) -> Answer {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::route;

    #[test]
    fn only_the_ingress_path_with_two_parts_routes() {
        assert_eq!(
            route("/ingress/github/maintainer"),
            Some(("github", "maintainer"))
        );
        assert_eq!(route("/ingress/github/"), None);
        assert_eq!(route("/ingress/github"), None);
        assert_eq!(route("/ingress//maintainer"), None);
        assert_eq!(route("/ingress/github/a/b"), None);
        assert_eq!(route("/other/github/maintainer"), None);
    }
}
