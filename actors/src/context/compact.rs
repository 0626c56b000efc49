//! Compaction of a long turn: when the steps a brain is sent each step
//! outgrow the room its budget leaves them, the oldest are folded into a
//! summary and only the newest go on whole. Which steps go is decided
//! here (pure); the summary is the brain's to write
//! ([`crate::brain::Brain::compact`]), and [`truncation`] is the
//! deterministic one every brain without a model of its own gets.

use std::collections::BTreeMap;

use serde::Serialize;

use super::tokens::Tokenizer;
use crate::step::StepRecord;

/// Longest summary kept, in characters, whoever writes it: it goes to the
/// brain at every later step and into the agent's running summary.
pub const MAX_SUMMARY_CHARS: usize = 4000;

/// What stands for the steps compacted away, as brains receive it
/// (`compacted` in the command contract).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Compaction {
    /// Always true: a marker a brain can test for.
    pub compacted: bool,
    /// Steps of this turn folded in so far.
    pub steps: usize,
    /// `model` (the brain's model wrote it) or `truncation`.
    pub by: &'static str,
    pub summary: String,
}

/// What a brain is asked to compact: the summary so far (of steps
/// compacted earlier in the turn) and the steps to fold into it.
#[derive(Debug, Clone)]
pub struct CompactRequest {
    pub earlier: Option<Compaction>,
    pub steps: Vec<StepRecord>,
    /// Tokens the summary may take.
    pub max_tokens: usize,
    /// The brain's whole budget: what a request to summarise may take.
    pub budget: usize,
    /// Where a brain that asks its model adds the tokens the summary cost:
    /// they are the turn's.
    pub usage: crate::step::UsageMeter,
}

/// How many of the oldest steps to compact so that what the brain gets
/// (the steps and the summary so far) fits in `room`; `None` when it
/// already fits. The newest steps kept whole take at most half the room,
/// so the next steps have space before another compaction; when not even
/// the newest fits in that half, every step goes.
pub fn overflow(
    tokenizer: Tokenizer,
    room: usize,
    steps: &[StepRecord],
    earlier: Option<&Compaction>,
) -> Option<usize> {
    let summary = earlier.map_or(0, |c| tokenizer.count_json(c));
    if summary + tokenizer.count_json(steps) <= room {
        return None;
    }
    let half = room / 2;
    let mut kept_tokens = 0;
    let mut kept = 0;
    for step in steps.iter().rev() {
        // One token each for the separator in the array.
        let cost = tokenizer.count_json(step) + 1;
        if kept_tokens + cost > half {
            break;
        }
        kept_tokens += cost;
        kept += 1;
    }
    Some(steps.len() - kept)
}

/// The deterministic summary: counts, the tools called and how they
/// ended, and the last reply, folded into the summary so far. Marked
/// `truncation`: no model read the steps.
pub fn truncation(tokenizer: Tokenizer, request: &CompactRequest) -> Compaction {
    let before = request.earlier.as_ref().map_or(0, |c| c.steps);
    let steps = before + request.steps.len();
    let mut calls: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for step in &request.steps {
        for result in &step.results {
            let entry = calls.entry(result.tool.as_str()).or_default();
            entry.0 += 1;
            entry.1 += usize::from(result.is_error);
        }
    }
    let tools: Vec<String> = calls
        .iter()
        .map(|(tool, (n, errors))| match errors {
            0 => format!("{tool} x{n}"),
            e => format!("{tool} x{n} ({e} failed)"),
        })
        .collect();
    let mut summary = format!(
        "{} step(s) compacted by truncation; tools called: {}",
        request.steps.len(),
        if tools.is_empty() {
            "none".to_owned()
        } else {
            tools.join(", ")
        }
    );
    if let Some(reply) = request.steps.iter().rev().find_map(|s| s.reply.as_deref()) {
        summary.push_str("; last reply: ");
        summary.push_str(reply);
    }
    if let Some(earlier) = &request.earlier {
        summary = format!("{}\n{summary}", earlier.summary);
    }
    Compaction {
        compacted: true,
        steps,
        by: "truncation",
        summary: bounded_summary(tokenizer, &summary, request.max_tokens),
    }
}

