//! Cuts a tool result's output to a byte bound on its JSON text, keeping
//! it valid JSON and its shape where it can: the longest strings are cut
//! first, each with a marker giving its full size, so a brain paging a
//! command's output still reads an `output` field, only shorter.

use serde_json::{json, Value};

use super::placeholder::escaped_len;
use crate::limits::json_len;

/// Room kept for the marker appended to each cut string.
const MARKER_ROOM: usize = 128;

/// `output` if its JSON text fits in `limit` bytes; otherwise a shorter
/// value, whose text fits, that says what was cut and from how many bytes.
pub fn cap_output(output: Value, limit: usize) -> Value {
    let full = json_len(&output);
    if full <= limit {
        return output;
    }
    // Lengths are as written (escaped), so the sums are exact but for the
    // markers; try once more with half the room before giving up the
    // shape.
    for room in [limit, limit / 2] {
        let mut lengths = Vec::new();
        string_lengths(&output, &mut lengths);
        let fixed = full.saturating_sub(lengths.iter().sum::<usize>());
        let strings_room = room.saturating_sub(fixed + MARKER_ROOM * lengths.len());
        if let Some(level) = fill_level(&mut lengths, strings_room) {
            let mut cut = output.clone();
            cut_strings(&mut cut, level, full, limit);
            if json_len(&cut) <= limit {
                return cut;
            }
        }
    }
    head_only(&output.to_string(), limit)
}

/// The whole text's head, as a string in a small object: for an output
/// whose shape cannot be kept within the bound.
fn head_only(output: &str, limit: usize) -> Value {
    // JSON text inside a JSON string at most doubles (quotes, backslashes).
    let head =
        holarchy_supervision::bounds::head(output, limit.saturating_sub(2 * MARKER_ROOM) / 2);
    json!({
        "cut": format!("this result was {} bytes, over the limit of {limit} (--max-tool-result-bytes); its head follows", output.len()),
        "head": head,
    })
}

fn string_lengths(value: &Value, out: &mut Vec<usize>) {
    match value {
        Value::String(s) => out.push(escaped_len(s)),
        Value::Array(items) => items.iter().for_each(|v| string_lengths(v, out)),
        Value::Object(map) => map.values().for_each(|v| string_lengths(v, out)),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// The largest written length `level` such that cutting every string to it keeps
/// their total within `room`; `None` if no string is long enough to cut.
fn fill_level(lengths: &mut [usize], room: usize) -> Option<usize> {
    lengths.sort_unstable();
    let mut left = room;
    for (i, &len) in lengths.iter().enumerate() {
        let share = left / (lengths.len() - i);
        if len > share {
            return Some(share);
        }
        left -= len;
    }
    None
}

fn cut_strings(value: &mut Value, level: usize, full: usize, limit: usize) {
    match value {
        Value::String(s) if escaped_len(s) > level => {
            let total = s.len();
            s.truncate(raw_end(s, level));
            s.push_str(&format!(
                "… [cut: {total} bytes here; the result was {full} bytes, over --max-tool-result-bytes {limit}]"
            ));
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| cut_strings(v, level, full, limit)),
        Value::Object(map) => map
            .values_mut()
            .for_each(|v| cut_strings(v, level, full, limit)),
        _ => {}
    }
}

/// Where to cut `s` so its written (escaped) form takes at most `level`
/// bytes, on a character boundary.
fn raw_end(s: &str, level: usize) -> usize {
    let mut written = 0;
    for (at, c) in s.char_indices() {
        let mut buf = [0u8; 4];
        written += escaped_len(c.encode_utf8(&mut buf));
        if written > level {
            return at;
        }
    }
    s.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_within_the_bound_is_untouched() {
        let value = json!({ "output": "short" });
        assert_eq!(cap_output(value.clone(), 1024), value);
    }

    #[test]
    fn a_long_output_field_is_cut_and_keeps_its_shape() {
        let value = json!({ "task_id": "t1", "output": "x".repeat(300_000), "done": false });
        let cut = cap_output(value, 64 * 1024);
        assert!(json_len(&cut) <= 64 * 1024, "{}", json_len(&cut));
        assert_eq!(cut["task_id"], "t1");
        assert_eq!(cut["done"], false);
        let output = cut["output"].as_str().expect("output kept");
        assert!(output.len() > 60_000, "most of the room used");
        assert!(output.contains("cut: 300000 bytes here"), "says its size");
    }

    #[test]
    fn escaped_lines_keep_their_shape_and_short_fields_whole() {
        let value = json!({ "task_id": "tsk_1", "output": "x\n".repeat(500_000) });
        let cut = cap_output(value, 256 * 1024);
        assert!(json_len(&cut) <= 256 * 1024, "{}", json_len(&cut));
        assert_eq!(cut["task_id"], "tsk_1");
        assert!(cut["output"].as_str().is_some_and(|o| o.len() > 100_000));
    }

    #[test]
    fn escaped_text_and_many_strings_stay_within_the_bound() {
        let quotes = "\"\\".repeat(100_000);
        let many: Vec<String> = (0..5000).map(|i| format!("line {i}")).collect();
        for value in [json!({ "output": quotes }), json!({ "lines": many })] {
            let cut = cap_output(value, 4096);
            assert!(json_len(&cut) <= 4096, "{}", json_len(&cut));
        }
    }

    #[test]
    fn an_output_without_strings_to_cut_gets_its_head_in_an_object() {
        let numbers: Vec<u64> = (0..10_000).collect();
        let value = json!(numbers);
        let full = json_len(&value);
        let cut = cap_output(value, 1000);
        assert!(json_len(&cut) <= 1000);
        assert!(cut["cut"]
            .as_str()
            .is_some_and(|c| c.contains(&format!("{full} bytes"))));
        assert!(cut["head"]
            .as_str()
            .is_some_and(|h| h.starts_with("[0,1,2")));
    }
}
