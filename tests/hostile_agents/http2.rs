//! Hostile clients at the HTTP/2 level: each connection bound of `serve`
//! (`--max-unix-connections`, `--max-streams-per-connection`,
//! `--max-header-bytes`, the keepalive pair) is tried by a client that
//! pushes past it, and each test waits for the daemon's own sign that the
//! bound held (a frame, a log line, a closed connection), never for time
//! to pass. A raw client, written here in a few frames, says what a
//! well-behaved HTTP/2 library would hide: the settings the daemon
//! advertises and how it refuses a peer that ignores them.

use std::path::Path;
use std::time::{Duration, Instant};

use holarchy::api::pb;
use holarchy::client::{self, Target};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use crate::common::{data_dir, Daemon};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;
const REFUSED_STREAM: u32 = 0x7;
/// How long a test waits for the daemon's sign before it fails.
const SIGN: Duration = Duration::from_secs(10);

/// One HTTP/2 frame.
#[derive(Debug)]
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

/// An HTTP/2 client of a few frames over the daemon's Unix socket.
struct Raw {
    io: UnixStream,
}

impl Raw {
    /// Connects, sends the preface and empty settings, and returns the
    /// daemon's settings (acknowledged), as `(id, value)` pairs.
    async fn connect(socket: &Path) -> (Raw, Vec<(u16, u32)>) {
        let io = UnixStream::connect(socket).await.expect("connects");
        let mut raw = Raw { io };
        raw.io.write_all(PREFACE).await.expect("preface");
        raw.send(SETTINGS, 0, 0, &[]).await;
        let settings = loop {
            let frame = raw.next().await.expect("the daemon's settings");
            if frame.kind == SETTINGS && frame.flags & ACK == 0 {
                break frame
                    .payload
                    .chunks_exact(6)
                    .map(|s| {
                        let id = u16::from_be_bytes([s[0], s[1]]);
                        (id, u32::from_be_bytes([s[2], s[3], s[4], s[5]]))
                    })
                    .collect();
            }
        };
        raw.send(SETTINGS, ACK, 0, &[]).await;
        (raw, settings)
    }

    async fn send(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        let len = u32::try_from(payload.len())
            .expect("small frame")
            .to_be_bytes();
        let mut frame = vec![len[1], len[2], len[3], kind, flags];
        frame.extend_from_slice(&stream.to_be_bytes());
        frame.extend_from_slice(payload);
        self.io.write_all(&frame).await.expect("frame sent");
    }

    /// The next frame, or `None` once the daemon closed the connection.
    async fn next(&mut self) -> Option<Frame> {
        let mut head = [0u8; 9];
        let read = tokio::time::timeout(SIGN, self.io.read_exact(&mut head))
            .await
            .expect("a frame or the end in time");
        read.ok()?;
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0u8; len];
        self.io.read_exact(&mut payload).await.ok()?;
        Some(Frame {
            kind: head[3],
            flags: head[4],
            stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
            payload,
        })
    }

    /// Opens `stream` with a gRPC call's headers and no body, so the call
    /// waits for its request and the stream stays open.
    async fn open_call(&mut self, stream: u32) {
        let block = hpack_call("/holarchy.v1.RuntimeService/GetStatus");
        self.send(HEADERS, END_HEADERS, stream, &block).await;
    }
}

/// An HPACK string: no Huffman, a 7-bit length (headers here are short).
fn hpack_string(out: &mut Vec<u8>, text: &str) {
    let len = u8::try_from(text.len()).expect("short header");
    assert!(len < 127);
    out.push(len);
    out.extend_from_slice(text.as_bytes());
}

/// The header block of a gRPC call to `path`: static-table entries for
/// `:method POST` and `:scheme http`, and literals never indexed.
fn hpack_call(path: &str) -> Vec<u8> {
    let mut block = vec![0x83, 0x86];
    // Literal, indexed name: `:path` (4) and `:authority` (1).
    block.push(0x04);
    hpack_string(&mut block, path);
    block.push(0x01);
    hpack_string(&mut block, "localhost");
    for (name, value) in [("content-type", "application/grpc"), ("te", "trailers")] {
        block.push(0x00);
        hpack_string(&mut block, name);
        hpack_string(&mut block, value);
    }
    block
}

fn setting(settings: &[(u16, u32)], id: u16) -> Option<u32> {
    settings.iter().find(|(i, _)| *i == id).map(|(_, v)| *v)
}

