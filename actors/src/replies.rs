//! Replies as they are written: the text a model brain streams, handed to
//! whoever watches the agent (`WatchReplies`) and never stored; the
//! durable record of a turn stays its `replied` and `run_finished` events.
//!
//! One bounded broadcast channel per watched agent, made when its first
//! watcher comes and dropped once none is left, so an agent nobody
//! watches costs one atomic load per delta. A watcher that falls behind
//! loses deltas (its receiver says how many); a turn never waits for one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use holarchy_supervision::{AgentId, MessageId, RunId, RunOutcome};
use tokio::sync::broadcast;

use crate::secrets::Secrets;

/// Events one agent's channel holds for its slowest watcher.
pub const CAPACITY: usize = 256;
/// Bytes of text one delta carries at most.
pub const MAX_DELTA: usize = 64 * 1024;

/// One thing a watcher of an agent's replies is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyEvent {
    pub agent_id: AgentId,
    pub run_id: RunId,
    pub message_id: MessageId,
    /// The turn's step (1 for its first decision); 0 for the turn's end.
    pub step: u32,
    pub kind: ReplyKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyKind {
    /// Text the model wrote, in order: a step's deltas joined are its text.
    Delta(String),
    /// The step's text so far is void (its stream broke off and the step
    /// is asked again from the start, or it failed): why.
    Discarded(String),
    /// The turn ended and its end is durable: how, its reply as stored
    /// (the last reply of its steps, bounded and redacted), and the
    /// `run_finished` event's detail (why it failed, say).
    End {
        outcome: RunOutcome,
        reply: Option<String>,
        detail: String,
    },
}

/// Every agent's watchers.
#[derive(Debug, Default)]
pub struct Replies {
    channels: Mutex<HashMap<AgentId, broadcast::Sender<ReplyEvent>>>,
    /// Agents with a channel: zero (the usual case) skips the lock.
    watched: AtomicUsize,
}

impl Replies {
    /// Watches `agent_id`'s replies from now on.
    pub fn watch(&self, agent_id: AgentId) -> broadcast::Receiver<ReplyEvent> {
        let mut channels = self.lock();
        // Channels whose watchers all left go now rather than at their
        // agent's next delta, which may never come.
        channels.retain(|_, sender| sender.receiver_count() > 0);
        let receiver = channels
            .entry(agent_id)
            .or_insert_with(|| broadcast::channel(CAPACITY).0)
            .subscribe();
        self.watched.store(channels.len(), Ordering::Release);
        receiver
    }

    /// Whether anyone watches `agent_id` now.
    pub fn is_watched(&self, agent_id: AgentId) -> bool {
        if self.watched.load(Ordering::Acquire) == 0 {
            return false;
        }
        self.lock()
            .get(&agent_id)
            .is_some_and(|sender| sender.receiver_count() > 0)
    }

