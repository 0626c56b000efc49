//! Fits a brain's context into its budget, in priority order: what goes
//! first is placed whole if it fits and cut (marked as such) if it does
//! not, so nothing essential is lost silently; what comes later (earlier
//! turns, memory hits) is placed while it fits and left out after. Pure:
//! it sees values and a tokenizer, never the store.

use serde_json::{json, Value};

use super::tokens::Tokenizer;

/// The most a cut item's marker costs beside the text it keeps (`{"cut":
/// true, "tokens": N, "text": ""}`): kept in reserve for every required
/// item still to come, so each can at least be named.
const MARKER_TOKENS: usize = 24;

/// Places items within a token budget and never charges more than it: a
/// required item with no room left is still named by its marker, paid
/// from a reserve kept for it (so the budget must exceed
/// `required_slots` markers, which every budget the daemon accepts does).
#[derive(Debug)]
pub struct Assembler {
    tokenizer: Tokenizer,
    budget: usize,
    used: usize,
    /// Required items still to come, each holding a marker's reserve.
    slots_left: usize,
}

impl Assembler {
    pub fn new(tokenizer: Tokenizer, budget: usize, required_slots: usize) -> Self {
        Self {
            tokenizer,
            budget,
            used: 0,
            slots_left: required_slots,
        }
    }

    pub fn tokenizer(&self) -> Tokenizer {
        self.tokenizer
    }

    pub fn used(&self) -> usize {
        self.used
    }

    /// Room for the next item, less the reserve of required ones to come.
    pub fn room(&self) -> usize {
        self.budget
            .saturating_sub(self.used)
            .saturating_sub(self.slots_left * MARKER_TOKENS)
    }

    /// Charges tokens the brain gets that are no item (the keys around
    /// them), up to the room left.
    pub fn charge(&mut self, tokens: usize) {
        self.used += tokens.min(self.room());
    }

