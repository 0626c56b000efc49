//! A loopback stand-in for a model server that streams: it reads each
//! HTTP/1.1 request, keeps its body, and answers what the test's handler
//! says: an error status, or a server-sent event stream written as chunks
//! cut at awkward places (inside a CRLF, a multi-byte character, a JSON
//! string) a few milliseconds apart. A stream may wait at a gate the test
//! opens, or be cut off (the connection closed mid-chunk, without the
//! stream's end).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use super::common::http::{read_request, write_json};

/// What the stub answers one request with.
pub enum Answer {
    /// A status and a JSON body (an error).
    Status(u16, Value),
    /// A `text/event-stream` body.
    Stream(Stream),
}

/// A stream as the stub writes it.
pub struct Stream {
    pub body: String,
    /// Bytes per piece: each piece is one HTTP chunk.
    pub piece: usize,
    pub delay: Duration,
    /// Waits before piece `.0` until the gate is opened.
    pub gate: Option<(usize, Arc<Notify>)>,
    /// Closes the connection after this many pieces and half of the next.
    pub cut_after: Option<usize>,
}

impl Stream {
    /// `body` in 7-byte pieces, 3 ms apart.
    pub fn of(body: String) -> Self {
        Self {
            body,
            piece: 7,
            delay: Duration::from_millis(3),
            gate: None,
            cut_after: None,
        }
    }
}

pub type Handler = Arc<dyn Fn(&Value, usize) -> Answer + Send + Sync>;

/// One request the stub received.
#[derive(Clone, Debug)]
pub struct Received {
    pub headers: HashMap<String, String>,
    pub body: Value,
}

/// A running stub: its address and every request it was sent, for the
/// test body to check.
#[derive(Debug)]
pub struct Stub {
    pub addr: String,
    requests: Arc<Mutex<Vec<Received>>>,
}

impl Stub {
    pub fn requests(&self) -> Vec<Received> {
        self.requests.lock().expect("requests").clone()
    }
}

pub async fn start(handler: Handler) -> Stub {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let requests: Arc<Mutex<Vec<Received>>> = Arc::default();
    let recorded = requests.clone();
    let count = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let _ = socket.set_nodelay(true);
            let handler = handler.clone();
            let recorded = recorded.clone();
            let count = count.clone();
            tokio::spawn(serve(socket, handler, recorded, count));
        }
    });
    Stub { addr, requests }
}

async fn serve(
    mut socket: TcpStream,
    handler: Handler,
    recorded: Arc<Mutex<Vec<Received>>>,
    count: Arc<AtomicUsize>,
) {
    let mut buf = Vec::new();
    loop {
        let Some(request) = read_request(&mut socket, &mut buf).await else {
            return;
        };
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        recorded.lock().expect("requests").push(Received {
            headers: request.headers,
            body: body.clone(),
        });
        let answer = handler(&body, count.fetch_add(1, Ordering::SeqCst));
        let keep = match answer {
            Answer::Status(status, body) => {
                write_json(&mut socket, status, &[], &body.to_string()).await
            }
            Answer::Stream(stream) => write_stream(&mut socket, stream).await,
        };
        if !keep {
            return;
        }
    }
}

/// Writes `stream` as chunks; whether the connection may serve another
/// request (not when it was cut).
async fn write_stream(socket: &mut TcpStream, stream: Stream) -> bool {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n";
    if socket.write_all(head.as_bytes()).await.is_err() {
        return false;
    }
    for (n, piece) in stream
        .body
        .as_bytes()
        .chunks(stream.piece.max(1))
        .enumerate()
    {
        if let Some((at, gate)) = &stream.gate {
            if n == *at {
                gate.notified().await;
            }
        }
        let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
        chunk.extend_from_slice(piece);
        chunk.extend_from_slice(b"\r\n");
        if stream.cut_after == Some(n) {
            // Half a chunk, then the connection goes: no end of the body.
            let _ = socket.write_all(&chunk[..chunk.len() / 2]).await;
            let _ = socket.flush().await;
            let _ = socket.shutdown().await;
            return false;
        }
        if socket.write_all(&chunk).await.is_err() {
            return false;
        }
        let _ = socket.flush().await;
        tokio::time::sleep(stream.delay).await;
    }
    socket.write_all(b"0\r\n\r\n").await.is_ok()
}

