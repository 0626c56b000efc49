//! A search's text made into a query of our own: words, `"phrases"`,
//! `+word` (must match) and `-word` (must not), and nothing else.
//!
//! The text comes from a brain or from any message an agent handles (a
//! webhook's body among them), so it is not handed to tantivy's query
//! parser: its range, prefix, fuzzy and field clauses each walk the whole
//! shared index's term dictionary, and a kilobyte of them cost seconds of
//! CPU. Here every clause is a term (or a phrase of a few terms) looked up
//! directly, and only the first [`MAX_QUERY_WORDS`] words count.

use tantivy::query::{BooleanQuery, EmptyQuery, Occur, PhraseQuery, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::Term;

/// Words of one query that are searched for; the rest are ignored.
pub const MAX_QUERY_WORDS: usize = 32;
/// Words of one phrase, at most: a longer phrase is cut to its start.
pub const MAX_PHRASE_WORDS: usize = 8;

/// One clause as the agent wrote it, before analysis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Clause<'a> {
    pub occur: Occur,
    pub text: &'a str,
    /// Written in quotes: its words must come in order.
    pub phrase: bool,
}

/// Splits `query` into clauses. Anything that is not a quote or a leading
/// `+` / `-` is plain text: `field:[a TO z]` is three words, not syntax.
pub(crate) fn clauses(query: &str) -> Vec<Clause<'_>> {
    let mut out = Vec::new();
    let mut rest = query;
    loop {
        rest = rest.trim_start();
        let Some(first) = rest.chars().next() else {
            return out;
        };
        let occur = match first {
            '+' => Occur::Must,
            '-' => Occur::MustNot,
            _ => Occur::Should,
        };
        if occur != Occur::Should {
            rest = &rest[1..];
        }
        let (text, phrase, after) = match rest.strip_prefix('"') {
            Some(quoted) => match quoted.find('"') {
                Some(end) => (&quoted[..end], true, &quoted[end + 1..]),
                None => (quoted, true, ""),
            },
            None => {
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                (&rest[..end], false, &rest[end..])
            }
        };
        if !text.trim().is_empty() {
            out.push(Clause {
                occur,
                text,
                phrase,
            });
        }
        rest = after;
    }
}

/// A searched field and the analyzer its documents were indexed with.
#[derive(Clone)]
pub(super) struct Searched {
    pub field: Field,
    pub analyzer: TextAnalyzer,
}

/// The query for `text` over `fields`: each clause matches in any of them.
/// At most [`MAX_QUERY_WORDS`] words in all (counted as the first field
/// analyses them) are looked up.
pub(super) fn build(text: &str, fields: &mut [Searched]) -> Box<dyn Query> {
    let mut budget = MAX_QUERY_WORDS;
    let mut built: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    for clause in clauses(text) {
        if budget == 0 {
            break;
        }
        let mut words_used = 0;
        let mut per_field: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for (i, searched) in fields.iter_mut().enumerate() {
            let terms = terms(&mut searched.analyzer, searched.field, clause.text, budget);
            if i == 0 {
                words_used = terms.len();
            }
            if let Some(query) = matching(terms) {
                per_field.push((Occur::Should, query));
            }
        }
        // A clause of punctuation only: nothing to look for.
        if per_field.is_empty() {
            continue;
        }
        budget = budget.saturating_sub(words_used.max(1));
        built.push((clause.occur, Box::new(BooleanQuery::new(per_field))));
    }
    if built.is_empty() {
        return Box::new(EmptyQuery);
    }
    Box::new(BooleanQuery::new(built))
}

/// The terms `text` analyses to in `field`, at most `limit` (and at most
/// [`MAX_PHRASE_WORDS`]).
fn terms(analyzer: &mut TextAnalyzer, field: Field, text: &str, limit: usize) -> Vec<Term> {
    let limit = limit.min(MAX_PHRASE_WORDS);
    let mut out = Vec::new();
    let mut stream = analyzer.token_stream(text);
    while out.len() < limit && stream.advance() {
        out.push(Term::from_field_text(field, &stream.token().text));
    }
    out
}

/// One term is a term query; several (a phrase, or a word such as
/// `deploy-bot` that analyses to two) must come in order.
fn matching(mut terms: Vec<Term>) -> Option<Box<dyn Query>> {
    match terms.len() {
        0 => None,
        1 => terms
            .pop()
            .map(|term| Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs)) as _),
        _ => Some(Box::new(PhraseQuery::new(terms))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(query: &str) -> Vec<(Occur, &str, bool)> {
        clauses(query)
            .into_iter()
            .map(|c| (c.occur, c.text, c.phrase))
            .collect()
    }

    #[test]
    fn syntax_is_words_phrases_and_must_signs_only() {
        assert_eq!(
            shape(r#"deploy +tuesday -friday "on call" -"not this""#),
            vec![
                (Occur::Should, "deploy", false),
                (Occur::Must, "tuesday", false),
                (Occur::MustNot, "friday", false),
                (Occur::Should, "on call", true),
                (Occur::MustNot, "not this", true),
            ]
        );
        // What tantivy's parser reads as a range, a field or a fuzzy term
        // is text here.
        assert_eq!(
            shape("text:[a TO z] dep* key:x~2"),
            vec![
                (Occur::Should, "text:[a", false),
                (Occur::Should, "TO", false),
                (Occur::Should, "z]", false),
                (Occur::Should, "dep*", false),
                (Occur::Should, "key:x~2", false),
            ]
        );
        assert_eq!(
            shape(r#"  "unclosed phrase"#),
            vec![(Occur::Should, "unclosed phrase", true)]
        );
        assert!(shape(" + - \"\" ").is_empty());
    }
}
