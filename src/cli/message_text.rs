//! The text of a message given on the command line (`agent send`, `task
//! input`): as typed, `-` for standard input, `@FILE` for a file's
//! contents (`@@...` sends a literal leading `@`), as curl reads `-d`.
//! And a warning when the text looks like JSON but does not parse: the
//! scripted brain follows a JSON object and acknowledges anything else, so
//! a stray quote would otherwise turn instructions into chatter silently.

use std::io::Read;

use super::failure::{CliError, Kind};
use super::output::Output;
use crate::api::budget::MAX_GRPC_MESSAGE_BYTES;

/// The most bytes read from stdin or a file: more could not be sent in
/// one call anyway, and an endless pipe must not fill the client's memory.
const MAX_TEXT_BYTES: u64 = MAX_GRPC_MESSAGE_BYTES as u64;

/// The text `arg` stands for.
pub fn read(arg: &str) -> anyhow::Result<String> {
    if arg == "-" {
        return read_bounded(std::io::stdin().lock(), "standard input");
    }
    if let Some(literal) = arg.strip_prefix("@@") {
        return Ok(format!("@{literal}"));
    }
    if let Some(path) = arg.strip_prefix('@') {
        let file = std::fs::File::open(path).map_err(|err| {
            let kind = match err.kind() {
                std::io::ErrorKind::NotFound => Kind::NotFound,
                std::io::ErrorKind::PermissionDenied => Kind::Denied,
                _ => Kind::Failed,
            };
            CliError::new(
                kind,
                format!("cannot read the message file `{path}`: {err} (to send text that starts with @, write @@)"),
            )
        })?;
        return read_bounded(file, &format!("`{path}`"));
    }
    Ok(arg.to_owned())
}

fn read_bounded(source: impl Read, what: &str) -> anyhow::Result<String> {
    let mut bytes = Vec::new();
    source
        .take(MAX_TEXT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| CliError::new(Kind::Failed, format!("cannot read {what}: {err}")))?;
    if bytes.len() as u64 > MAX_TEXT_BYTES {
        return Err(CliError::invalid(format!(
            "the message in {what} is over {MAX_TEXT_BYTES} bytes"
        ))
        .into());
    }
    String::from_utf8(bytes)
        .map_err(|_| CliError::invalid(format!("the message in {what} is not UTF-8 text")).into())
}

/// Why `text` looks like JSON yet does not parse, if it does.
pub fn broken_json(text: &str) -> Option<String> {
    let trimmed = text.trim_start();
    if !(trimmed.starts_with('{') || trimmed.starts_with('[')) {
        return None;
    }
    serde_json::from_str::<serde_json::Value>(text)
        .err()
        .map(|err| err.to_string())
}

/// Warns on stderr when `text` looks like JSON but does not parse. The
/// message is still sent: it may be meant as text.
pub fn warn_if_broken_json(text: &str, out: &Output) {
    if let Some(why) = broken_json(text) {
        out.warn(&format!(
            "the message looks like JSON but does not parse ({why}); it is sent as plain text, \
             which the scripted brain only acknowledges"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_that_does_not_parse_is_named_and_text_is_not() {
        assert!(broken_json(r#"{"reply":"x""#).is_some());
        assert!(broken_json(r#"  [1, 2"#).is_some());
        assert_eq!(broken_json(r#"{"reply":"x"}"#), None);
        assert_eq!(broken_json("check the build"), None);
    }

    #[test]
    fn an_at_sign_reads_a_file_and_two_send_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("note.txt");
        std::fs::write(&path, "from a file\n").expect("written");
        let arg = format!("@{}", path.display());
        assert_eq!(read(&arg).expect("read"), "from a file\n");
        assert_eq!(read("@@ops hello").expect("literal"), "@ops hello");
        let missing = read("@/no/such/file").expect_err("missing");
        assert!(missing.to_string().contains("@@"), "{missing}");
    }

    #[test]
    fn input_past_the_bound_is_refused() {
        let big = std::io::repeat(b'a');
        let err = read_bounded(big, "the pipe").expect_err("too long");
        assert!(err.to_string().contains("over"), "{err}");
    }
}
