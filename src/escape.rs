//! Text from agents made safe to print in an operator's terminal.
//!
//! Replies, events, command lines, task output and notes are written by
//! brains and their programs, which the operator does not control. Printed
//! raw, their control characters are the terminal's commands: `\e[2K\r`
//! erases and forges a line, an OSC sequence sets the window title or (on
//! some terminals) writes the clipboard. Every control character is shown
//! as a `\u001b`-style escape instead: readable, and in a JSON line the
//! very same string (so `--json` output stays exact).

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must not reach a terminal as it is. Newlines and tabs are
/// decided by the caller: a block of text keeps them, a cell does not.
fn is_unsafe(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// Unicode's bidirectional overrides and isolates: they reorder what the
/// operator sees without being seen ("Trojan Source").
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn escaped(text: &str, keep: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(|c| is_unsafe(c) && !keep(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_unsafe(c) && !keep(c) {
            // Four hex digits cover every control character; JSON reads
            // the same escape as the same character.
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A block of text (task output, a reply): lines and tabs kept, every
/// other control character escaped.
pub fn block(text: &str) -> Cow<'_, str> {
    escaped(text, |c| c == '\n' || c == '\t')
}

/// One field of one line (a table cell, an event's text): line breaks
/// escaped too, so a field can never start a line of its own that looks
/// like the program's.
pub fn one_line(text: &str) -> Cow<'_, str> {
    escaped(text, |_| false)
}

/// A block of text whose lines after the first are indented by `indent`
/// spaces: what an agent wrote stays visibly inside its entry.
pub fn indented(text: &str, indent: usize) -> String {
    let pad = format!("\n{:indent$}", "");
    block(text).replace('\n', &pad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_never_reach_the_terminal() {
        let forged = "ok\u{1b}[2K\rAPPROVED\u{7}\u{1b}]52;c;ZXZpbA==\u{7}\u{9b}31m\u{202e}";
        for shown in [block(forged), one_line(forged)] {
            assert!(!shown.chars().any(is_unsafe), "{shown:?}");
            assert!(shown.contains("\\u001b[2K\\u000dAPPROVED"), "{shown}");
            assert!(shown.contains("\\u009b31m\\u202e"), "{shown}");
        }
        assert_eq!(block("two\nlines\tand a tab"), "two\nlines\tand a tab");
        assert_eq!(one_line("two\nlines"), "two\\u000alines");
        assert_eq!(indented("a\nb\u{1b}", 4), "a\n    b\\u001b");
        assert!(matches!(one_line("plain text é"), Cow::Borrowed(_)));
    }

    #[test]
    fn an_escaped_json_line_reads_back_as_the_same_value() {
        let value = serde_json::json!({ "text": "a\u{9b}b\u{7f}c\u{1b}d" });
        let line = value.to_string();
        let shown = block(&line);
        assert!(!shown.chars().any(is_unsafe));
        let back: serde_json::Value = serde_json::from_str(&shown).expect("still JSON");
        assert_eq!(back, value);
    }
}