/// A summary within `max_tokens` and [`MAX_SUMMARY_CHARS`], keeping its
/// end (the newest part) when it must be cut.
pub fn bounded_summary(tokenizer: Tokenizer, text: &str, max_tokens: usize) -> String {
    let chars = text.chars().count();
    let mut tail: String = text
        .chars()
        .skip(chars.saturating_sub(MAX_SUMMARY_CHARS))
        .collect();
    while tokenizer.count(&tail) > max_tokens && !tail.is_empty() {
        let drop = tail.chars().count().div_ceil(4);
        tail = tail.chars().skip(drop).collect();
    }
    tail
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::step::{ResultView, ToolCall};

    fn step(tool: &str, bytes: usize, is_error: bool) -> StepRecord {
        StepRecord {
            reply: Some(format!("did {tool}")),
            tool_calls: vec![ToolCall {
                name: tool.into(),
                input: json!({}),
            }],
            results: vec![ResultView {
                tool: tool.into(),
                input: json!({}),
                output: json!({ "out": "o".repeat(bytes) }),
                is_error,
            }],
        }
    }

    #[test]
    fn steps_that_fit_are_left_alone() {
        let steps = vec![step("AgentGet", 100, false); 3];
        assert_eq!(overflow(Tokenizer::Estimate, 10_000, &steps, None), None);
    }

    #[test]
    fn the_oldest_go_and_the_newest_fit_in_half_the_room() {
        let steps = vec![step("AgentGet", 400, false); 10];
        let room = 1000;
        let n = overflow(Tokenizer::Estimate, room, &steps, None).expect("over");
        assert!(n > 0 && n < 10, "{n}");
        let kept = &steps[n..];
        assert!(Tokenizer::Estimate.count_json(kept) <= room / 2);
        // One more would not have fit.
        assert!(Tokenizer::Estimate.count_json(&steps[n - 1..]) > room / 2);
        // A single step over half the room: all of them go.
        let huge = vec![step("ExecCommand", 4000, false)];
        assert_eq!(overflow(Tokenizer::Estimate, room, &huge, None), Some(1));
    }

    #[test]
    fn truncation_names_the_tools_and_folds_the_earlier_summary() {
        let first = truncation(
            Tokenizer::Estimate,
            &CompactRequest {
                earlier: None,
                steps: vec![step("AgentGet", 10, false), step("ExecCommand", 10, true)],
                max_tokens: 500,
                budget: 2000,
                usage: Default::default(),
            },
        );
        assert!(first.compacted);
        assert_eq!(first.by, "truncation");
        assert_eq!(first.steps, 2);
        assert!(first.summary.contains("AgentGet x1"), "{}", first.summary);
        assert!(first.summary.contains("ExecCommand x1 (1 failed)"));
        let second = truncation(
            Tokenizer::Estimate,
            &CompactRequest {
                earlier: Some(first.clone()),
                steps: vec![step("Sleep", 10, false)],
                max_tokens: 500,
                budget: 2000,
                usage: Default::default(),
            },
        );
        assert_eq!(second.steps, 3);
        assert!(second.summary.starts_with(&first.summary));
        assert!(second.summary.contains("Sleep x1"));
    }

    #[test]
    fn a_summary_is_bounded_keeping_its_newest_end() {
        let text = format!("{}THE END", "old ".repeat(5000));
        let short = bounded_summary(Tokenizer::Estimate, &text, 100);
        assert!(short.ends_with("THE END"));
        assert!(Tokenizer::Estimate.count(&short) <= 100);
        assert!(short.chars().count() <= MAX_SUMMARY_CHARS);
    }
}
