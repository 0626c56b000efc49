//! `holarchy agent send AGENT TEXT --follow`: sends the message, then
//! prints its turn's reply as the model writes it (`WatchReplies`), and
//! ends when the turn does. The watch opens before the message is sent, so
//! nothing of the turn is missed.
//!
//! What is printed is the reply as stored: text thrown away (a stream that
//! broke off and was asked again) is taken back by starting the step over
//! on a new line, and if what was printed is not the stored reply (the
//! watch fell behind, or a brain added a note) the stored reply follows
//! whole. Should the end never come (the watch fell behind past it, or the
//! agent was archived mid-turn), the message itself is read every second
//! and its reply printed once it is settled. With `--json`, each event is
//! one JSON object per line, ending with `{"kind": "end", ...}`.

use std::io::Write as _;
use std::time::Duration;

use anyhow::Context as _;
use holarchy_supervision::MessageId;
use serde_json::json;
use tokio_stream::StreamExt;

use super::output::{emit, Output};
use crate::api::pb;
use crate::client::Clients;

/// How often the message is read while no end has come.
const POLL: Duration = Duration::from_secs(1);

/// Sends `text` to `agent_id` and follows its turn to the end.
pub async fn send(
    mut clients: Clients,
    agent_id: String,
    request: pb::SendMessageRequest,
    out: &Output,
) -> anyhow::Result<()> {
    let mut replies = clients
        .agents
        .watch_replies(pb::WatchRepliesRequest {
            agent_id: agent_id.clone(),
        })
        .await?
        .into_inner();
    let sent = clients.agents.send_message(request).await?.into_inner();
    out.sent(&sent);
    let mut follow = Follow {
        json: out.json,
        message_id: sent.message_id.clone(),
        step: 0,
        printed: String::new(),
        lost: false,
    };
    // A dedupe key already used: that message's turn may be long over.
    if sent.duplicate {
        let message = message(&mut clients, &agent_id, &sent.message_id).await?;
        if is_settled(message.status) {
            return follow.settle(&message);
        }
    }
    let mut poll = tokio::time::interval(POLL);
    poll.tick().await;
    // A settled message seen by the poll: its end is given one more
    // second to arrive before the message's own reply stands in for it.
    let mut settled: Option<pb::Message> = None;
    loop {
        tokio::select! {
            item = replies.next() => match item {
                Some(event) => {
                    if let Some(end) = follow.event(event?) {
                        return follow.end(&end.outcome, end.reply.as_deref(), &end.detail);
                    }
                }
                None => {
                    // The daemon is going away: the message says how far it got.
                    let message = message(&mut clients, &agent_id, &sent.message_id).await?;
                    return follow.settle(&message);
                }
            },
            _ = poll.tick() => {
                if let Some(message) = settled.take() {
                    return follow.settle(&message);
                }
                let message = message(&mut clients, &agent_id, &sent.message_id).await?;
                if is_settled(message.status) {
                    settled = Some(message);
                }
            }
        }
    }
}

/// What the follower printed of the turn so far.
struct Follow {
    json: bool,
    message_id: String,
    /// The step whose text is being printed (0: none yet).
    step: u32,
    /// That step's text as printed.
    printed: String,
    /// Events were dropped: what was printed may not be the reply.
    lost: bool,
}

