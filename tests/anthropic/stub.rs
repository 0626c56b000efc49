//! A stub of the Anthropic Messages API on 127.0.0.1, standing in for the
//! external model only: it checks the key header, keeps every request it
//! was sent (headers, body, when), and answers what each test's handler
//! says.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{json, Value};

use super::common::http::{listen, Reply};
use super::KEY;

/// What the stub answers: a status, extra headers, and a body (JSON, or
/// raw text when `raw` is set).
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Value,
    pub raw: Option<&'static str>,
}

impl Answer {
    pub fn json(status: u16, body: Value) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body,
            raw: None,
        }
    }
}

pub fn reply(text: &str) -> Answer {
    Answer::json(
        200,
        json!({
            "id": "msg_stub", "type": "message", "role": "assistant", "model": "claude-stub",
            "content": [{ "type": "text", "text": text }],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": { "input_tokens": 10, "output_tokens": 3 },
        }),
    )
}

pub fn tool_use(name: &str, input: Value) -> Answer {
    Answer::json(
        200,
        json!({
            "id": "msg_stub", "type": "message", "role": "assistant", "model": "claude-stub",
            "content": [
                { "type": "text", "text": "On it." },
                { "type": "tool_use", "id": "toolu_stub_1", "name": name, "input": input },
            ],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": { "input_tokens": 10, "output_tokens": 3 },
        }),
    )
}

pub fn error(status: u16, kind: &str, message: &str) -> Answer {
    Answer::json(
        status,
        json!({ "type": "error", "error": { "type": kind, "message": message } }),
    )
}

/// One request as the stub received it.
#[derive(Clone)]
pub struct Received {
    pub headers: HashMap<String, String>,
    pub body: Value,
    pub at: Instant,
}

pub type Handler = Arc<dyn Fn(&Value, usize) -> Answer + Send + Sync>;

/// Per-message request counts, for handlers that answer the same message
/// differently each time it is asked.
pub struct Asked(pub Mutex<HashMap<String, usize>>);

impl Asked {
    /// How often `text` was asked before this time.
    pub fn with_count(&self, text: &str) -> usize {
        let mut counts = self.0.lock().expect("counts");
        let count = counts.entry(text.to_owned()).or_default();
        *count += 1;
        *count - 1
    }
}

/// A running stub: its base URL, and every request with the right key,
/// in order, for the test body to check (a check inside the stub's own
/// tasks could not fail the test).
pub struct Stub {
    pub base: String,
    pub requests: Arc<Mutex<Vec<Received>>>,
}

impl Stub {
    pub fn requests(&self) -> Vec<Received> {
        self.requests.lock().expect("requests").clone()
    }

    pub fn bodies(&self) -> Vec<Value> {
        self.requests().into_iter().map(|r| r.body).collect()
    }
}

/// A minimal Messages API server.
pub async fn stub(handler: Handler) -> Stub {
    let calls = Arc::new(AtomicUsize::new(0));
    let requests: Arc<Mutex<Vec<Received>>> = Arc::default();
    let recorded = requests.clone();
    let addr = listen(move |request| {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let answer = if request.path != "/v1/messages" {
            error(404, "not_found_error", "no such path")
        } else if request.headers.get("x-api-key").map(String::as_str) == Some(KEY) {
            recorded.lock().expect("requests").push(Received {
                headers: request.headers,
                body: body.clone(),
                at: Instant::now(),
            });
            handler(&body, calls.fetch_add(1, Ordering::SeqCst))
        } else {
            error(401, "authentication_error", "invalid x-api-key")
        };
        let body = answer
            .raw
            .map_or_else(|| answer.body.to_string(), str::to_owned);
        std::future::ready(Reply {
            status: answer.status,
            headers: answer.headers,
            body,
        })
    })
    .await;
    Stub {
        base: format!("http://{addr}"),
        requests,
    }
}
