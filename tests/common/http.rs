//! The HTTP/1.1 side of the model-API stubs that end-to-end tests start on
//! 127.0.0.1: requests read one at a time off a kept-alive connection.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One request as a stub sees it.
pub struct Request {
    pub path: String,
    /// Names lowercased.
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

impl Request {
    /// Whether header `name` (lowercase) holds `value`, in any case.
    pub fn has(&self, name: &str, value: &str) -> bool {
        self.headers
            .get(name)
            .is_some_and(|v| v.eq_ignore_ascii_case(value))
    }
}

/// Reads the next request off `socket` (headers, then Content-Length
/// bytes), keeping what follows it in `buf`; `None` once the peer is gone.
pub async fn read_request(socket: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Request> {
    let header_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        read_more(socket, buf).await?;
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
    let mut lines = head.lines();
    let path = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_default()
        .to_owned();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < header_end + length {
        read_more(socket, buf).await?;
    }
    let body = buf[header_end..header_end + length].to_vec();
    buf.drain(..header_end + length);
    Some(Request {
        path,
        headers,
        body,
    })
}

async fn read_more(socket: &mut TcpStream, buf: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 8192];
    match socket.read(&mut chunk).await {
        Ok(0) | Err(_) => None,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Some(())
        }
    }
}

/// Writes one JSON response with `headers` beside the content type;
/// whether the connection still stands.
pub async fn write_json(
    socket: &mut TcpStream,
    status: u16,
    headers: &[(&str, String)],
    text: &str,
) -> bool {
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let response = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n{text}",
        text.len()
    );
    socket.write_all(response.as_bytes()).await.is_ok()
}

/// What a stub answers one request with: a status, headers beside the
/// content type, and a JSON (or raw) body.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
}

/// Serves on a fresh port of 127.0.0.1 until the test ends: every request
/// of every (kept-alive) connection is answered with what `answer` makes
/// of it.
pub async fn listen<F, Fut>(answer: F) -> SocketAddr
where
    F: Fn(Request) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Reply> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                while let Some(request) = read_request(&mut socket, &mut buf).await {
                    let reply = answer(request).await;
                    if !write_json(&mut socket, reply.status, &reply.headers, &reply.body).await {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// The client side: one HTTP/1.1 POST on a fresh connection (closed after
/// the answer); the status and the body as JSON (null when it is not).
/// An error when the server cannot be reached or answers no status line
/// within 30 s.
pub async fn post(
    addr: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> std::io::Result<(u16, serde_json::Value)> {
    use std::io::{Error, ErrorKind};
    let mut stream = TcpStream::connect(addr).await?;
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    // A server that refuses by Content-Length may close before the body is
    // all sent; the answer is still there to read.
    let _ = stream.write_all(body).await;
    let mut answer = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(30),
        stream.read_to_end(&mut answer),
    )
    .await
    .map_err(|_| Error::new(ErrorKind::TimedOut, "no answer in 30 s"))??;
    let answer = String::from_utf8_lossy(&answer);
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidData,
                format!("no status line in {answer:?}"),
            )
        })?;
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    Ok((
        status,
        serde_json::from_str(body).unwrap_or(serde_json::Value::Null),
    ))
}
