//! The chaos run's clients: each drives a random mix of work at the daemon
//! until told to stop, and writes what was acknowledged to the ledger.
//! Every call has a deadline, so a client whose daemon was killed moves
//! on at once.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::json;

use crate::fixtures::Fixtures;
use crate::ledger::{Ledger, Note};

pub(crate) const CALL: Duration = Duration::from_secs(5);

/// The load's long command (it outlives its turn by far), whose own
/// argument marks it as this run's, so a check can find any that outlived
/// their daemon: `sleep` for 20 s and a fraction made of the test's pid.
pub fn long_marker() -> String {
    format!("sleep 20.{}", std::process::id())
}

/// The command that waits for a line of input (`SendTaskInput`), marked
/// as [`long_marker`] is.
pub fn read_marker() -> String {
    format!("chaos-read-{}", std::process::id())
}

/// A small deterministic generator: a run is replayed from its seed.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The clients running against one daemon's life.
pub struct Load {
    stop: Arc<AtomicBool>,
    drivers: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// `drivers` clients on `clients`' channel, each with its own seed.
    pub fn start(
        clients: &Clients,
        ledger: &Arc<Mutex<Ledger>>,
        drivers: usize,
        rng: &mut Rng,
        seq: &Arc<AtomicU64>,
        fixtures: &Arc<Fixtures>,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let count = drivers;
        let drivers = (0..count)
            .map(|index| {
                let mut driver = Driver {
                    index,
                    count,
                    c: clients.clone(),
                    ledger: ledger.clone(),
                    rng: Rng(rng.next() | 1),
                    seq: seq.clone(),
                    fixtures: fixtures.clone(),
                };
                let stop = stop.clone();
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        driver.step().await;
                    }
                })
            })
            .collect();
        Self { stop, drivers }
    }

    /// Tells every client to stop after its current call, which a kill
    /// right after still cuts short: no client starts a call against a
    /// daemon already dead.
    pub fn halt(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Waits for every client to end.
    pub async fn join(self) {
        self.halt();
        for driver in self.drivers {
            let _ = driver.await;
        }
    }
}

pub(crate) struct Driver {
    /// This client's place among `count`: it alone pauses, resumes and
    /// archives the agents whose ids hash to it, so the ledger knows the
    /// order those took effect in.
    pub(crate) index: usize,
    count: usize,
    pub(crate) c: Clients,
    ledger: Arc<Mutex<Ledger>>,
    pub(crate) rng: Rng,
    seq: Arc<AtomicU64>,
    pub(crate) fixtures: Arc<Fixtures>,
}

/// Runs `call` under the call deadline; `None` if it failed or timed out.
pub(crate) async fn answered<T, E>(
    call: impl std::future::Future<Output = Result<T, E>>,
) -> Option<T> {
    match tokio::time::timeout(CALL, call).await {
        Ok(Ok(value)) => Some(value),
        Ok(Err(_)) | Err(_) => None,
    }
}

