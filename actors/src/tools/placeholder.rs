//! Placeholders: `{{results[N].field.sub}}` in a tool call's strings takes
//! a field of the N-th earlier result of the turn. Filling is bounded by
//! construction: every piece is charged, at its serialized size, against
//! the tool's input bound before it is appended, so a call whose filled
//! input would be too large fails as soon as that is known and the
//! oversized value is never built (nested placeholders across calls would
//! otherwise double the input at each call).

use serde_json::{Map, Value};

use super::ToolResult;

const OPEN: &str = "{{results[";
const CLOSE: &str = "}}";

/// A tool input over its bound, filled or as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the tool input is over its limit of {limit} bytes (as JSON, placeholders filled in)")]
pub struct InputTooLarge {
    pub limit: usize,
}

/// Fills the placeholders of `input` from `results`. A placeholder that
/// matches nothing is left as written. Fails if the filled input, as
/// compact JSON, would exceed `limit` bytes; never holds more than about
/// `limit` bytes of filled text while it works.
pub fn fill_placeholders(
    input: &Value,
    results: &[ToolResult],
    limit: usize,
) -> Result<Value, InputTooLarge> {
    let mut filler = Filler {
        results,
        budget: Budget { left: limit, limit },
    };
    filler.value(input)
}

/// Bytes of compact JSON still allowed.
struct Budget {
    left: usize,
    limit: usize,
}

impl Budget {
    fn charge(&mut self, bytes: usize) -> Result<(), InputTooLarge> {
        self.left = self
            .left
            .checked_sub(bytes)
            .ok_or(InputTooLarge { limit: self.limit })?;
        Ok(())
    }
}

struct Filler<'a> {
    results: &'a [ToolResult],
    budget: Budget,
}

impl Filler<'_> {
    fn value(&mut self, input: &Value) -> Result<Value, InputTooLarge> {
        Ok(match input {
            Value::String(text) => Value::String(self.text(text)?),
            Value::Array(items) => {
                self.budget.charge(2 + items.len().saturating_sub(1))?;
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(self.value(item)?);
                }
                Value::Array(out)
            }
            Value::Object(map) => {
                self.budget.charge(2 + map.len().saturating_sub(1))?;
                let mut out = Map::new();
                for (key, item) in map {
                    // `"key":`
                    self.budget.charge(escaped_len(key) + 3)?;
                    out.insert(key.clone(), self.value(item)?);
                }
                Value::Object(out)
            }
            // Numbers print in at most a few dozen bytes.
            scalar => {
                self.budget.charge(scalar.to_string().len())?;
                scalar.clone()
            }
        })
    }

    /// One string, quotes included in the charge.
    fn text(&mut self, text: &str) -> Result<String, InputTooLarge> {
        self.budget.charge(2)?;
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find(OPEN) {
            self.append(&mut out, &rest[..start])?;
            let tail = &rest[start..];
            let Some(end) = tail.find(CLOSE) else {
                rest = tail;
                break;
            };
            let written = &tail[..end + CLOSE.len()];
            match self.lookup(&tail[OPEN.len()..end])? {
                Some(filled) => self.append(&mut out, &filled)?,
                None => self.append(&mut out, written)?,
            }
            rest = &tail[end + CLOSE.len()..];
        }
        self.append(&mut out, rest)?;
        Ok(out)
    }

    fn append(&mut self, out: &mut String, piece: &str) -> Result<(), InputTooLarge> {
        self.budget.charge(escaped_len(piece))?;
        out.push_str(piece);
        Ok(())
    }

    /// `N].a.b` -> the text of field a.b of result N; `None` if there is no
    /// such field. A text longer than the budget left is refused before it
    /// is copied or printed.
    fn lookup(&mut self, reference: &str) -> Result<Option<String>, InputTooLarge> {
        let Some((index, path)) = reference.split_once(']') else {
            return Ok(None);
        };
        let Ok(index) = index.parse::<usize>() else {
            return Ok(None);
        };
        let Some(result) = self.results.get(index) else {
            return Ok(None);
        };
        let mut value = &result.output;
        for field in path.split('.').filter(|f| !f.is_empty()) {
            match value.get(field) {
                Some(inner) => value = inner,
                None => return Ok(None),
            }
        }
        let limit = self.budget.left;
        let too_large = InputTooLarge {
            limit: self.budget.limit,
        };
        match value {
            Value::String(s) if s.len() > limit => Err(too_large),
            Value::String(s) => Ok(Some(s.clone())),
            other => {
                // Printed through a writer that stops at the budget, so a
                // huge value is never printed whole.
                let mut writer = Capped {
                    bytes: Vec::new(),
                    limit,
                };
                serde_json::to_writer(&mut writer, other).map_err(|_| too_large)?;
                String::from_utf8(writer.bytes)
                    .map(Some)
                    .map_err(|_| too_large)
            }
        }
    }
}

