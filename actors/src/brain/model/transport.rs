//! How the model brains talk HTTP: one JSON POST, retried with jittered
//! exponential backoff on what may pass (network errors, 429, 5xx, which
//! takes in Anthropic's 529 "overloaded"), honouring `Retry-After`, up to
//! a number of retries. Every body is read with a bound, the answer's and
//! an error's alike, so a server cannot make the daemon hold more than
//! that. The brains differ only in how they build the request and read
//! the answer, which stay theirs. The loop itself is
//! [`super::stream::post`], which reads an answer as a stream or whole.

use std::time::Duration;

use serde_json::Value;

use super::sse::SseError;

/// How failed requests are retried, and when a silent one has failed.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub max_retries: u32,
    pub base: Duration,
    /// The longest wait before a retry: the backoff's and a server's
    /// `Retry-After` alike, so no server can park a turn for an hour.
    pub cap: Duration,
    /// How long an attempt may stay silent (no headers yet, or no byte of
    /// its body, not even a keepalive) before it counts as broken and is
    /// asked again: a server that stalls costs a bounded time per attempt,
    /// never the whole turn's deadline.
    pub idle: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            base: Duration::from_millis(500),
            cap: Duration::from_secs(8),
            idle: Duration::from_secs(180),
        }
    }
}

impl RetryPolicy {
    /// Jittered: between half and all of the exponential bound, so many
    /// agents retrying at once do not march in step.
    pub(crate) fn delay(&self, attempt: u32) -> Duration {
        let bound = self
            .base
            .saturating_mul(1u32 << attempt.min(16))
            .min(self.cap);
        let mut byte = [0u8; 2];
        let _ = getrandom::fill(&mut byte);
        let fraction = f64::from(u16::from_le_bytes(byte)) / f64::from(u16::MAX);
        bound.mul_f64(0.5 + fraction / 2.0)
    }
}

/// Bytes of an answer read at most.
pub(crate) const MAX_ANSWER: usize = 4 * 1024 * 1024;
/// Bytes of an error body read at most: enough for any server's message,
/// which is cut shorter still before anyone is shown it.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// Why a model's answer could not be had: what one attempt met (some of
/// it may pass: see [`Sent`] and [`super::stream`]), and once retrying is
/// over, the last of it. The brains show it to operators as text.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ModelError {
    /// An error status, with the message its body gave.
    #[error("the server answered {status}: {message}")]
    Status {
        status: reqwest::StatusCode,
        message: String,
    },
    /// Connecting, sending or waiting failed.
    #[error("request failed: {0}")]
    Request(reqwest::Error),
    #[error("no answer within {0:?}")]
    NoAnswer(Duration),
    /// A whole answer's body broke off or stalled.
    #[error("reading the answer failed: {0}")]
    Read(BodyError),
    #[error("the stream was silent for {0:?}")]
    Silent(Duration),
    #[error("the stream broke off: {0}")]
    BrokeOff(reqwest::Error),
    #[error("the stream ended before the answer did")]
    EndedEarly,
    /// Over [`MAX_ANSWER`]: asking again would not help.
    #[error("{TOO_LARGE}")]
    TooLarge,
    #[error(transparent)]
    Event(SseError),
    /// The server said, mid-stream, that something passing went wrong
    /// (overloaded): the brain's reading of it.
    #[error("{0}")]
    Passing(String),
    /// The stream holds no answer the brain can read: its reason.
    #[error("{0}")]
    BadStream(String),
    #[error(transparent)]
    Unreadable(#[from] Unreadable),
    #[error("{last} (gave up after {retries} retries)")]
    GaveUp { last: Box<ModelError>, retries: u32 },
}

/// A whole answer a brain cannot read: what it expected, and why not.
#[derive(Debug, thiserror::Error)]
#[error("the answer is not {expected}: {source}")]
pub(crate) struct Unreadable {
    pub expected: &'static str,
    pub source: serde_json::Error,
}

/// Why a body was not read to its end.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    #[error("the body was silent for {0:?}")]
    Silent(Duration),
    #[error("{0}")]
    Broke(reqwest::Error),
}

/// What one request came to, before its body is read.
pub(crate) enum Sent {
    /// A success: the body is the caller's to read.
    Answer(reqwest::Response),
    /// A failure that may pass (a 429, a 5xx, a network error), and how
    /// long the server asked to be left alone.
    Retry(ModelError, Option<Duration>),
    /// A failure that will not.
    Fail(ModelError),
}

