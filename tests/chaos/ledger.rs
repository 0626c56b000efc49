//! What the daemon acknowledged, as the chaos run's clients saw it: the
//! ground truth every check after a restart is held against. A call that
//! failed (the daemon died under it) acknowledged nothing, so its effect
//! may or may not be there: the ledger marks what it touched uncertain
//! rather than guessing.

use std::collections::{BTreeMap, BTreeSet};

/// One agent a client created and was told so.
#[derive(Debug, Clone, Default)]
pub struct Tracked {
    pub name: String,
    /// `Some(true)`: an archive was acknowledged; `None`: one was tried
    /// and its answer lost, so either state is right.
    pub archived: Option<bool>,
    /// As `archived`, for pause and resume.
    pub paused: Option<bool>,
    /// Acknowledged message ids, oldest first.
    pub messages: Vec<String>,
}

impl Tracked {
    fn new(name: String) -> Self {
        Self {
            name,
            archived: Some(false),
            paused: Some(false),
            messages: Vec::new(),
        }
    }

    /// Surely live and not archived: messages may be sent to it.
    pub fn live(&self) -> bool {
        self.archived == Some(false)
    }
}

/// An operator's note the daemon acknowledged: a search of its agent's
/// memory for `word` (in no other note) must find it.
#[derive(Debug, Clone)]
pub struct Note {
    pub agent: String,
    pub note_id: String,
    pub word: String,
}

#[derive(Debug, Default)]
pub struct Ledger {
    pub agents: BTreeMap<String, Tracked>,
    /// (agent id, dedupe key) -> the one message id the key names.
    pub dedupe: BTreeMap<(String, String), String>,
    /// Agents a call touched (answered or not) since the last checks:
    /// those are checked after each restart, the rest a sample at a time.
    pub touched: BTreeSet<String>,
    /// Acknowledged notes, in the order they were acknowledged.
    pub notes: Vec<Note>,
    /// Acknowledged operations by kind.
    pub acked: BTreeMap<&'static str, u64>,
    /// Operations whose answer was lost, by kind.
    pub lost: BTreeMap<&'static str, u64>,
    /// Broken promises seen by a client as they happened (a dedupe key
    /// answered with two ids, say).
    pub violations: Vec<String>,
}

impl Ledger {
    pub fn ack(&mut self, kind: &'static str) {
        *self.acked.entry(kind).or_default() += 1;
    }

    pub fn unknown(&mut self, kind: &'static str) {
        *self.lost.entry(kind).or_default() += 1;
    }

    pub fn created(&mut self, agent_id: String, name: String) {
        self.touched.insert(agent_id.clone());
        self.agents.insert(agent_id, Tracked::new(name));
    }

    pub fn sent(&mut self, agent_id: &str, message_id: String) {
        self.touched.insert(agent_id.to_owned());
        if let Some(agent) = self.agents.get_mut(agent_id) {
            agent.messages.push(message_id);
        }
    }

    /// A dedupe-keyed send acknowledged: the first fixes the key's id, a
    /// later one must name the same id.
    pub fn sent_once(&mut self, agent_id: &str, key: &str, message_id: String) {
        match self.dedupe.get(&(agent_id.to_owned(), key.to_owned())) {
            Some(first) if *first != message_id => self.violations.push(format!(
                "dedupe key {key} of {agent_id} answered {message_id} after {first}"
            )),
            Some(_) => {}
            None => {
                self.dedupe
                    .insert((agent_id.to_owned(), key.to_owned()), message_id.clone());
                self.sent(agent_id, message_id);
            }
        }
    }

    /// Live agents' ids, for the load to pick from.
    pub fn live_ids(&self) -> Vec<String> {
        self.agents
            .iter()
            .filter(|(_, a)| a.live())
            .map(|(id, _)| id.clone())
            .collect()
    }

    pub fn total(map: &BTreeMap<&'static str, u64>) -> u64 {
        map.values().sum()
    }
}
