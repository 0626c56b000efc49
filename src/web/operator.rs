//! The operators' routes on the HTTP listener, beside the webhooks:
//! `GET /healthz` (the process answers), `GET /readyz` (the runtime is
//! recovered and not shutting down) for load balancers, and
//! `GET /metrics` (see [`crate::metrics`]). None takes a token: they say
//! how much and how fast, never what an agent holds. A connection of the
//! listener's reserve (see [`super::connections`]) gets the first two only.

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Method, Response, StatusCode};

use super::console::Body;
use super::webhook::Answer;
use crate::metrics::Metrics;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

fn text(status: StatusCode, content_type: &'static str, body: String) -> Answer {
    let mut answer = Response::new(Full::new(Bytes::from(body)));
    *answer.status_mut() = status;
    answer.headers_mut().insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    answer
}

/// `/readyz` while the disk guard refuses new work (see `daemon::disk`).
pub fn not_ready(why: &str) -> Answer {
    text(
        StatusCode::SERVICE_UNAVAILABLE,
        "text/plain",
        format!("not ready: {why}\n"),
    )
}

/// A request that would write (a webhook, a console action) while the disk
/// guard holds new work: 503 with `Retry-After`, so its sender retries.
pub fn held(why: &str) -> Answer {
    let mut held = text(
        StatusCode::SERVICE_UNAVAILABLE,
        "text/plain",
        format!("not taking writes now: {why}\n"),
    );
    held.headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from_static("5"));
    held
}

/// The answer to an operator's route, or `None` for any other request.
pub fn answer(method: &Method, path: &str, metrics: &Metrics, stopping: bool) -> Option<Answer> {
    let route = matches!(path, "/healthz" | "/readyz" | "/metrics");
    if !route {
        return None;
    }
    if method != Method::GET && method != Method::HEAD {
        return Some(text(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "use GET\n".into(),
        ));
    }
    Some(match path {
        "/healthz" => text(StatusCode::OK, "text/plain", "ok\n".into()),
        "/readyz" if stopping => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            "stopping\n".into(),
        ),
        "/readyz" => text(StatusCode::OK, "text/plain", "ready\n".into()),
        _ => match metrics.encode() {
            None => text(
                StatusCode::NOT_FOUND,
                "text/plain",
                "metrics are off (serve --no-metrics)\n".into(),
            ),
            Some(Ok(body)) => text(StatusCode::OK, OPENMETRICS, body),
            Some(Err(_)) => text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain",
                "the metrics could not be written\n".into(),
            ),
        },
    })
}

/// The answer on a connection of the reserve: `/healthz` and `/readyz` as
/// ever (`operator` is what [`answer`] made of the request), anything else
/// 503 with the connection closed, so a sender retries on a connection of
/// the general pool.
pub fn health_or_busy(path: &str, operator: Option<Answer>) -> hyper::Response<Body> {
    let answer = match operator {
        Some(answer) if matches!(path, "/healthz" | "/readyz") => answer,
        _ => {
            let mut busy = text(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                "the listener is busy; try again\n".into(),
            );
            let headers = busy.headers_mut();
            headers.insert(RETRY_AFTER, HeaderValue::from_static("1"));
            headers.insert(CONNECTION, HeaderValue::from_static("close"));
            busy
        }
    };
    answer.map(|body| body.boxed_unsync())
}