/// Sends one request and sorts its outcome. An error's body is read (with
/// a bound) for the message it gives.
pub(crate) async fn send(retry: &RetryPolicy, request: reqwest::RequestBuilder) -> Sent {
    match request.send().await {
        Ok(response) if response.status().is_success() => Sent::Answer(response),
        Ok(response) => {
            let status = response.status();
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|secs| Duration::from_secs(secs).min(retry.cap));
            // A body that breaks off (or stalls) still says what it said
            // so far.
            let body = read_at_most(response, MAX_ERROR_BODY, retry.idle)
                .await
                .map(|(bytes, _)| bytes)
                .unwrap_or_default();
            let detail = ModelError::Status {
                status,
                message: error_message(&body),
            };
            if status.as_u16() == 429 || status.is_server_error() {
                Sent::Retry(detail, retry_after)
            } else {
                Sent::Fail(detail)
            }
        }
        // Connecting, timing out, a broken connection: transient.
        Err(err) if err.is_connect() || err.is_timeout() || err.is_request() => {
            Sent::Retry(ModelError::Request(err), None)
        }
        Err(err) => Sent::Fail(ModelError::Request(err)),
    }
}

/// Waits before retry number `attempt` (0 for the first), or says why
/// retrying is over.
pub(crate) async fn backoff(
    retry: &RetryPolicy,
    attempt: u32,
    why: ModelError,
    wait: Option<Duration>,
) -> Result<(), ModelError> {
    if attempt >= retry.max_retries {
        return Err(ModelError::GaveUp {
            last: Box::new(why),
            retries: retry.max_retries,
        });
    }
    tokio::time::sleep(wait.unwrap_or_else(|| retry.delay(attempt))).await;
    Ok(())
}

/// Why an answer's body was not read whole.
pub(crate) enum Unread {
    /// Over [`MAX_ANSWER`]: asking again would not help.
    TooLarge,
    /// The connection broke off: it may work next time.
    BrokeOff(BodyError),
}

/// What a failure says of an answer over the bound.
pub(crate) const TOO_LARGE: &str = "the answer is too large";

/// A whole answer's body, up to [`MAX_ANSWER`], each piece within `idle`
/// of the one before.
pub(crate) async fn read_answer(
    response: reqwest::Response,
    idle: Duration,
) -> Result<Vec<u8>, Unread> {
    if response
        .content_length()
        .is_some_and(|n| n > MAX_ANSWER as u64)
    {
        return Err(Unread::TooLarge);
    }
    match read_at_most(response, MAX_ANSWER, idle).await {
        Ok((bytes, true)) => Ok(bytes),
        Ok((_, false)) => Err(Unread::TooLarge),
        Err(err) => Err(Unread::BrokeOff(err)),
    }
}

