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
    /// An instance's agent the run set up: checked as the others are, but
    /// never picked by the load to pause or archive.
    pub fixture: bool,
}

impl Tracked {
    fn new(name: String) -> Self {
        Self {
            name,
            archived: Some(false),
            paused: Some(false),
            messages: Vec::new(),
            fixture: false,
        }
    }

    /// Surely live and not archived: messages may be sent to it.
    pub fn live(&self) -> bool {
        self.archived == Some(false)
    }
}

/// Operators' decisions on one parked call, as acknowledged.
#[derive(Debug, Clone, Default)]
pub struct Decided {
    /// The file the call appends a line to each time it runs, in its
    /// agent's home.
    pub file: String,
    pub approved: u32,
    pub denied: u32,
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
    /// Acknowledged inbound events (published or webhook deliveries): the
    /// dedupe key and the event id it was answered with.
    pub events: BTreeMap<String, String>,
    /// Parked calls an operator decided on, by approval id.
    pub decided: BTreeMap<String, Decided>,
    /// Files of every parked call asked for: none may hold two lines.
    pub asked: BTreeSet<String>,
    /// Workspaces whose attach was acknowledged: (agent, workspace id).
    pub attached: Vec<(String, String)>,
    /// Agents sent a command that waits for input: where task input and
    /// stops find running commands.
    pub readers: Vec<String>,
    /// Command tasks whose stop was acknowledged.
    pub stopped: BTreeSet<String>,
    /// The digest of the tools instance's last acknowledged apply; `None`
    /// when an apply's answer was lost.
    pub tools_digest: Option<String>,
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

    /// An instance's agent set up by the run.
    pub fn fixture(&mut self, agent_id: &str, name: &str) {
        let mut tracked = Tracked::new(name.to_owned());
        tracked.fixture = true;
        self.agents.insert(agent_id.to_owned(), tracked);
    }

    /// An inbound event acknowledged under `key`: a second answer for the
    /// key must name the same event.
    pub fn event(&mut self, key: String, event_id: String) {
        match self.events.get(&key) {
            Some(first) if *first != event_id => self
                .violations
                .push(format!("event key {key} answered {event_id} after {first}")),
            Some(_) => {}
            None => {
                self.events.insert(key, event_id);
            }
        }
    }

    /// Live agents' ids, for the load to pick from (the run's fixtures
    /// are left to their own kinds of work).
    pub fn live_ids(&self) -> Vec<String> {
        self.agents
            .iter()
            .filter(|(_, a)| a.live() && !a.fixture)
            .map(|(id, _)| id.clone())
            .collect()
    }

    pub fn total(map: &BTreeMap<&'static str, u64>) -> u64 {
        map.values().sum()
    }
}
