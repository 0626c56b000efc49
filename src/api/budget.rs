//! Responses bounded in bytes: how big a page, a record and a gRPC message
//! may be, and the cutting of a record that is over its budget. Agents
//! write most of what the API returns (messages, replies, events, task
//! results, brain programs), so a count of records alone bounds nothing.

use prost::Message;

use super::pb;

/// The encoded size a page of any listing stops before: a page holds as
/// many records as fit (at least one), and says where to go on.
pub const PAGE_BUDGET_BYTES: usize = 1024 * 1024;

/// The largest record sent whole; a larger one is cut to this size and
/// states its full size in `truncated_from_bytes`. A little under the page
/// budget, so a cut record still fits a page with its envelope.
pub const RECORD_BUDGET_BYTES: usize = PAGE_BUDGET_BYTES - 4 * 1024;

/// The largest gRPC message the server and the client decode or encode.
/// Every response stays under [`PAGE_BUDGET_BYTES`] with room to spare;
/// requests are bounded far below it by the message and batch limits.
/// gRPC's customary 4 MiB, stated here rather than inherited.
pub const MAX_GRPC_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// A record that can be cut to a byte budget.
pub trait Bounded: Message {
    /// The text fields an agent can make large, any order.
    fn texts(&mut self) -> Vec<&mut String>;
    /// Records the encoded size before the cut.
    fn mark_truncated(&mut self, full_bytes: u64);
}

/// Cuts `record` to [`RECORD_BUDGET_BYTES`] when it is larger, longest
/// text fields first, and marks it with its full size.
pub fn bound<T: Bounded>(record: &mut T) {
    bound_to(record, RECORD_BUDGET_BYTES);
}

/// [`bound`] with a given budget.
pub fn bound_to<T: Bounded>(record: &mut T, budget: usize) {
    let full = record.encoded_len();
    if full <= budget {
        return;
    }
    // Room for the mark itself and for length prefixes that shrink by less
    // than the text does.
    let budget = budget.saturating_sub(32);
    while record.encoded_len() > budget {
        let excess = record.encoded_len() - budget;
        let mut texts = record.texts();
        let Some(longest) = texts.iter_mut().max_by_key(|t| t.len()) else {
            break;
        };
        if longest.is_empty() {
            break;
        }
        let keep = floor_char_boundary(longest, longest.len().saturating_sub(excess));
        longest.truncate(keep);
    }
    record.mark_truncated(full as u64);
}

/// The largest char boundary of `text` at or below `at`.
fn floor_char_boundary(text: &str, at: usize) -> usize {
    holarchy_supervision::bounds::head(text, at).len()
}

/// Bounds every record of a page and keeps the longest prefix that fits in
/// [`PAGE_BUDGET_BYTES`], always at least one record. Returns whether
/// records were dropped to fit, in which case the page goes on after the
/// last one kept.
pub fn fit_page<T: Bounded>(records: &mut Vec<T>) -> bool {
    fit_page_within(records, PAGE_BUDGET_BYTES)
}

/// [`fit_page`] with a given budget, for what else shares the page.
pub fn fit_page_within<T: Bounded>(records: &mut Vec<T>, budget: usize) -> bool {
    let mut used = 0;
    let mut keep = records.len();
    for (i, record) in records.iter_mut().enumerate() {
        bound(record);
        // Each repeated field costs its length prefix and tag too.
        let size = record.encoded_len() + 8;
        if i > 0 && used + size > budget {
            keep = i;
            break;
        }
        used += size;
    }
    let cut = keep < records.len();
    records.truncate(keep);
    cut
}

impl Bounded for pb::Message {
    fn texts(&mut self) -> Vec<&mut String> {
        vec![&mut self.text, &mut self.reply, &mut self.dedupe_key]
    }
    fn mark_truncated(&mut self, full_bytes: u64) {
        self.truncated_from_bytes = full_bytes;
    }
}

impl Bounded for pb::Event {
    fn texts(&mut self) -> Vec<&mut String> {
        vec![&mut self.text, &mut self.detail_json]
    }
    fn mark_truncated(&mut self, full_bytes: u64) {
        self.truncated_from_bytes = full_bytes;
    }
}

impl Bounded for pb::WorkItem {
    fn texts(&mut self) -> Vec<&mut String> {
        let mut texts = vec![&mut self.objective];
        texts.extend(self.plan.iter_mut().map(|s| &mut s.title));
        texts.extend(self.waiting_on.iter_mut());
        texts
    }
    fn mark_truncated(&mut self, full_bytes: u64) {
        self.truncated_from_bytes = full_bytes;
    }
}