/// The body, up to `limit` bytes, and whether that was all of it. Read a
/// chunk at a time: a body without a length (chunked) is held to the
/// bound as well. A body silent for `idle` is an error: without it a
/// server that sent its headers and part of its body, then stalled, held
/// the turn until the request's whole deadline.
async fn read_at_most(
    mut response: reqwest::Response,
    limit: usize,
    idle: Duration,
) -> Result<(Vec<u8>, bool), BodyError> {
    let mut bytes = Vec::new();
    loop {
        let chunk = match tokio::time::timeout(idle, response.chunk()).await {
            Err(_) => return Err(BodyError::Silent(idle)),
            Ok(Err(err)) => return Err(BodyError::Broke(err)),
            Ok(Ok(None)) => break,
            Ok(Ok(Some(chunk))) => chunk,
        };
        if bytes.len() + chunk.len() > limit {
            let room = limit - bytes.len();
            bytes.extend_from_slice(&chunk[..room]);
            return Ok((bytes, false));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok((bytes, true))
}

/// What an error body says: the `error.message` both OpenAI-compatible
/// servers and Anthropic's API give, else the body as text.
fn error_message(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned())
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::super::sse::SseEvent;
    use super::super::stream::{self, Assembler, Fault, Flow};
    use super::*;

    /// Takes a whole answer as its bytes (the servers here do not stream).
    #[derive(Default)]
    struct Whole(Vec<u8>);

    impl Assembler for Whole {
        fn event(&mut self, _: SseEvent) -> Result<Flow, Fault> {
            Ok(Flow::Done)
        }

        fn abandon(&mut self, _: &str) {
            self.0.clear();
        }

        fn whole(&mut self, body: &[u8]) -> Result<(), Unreadable> {
            self.0 = body.to_vec();
            Ok(())
        }
    }

    /// Posts until a whole answer: its bytes, or why there is none.
    async fn post<F>(retry: RetryPolicy, request: F) -> Result<Vec<u8>, ModelError>
    where
        F: Fn() -> reqwest::RequestBuilder,
    {
        let mut whole = Whole::default();
        stream::post(retry, request, &mut whole).await?;
        Ok(whole.0)
    }

    /// A loopback server that answers its `i`th connection with
    /// `responses[i]` (raw HTTP, the connection closed after it), and the
    /// URL to reach it.
    async fn server(responses: Vec<Vec<u8>>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            for response in responses {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let mut request = Vec::new();
                let mut chunk = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => request.extend_from_slice(&chunk[..n]),
                    }
                }
                let _ = socket.write_all(&response).await;
                let _ = socket.shutdown().await;
            }
        });
        url
    }

    /// A response without a length: its body runs to the connection's end.
    fn unsized_response(status: &str, body: &[u8]) -> Vec<u8> {
        let mut response = format!("HTTP/1.1 {status}\r\nconnection: close\r\n\r\n").into_bytes();
        response.extend_from_slice(body);
        response
    }

    fn quick() -> RetryPolicy {
        RetryPolicy {
            max_retries: 2,
            base: Duration::from_millis(1),
            cap: Duration::from_millis(5),
            idle: Duration::from_secs(5),
        }
    }

    #[tokio::test]
    async fn an_answer_without_a_length_is_still_held_to_the_bound() {
        let huge = vec![b'x'; MAX_ANSWER + 1];
        let url = server(vec![unsized_response("200 OK", &huge)]).await;
        let client = reqwest::Client::new();
        let got = post(quick(), || client.post(&url)).await;
        assert!(matches!(got, Err(ModelError::TooLarge)), "{got:?}");
    }

    #[tokio::test]
    async fn an_error_body_is_read_only_so_far() {
        let huge = vec![b'e'; 4 * MAX_ERROR_BODY];
        let url = server(vec![unsized_response("400 Bad Request", &huge)]).await;
        let client = reqwest::Client::new();
        let got = post(quick(), || client.post(&url))
            .await
            .expect_err("a 400")
            .to_string();
        assert!(
            got.starts_with("the server answered 400 Bad Request: eee"),
            "{}",
            &got[..60]
        );
        assert!(got.len() < MAX_ERROR_BODY + 100, "{} bytes", got.len());
    }

    #[tokio::test]
    async fn transient_failures_are_retried_until_an_answer() {
        let url = server(vec![
            unsized_response("529 Overloaded", br#"{"error":{"message":"Overloaded"}}"#),
            unsized_response("429 Too Many Requests", b"slow down"),
            unsized_response("200 OK", b"{}"),
        ])
        .await;
        let client = reqwest::Client::new();
        let got = post(quick(), || client.post(&url)).await.expect("answered");
        assert_eq!(got, b"{}".to_vec());
        // One retry fewer than it takes: the last failure, and why it stopped.
        let url = server(vec![
            unsized_response("503 Service Unavailable", b"down"),
            unsized_response(
                "500 Internal Server Error",
                br#"{"error":{"message":"on fire"}}"#,
            ),
        ])
        .await;
        let once = RetryPolicy {
            max_retries: 1,
            ..quick()
        };
        let got = post(once, || client.post(&url))
            .await
            .expect_err("gave up")
            .to_string();
        assert_eq!(
            got,
            "the server answered 500 Internal Server Error: on fire (gave up after 1 retries)"
        );
    }

    #[test]
    fn error_bodies_give_their_message() {
        let openai = br#"{"error":{"message":"slow down","type":"rate_limit"}}"#;
        assert_eq!(error_message(openai), "slow down");
        let anthropic =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(error_message(anthropic), "Overloaded");
        assert_eq!(
            error_message(b"<html>bad gateway</html>"),
            "<html>bad gateway</html>"
        );
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let retry = RetryPolicy {
            max_retries: 5,
            base: Duration::from_millis(100),
            cap: Duration::from_millis(400),
            ..RetryPolicy::default()
        };
        let ms = |d: Duration| d.as_millis();
        // Many samples per attempt, so the jitter shows its whole range: a
        // constant delay, or one that never reaches its bound, fails here.
        let samples =
            |attempt: u32| -> Vec<u128> { (0..300).map(|_| ms(retry.delay(attempt))).collect() };
        // The bound doubles from the base until the cap, then stays.
        let bounds = [100, 200, 400, 400, 400];
        let mut previous: Option<(u128, u128)> = None;
        for (attempt, bound) in (0u32..).zip(bounds) {
            let got = samples(attempt);
            let min = got.iter().min().expect("samples");
            let max = got.iter().max().expect("samples");
            assert!(
                *min >= bound / 2 && *max <= bound,
                "attempt {attempt}: delays {min}..={max} ms outside [{}, {bound}]",
                bound / 2
            );
            assert!(
                *max >= bound * 9 / 10,
                "attempt {attempt}: delays never come near the bound {bound} ms (max {max})"
            );
            assert!(min < max, "attempt {attempt}: no jitter");
            // Below the cap, every delay of a retry is at least every
            // delay of the one before: the ranges [b/2, b] and [b, 2b] meet.
            if let Some((before_bound, before_max)) = previous {
                if bound > before_bound {
                    assert!(
                        *min >= before_max,
                        "attempt {attempt}: {min} ms < {before_max} ms the attempt before"
                    );
                }
            }
            previous = Some((bound, *max));
        }
        // Far past the cap it stays there, without overflowing.
        for attempt in [10, 31, 64, u32::MAX] {
            let got = samples(attempt);
            assert!(
                got.iter().all(|d| (200..=400).contains(d)),
                "attempt {attempt}: {got:?}"
            );
            assert!(
                got.iter().any(|d| *d >= 360),
                "attempt {attempt}: never at the cap"
            );
        }
    }
}
