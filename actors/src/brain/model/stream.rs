//! A streamed answer: the request is sent and retried as in
//! [`super::transport`], and a `text/event-stream` answer is read as it
//! arrives, each event handed to the brain's [`Assembler`], which builds
//! the answer and passes text on to watchers. An answer is whole only when
//! its format says so (OpenAI's `[DONE]`, Anthropic's `message_stop`): a
//! stream that breaks off, falls silent or ends early is thrown away and
//! asked again from the start, so no half-written answer is ever used.
//! A server that answers with one JSON document instead (one that ignores
//! `stream`) is read as before.
//!
//! Bounds: the whole answer is read up to [`MAX_ANSWER`] bytes and each
//! event up to [`MAX_EVENT`]; past either the turn fails (asking again
//! would get the same answer).

use std::time::Duration;

use reqwest::header::CONTENT_TYPE;

use super::sse::{SseEvent, SseParser};
use super::transport::{
    self, read_answer, ModelError, RetryPolicy, Sent, Unread, Unreadable, MAX_ANSWER,
};

/// Bytes of one event read at most: room for the largest tool input (a
/// 1 MiB patch) escaped twice, as a JSON string inside a JSON event.
pub(crate) const MAX_EVENT: usize = 2 * 1024 * 1024;
/// How long one streamed request may take in all: a turn's deadline. A
/// long answer streams for minutes; the idle bound catches a dead one.
const WHOLE: Duration = Duration::from_secs(600);

/// Whether an answer is whole after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    More,
    Done,
}

/// Why an event ends an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The server said something passing went wrong (overloaded): ask again.
    Retry(String),
    /// The stream does not hold an answer this brain can read.
    Fail(String),
}

/// What a brain makes of a streamed answer.
pub(crate) trait Assembler {
    /// One event of the stream.
    fn event(&mut self, event: SseEvent) -> Result<Flow, Fault>;
    /// The server closed the stream without the event that ends an answer:
    /// whether what was read is whole all the same (a server that leaves
    /// out the last marker). By default it is not.
    fn ended(&mut self) -> bool {
        false
    }
    /// The attempt failed: what was read of it is void, and the next
    /// attempt, if any, starts from nothing.
    fn abandon(&mut self, why: &str);
    /// The server answered with one JSON document rather than a stream.
    fn whole(&mut self, body: &[u8]) -> Result<(), Unreadable>;
}

/// Posts what `request` builds until `answer` has a whole answer or
/// retrying is over; a failed attempt is abandoned whole before the next.
pub(crate) async fn post<F, A>(
    retry: RetryPolicy,
    request: F,
    answer: &mut A,
) -> Result<(), ModelError>
where
    F: Fn() -> reqwest::RequestBuilder,
    A: Assembler,
{
    let mut attempt = 0;
    loop {
        // The answer's headers may take as long as a stream may stay
        // silent (`retry.idle`).
        let idle = retry.idle;
        let sent = tokio::time::timeout(idle, transport::send(&retry, request().timeout(WHOLE)))
            .await
            .unwrap_or_else(|_| Sent::Retry(ModelError::NoAnswer(idle), None));
        let outcome = match sent {
            Sent::Answer(response) => read(response, idle, answer).await,
            Sent::Retry(why, wait) => Step::Retry(why, wait),
            Sent::Fail(why) => Step::Fail(why),
        };
        let (why, wait) = match outcome {
            Step::Done => return Ok(()),
            Step::Fail(why) => {
                answer.abandon(&why.to_string());
                return Err(why);
            }
            Step::Retry(why, wait) => {
                answer.abandon(&why.to_string());
                (why, wait)
            }
        };
        transport::backoff(&retry, attempt, why, wait).await?;
        attempt += 1;
    }
}

/// What one attempt came to.
enum Step {
    Done,
    Retry(ModelError, Option<Duration>),
    Fail(ModelError),
}

