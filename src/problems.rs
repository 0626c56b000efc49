//! What went wrong in an agent's turn, said in one line for people: a
//! failed run's reason (`run_finished`'s detail) or a tool's error
//! (`tool_called` with `is_error`), read off one event of the log. The
//! CLI (`events`, `agent messages`, `agent get`) and the console's
//! overview say it in these same words.

use serde_json::Value;

use crate::api::pb;
use crate::escape::one_line;

/// The most characters of a reason shown on one line; the whole of it is
/// in `holarchy --json events`.
const MAX_SHOWN: usize = 300;

/// An event's problem, as one line for people: a failed run's reason or a
/// tool's error. `None` for every other event.
pub fn problem(e: &pb::Event) -> Option<String> {
    match e.kind.as_str() {
        "run_finished" => {
            let detail = detail(e);
            if detail["outcome"] != "failed" {
                return None;
            }
            let why = detail["detail"].as_str().unwrap_or_default();
            Some(format!("run failed: {}", shown(or_unsaid(why))))
        }
        "tool_called" => {
            let detail = detail(e);
            if detail["is_error"] != true {
                return None;
            }
            let tool = detail["tool"].as_str().unwrap_or_default();
            let output = detail["output"].as_str().unwrap_or_default();
            // A tool's error is `{"error": ..., "kind": ...}`; any other
            // output (an MCP server's, say) is shown as it is.
            let error: Value = serde_json::from_str(output).unwrap_or(Value::Null);
            Some(match (error["error"].as_str(), error["kind"].as_str()) {
                (Some(why), Some(kind)) => {
                    let kind = kind.replace('_', " ");
                    format!("tool {tool} {kind}: {}", shown(or_unsaid(why)))
                }
                (Some(why), None) => format!("tool {tool} failed: {}", shown(or_unsaid(why))),
                (None, _) => format!("tool {tool} failed: {}", shown(or_unsaid(output))),
            })
        }
        _ => None,
    }
}

fn detail(e: &pb::Event) -> Value {
    serde_json::from_str(&e.detail_json).unwrap_or(Value::Null)
}

fn or_unsaid(text: &str) -> &str {
    if text.trim().is_empty() {
        "(no reason given)"
    } else {
        text
    }
}

/// `text` on one line (its line breaks and runs of spaces one space),
/// escaped, cut to [`MAX_SHOWN`] characters.
fn shown(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let line = one_line(&joined);
    match line.char_indices().nth(MAX_SHOWN) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(kind: &str, detail: Value) -> pb::Event {
        pb::Event {
            kind: kind.to_owned(),
            detail_json: detail.to_string(),
            ..Default::default()
        }
    }

    #[test]
    fn a_failed_run_and_a_tool_error_say_why_and_nothing_else_does() {
        let failed = event(
            "run_finished",
            json!({"outcome": "failed", "detail": "OPENAI_API_KEY is not set"}),
        );
        assert_eq!(
            problem(&failed).as_deref(),
            Some("run failed: OPENAI_API_KEY is not set")
        );
        let tool = event(
            "tool_called",
            json!({"tool": "Nope", "output": "unknown tool `Nope`\nsecond line", "is_error": true}),
        );
        assert_eq!(
            problem(&tool).as_deref(),
            Some("tool Nope failed: unknown tool `Nope` second line")
        );
        let refused = event(
            "tool_called",
            json!({"tool": "Nope", "output": r#"{"error":"not in the catalog","kind":"refused"}"#, "is_error": true}),
        );
        assert_eq!(
            problem(&refused).as_deref(),
            Some("tool Nope refused: not in the catalog")
        );
        let fine = event(
            "tool_called",
            json!({"tool": "AgentGet", "is_error": false}),
        );
        assert_eq!(problem(&fine), None);
        let done = event(
            "run_finished",
            json!({"outcome": "completed", "detail": ""}),
        );
        assert_eq!(problem(&done), None);
    }

    #[test]
    fn a_long_reason_is_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_SHOWN * 2);
        let cut = shown(&long);
        assert_eq!(cut.chars().count(), MAX_SHOWN + 1);
        assert!(cut.ends_with('…'));
    }
}
