//! Server-sent events (the `text/event-stream` format both model APIs
//! stream in), parsed incrementally from bytes as they arrive: a chunk may
//! end anywhere, inside a line, a field, a character or between the CR
//! and LF of one line end. Lines end in LF, CR or CRLF; lines starting
//! with `:` are comments (keepalives); a blank line ends an event; an
//! event cut off by the end of the stream is dropped, as the format says.
//! Only `event` and `data` matter here (`id` and `retry` are for
//! reconnecting browsers). Each event is held to a bound, so a server
//! cannot make the daemon buffer more than that before it is told no.

/// One event: its type (`message` when the server named none) and its
/// data lines joined by LF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SseEvent {
    pub event: String,
    pub data: String,
}

/// Why a stream cannot be read on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SseError {
    #[error("an event of the stream is over {0} bytes")]
    TooLarge(usize),
    #[error("the stream is not UTF-8 text")]
    NotText,
}

/// The parser's state between chunks.
#[derive(Debug)]
pub(crate) struct SseParser {
    /// The line being read, without its end.
    line: Vec<u8>,
    /// The last chunk ended in CR: an LF opening the next one ends no line.
    after_cr: bool,
    /// No line read yet: a byte-order mark at the start is dropped.
    first_line: bool,
    event: String,
    data: String,
    /// The event has at least one `data` line.
    has_data: bool,
    max_event: usize,
}

impl SseParser {
    pub(crate) fn new(max_event: usize) -> Self {
        Self {
            line: Vec::new(),
            after_cr: false,
            first_line: true,
            event: String::new(),
            data: String::new(),
            has_data: false,
            max_event,
        }
    }

    /// Reads `bytes`, appending every event they complete to `out`.
    pub(crate) fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let mut rest = bytes;
        while !rest.is_empty() {
            if std::mem::take(&mut self.after_cr) && rest[0] == b'\n' {
                rest = &rest[1..];
                continue;
            }
            match memchr::memchr2(b'\r', b'\n', rest) {
                None => {
                    self.line.extend_from_slice(rest);
                    self.check_size()?;
                    break;
                }
                Some(end) => {
                    self.line.extend_from_slice(&rest[..end]);
                    self.check_size()?;
                    self.after_cr = rest[end] == b'\r';
                    rest = &rest[end + 1..];
                    self.take_line(out)?;
                }
            }
        }
        Ok(())
    }

    /// The event being read and the line it is on, over the bound?
    fn check_size(&self) -> Result<(), SseError> {
        if self.line.len() + self.data.len() + self.event.len() > self.max_event {
            return Err(SseError::TooLarge(self.max_event));
        }
        Ok(())
    }

    fn take_line(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let mut line = std::mem::take(&mut self.line);
        if std::mem::take(&mut self.first_line) && line.starts_with("\u{feff}".as_bytes()) {
            line.drain(..3);
        }
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let text = std::str::from_utf8(&line).map_err(|_| SseError::NotText)?;
        let (field, value) = match text.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (text, ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            // `id`, `retry` and fields the format does not know.
            _ => {}
        }
        // Reuse the line's allocation for the next one.
        line.clear();
        self.line = line;
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let event = std::mem::take(&mut self.event);
        if !std::mem::take(&mut self.has_data) {
            return;
        }
        out.push(SseEvent {
            event: if event.is_empty() {
                "message".to_owned()
            } else {
                event
            },
            data: std::mem::take(&mut self.data),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in(pieces: &[&[u8]]) -> Result<Vec<SseEvent>, SseError> {
        let mut parser = SseParser::new(1024);
        let mut out = Vec::new();
        for piece in pieces {
            parser.feed(piece, &mut out)?;
        }
        Ok(out)
    }

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
        }
    }

    const STREAM: &str = "\u{feff}: keepalive\r\n\r\nevent: content_block_delta\r\ndata: {\"text\":\"h\u{e9}llo\"}\r\n\r\ndata:a\ndata: b\n\n:ping\n\nevent: message_stop\rdata: {}\r\r";

    #[test]
    fn every_split_of_a_stream_reads_the_same_events() {
        let want = vec![
            ev("content_block_delta", "{\"text\":\"h\u{e9}llo\"}"),
            ev("message", "a\nb"),
            ev("message_stop", "{}"),
        ];
        let bytes = STREAM.as_bytes();
        assert_eq!(parse_in(&[bytes]), Ok(want.clone()));
        // Cut in two at every byte (inside the BOM, the é, a CRLF)...
        for at in 0..=bytes.len() {
            let (a, b) = bytes.split_at(at);
            assert_eq!(parse_in(&[a, b]), Ok(want.clone()), "cut at {at}");
        }
        // ...and one byte at a time.
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(parse_in(&singles), Ok(want));
    }

    #[test]
    fn comments_and_empty_events_dispatch_nothing_and_a_cut_event_is_dropped() {
        assert_eq!(
            parse_in(&[b": hi\n\nevent: ping\n\nid: 7\nretry: 10\n\n"]),
            Ok(vec![])
        );
        // A type without data dispatches nothing and does not carry over.
        assert_eq!(
            parse_in(&[b"event: lost\n\ndata: x\n\n"]),
            Ok(vec![ev("message", "x")])
        );
        // The stream ends inside an event: it never completes.
        assert_eq!(
            parse_in(&[b"data: whole\n\ndata: {\"cut"]),
            Ok(vec![ev("message", "whole")])
        );
        // A field without a colon; only one leading space is taken off.
        assert_eq!(
            parse_in(&[b"data\ndata:  two\n\n"]),
            Ok(vec![ev("message", "\n two")])
        );
    }

    #[test]
    fn an_event_over_the_bound_is_refused_however_it_arrives() {
        let big = format!("data: {}\n\n", "x".repeat(2000));
        assert_eq!(parse_in(&[big.as_bytes()]), Err(SseError::TooLarge(1024)));
        // Many data lines, each short, add up to too much.
        let lines = "data: 0123456789\n".repeat(100);
        assert_eq!(parse_in(&[lines.as_bytes()]), Err(SseError::TooLarge(1024)));
        // A line without an end, fed a byte at a time, stops at the bound.
        let endless = vec![b'y'; 2000];
        let singles: Vec<&[u8]> = endless.chunks(1).collect();
        assert_eq!(parse_in(&singles), Err(SseError::TooLarge(1024)));
        // Many small events are fine: the bound is per event.
        let small = "data: 0123456789\n\n".repeat(1000);
        assert_eq!(parse_in(&[small.as_bytes()]).map(|e| e.len()), Ok(1000));
    }

    #[test]
    fn bytes_that_are_not_text_are_refused() {
        assert_eq!(parse_in(&[b"data: \xff\xfe\n\n"]), Err(SseError::NotText));
    }
}
