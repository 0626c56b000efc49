//! The tree's filter on the server: `GET /api/tree?filter=WORDS&page=`
//! finds the nodes the page has not loaded. The browser filters the rows
//! it holds; this walks the tree itself, a bounded stretch per request,
//! and answers the nodes whose name, id, state, kind, visibility or type
//! hold every word, with where the walk stopped for the next request.
//!
//! The operator's walk is the whole tree, every level (as `check` walks
//! it); a caller without the token (`--console-public-read`) walks the
//! roots alone, paged by id: the whole walk reads every agent, which is
//! the operator's to ask for. Words are matched against what the caller
//! may see of a node ([`views::tree_node`]), so a filter reveals nothing
//! the rows would not show.

use serde_json::{json, Value};

use crate::api::pb;
use crate::api::pb::supervision_service_server::SupervisionService as _;

use super::routes::called;
use super::{views, Caller, Console, Refusal};

/// Longest filter, in bytes (the page's field holds as much), and most
/// words in it.
const MAX_FILTER: usize = 64;
const MAX_WORDS: usize = 8;
/// Nodes one request walks at most: a filter matching nothing costs a
/// bounded stretch of the walk per request, never the whole tree at once.
const SCAN_BUDGET: usize = 10_000;

/// Matches of `filter` from where `page_token` says the last request
/// stopped: at most `limit` nodes (the walk is read `limit` at a time and
/// stops after the first stretch holding a match), and `next`, empty once
/// the walk is over.
pub async fn matches(
    console: &Console,
    filter: &str,
    mut page_token: String,
    limit: u32,
    caller: Caller,
) -> Result<Value, Refusal> {
    let words = words(filter)?;
    let full = caller.signed_in();
    // Roots alone (`Some(0)`, paged by id) for a caller without the
    // token; every level (offsets into the whole walk) for the operator.
    let max_depth = if full { None } else { Some(0) };
    let mut found = Vec::new();
    let mut walked = 0usize;
    loop {
        let page = called(
            console
                .tree
                .get_tree(super::req(pb::GetTreeRequest {
                    agent_id: String::new(),
                    page_token: std::mem::take(&mut page_token),
                    max_nodes: limit,
                    max_depth,
                }))
                .await,
        )?;
        walked += page.nodes.len();
        found.extend(
            page.nodes
                .iter()
                .map(|node| views::tree_node(node, full))
                .filter(|view| holds_every(view, &words)),
        );
        page_token = page.next_page_token;
        if page_token.is_empty() || !found.is_empty() || walked >= SCAN_BUDGET {
            break;
        }
    }
    Ok(json!({
        "nodes": found,
        "next": page_token,
        "walked": walked,
        "whole_tree": full,
    }))
}

/// The filter's words, lower case; refused when empty or too long.
fn words(filter: &str) -> Result<Vec<String>, Refusal> {
    let words: Vec<String> = filter.split_whitespace().map(str::to_lowercase).collect();
    if filter.len() > MAX_FILTER || words.is_empty() || words.len() > MAX_WORDS {
        return Err(Refusal::bad(format!(
            "filter must be 1 to {MAX_WORDS} words in at most {MAX_FILTER} bytes"
        )));
    }
    Ok(words)
}

/// Whether the node's shown fields, together, hold every word: what the
/// page's own filter matches on its rows.
fn holds_every(view: &Value, words: &[String]) -> bool {
    let text = ["name", "id", "state", "kind", "visibility", "type"]
        .iter()
        .filter_map(|field| view[field].as_str())
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    words.iter().all(|word| text.contains(word.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_must_be_in_some_shown_field() {
        let view = json!({
            "type": "agent", "id": "agt_01ABC", "name": "Build-7", "state": "paused",
            "kind": "public_named", "visibility": "public",
        });
        let holds = |filter: &str| holds_every(&view, &words(filter).expect("words"));
        assert!(holds("build paused"));
        assert!(holds("01abc"));
        assert!(!holds("build active"));
        assert!(words("").is_err() && words("   ").is_err());
        assert!(words(&"x".repeat(MAX_FILTER + 1)).is_err());
        assert!(words("a b c d e f g h i").is_err());
    }
}