    /// Charges text the brain gets outside the context (the role's
    /// prompt), cut to the room left: the part returned is what fits.
    pub fn charge_text<'t>(&mut self, text: &'t str) -> &'t str {
        let kept = self.tokenizer.head(text, self.room());
        self.used += self.tokenizer.count(kept);
        kept
    }

    /// An item the brain must see: whole if it fits, otherwise cut to the
    /// room left, as `{"cut": true, "tokens": <whole>, "text": <start of
    /// its JSON>}`. `null` costs nothing.
    pub fn required(&mut self, value: Value) -> Value {
        self.slots_left = self.slots_left.saturating_sub(1);
        if value.is_null() {
            return value;
        }
        let text = value.to_string();
        let tokens = self.tokenizer.count(&text);
        if tokens <= self.room() {
            self.used += tokens;
            return value;
        }
        self.cut(&text, tokens)
    }

    /// Text the brain should see (a summary): whole if it fits, otherwise
    /// its start, marked like [`Assembler::required`].
    pub fn required_text(&mut self, text: &str) -> Value {
        self.slots_left = self.slots_left.saturating_sub(1);
        let value = Value::String(text.to_owned());
        let tokens = self.tokenizer.count_json(&value);
        if tokens <= self.room() {
            self.used += tokens;
            return value;
        }
        self.cut(text, tokens)
    }

    /// The marker of a cut item: its text is measured as embedded (JSON
    /// escapes lengthen it), shrinking until the marker fits; with no
    /// room, the marker holds no text and is paid from the reserve.
    fn cut(&mut self, text: &str, tokens: usize) -> Value {
        let room = self.room();
        let mut limit = room.saturating_sub(MARKER_TOKENS);
        loop {
            let kept = self.tokenizer.head(text, limit);
            let marker = json!({ "cut": true, "tokens": tokens, "text": kept });
            let cost = self.tokenizer.count_json(&marker);
            if cost <= room.max(MARKER_TOKENS) || limit == 0 {
                self.used += cost;
                return marker;
            }
            limit = limit * 3 / 4;
        }
    }

    /// An item placed only if it fits whole.
    pub fn optional(&mut self, value: &Value) -> bool {
        let tokens = self.tokenizer.count_json(value);
        if tokens <= self.room() {
            self.used += tokens;
            true
        } else {
            false
        }
    }

    /// The newest items that fit, newest first in `items` and oldest first
    /// in the answer, with how many were left out. When not even the
    /// newest fits whole, it is cut rather than dropped.
    pub fn newest(&mut self, items: impl IntoIterator<Item = Value>) -> (Vec<Value>, usize) {
        let mut placed = Vec::new();
        let mut left_out = 0;
        // Once one does not fit (or the newest was cut), older ones are
        // only counted: the turns shown stay a contiguous newest run.
        let mut full = false;
        for item in items {
            if full {
                left_out += 1;
            } else if self.optional(&item) {
                placed.push(item);
            } else if placed.is_empty() && self.room() > MARKER_TOKENS {
                self.slots_left += 1;
                placed.push(self.required(item));
                full = true;
            } else {
                left_out += 1;
                full = true;
            }
        }
        placed.reverse();
        (placed, left_out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(n: usize, bytes: usize) -> Value {
        json!({ "n": n, "text": "x".repeat(bytes) })
    }

    #[test]
    fn priority_order_decides_what_stays() {
        let mut a = Assembler::new(Tokenizer::Estimate, 1000, 2);
        let work = a.required(json!({ "objective": "ship it" }));
        assert_eq!(work["objective"], "ship it");
        let summary = a.required_text("earlier: built the parser");
        assert_eq!(summary, "earlier: built the parser");
        // Ten turns of ~100 bytes newest first: as many as fit, not five.
        let (turns, left_out) = a.newest((0..30).rev().map(|n| turn(n, 400)));
        assert!(turns.len() > 5, "{} turns placed", turns.len());
        assert_eq!(turns.len() + left_out, 30);
        // Oldest first in the answer, and the newest are the ones kept.
        assert_eq!(turns.last().expect("a turn")["n"], 29);
        let first = turns[0]["n"].as_u64().expect("n") as usize;
        assert_eq!(first, 30 - turns.len());
        assert!(a.used() <= 1000);
        // Whatever is left goes to memory hits only if it fits.
        assert!(!a.optional(&turn(99, 4000)));
    }

    #[test]
    fn never_over_budget() {
        // Down to the smallest budget that holds the markers' reserve.
        for budget in [48, 60, 100, 300, 999] {
            let mut a = Assembler::new(Tokenizer::Estimate, budget, 2);
            let _ = a.charge_text(&"role ".repeat(50));
            let _ = a.required(json!({ "big": "y".repeat(5000) }));
            let _ = a.required_text(&"s".repeat(3000));
            let (_turns, _) = a.newest((0..10).map(|n| turn(n, 300)));
            let _ = a.optional(&turn(0, 10));
            assert!(a.used() <= budget, "budget {budget}: used {}", a.used());
        }
    }

    #[test]
    fn a_single_huge_item_is_cut_not_dropped() {
        let mut a = Assembler::new(Tokenizer::Estimate, 200, 1);
        let work = a.required(json!({ "objective": "z".repeat(10_000) }));
        assert_eq!(work["cut"], true);
        assert!(work["tokens"].as_u64().expect("tokens") > 2000);
        let kept = work["text"].as_str().expect("text");
        assert!(kept.starts_with("{\"objective\":\"zzz"), "{kept}");
        assert!(a.used() <= 200);

        // The newest turn alone over the room: cut, and still the newest.
        let mut a = Assembler::new(Tokenizer::Estimate, 300, 0);
        let (turns, left_out) = a.newest([turn(2, 5000), turn(1, 10)]);
        assert_eq!(turns.len(), 1);
        assert_eq!(turns[0]["cut"], true);
        assert!(turns[0]["text"].as_str().expect("text").contains("\"n\":2"));
        assert_eq!(left_out, 1, "the older turn is not placed after a cut one");
        assert!(a.used() <= 300);
    }

    #[test]
    fn real_token_counts_are_used_for_openai_models() {
        // "hello world" is 2 tokens in o200k but 3 estimated.
        let mut a = Assembler::new(Tokenizer::O200k, 2, 0);
        assert_eq!(a.charge_text("hello world"), "hello world");
        let mut b = Assembler::new(Tokenizer::Estimate, 2, 0);
        assert_eq!(b.charge_text("hello world"), "hello wo");
    }
}