impl Bounded for pb::AgentSummary {
    fn texts(&mut self) -> Vec<&mut String> {
        let mut texts: Vec<&mut String> = self.waiting_on.iter_mut().collect();
        if let Some(item) = &mut self.current_work_item {
            texts.push(&mut item.objective);
            texts.extend(item.plan.iter_mut().map(|s| &mut s.title));
            texts.extend(item.waiting_on.iter_mut());
        }
        match self.brain.as_mut().and_then(|b| b.kind.as_mut()) {
            Some(pb::brain_config::Kind::Command(command)) => {
                texts.push(&mut command.program);
                texts.extend(command.args.iter_mut());
                texts.extend(command.env.values_mut());
            }
            Some(pb::brain_config::Kind::Openai(openai)) => {
                texts.push(&mut openai.base_url);
                texts.push(&mut openai.model);
                texts.push(&mut openai.api_key_env);
            }
            Some(pb::brain_config::Kind::Anthropic(anthropic)) => {
                texts.push(&mut anthropic.base_url);
                texts.push(&mut anthropic.model);
                texts.push(&mut anthropic.api_key_env);
            }
            Some(pb::brain_config::Kind::Scripted(_)) | None => {}
        }
        texts
    }
    fn mark_truncated(&mut self, full_bytes: u64) {
        self.truncated_from_bytes = full_bytes;
    }
}

impl Bounded for pb::TaskHandle {
    fn texts(&mut self) -> Vec<&mut String> {
        vec![
            &mut self.output,
            &mut self.label,
            &mut self.command,
            &mut self.exit,
            &mut self.workdir,
        ]
    }
    fn mark_truncated(&mut self, full_bytes: u64) {
        self.truncated_from_bytes = full_bytes;
    }
}

impl Bounded for pb::TreeNode {
    fn texts(&mut self) -> Vec<&mut String> {
        vec![&mut self.name, &mut self.kind, &mut self.active_dir]
    }
    fn mark_truncated(&mut self, full_bytes: u64) {
        self.truncated_from_bytes = full_bytes;
    }
}

impl Bounded for pb::ReadTaskOutputResponse {
    fn texts(&mut self) -> Vec<&mut String> {
        vec![&mut self.output]
    }
    fn mark_truncated(&mut self, full_bytes: u64) {
        self.truncated_from_bytes = full_bytes;
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn message(text_len: usize, reply_len: usize) -> pb::Message {
        pb::Message {
            message_id: "m".into(),
            text: "é".repeat(text_len / 2),
            reply: "x".repeat(reply_len),
            ..Default::default()
        }
    }

    proptest! {
        #[test]
        fn a_bound_record_fits_and_states_its_full_size(
            text in 0usize..20_000,
            reply in 0usize..20_000,
            budget in 100usize..10_000,
        ) {
            let mut record = message(text, reply);
            let full = record.encoded_len();
            bound_to(&mut record, budget);
            prop_assert!(record.encoded_len() <= budget);
            if full > budget {
                prop_assert_eq!(record.truncated_from_bytes, full as u64);
            } else {
                prop_assert_eq!(record.truncated_from_bytes, 0);
                prop_assert_eq!(record, message(text, reply));
            }
        }

        #[test]
        fn a_page_fits_its_budget_and_keeps_at_least_one(
            sizes in proptest::collection::vec(0usize..400_000, 1..40),
        ) {
            let mut page: Vec<pb::Message> = sizes.iter().map(|s| message(0, *s)).collect();
            let before = page.len();
            let cut = fit_page(&mut page);
            prop_assert!(!page.is_empty());
            prop_assert_eq!(cut, page.len() < before);
            let response = pb::ListMessagesResponse { messages: page, next_page_token: "t".repeat(40) };
            prop_assert!(response.encoded_len() <= PAGE_BUDGET_BYTES + 64);
        }
    }

    #[test]
    fn one_record_over_the_whole_grpc_limit_comes_back_cut() {
        let mut page = vec![message(0, 6 * 1024 * 1024)];
        assert!(!fit_page(&mut page));
        assert_eq!(page.len(), 1);
        assert!(page[0].encoded_len() <= RECORD_BUDGET_BYTES);
        assert!(page[0].truncated_from_bytes > 6 * 1024 * 1024);
    }
}