/// Reads one answer: a stream event by event, or a whole document; a
/// silence of `idle` breaks either.
async fn read<A: Assembler>(
    mut response: reqwest::Response,
    idle: Duration,
    answer: &mut A,
) -> Step {
    let streamed = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        });
    if !streamed {
        return match read_answer(response, idle).await {
            Ok(bytes) => match answer.whole(&bytes) {
                Ok(()) => Step::Done,
                Err(why) => Step::Fail(why.into()),
            },
            Err(Unread::TooLarge) => Step::Fail(ModelError::TooLarge),
            Err(Unread::BrokeOff(why)) => Step::Retry(ModelError::Read(why), None),
        };
    }
    let mut parser = SseParser::new(MAX_EVENT);
    let mut events = Vec::new();
    let mut read = 0usize;
    loop {
        let chunk = match tokio::time::timeout(idle, response.chunk()).await {
            Err(_) => return Step::Retry(ModelError::Silent(idle), None),
            Ok(Err(err)) => return Step::Retry(ModelError::BrokeOff(err), None),
            Ok(Ok(None)) if answer.ended() => return Step::Done,
            Ok(Ok(None)) => return Step::Retry(ModelError::EndedEarly, None),
            Ok(Ok(Some(chunk))) => chunk,
        };
        read += chunk.len();
        if read > MAX_ANSWER {
            return Step::Fail(ModelError::TooLarge);
        }
        if let Err(err) = parser.feed(&chunk, &mut events) {
            return Step::Fail(ModelError::Event(err));
        }
        for event in events.drain(..) {
            match answer.event(event) {
                Ok(Flow::More) => {}
                Ok(Flow::Done) => return Step::Done,
                Err(Fault::Retry(why)) => return Step::Retry(ModelError::Passing(why), None),
                Err(Fault::Fail(why)) => return Step::Fail(ModelError::BadStream(why)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Collects `data` of events until one says `done`; `stop` ends it
    /// without a marker, `fail` and `overloaded` fault.
    #[derive(Default)]
    struct Collect {
        data: Vec<String>,
        abandoned: Vec<String>,
        whole: Option<Vec<u8>>,
    }

    impl Assembler for Collect {
        fn event(&mut self, event: SseEvent) -> Result<Flow, Fault> {
            match event.data.as_str() {
                "done" => Ok(Flow::Done),
                "overloaded" => Err(Fault::Retry("overloaded".into())),
                "fail" => Err(Fault::Fail("unreadable".into())),
                data => {
                    self.data.push(data.to_owned());
                    Ok(Flow::More)
                }
            }
        }

        fn abandon(&mut self, why: &str) {
            self.data.clear();
            self.abandoned.push(why.to_owned());
        }

        fn whole(&mut self, body: &[u8]) -> Result<(), Unreadable> {
            self.whole = Some(body.to_vec());
            Ok(())
        }
    }

    /// A loopback server answering its `i`th connection with the pieces
    /// of `answers[i]`, a millisecond apart, then closing it.
    async fn server(answers: Vec<Vec<Vec<u8>>>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            for pieces in answers {
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
                for piece in pieces {
                    let _ = socket.write_all(&piece).await;
                    let _ = socket.flush().await;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                let _ = socket.shutdown().await;
            }
        });
        url
    }

    fn streamed(body: &str, pieces: usize) -> Vec<Vec<u8>> {
        let mut out = vec![
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
                .to_vec(),
        ];
        let bytes = body.as_bytes();
        let size = bytes.len().div_ceil(pieces).max(1);
        out.extend(bytes.chunks(size).map(<[u8]>::to_vec));
        out
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
    async fn a_stream_cut_short_is_abandoned_and_asked_again() {
        let url = server(vec![
            streamed("data: one\n\ndata: tw", 3),
            streamed("data: overloaded\n\n", 1),
            streamed(
                "data: one\r\n\r\n: ping\r\n\r\ndata: two\r\n\r\ndata: done\r\n\r\n",
                7,
            ),
        ])
        .await;
        let client = reqwest::Client::new();
        let mut collect = Collect::default();
        post(quick(), || client.post(&url), &mut collect)
            .await
            .expect("the third answer is whole");
        assert_eq!(collect.data, ["one", "two"]);
        assert_eq!(
            collect.abandoned,
            ["the stream ended before the answer did", "overloaded"]
        );
    }

    #[tokio::test]
    async fn a_stream_that_never_ends_gives_up_and_a_bad_one_fails_at_once() {
        let cut = || streamed("data: one\n\n", 1);
        let url = server(vec![cut(), cut(), cut()]).await;
        let client = reqwest::Client::new();
        let mut collect = Collect::default();
        let err = post(quick(), || client.post(&url), &mut collect)
            .await
            .expect_err("never whole")
            .to_string();
        assert_eq!(
            err,
            "the stream ended before the answer did (gave up after 2 retries)"
        );
        assert!(collect.data.is_empty(), "nothing half-read is kept");
        assert_eq!(collect.abandoned.len(), 3);

        let url = server(vec![streamed("data: fail\n\n", 1)]).await;
        let mut collect = Collect::default();
        let err = post(quick(), || client.post(&url), &mut collect)
            .await
            .expect_err("unreadable");
        assert_eq!(err.to_string(), "unreadable");
    }

    #[tokio::test]
    async fn streams_and_events_are_held_to_their_bounds() {
        let event = format!("data: {}\n\n", "x".repeat(MAX_EVENT));
        let url = server(vec![streamed(&event, 64)]).await;
        let client = reqwest::Client::new();
        let mut collect = Collect::default();
        let err = post(quick(), || client.post(&url), &mut collect)
            .await
            .expect_err("too large an event")
            .to_string();
        assert!(err.contains("over 2097152 bytes"), "{err}");

        let many = "data: 0123456789abcdef\n\n".repeat(MAX_ANSWER / 24 + 10);
        let url = server(vec![streamed(&many, 64)]).await;
        let mut collect = Collect::default();
        let err = post(quick(), || client.post(&url), &mut collect)
            .await
            .expect_err("too large an answer");
        assert_eq!(err.to_string(), transport::TOO_LARGE);
    }

    #[tokio::test]
    async fn a_server_that_does_not_stream_is_read_whole() {
        let url = server(vec![vec![
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
                .to_vec(),
        ]])
        .await;
        let client = reqwest::Client::new();
        let mut collect = Collect::default();
        post(quick(), || client.post(&url), &mut collect)
            .await
            .expect("whole");
        assert_eq!(collect.whole.as_deref(), Some(&b"{}"[..]));
    }
}
