//! Redaction: whole texts, records, and streams cut anywhere.

use proptest::prelude::*;

use super::*;

fn secrets(values: &[&str]) -> Secrets {
    let secrets = Secrets::default();
    for value in values {
        secrets.add(value);
    }
    secrets
}

fn redacted(secrets: &Secrets, text: &str) -> String {
    let mut text = text.to_owned();
    secrets.redact(&mut text);
    text
}

#[test]
fn known_values_and_trigger_tokens_are_replaced() {
    let s = secrets(&["sk-live-0123456789", "short"]);
    let token = format!("htr_{}", "ab".repeat(32));
    let text = format!("key=sk-live-0123456789 tok={token} short ok");
    assert_eq!(
        redacted(&s, &text),
        "key=<redacted> tok=htr_<redacted> short ok"
    );
}

#[test]
fn a_secret_containing_another_goes_whole() {
    let s = secrets(&["abcdefgh", "abcdefgh-and-more"]);
    assert_eq!(redacted(&s, "x abcdefgh-and-more y"), "x <redacted> y");
}

#[test]
fn secret_names_follow_their_shape() {
    for name in [
        "HOLARCHY_TOKEN",
        "OPENAI_API_KEY",
        "GH_WEBHOOK_SECRET",
        "db_password",
    ] {
        assert!(is_secret_name(name), "{name}");
    }
    for name in ["PATH", "HOME", "TOKENIZER_DIR", "KEYBOARD"] {
        assert!(!is_secret_name(name), "{name}");
    }
}

/// Feeds `text` to the stream redactor in the given pieces.
fn through_stream(secrets: &Secrets, text: &[u8], cuts: &[usize]) -> Vec<u8> {
    let mut held = Vec::new();
    let mut out = Vec::new();
    let mut from = 0;
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (text.len() + 1)).collect();
    cuts.sort_unstable();
    for cut in cuts.into_iter().chain([text.len()]) {
        held.extend_from_slice(&text[from..cut.max(from)]);
        from = cut.max(from);
        out.extend(secrets.redact_stream(&mut held, false));
    }
    out.extend(secrets.redact_stream(&mut held, true));
    assert!(held.is_empty());
    out
}

proptest! {
    #[test]
    fn a_stream_cut_anywhere_is_redacted_as_the_whole_text(
        parts in proptest::collection::vec(
            prop_oneof![
                Just("s3cr3t-value".to_owned()),
                Just("s3cr3t".to_owned()),
                Just(format!("htr_{}", "0f".repeat(32))),
                Just("htr_0f".to_owned()),
                "[a-z 0-9\n]{0,20}",
            ],
            0..12,
        ),
        cuts in proptest::collection::vec(0usize..400, 0..8),
    ) {
        let s = secrets(&["s3cr3t-value"]);
        let text = parts.concat();
        let streamed = through_stream(&s, text.as_bytes(), &cuts);
        prop_assert_eq!(String::from_utf8(streamed).expect("utf-8"), redacted(&s, &text));
    }
}

#[test]
fn output_that_cannot_start_a_secret_is_passed_on_at_once() {
    let s = secrets(&["s3cr3t-value"]);
    let mut held = b"1\n".to_vec();
    assert_eq!(s.redact_stream(&mut held, false), b"1\n");
    assert!(held.is_empty());
    // What may begin a secret or a trigger token waits for the next read.
    for (text, kept) in [
        ("ok s3cr3t-v", "s3cr3t-v"),
        ("ok htr", "htr"),
        ("ok htr_0f1", "htr_0f1"),
    ] {
        let mut held = text.as_bytes().to_vec();
        assert_eq!(s.redact_stream(&mut held, false), b"ok ");
        assert_eq!(held, kept.as_bytes(), "{text}");
    }
}
