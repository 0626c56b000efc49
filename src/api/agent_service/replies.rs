//! The `WatchReplies` stream: an agent's replies as its brain writes them,
//! from the runtime's in-memory broadcast (nothing here is stored). A
//! watcher that falls behind is told how many events it lost; it never
//! holds a turn back. The stream ends when the client leaves or the
//! daemon shuts down.

use holarchy_actors::replies::{ReplyEvent, ReplyKind};
use holarchy_supervision::AgentId;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::watch;
use tonic::Status;

use crate::api::pb;

/// The events `receiver` gets, as the API tells them.
pub(super) fn stream(
    agent_id: AgentId,
    receiver: broadcast::Receiver<ReplyEvent>,
    shutdown: watch::Receiver<bool>,
) -> impl futures::Stream<Item = Result<pb::ReplyEvent, Status>> + Send {
    futures::stream::unfold(
        (receiver, shutdown),
        move |(mut receiver, mut shutdown)| async move {
            let item = tokio::select! {
                got = receiver.recv() => match got {
                    Ok(event) => convert(event),
                    Err(RecvError::Lagged(lost)) => pb::ReplyEvent {
                        agent_id: agent_id.to_string(),
                        kind: Some(pb::reply_event::Kind::Dropped(lost)),
                        ..Default::default()
                    },
                    Err(RecvError::Closed) => return None,
                },
                _ = shutdown.wait_for(|stop| *stop) => return None,
            };
            Some((Ok(item), (receiver, shutdown)))
        },
    )
}

fn convert(event: ReplyEvent) -> pb::ReplyEvent {
    let kind = match event.kind {
        ReplyKind::Delta(text) => pb::reply_event::Kind::Delta(text),
        ReplyKind::Discarded(why) => pb::reply_event::Kind::Discarded(why),
        ReplyKind::End {
            outcome,
            reply,
            detail,
        } => pb::reply_event::Kind::End(pb::ReplyEnd {
            outcome: outcome.name().to_owned(),
            reply,
            detail,
        }),
    };
    pb::ReplyEvent {
        agent_id: event.agent_id.to_string(),
        run_id: event.run_id.to_string(),
        message_id: event.message_id.to_string(),
        step: event.step,
        kind: Some(kind),
    }
}
