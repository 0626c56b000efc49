//! A search's text as PostgreSQL full-text queries, with the syntax of the
//! sled store's search (`memory_index::clauses`): words, `"phrases"`,
//! `+word` (must match) and `-word` (must not), and nothing else.
//!
//! The text comes from a brain or from any message an agent handles, so it
//! is never read as `tsquery` syntax. Each clause's text goes to the
//! database as a parameter, which analyses it (`phraseto_tsquery`: a word
//! is a lexeme, several must come in order); the queries it answers with
//! are then joined here with `&`, `|` and `!`, each in parentheses, which
//! is all the syntax this module ever writes. Only the first
//! [`MAX_QUERY_WORDS`] words of a query count, at most
//! [`MAX_PHRASE_WORDS`] of one clause, as in the sled store.

use tantivy::query::Occur;

use crate::store::memory_index::{clauses, Clause, MAX_PHRASE_WORDS, MAX_QUERY_WORDS};

/// One clause cut to its bounded words, ready to be analysed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Bounded {
    pub occur: Occur,
    /// The clause's text up to the end of its last counted word, NUL
    /// bytes made spaces (PostgreSQL text holds none).
    pub text: String,
}

/// The clauses of `query`, each cut to the words that count.
///
/// Words are counted as runs of letters and digits, as the sled store's
/// analyser splits them; the text is cut after the last word counted, not
/// rewritten, so what PostgreSQL's parser reads as one token (a host name,
/// an e-mail address, `deploy-bot`) stays whole when it fits.
pub(super) fn bounded(query: &str) -> Vec<Bounded> {
    let mut budget = MAX_QUERY_WORDS;
    let mut out = Vec::new();
    for Clause { occur, text, .. } in clauses(query) {
        if budget == 0 {
            break;
        }
        let (kept, words) = first_words(text, budget.min(MAX_PHRASE_WORDS));
        // Punctuation only: nothing to look for, and no word spent.
        if words == 0 {
            continue;
        }
        budget -= words;
        out.push(Bounded {
            occur,
            text: kept.replace('\0', " "),
        });
    }
    out
}

/// `text` up to the end of its `limit`-th word, and how many words that
/// holds.
fn first_words(text: &str, limit: usize) -> (&str, usize) {
    let mut words = 0;
    let mut in_word = false;
    for (at, c) in text.char_indices() {
        let letter = c.is_alphanumeric();
        if in_word && !letter && words == limit {
            return (&text[..at], words);
        }
        if letter && !in_word {
            words += 1;
        }
        in_word = letter;
    }
    (text, words)
}

/// The queries a search runs, as `tsquery` text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Built {
    /// What an entry must match: every `+` clause (or, without any, one of
    /// the plain ones), and no `-` clause.
    pub matching: String,
    /// Every clause that is looked for, any of them: ranks the matches and
    /// marks the words of a snippet.
    pub wanted: String,
}

/// Joins the clauses as PostgreSQL analysed them (`analysed[i]` is the
/// `tsquery` text of `clauses[i]`; empty when it held only stop words).
/// `None` when nothing could match: only `-` clauses, or no lexeme at all.
pub(super) fn built(clauses: &[Bounded], analysed: &[String]) -> Option<Built> {
    let mut must = Vec::new();
    let mut should = Vec::new();
    let mut must_not = Vec::new();
    for (clause, query) in clauses.iter().zip(analysed) {
        if query.trim().is_empty() {
            continue;
        }
        let part = format!("( {query} )");
        match clause.occur {
            Occur::Must => must.push(part),
            Occur::Should => should.push(part),
            Occur::MustNot => must_not.push(part),
        }
    }
    let positive = if must.is_empty() {
        should.join(" | ")
    } else {
        must.join(" & ")
    };
    if positive.is_empty() {
        return None;
    }
    let matching = match must_not.is_empty() {
        true => positive,
        false => format!("( {positive} ) & !( {} )", must_not.join(" | ")),
    };
    let wanted = must
        .into_iter()
        .chain(should)
        .collect::<Vec<_>>()
        .join(" | ");
    Some(Built { matching, wanted })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(query: &str) -> Vec<(Occur, String)> {
        bounded(query)
            .into_iter()
            .map(|b| (b.occur, b.text))
            .collect()
    }

    #[test]
    fn words_past_the_bounds_are_cut_and_tokens_that_fit_stay_whole() {
        let filler = vec!["nothing"; MAX_QUERY_WORDS].join(" ");
        let cut = texts(&format!("{filler} hello"));
        assert_eq!(cut.len(), MAX_QUERY_WORDS);
        assert!(cut.iter().all(|(_, t)| !t.contains("hello")));
        assert_eq!(
            texts(r#""one two three four five six seven eight nine ten""#),
            [(
                Occur::Should,
                "one two three four five six seven eight".to_owned()
            )]
        );
        assert_eq!(
            texts("ops.example.com -deploy-bot +x\0y"),
            [
                (Occur::Should, "ops.example.com".to_owned()),
                (Occur::MustNot, "deploy-bot".to_owned()),
                (Occur::Must, "x y".to_owned()),
            ]
        );
        assert!(texts("+ - \"...\" ??").is_empty());
    }

    #[test]
    fn must_clauses_decide_and_must_not_clauses_exclude() {
        let clauses = bounded(r#"deploy +tuesday -friday "on call""#);
        let analysed: Vec<String> = ["'deploy'", "'tuesday'", "'friday'", "'call'"]
            .map(str::to_owned)
            .to_vec();
        let signed = built(&clauses, &analysed).expect("something to match");
        assert_eq!(signed.matching, "( ( 'tuesday' ) ) & !( ( 'friday' ) )");
        assert_eq!(signed.wanted, "( 'tuesday' ) | ( 'deploy' ) | ( 'call' )");

        let plain = bounded("a b");
        let one_left = built(&plain, &["'a'".to_owned(), String::new()]).expect("one word left");
        assert_eq!(one_left.matching, "( 'a' )");
        assert_eq!(built(&bounded("-a"), &["'a'".to_owned()]), None);
        assert_eq!(built(&bounded("the"), &[String::new()]), None);
    }
}
