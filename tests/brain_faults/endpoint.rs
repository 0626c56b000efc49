//! A loopback model endpoint that misbehaves on purpose: the fault being
//! injected, standing in for the external model only. Each request is
//! sorted by the marker it holds (one agent per marker, named after it)
//! and answered with what the test's handler makes of that marker and how
//! often it was asked: a whole answer (OpenAI-compatible or Anthropic), an
//! error status with or without `Retry-After`, a reset connection, or
//! silence before the headers, mid-body or mid-stream.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::common::http::{read_request, write_json};

/// Which API the endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    OpenAi,
    Anthropic,
}

/// What one request is answered with.
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// A whole answer (not streamed) whose reply is this text.
    Answer(&'static str),
    /// An error status, with a `Retry-After` value if given.
    Status(u16, Option<&'static str>),
    /// The connection reset (RST) once the request is read.
    Reset,
    /// No answer at all: the request is read and left waiting.
    StallHeaders,
    /// A 200 with a length, a few bytes of its body, then silence.
    StallBody,
    /// A 200 event stream, its first event, then silence.
    StallStream,
}

/// What the handler makes of a marker asked for the `n`th time (from 0).
pub type Handler = fn(&str, usize) -> Fault;

/// A running endpoint: every request it was sent (its marker, when), and
/// how many stalled connections the daemon still holds open.
pub struct Endpoint {
    pub addr: String,
    asked: Arc<Mutex<Vec<(String, Instant)>>>,
    stalled: Arc<AtomicUsize>,
}

impl Endpoint {
    /// When each request holding `marker` came, in order.
    pub fn asked(&self, marker: &str) -> Vec<Instant> {
        self.asked
            .lock()
            .expect("asked")
            .iter()
            .filter(|(m, _)| m == marker)
            .map(|(_, at)| *at)
            .collect()
    }

    /// Stalled connections the daemon has not closed yet.
    pub fn stalled_open(&self) -> usize {
        self.stalled.load(Ordering::SeqCst)
    }
}

/// Serves on a fresh loopback port until the test ends.
pub async fn start(api: Api, markers: &'static [&'static str], handler: Handler) -> Endpoint {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let asked: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let stalled = Arc::new(AtomicUsize::new(0));
    let (a, s) = (asked.clone(), stalled.clone());
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let conn = Conn {
                api,
                markers,
                handler,
                asked: a.clone(),
                stalled: s.clone(),
            };
            tokio::spawn(conn.serve(socket));
        }
    });
    Endpoint {
        addr,
        asked,
        stalled,
    }
}

struct Conn {
    api: Api,
    markers: &'static [&'static str],
    handler: Handler,
    asked: Arc<Mutex<Vec<(String, Instant)>>>,
    stalled: Arc<AtomicUsize>,
}

impl Conn {
    async fn serve(self, mut socket: TcpStream) {
        let mut buf = Vec::new();
        while let Some(request) = read_request(&mut socket, &mut buf).await {
            let body = String::from_utf8_lossy(&request.body);
            let marker = self
                .markers
                .iter()
                .find(|m| body.contains(**m))
                .copied()
                .unwrap_or("unmarked");
            let fault = {
                let mut asked = self.asked.lock().expect("asked");
                let n = asked.iter().filter(|(m, _)| m == marker).count();
                asked.push((marker.to_owned(), Instant::now()));
                (self.handler)(marker, n)
            };
            match fault {
                Fault::Answer(text) => {
                    let body = answer(self.api, text).to_string();
                    if !write_json(&mut socket, 200, &[], &body).await {
                        return;
                    }
                }
                Fault::Status(status, retry_after) => {
                    let headers: Vec<(&str, String)> = retry_after
                        .map(|v| ("retry-after", v.to_owned()))
                        .into_iter()
                        .collect();
                    let body = json!({ "type": "error", "error": {
                        "type": "api_error", "message": format!("{marker} answered {status}") } });
                    if !write_json(&mut socket, status, &headers, &body.to_string()).await {
                        return;
                    }
                }
                Fault::Reset => {
                    // Linger 0: closing sends RST, not FIN.
                    let _ = socket2::SockRef::from(&socket).set_linger(Some(Duration::ZERO));
                    return;
                }
                Fault::StallHeaders => return self.stall(socket, b"").await,
                Fault::StallBody => {
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 4096\r\n\r\n{\"choices\": [";
                    return self.stall(socket, head.as_bytes()).await;
                }
                Fault::StallStream => {
                    let mut head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n".to_vec();
                    head.extend_from_slice(first_event(self.api).as_bytes());
                    return self.stall(socket, &head).await;
                }
            }
        }
    }

    /// Writes `head`, then says nothing more until the daemon closes the
    /// connection.
    async fn stall(&self, mut socket: TcpStream, head: &[u8]) {
        self.stalled.fetch_add(1, Ordering::SeqCst);
        if socket.write_all(head).await.is_ok() {
            let _ = socket.flush().await;
            let mut sink = [0u8; 1024];
            while matches!(socket.read(&mut sink).await, Ok(n) if n > 0) {}
        }
        self.stalled.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A whole answer replying `text`, in `api`'s shape.
fn answer(api: Api, text: &str) -> serde_json::Value {
    match api {
        Api::OpenAi => {
            json!({ "choices": [{ "message": { "role": "assistant", "content": text } }] })
        }
        Api::Anthropic => json!({
            "id": "msg_stub", "type": "message", "role": "assistant", "model": "claude-stub",
            "content": [{ "type": "text", "text": text }],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": { "input_tokens": 10, "output_tokens": 3 },
        }),
    }
}

/// The first event of a streamed answer, with some text in it.
fn first_event(api: Api) -> String {
    match api {
        Api::OpenAi => {
            let delta = json!({ "choices": [{ "index": 0, "delta": { "role": "assistant", "content": "partial" } }] });
            format!("data: {delta}\n\n")
        }
        Api::Anthropic => {
            let start = json!({ "type": "message_start", "message": { "id": "msg_stub", "type": "message",
                "role": "assistant", "model": "claude-stub", "content": [], "stop_reason": null,
                "usage": { "input_tokens": 1, "output_tokens": 1 } } });
            format!("event: message_start\ndata: {start}\n\n")
        }
    }
}
