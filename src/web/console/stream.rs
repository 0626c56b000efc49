//! An agent's events, followed live, as server-sent events
//! (`text/event-stream`): the gRPC `WatchEvents` stream with `follow`,
//! each event one `data:` line of JSON with its cursor as `id:`.
//!
//! Bounded: at most [`super::MAX_STREAMS`] at once (each also holds one of
//! the listener's connections), a comment every [`HEARTBEAT`] so a client
//! that left is noticed at the next write, and every stream ends when the
//! daemon stops (the watch ends then).

use std::time::Duration;

use futures::StreamExt as _;
use http_body_util::{BodyExt as _, StreamBody};
use hyper::body::{Bytes, Frame};
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Response, StatusCode};

use crate::api::pb;
use crate::api::pb::agent_service_server::AgentService as _;

use super::{assets, error, views, Body, Console, Refusal};

/// Events of the log a stream starts with when no cursor is given: the
/// agent's among the newest this many, then what comes.
const RECENT: u64 = 2000;
const HEARTBEAT: Duration = Duration::from_secs(15);

/// What one pull of the stream gives the body.
enum Next {
    Event(Result<pb::Event, tonic::Status>),
    Beat,
    End,
}

pub async fn events(console: &Console, agent_id: &str, after: Option<u64>) -> Response<Body> {
    let Ok(permit) = console.streams.clone().try_acquire_owned() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many event streams open; close one and try again",
        );
    };
    // The agent must exist: a typo is a 404, not an empty stream.
    let exists = console
        .agents
        .get_agent(super::req(pb::GetAgentRequest {
            agent: Some(pb::get_agent_request::Agent::AgentId(agent_id.to_owned())),
        }))
        .await;
    if let Err(status) = exists {
        return Refusal::of(&status).answer();
    }
    let after = after.unwrap_or_else(|| {
        console
            .store
            .event_watermark()
            .borrow()
            .saturating_sub(RECENT)
    });
    let watch = console
        .agents
        .watch_events(super::req(pb::WatchEventsRequest {
            after_cursor: after,
            follow: true,
            agent_id: agent_id.to_owned(),
        }))
        .await;
    let events = match watch {
        Ok(events) => events.into_inner(),
        Err(status) => return Refusal::of(&status).answer(),
    };
    let shutdown = console.shutdown.clone();
    let mut beat = tokio::time::interval(HEARTBEAT);
    beat.reset();
    let state = (events, beat, permit, false);
    let frames = futures::stream::unfold(state, move |(mut events, mut beat, permit, done)| {
        let mut shutdown = shutdown.clone();
        async move {
            if done {
                return None;
            }
            let next = tokio::select! {
                event = events.next() => event.map_or(Next::End, Next::Event),
                _ = beat.tick() => Next::Beat,
                _ = shutdown.wait_for(|stop| *stop) => Next::End,
            };
            let (text, done) = match next {
                Next::Event(Ok(event)) => (
                    format!("id: {}\ndata: {}\n\n", event.cursor, views::event(&event)),
                    false,
                ),
                Next::Event(Err(status)) => (
                    format!(
                        "event: error\ndata: {}\n\n",
                        status.message().replace('\n', " ")
                    ),
                    true,
                ),
                Next::Beat => (": still here\n\n".to_owned(), false),
                Next::End => return None,
            };
            let frame = Ok(Frame::data(Bytes::from(text)));
            Some((frame, (events, beat, permit, done)))
        }
    });
    let mut answer = Response::new(StreamBody::new(frames).boxed_unsync());
    let headers = answer.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    assets::harden(headers);
    answer
}