impl Driver {
    pub(crate) fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn n(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed)
    }

    /// A live agent of the ledger's, at random.
    pub(crate) fn some_agent(&mut self) -> Option<String> {
        let live = self.ledger().live_ids();
        (!live.is_empty()).then(|| live[self.rng.below(live.len())].clone())
    }

    async fn step(&mut self) {
        // One call in four is an operator's or an instance's work.
        if self.rng.below(4) == 0 {
            return self.operate().await;
        }
        let roll = self.rng.below(100);
        let Some(agent) = self.some_agent().filter(|_| roll >= 8) else {
            return self.create().await;
        };
        match roll {
            8..=11 => self.create_batch().await,
            12..=44 => self.send(&agent, None).await,
            45..=48 => self.note(&agent).await,
            49..=51 => self.search(&agent).await,
            52..=66 => {
                let key = format!("key-{}", self.n());
                self.send(&agent, Some(&key)).await;
                // A retry under the same key: the same message, once.
                self.send(&agent, Some(&key)).await;
            }
            67..=81 => self.send_batch().await,
            82..=91 if self.owns(&agent) => self.pause_or_resume(&agent).await,
            92.. if self.owns(&agent) => self.archive(&agent).await,
            _ => self.send(&agent, None).await,
        }
    }

    pub(crate) fn owns(&self, agent: &str) -> bool {
        let hash = agent.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        hash % self.count as u64 == self.index as u64
    }

    async fn create(&mut self) {
        let name = format!("chaos-{}", self.n());
        let request = pb::CreateAgentRequest {
            name: name.clone(),
            initial_message: Some("hello".into()),
            ..Default::default()
        };
        match answered(self.c.agents.create_agent(request)).await {
            Some(done) => {
                let mut ledger = self.ledger();
                ledger.ack("create");
                ledger.created(done.into_inner().agent_id, name);
            }
            None => self.ledger().unknown("create"),
        }
    }

    async fn create_batch(&mut self) {
        let names: Vec<String> = (0..4).map(|_| format!("chaos-{}", self.n())).collect();
        let request = pb::CreateAgentsRequest {
            agents: names
                .iter()
                .map(|name| pb::CreateAgentRequest {
                    name: name.clone(),
                    ..Default::default()
                })
                .collect(),
        };
        match answered(self.c.agents.create_agents(request)).await {
            Some(done) => {
                let mut ledger = self.ledger();
                ledger.ack("create_batch");
                for (id, name) in done.into_inner().agent_ids.into_iter().zip(names) {
                    ledger.created(id, name);
                }
            }
            None => self.ledger().unknown("create_batch"),
        }
    }

    /// A message of a random kind: plain text, or a scripted turn that
    /// spawns a private child (which spawns one of its own), runs a
    /// command, arms a timer or a trigger, writes a note or sets a work
    /// item.
    fn text(&mut self) -> String {
        let n = self.n();
        let call = match self.rng.below(10) {
            // A child that spawns a grandchild: three levels.
            0 => {
                let grandchild = json!({ "tool_calls": [{ "name": "SpawnAgent", "input": {
                    "preset": "private_child", "initial_message": format!("grandchild {n}") } }] });
                json!({ "name": "SpawnAgent", "input": {
                    "preset": "private_delegator", "initial_message": grandchild.to_string() } })
            }
            7 => {
                json!({ "name": "update_work_item", "input": { "objective": format!("chaos {n}") } })
            }
            8 => json!({ "name": "CreateExternalTrigger", "input": {} }),
            1 => json!({ "name": "ExecCommand", "input": {
                "command": format!("echo chaos-{n}"), "yield_ms": 2000 } }),
            2 => json!({ "name": "Sleep", "input": { "duration_ms": 200 + n % 400 } }),
            3 => json!({ "name": "MemoryWrite", "input": { "text": format!("chaos note {n}") } }),
            4 => json!({ "name": "ExecCommand", "input": {
                "command": format!("{}; echo long-{n}", long_marker()), "yield_ms": 50 } }),
            _ => return format!("hello {n}"),
        };
        json!({ "tool_calls": [call] }).to_string()
    }

    async fn send(&mut self, agent: &str, key: Option<&str>) {
        let request = pb::SendMessageRequest {
            agent_id: agent.to_owned(),
            text: self.text(),
            dedupe_key: key.unwrap_or_default().to_owned(),
        };
        let kind = if key.is_some() { "send_dedupe" } else { "send" };
        self.ledger().touched.insert(agent.to_owned());
        match answered(self.c.agents.send_message(request)).await {
            Some(sent) => {
                let sent = sent.into_inner();
                let mut ledger = self.ledger();
                ledger.ack(kind);
                match key {
                    Some(key) => ledger.sent_once(agent, key, sent.message_id),
                    None => ledger.sent(agent, sent.message_id),
                }
            }
            None => self.ledger().unknown(kind),
        }
    }

    async fn send_batch(&mut self) {
        let mut messages = Vec::new();
        for _ in 0..5 {
            if let Some(agent) = self.some_agent() {
                let text = self.text();
                messages.push(pb::SendMessageRequest {
                    agent_id: agent,
                    text,
                    dedupe_key: String::new(),
                });
            }
        }
        let targets: Vec<String> = messages.iter().map(|m| m.agent_id.clone()).collect();
        self.ledger().touched.extend(targets.iter().cloned());
        let request = pb::SendMessagesRequest { messages };
        match answered(self.c.agents.send_messages(request)).await {
            Some(done) => {
                let mut ledger = self.ledger();
                ledger.ack("send_batch");
                for (agent, result) in targets.iter().zip(done.into_inner().results) {
                    if let Some(pb::send_message_result::Result::Sent(sent)) = result.result {
                        ledger.sent(agent, sent.message_id);
                    }
                }
            }
            None => self.ledger().unknown("send_batch"),
        }
    }

    /// Sends `agent` a scripted turn making `calls`, recording the answer
    /// under `kind`; whether it was acknowledged.
    pub(crate) async fn send_calls(
        &mut self,
        agent: &str,
        calls: serde_json::Value,
        kind: &'static str,
    ) -> bool {
        let request = pb::SendMessageRequest {
            agent_id: agent.to_owned(),
            text: json!({ "tool_calls": calls }).to_string(),
            dedupe_key: String::new(),
        };
        let sent = answered(self.c.agents.send_message(request)).await;
        let mut ledger = self.ledger();
        ledger.touched.insert(agent.to_owned());
        match sent {
            Some(sent) => {
                ledger.ack(kind);
                ledger.sent(agent, sent.into_inner().message_id);
                true
            }
            None => {
                ledger.unknown(kind);
                false
            }
        }
    }

    /// An operator's note, with a word no other note has.
    async fn note(&mut self, agent: &str) {
        let word = format!("zq{}note", self.n());
        let request = pb::WriteMemoryRequest {
            agent_id: agent.to_owned(),
            key: String::new(),
            text: format!("operator note {word}"),
            tags: Vec::new(),
        };
        match answered(self.c.memory.write_memory(request)).await {
            Some(note) => {
                let mut ledger = self.ledger();
                ledger.ack("memory_write");
                ledger.notes.push(Note {
                    agent: agent.to_owned(),
                    note_id: note.into_inner().note_id,
                    word,
                });
            }
            None => self.ledger().unknown("memory_write"),
        }
    }

    /// A search beside the writes (the index's readers under load).
    async fn search(&mut self, agent: &str) {
        let request = pb::SearchMemoryRequest {
            agent_id: agent.to_owned(),
            query: "operator note".into(),
            limit: 5,
            kinds: Vec::new(),
        };
        match answered(self.c.memory.search_memory(request)).await {
            Some(_) => self.ledger().ack("memory_search"),
            None => self.ledger().unknown("memory_search"),
        }
    }

    async fn pause_or_resume(&mut self, agent: &str) {
        let pause = self.rng.below(2) == 0;
        let done = if pause {
            let request = pb::PauseAgentRequest {
                agent_id: agent.to_owned(),
            };
            answered(self.c.agents.pause_agent(request)).await
        } else {
            let request = pb::ResumeAgentRequest {
                agent_id: agent.to_owned(),
            };
            answered(self.c.agents.resume_agent(request)).await
        };
        let mut ledger = self.ledger();
        ledger.touched.insert(agent.to_owned());
        let kind = if pause { "pause" } else { "resume" };
        match done {
            Some(_) => ledger.ack(kind),
            None => ledger.unknown(kind),
        }
        if let Some(tracked) = ledger.agents.get_mut(agent) {
            tracked.paused = done.map(|_| pause);
        }
    }

    async fn archive(&mut self, agent: &str) {
        let request = pb::ArchiveAgentRequest {
            agent_id: agent.to_owned(),
        };
        let done = answered(self.c.agents.archive_agent(request)).await;
        let mut ledger = self.ledger();
        ledger.touched.insert(agent.to_owned());
        match done {
            Some(_) => ledger.ack("archive"),
            None => ledger.unknown("archive"),
        }
        if let Some(tracked) = ledger.agents.get_mut(agent) {
            tracked.archived = if done.is_some() { Some(true) } else { None };
        }
    }
}
