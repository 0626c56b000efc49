//! What one turn's tool results may take of the brain's context.

use crate::limits::{json_len, LimitError, Limits};
use crate::protocol::ToolResult;
use crate::tools::cap_output;

/// The least room a result is cut to near the end of a turn's budget, so
/// its marker still fits and says what happened.
const MIN_RESULT_ROOM: usize = 4 * 1024;

/// What one turn's tool results have used of `--max-turn-result-bytes`,
/// and the cut of each to `--max-tool-result-bytes`. A turn holds at most
/// about the budget (plus one result's marker room): every result is
/// charged as kept, and cut to the room left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResultBudget {
    spent: usize,
    limit: usize,
    per_result: usize,
}

impl ResultBudget {
    pub fn new(limits: &Limits) -> Self {
        Self {
            spent: 0,
            limit: limits.max_turn_result_bytes,
            per_result: limits.max_tool_result_bytes,
        }
    }

    /// Refuses a tool call once the budget is spent.
    pub fn check(&self) -> Result<(), LimitError> {
        if self.spent >= self.limit {
            return Err(LimitError::TurnResults {
                spent: self.spent,
                limit: self.limit,
            });
        }
        Ok(())
    }

    /// Cuts `result`'s output to its bound (and the room left) and charges
    /// what is kept.
    pub fn charge(&mut self, result: &mut ToolResult) {
        let room = self
            .per_result
            .min(self.limit.saturating_sub(self.spent).max(MIN_RESULT_ROOM));
        result.output = cap_output(std::mem::take(&mut result.output), room);
        // Charged as the event log stores them: as JSON text.
        self.spent = self
            .spent
            .saturating_add(json_len(&result.output) + result.input.text_len() + result.tool.len());
    }

    /// Bytes charged so far.
    pub fn spent(&self) -> usize {
        self.spent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::CallInput;

    fn result(output: serde_json::Value) -> ToolResult {
        ToolResult {
            tool: "TaskOutput".into(),
            input: CallInput::Whole(serde_json::json!({})),
            output,
            is_error: false,
        }
    }

    #[test]
    fn a_turn_is_refused_tools_once_its_results_spend_the_budget() {
        let limits = Limits {
            max_tool_result_bytes: 64 * 1024,
            max_turn_result_bytes: 256 * 1024,
            ..Limits::default()
        };
        let mut budget = ResultBudget::new(&limits);
        let mut calls = 0;
        while budget.check().is_ok() {
            let mut big = result(serde_json::json!({ "output": "x".repeat(1 << 20) }));
            budget.charge(&mut big);
            assert!(json_len(&big.output) <= 64 * 1024, "each result is cut");
            assert!(big.output["output"]
                .as_str()
                .is_some_and(|o| o.contains("cut: 1048576 bytes here")));
            calls += 1;
            assert!(calls < 10, "the budget ends the calls");
        }
        // Four results cut to just under 64 KiB nearly fill 256 KiB; the
        // fifth is cut to what is left, and then the budget is spent.
        assert_eq!(calls, 5);
        assert!(budget.spent() <= 256 * 1024 + MIN_RESULT_ROOM);
        let refused = budget.check().expect_err("spent").to_string();
        assert!(
            refused.contains("--max-turn-result-bytes") && refused.contains("262144"),
            "{refused}"
        );
    }

    #[test]
    fn the_last_result_is_cut_to_the_room_left() {
        let limits = Limits {
            max_tool_result_bytes: 64 * 1024,
            max_turn_result_bytes: 100 * 1024,
            ..Limits::default()
        };
        let mut budget = ResultBudget::new(&limits);
        for _ in 0..2 {
            let mut big = result(serde_json::json!({ "output": "y".repeat(200_000) }));
            budget.charge(&mut big);
        }
        // The room left bounds the output; its input and name are extra.
        assert!(budget.spent() <= 100 * 1024 + 64, "{}", budget.spent());
        // Small results cost what they are.
        let mut small = result(serde_json::json!({ "ok": true }));
        let before = budget.spent();
        budget.charge(&mut small);
        assert_eq!(small.output, serde_json::json!({ "ok": true }));
        assert_eq!(budget.spent(), before + "{\"ok\":true}".len() + 2 + 10);
    }
}