/// A writer that fails once more than `limit` bytes are written.
struct Capped {
    bytes: Vec<u8>,
    limit: usize,
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + buf.len() > self.limit {
            return Err(std::io::Error::other("over the limit"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Bytes `text` takes inside a JSON string as serde_json writes it: quote
/// and backslash escaped, the short escapes for \b \f \n \r \t, `\u00XX`
/// for other control characters, everything else as UTF-8.
pub fn escaped_len(text: &str) -> usize {
    text.bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\x08' | b'\x0c' | b'\n' | b'\r' | b'\t' => 2,
            0x00..=0x1f => 6,
            _ => 1,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::protocol::CallInput;

    fn result(output: Value) -> ToolResult {
        ToolResult {
            tool: "T".into(),
            input: CallInput::Whole(json!({})),
            output,
            is_error: false,
        }
    }

    #[test]
    fn placeholders_take_fields_of_earlier_results() {
        let results = [result(
            json!({ "token": "htr_abc", "n": 3, "deep": { "x": "y" } }),
        )];
        let input = json!({ "a": "t={{results[0].token}}", "b": ["{{results[0].n}}", "{{results[0].deep.x}}"], "c": "{{results[9].x}}", "d": "{{results[0" });
        let filled = fill_placeholders(&input, &results, 1024).expect("small");
        assert_eq!(
            filled,
            json!({ "a": "t=htr_abc", "b": ["3", "y"], "c": "{{results[9].x}}", "d": "{{results[0" })
        );
    }

    #[test]
    fn a_doubling_chain_fails_fast_within_the_bound() {
        // Each call doubles the previous call's text: 2^40 bytes if filled.
        let limit = 64 * 1024;
        let call = json!({ "text": "{{results[0].text}}{{results[0].text}}" });
        let mut results = vec![result(json!({ "text": "x".repeat(100) }))];
        let started = std::time::Instant::now();
        let mut failed_at = None;
        for step in 0..40 {
            match fill_placeholders(&call, &results, limit) {
                Ok(filled) => {
                    assert!(filled.to_string().len() <= limit);
                    results = vec![result(filled)];
                }
                Err(err) => {
                    assert_eq!(err, InputTooLarge { limit });
                    failed_at = Some(step);
                    break;
                }
            }
        }
        // 100 * 2^10 > 64 KiB.
        assert_eq!(failed_at, Some(9));
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn a_huge_result_named_many_times_is_refused_without_printing_it() {
        let big = result(json!({ "blob": { "x": "y".repeat(4 * 1024 * 1024) } }));
        let input = Value::String("{{results[0].blob}}".repeat(10_000));
        let started = std::time::Instant::now();
        let err = fill_placeholders(&input, &[big], 64 * 1024).expect_err("too large");
        assert_eq!(err.limit, 64 * 1024);
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn escaping_is_charged_as_serde_json_writes_it() {
        let text = "a\"b\\c\n\u{1}é\u{7f}</";
        assert_eq!(
            escaped_len(text) + 2,
            serde_json::to_string(text).expect("json").len()
        );
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let piece = prop_oneof![
            Just("{{results[0].a}}".to_owned()),
            Just("{{results[1].b.c}}".to_owned()),
            Just("{{results[2]}}".to_owned()),
            Just("{{results[1].b}}".to_owned()),
            Just("{{results[".to_owned()),
            "[a-z\"\\\\\n\u{1}é]{0,12}",
        ];
        let text = proptest::collection::vec(piece, 0..6).prop_map(|p| p.concat());
        let leaf = prop_oneof![
            text.prop_map(Value::String),
            any::<i64>().prop_map(Value::from),
            any::<bool>().prop_map(Value::Bool),
            Just(Value::Null),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z\"]{0,4}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn filled_inputs_stay_within_the_bound_or_fail(
            input in arb_json(),
            outputs in proptest::collection::vec(arb_json(), 0..4),
            limit in 0usize..600,
        ) {
            let results: Vec<ToolResult> = outputs.into_iter().map(result).collect();
            match fill_placeholders(&input, &results, limit) {
                Ok(filled) => {
                    prop_assert!(filled.to_string().len() <= limit);
                }
                Err(err) => {
                    prop_assert_eq!(err.limit, limit);
                    // Refused only when the full fill is really over.
                    let full = fill_placeholders(&input, &results, usize::MAX)
                        .expect("no bound");
                    prop_assert!(full.to_string().len() > limit);
                }
            }
        }

        #[test]
        fn the_charge_is_the_exact_serialized_size(
            input in arb_json(),
            outputs in proptest::collection::vec(arb_json(), 0..4),
        ) {
            let results: Vec<ToolResult> = outputs.into_iter().map(result).collect();
            let filled = fill_placeholders(&input, &results, usize::MAX).expect("no bound");
            let size = filled.to_string().len();
            prop_assert!(fill_placeholders(&input, &results, size).is_ok());
            if size > 0 {
                prop_assert!(fill_placeholders(&input, &results, size - 1).is_err());
            }
        }
    }
}