    /// Tells `event`'s agent's watchers, if it has any; never waits.
    pub fn publish(&self, event: ReplyEvent) {
        if self.watched.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut channels = self.lock();
        let agent_id = event.agent_id;
        let Some(sender) = channels.get(&agent_id) else {
            return;
        };
        if sender.send(event).is_err() {
            // Nobody is left to tell.
            channels.remove(&agent_id);
            self.watched.store(channels.len(), Ordering::Release);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<AgentId, broadcast::Sender<ReplyEvent>>> {
        self.channels.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Where one step's text goes as its brain reads it: through the stream
/// redactor (a secret or a trigger token may straddle two deltas), then to
/// the agent's watchers. The redactor runs whether or not anyone watches,
/// so a watcher that comes mid-step never sees the rest of a secret whose
/// start went by unwatched.
#[derive(Clone)]
pub struct ReplySink {
    hub: Arc<Replies>,
    secrets: Arc<Secrets>,
    agent_id: AgentId,
    run_id: RunId,
    message_id: MessageId,
    step: u32,
    /// Read and not passed on: what may still be the start of a secret.
    held: Vec<u8>,
    /// Text came since the step (or its last attempt) started.
    wrote: bool,
}

impl std::fmt::Debug for ReplySink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplySink")
            .field("agent_id", &self.agent_id)
            .field("run_id", &self.run_id)
            .field("step", &self.step)
            .finish_non_exhaustive()
    }
}

impl ReplySink {
    pub fn new(
        hub: Arc<Replies>,
        secrets: Arc<Secrets>,
        agent_id: AgentId,
        run_id: RunId,
        message_id: MessageId,
        step: u32,
    ) -> Self {
        Self {
            hub,
            secrets,
            agent_id,
            run_id,
            message_id,
            step,
            held: Vec::new(),
            wrote: false,
        }
    }

    /// More of the step's text.
    pub fn delta(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.wrote = true;
        self.held.extend_from_slice(text.as_bytes());
        let ready = self.secrets.redact_stream(&mut self.held, false);
        self.send_text(ready);
    }

    /// The step's text is whole: what was held back goes too.
    pub fn flush(&mut self) {
        let ready = self.secrets.redact_stream(&mut self.held, true);
        self.send_text(ready);
    }

    /// The step's text so far is void; watchers are told if there was
    /// any (an attempt refused before it wrote anything voids nothing).
    pub fn discard(&mut self, why: &str) {
        self.held.clear();
        if std::mem::take(&mut self.wrote) {
            self.send(ReplyKind::Discarded(why.to_owned()));
        }
    }

    fn send_text(&self, bytes: Vec<u8>) {
        if bytes.is_empty() {
            return;
        }
        // Whole characters in, whole characters out: the redactor cuts only
        // where a secret or a token starts.
        let text = String::from_utf8(bytes)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        // A server may send a whole answer as one piece: watchers get it in
        // pieces of at most MAX_DELTA bytes, whole characters each.
        let mut rest = text.as_str();
        while rest.len() > MAX_DELTA {
            let mut cut = MAX_DELTA;
            while !rest.is_char_boundary(cut) {
                cut -= 1;
            }
            self.send(ReplyKind::Delta(rest[..cut].to_owned()));
            rest = &rest[cut..];
        }
        self.send(ReplyKind::Delta(rest.to_owned()));
    }

    fn send(&self, kind: ReplyKind) {
        self.hub.publish(ReplyEvent {
            agent_id: self.agent_id,
            run_id: self.run_id,
            message_id: self.message_id,
            step: self.step,
            kind,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink(hub: &Arc<Replies>, secrets: &Arc<Secrets>, agent_id: AgentId) -> ReplySink {
        ReplySink::new(
            hub.clone(),
            secrets.clone(),
            agent_id,
            RunId::generate(),
            MessageId::generate(),
            1,
        )
    }

    fn texts(receiver: &mut broadcast::Receiver<ReplyEvent>) -> Vec<ReplyKind> {
        let mut out = Vec::new();
        while let Ok(event) = receiver.try_recv() {
            out.push(event.kind);
        }
        out
    }

    #[test]
    fn watchers_get_their_agents_deltas_redacted_across_deltas() {
        let hub = Arc::new(Replies::default());
        let secrets = Arc::new(Secrets::default());
        secrets.add("sk-0123456789-secret");
        let agent = AgentId::generate();
        let other = AgentId::generate();
        let mut mine = hub.watch(agent);
        let mut theirs = hub.watch(other);
        let mut writer = sink(&hub, &secrets, agent);
        for piece in [
            "the key is sk-0123",
            "456789-sec",
            "ret, and ",
            "htr_",
            "ab",
        ] {
            writer.delta(piece);
        }
        writer.flush();
        let got = texts(&mut mine);
        let joined: String = got
            .iter()
            .map(|k| match k {
                ReplyKind::Delta(text) => text.as_str(),
                _ => "",
            })
            .collect();
        assert_eq!(joined, "the key is <redacted>, and htr_ab");
        assert!(
            got.iter().all(|k| match k {
                ReplyKind::Delta(text) => !text.contains("0123"),
                _ => true,
            }),
            "no piece of the secret went out: {got:?}"
        );
        assert!(texts(&mut theirs).is_empty(), "another agent's watcher");
    }

    #[test]
    fn a_long_delta_goes_out_in_pieces_of_whole_characters() {
        let hub = Arc::new(Replies::default());
        let secrets = Arc::new(Secrets::default());
        let agent = AgentId::generate();
        let mut watcher = hub.watch(agent);
        let long = "\u{e9}".repeat(MAX_DELTA);
        let mut writer = sink(&hub, &secrets, agent);
        writer.delta(&long);
        writer.flush();
        let pieces: Vec<String> = texts(&mut watcher)
            .into_iter()
            .filter_map(|k| match k {
                ReplyKind::Delta(text) => Some(text),
                _ => None,
            })
            .collect();
        assert_eq!(pieces.len(), 2);
        assert!(pieces.iter().all(|p| p.len() <= MAX_DELTA));
        assert_eq!(pieces.concat(), long);
    }

    #[test]
    fn an_unwatched_agent_costs_no_channel_and_a_left_one_is_dropped() {
        let hub = Arc::new(Replies::default());
        let secrets = Arc::new(Secrets::default());
        let agent = AgentId::generate();
        assert!(!hub.is_watched(agent));
        sink(&hub, &secrets, agent).delta("nobody hears this");
        let watcher = hub.watch(agent);
        assert!(hub.is_watched(agent));
        drop(watcher);
        assert!(!hub.is_watched(agent));
        sink(&hub, &secrets, agent).delta("the channel goes");
        assert_eq!(hub.watched.load(Ordering::Acquire), 0);
    }

    #[test]
    fn a_lagging_watcher_loses_deltas_and_the_writer_never_waits() {
        let hub = Arc::new(Replies::default());
        let secrets = Arc::new(Secrets::default());
        let agent = AgentId::generate();
        let mut slow = hub.watch(agent);
        let mut writer = sink(&hub, &secrets, agent);
        for n in 0..CAPACITY + 10 {
            writer.delta(&format!("{n} "));
        }
        writer.discard("stream cut");
        assert!(matches!(
            slow.try_recv(),
            Err(broadcast::error::TryRecvError::Lagged(n)) if n > 0
        ));
        let rest = texts(&mut slow);
        assert_eq!(rest.len(), CAPACITY);
        assert_eq!(
            rest.last(),
            Some(&ReplyKind::Discarded("stream cut".into()))
        );
    }
}