/// Tokens a stubbed answer reports: prompt, completion, cached.
#[derive(Clone, Copy)]
pub struct Tokens(pub u64, pub u64, pub u64);

/// A chat-completions stream: `texts` as content deltas, then `call`
/// (a name and its arguments in pieces), the finish, the usage and
/// `[DONE]`, with CRLF line ends and keepalive comments between.
pub fn openai(texts: &[&str], call: Option<(&str, &[&str])>, tokens: Tokens) -> String {
    let mut out = String::from(": keepalive\r\n\r\n");
    let mut chunk = |value: Value| out.push_str(&format!("data: {value}\r\n\r\n"));
    chunk(json!({ "choices": [{ "index": 0, "delta": { "role": "assistant", "content": "" } }] }));
    for text in texts {
        chunk(json!({ "choices": [{ "index": 0, "delta": { "content": text } }] }));
    }
    if let Some((name, pieces)) = call {
        chunk(json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [
            { "index": 0, "id": "call_1", "type": "function", "function": { "name": name, "arguments": "" } }
        ] } }] }));
        for piece in pieces {
            chunk(json!({ "choices": [{ "index": 0, "delta": { "tool_calls": [
                { "index": 0, "function": { "arguments": piece } }
            ] } }] }));
        }
    }
    let finish = if call.is_some() { "tool_calls" } else { "stop" };
    chunk(json!({ "choices": [{ "index": 0, "delta": {}, "finish_reason": finish }] }));
    let Tokens(prompt, completion, cached) = tokens;
    chunk(
        json!({ "choices": [], "usage": { "prompt_tokens": prompt, "completion_tokens": completion,
        "total_tokens": prompt + completion, "prompt_tokens_details": { "cached_tokens": cached } } }),
    );
    out.push_str(": keepalive\r\n\r\ndata: [DONE]\r\n\r\n");
    out
}

/// A Messages API stream: `texts` as one text block's deltas, then `tool`
/// (a name and its input JSON in pieces) as a `tool_use` block, with
/// pings between. `tokens` are reported as Anthropic splits them: the
/// prompt less its cached part as input, the cached part as cache reads.
pub fn anthropic(texts: &[&str], tool: Option<(&str, &[&str])>, tokens: Tokens) -> String {
    let Tokens(prompt, completion, cached) = tokens;
    let mut out = String::new();
    let mut event = |kind: &str, value: Value| {
        out.push_str(&format!("event: {kind}\ndata: {value}\n\n"));
    };
    event(
        "message_start",
        json!({ "type": "message_start", "message": { "id": "msg_stub", "type": "message",
        "role": "assistant", "model": "claude-stub", "content": [], "stop_reason": null,
        "usage": { "input_tokens": prompt - cached, "cache_creation_input_tokens": 0,
                   "cache_read_input_tokens": cached, "output_tokens": 1 } } }),
    );
    event(
        "content_block_start",
        json!({ "type": "content_block_start", "index": 0, "content_block": { "type": "text", "text": "" } }),
    );
    event("ping", json!({ "type": "ping" }));
    for text in texts {
        event(
            "content_block_delta",
            json!({ "type": "content_block_delta", "index": 0, "delta": { "type": "text_delta", "text": text } }),
        );
    }
    event(
        "content_block_stop",
        json!({ "type": "content_block_stop", "index": 0 }),
    );
    if let Some((name, pieces)) = tool {
        event(
            "content_block_start",
            json!({ "type": "content_block_start", "index": 1, "content_block": { "type": "tool_use",
            "id": "toolu_1", "name": name, "input": {} } }),
        );
        for piece in pieces {
            event(
                "content_block_delta",
                json!({ "type": "content_block_delta", "index": 1, "delta": { "type": "input_json_delta", "partial_json": piece } }),
            );
        }
        event(
            "content_block_stop",
            json!({ "type": "content_block_stop", "index": 1 }),
        );
    }
    let stop = if tool.is_some() {
        "tool_use"
    } else {
        "end_turn"
    };
    event(
        "message_delta",
        json!({ "type": "message_delta", "delta": { "stop_reason": stop, "stop_sequence": null },
        "usage": { "output_tokens": completion } }),
    );
    event("message_stop", json!({ "type": "message_stop" }));
    out
}