impl Follow {
    /// Prints one event of the watch; the end of this message's turn, if
    /// it is that.
    fn event(&mut self, event: pb::ReplyEvent) -> Option<pb::ReplyEnd> {
        let kind = event.kind?;
        if let pb::reply_event::Kind::Dropped(count) = kind {
            self.lost = true;
            if self.json {
                emit(json!({ "kind": "dropped", "count": count }));
            } else {
                eprintln!("holarchy: the watch fell behind; {count} reply event(s) dropped");
            }
            return None;
        }
        // Another message's turn (queued before this one).
        if event.message_id != self.message_id {
            return None;
        }
        match kind {
            pb::reply_event::Kind::Delta(text) => {
                if self.json {
                    emit(
                        json!({ "kind": "delta", "run_id": event.run_id, "step": event.step, "text": text }),
                    );
                    return None;
                }
                if event.step != self.step {
                    // A new step: its text starts on a line of its own.
                    if !self.printed.is_empty() {
                        raw("\n");
                    }
                    self.step = event.step;
                    self.printed.clear();
                }
                raw(&text);
                self.printed.push_str(&text);
                None
            }
            pb::reply_event::Kind::Discarded(why) => {
                if self.json {
                    emit(
                        json!({ "kind": "discarded", "run_id": event.run_id, "step": event.step, "reason": why }),
                    );
                } else if event.step == self.step && !self.printed.is_empty() {
                    raw("\n");
                    eprintln!(
                        "holarchy: the reply so far was thrown away ({}); it starts over",
                        super::output::escape::one_line(&why)
                    );
                    self.printed.clear();
                }
                None
            }
            pb::reply_event::Kind::End(end) => Some(end),
            pb::reply_event::Kind::Dropped(_) => None,
        }
    }

    /// Finishes with the turn's end: the rest of the reply, and whether
    /// the turn did what it was asked.
    fn end(&mut self, outcome: &str, reply: Option<&str>, detail: &str) -> anyhow::Result<()> {
        if self.json {
            emit(
                json!({ "kind": "end", "message_id": self.message_id, "outcome": outcome, "reply": reply, "detail": detail }),
            );
        } else {
            let reply = reply.unwrap_or_default();
            match reply.strip_prefix(self.printed.as_str()) {
                // What was printed is the reply so far: only the rest.
                Some(rest) if !self.lost => raw(rest),
                _ => {
                    if !self.printed.is_empty() {
                        raw("\n");
                    }
                    raw(reply);
                }
            }
            if !reply.is_empty() || !self.printed.is_empty() {
                raw("\n");
            }
        }
        match outcome {
            "completed" => Ok(()),
            _ if detail.is_empty() => Err(anyhow::anyhow!("the turn {outcome}")),
            _ => Err(anyhow::anyhow!("the turn {outcome}: {detail}")),
        }
    }

    /// Finishes from the message as stored, when no end came.
    fn settle(&mut self, message: &pb::Message) -> anyhow::Result<()> {
        let outcome = match pb::MessageStatus::try_from(message.status) {
            Ok(pb::MessageStatus::Handled) => "completed",
            Ok(pb::MessageStatus::Failed) => "failed",
            Ok(pb::MessageStatus::Aborted) => "aborted",
            Ok(pb::MessageStatus::Cancelled) => "cancelled",
            _ => "unfinished",
        };
        let reply = (!message.reply.is_empty()).then_some(message.reply.as_str());
        // Events may have been missed: print the stored reply whole unless
        // what was printed is all of its start.
        self.end(outcome, reply, "")
    }
}

fn is_settled(status: i32) -> bool {
    !matches!(
        pb::MessageStatus::try_from(status),
        Ok(pb::MessageStatus::Queued | pb::MessageStatus::Handling) | Err(_)
    )
}

/// The message `message_id` of `agent_id`: the one page after the id just
/// before it.
async fn message(
    clients: &mut Clients,
    agent_id: &str,
    message_id: &str,
) -> anyhow::Result<pb::Message> {
    let id: MessageId = message_id.parse().context("the daemon answered a bad id")?;
    let before = MessageId::from_u128(id.as_u128().saturating_sub(1));
    let page = clients
        .agents
        .list_messages(pb::ListMessagesRequest {
            agent_id: agent_id.to_owned(),
            page_size: 1,
            page_token: before.to_string(),
        })
        .await?
        .into_inner();
    page.messages
        .into_iter()
        .find(|m| m.message_id == message_id)
        .with_context(|| format!("message {message_id} not found"))
}

/// Writes text as it comes, without a line end, its control characters
/// escaped as [`emit`] does (a reply is the brain's text). A closed pipe
/// ends the program quietly.
fn raw(text: &str) {
    let mut stdout = std::io::stdout().lock();
    if let Err(err) = stdout
        .write_all(super::output::escape::block(text).as_bytes())
        .and_then(|()| stdout.flush())
    {
        if err.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("holarchy: cannot write output: {err}");
        std::process::exit(1);
    }
}