/// `--max-streams-per-connection 2`: the daemon advertises it, and a
/// client that opens a third call anyway has that one stream refused
/// (`REFUSED_STREAM`, so it may retry), while its two calls stay open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_past_the_streams_per_connection_is_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with(&data_dir(&root), &["--max-streams-per-connection", "2"]).await;
    let (mut raw, settings) = Raw::connect(&daemon.socket()).await;
    assert_eq!(
        setting(&settings, SETTINGS_MAX_CONCURRENT_STREAMS),
        Some(2),
        "{settings:?}"
    );
    for stream in [1, 3, 5] {
        raw.open_call(stream).await;
    }
    let refused = loop {
        let frame = raw.next().await.expect("the connection stays open");
        match frame.kind {
            RST_STREAM => break frame,
            GOAWAY => panic!("the whole connection was refused: {frame:?}"),
            _ => {}
        }
    };
    assert_eq!(refused.stream, 5, "{refused:?}");
    let code = u32::from_be_bytes(refused.payload[..4].try_into().expect("a code"));
    assert_eq!(code, REFUSED_STREAM, "{refused:?}");
    // The two calls within the bound are still open: their requests,
    // sent now, are answered.
    let empty_request = [0u8; 5];
    for stream in [1, 3] {
        raw.send(DATA, 0x1, stream, &empty_request).await;
    }
    let mut answered = Vec::new();
    while answered.len() < 2 {
        let frame = raw.next().await.expect("answers");
        assert_ne!(frame.kind, RST_STREAM, "{frame:?}");
        if frame.kind == HEADERS && frame.flags & 0x1 != 0 && !answered.contains(&frame.stream) {
            answered.push(frame.stream);
        }
    }
    answered.sort_unstable();
    assert_eq!(answered, [1, 3]);
}

/// `--max-header-bytes 4096`: advertised, and a call whose headers are
/// larger fails while the same call with small headers is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_past_the_bound_are_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with(&data_dir(&root), &["--max-header-bytes", "4096"]).await;
    let (_raw, settings) = Raw::connect(&daemon.socket()).await;
    assert_eq!(
        setting(&settings, SETTINGS_MAX_HEADER_LIST_SIZE),
        Some(4096),
        "{settings:?}"
    );
    let mut c = daemon.clients().await;
    let call = |pad: usize| {
        let mut request = tonic::Request::new(pb::GetStatusRequest {});
        let value = "x".repeat(pad).parse().expect("a header value");
        request.metadata_mut().insert("x-pad", value);
        request
    };
    c.runtime
        .get_status(call(1_000))
        .await
        .expect("small headers pass");
    let refused = c
        .runtime
        .get_status(call(8_000))
        .await
        .expect_err("8 KB of headers past a 4 KiB bound");
    assert_ne!(refused.code(), tonic::Code::Ok, "{refused:?}");
    // The connection survives the refusal.
    c.runtime
        .get_status(call(1_000))
        .await
        .expect("small headers pass again");
}

/// `--keepalive-interval 1 --keepalive-timeout 1`: the daemon pings a
/// connection, and one whose peer never answers is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_never_answers_pings_is_dropped() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with(
        &data_dir(&root),
        &["--keepalive-interval", "1", "--keepalive-timeout", "1"],
    )
    .await;
    let (mut raw, _) = Raw::connect(&daemon.socket()).await;
    let started = Instant::now();
    let pinged = loop {
        let frame = raw.next().await.expect("a ping before the end");
        if frame.kind == PING && frame.flags & ACK == 0 {
            break started.elapsed();
        }
    };
    // Unanswered: the daemon gives up on the connection.
    while let Some(frame) = raw.next().await {
        assert!(
            frame.kind == PING || frame.kind == GOAWAY,
            "unexpected {frame:?}"
        );
    }
    assert!(pinged < SIGN, "pinged after {pinged:?}");
    // The daemon still serves everyone else.
    crate::common::status(&mut daemon.clients().await).await;
}

/// `--max-unix-connections 2`: with two connections open the daemon stops
/// accepting (and says so), and a third client is served once one of the
/// two closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_unix_connection_cap_a_new_client_waits_for_a_place() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with(&data_dir(&root), &["--max-unix-connections", "2"]).await;
    // Each holds a place: the daemon answered its preface.
    let (first, _) = Raw::connect(&daemon.socket()).await;
    let (_second, _) = Raw::connect(&daemon.socket()).await;
    let target = Target::Unix(daemon.socket());
    let third = tokio::spawn(async move {
        let mut clients = client::connect(&target).await?;
        clients.runtime.get_status(pb::GetStatusRequest {}).await?;
        anyhow::Ok(())
    });
    let started = Instant::now();
    while !daemon
        .log()
        .lines()
        .any(|l| l.contains("connection cap reached") && l.contains("unix"))
    {
        assert!(
            started.elapsed() < SIGN,
            "the daemon never reached its cap of 2:\n{}",
            daemon.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The accept loop waits for a place: the third cannot have one yet.
    assert!(!third.is_finished(), "served past the cap: {third:?}");
    drop(first);
    tokio::time::timeout(SIGN, third)
        .await
        .expect("served once a place freed")
        .expect("joins")
        .expect("the call succeeds");
}
