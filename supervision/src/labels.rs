//! Labels: an operator's `key=value` tags on an agent (`team=infra`,
//! `env=staging`), set at creation and picked by selectors (`agent list
//! --label`, `agent archive --label`). Bounded so that a caller cannot
//! grow a record with them.

use std::collections::BTreeMap;

/// The most labels one agent holds.
pub const MAX_LABELS: usize = 16;
/// The longest key and the longest value, in bytes.
pub const MAX_LABEL_LEN: usize = 63;

/// An agent's labels, ordered by key.
pub type Labels = BTreeMap<String, String>;

/// Why labels were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidLabel {
    #[error("an agent has at most {MAX_LABELS} labels, not {0}")]
    TooMany(usize),
    #[error("label key `{0}` must be 1 to {MAX_LABEL_LEN} bytes of a-z, 0-9, '.', '_', '-' and '/', starting with a letter or digit")]
    Key(String),
    #[error("label value `{0}` must be at most {MAX_LABEL_LEN} bytes of A-Z, a-z, 0-9, '.', '_' and '-'")]
    Value(String),
    #[error("`{0}` is not a label: write key=value")]
    Form(String),
}

fn cut(text: &str) -> String {
    crate::bounds::head(text, MAX_LABEL_LEN + 1).to_owned()
}

/// Checks every label: keys and values of bounded, printable characters,
/// so they read the same in a table, a URL and a log line.
pub fn check(labels: &Labels) -> Result<(), InvalidLabel> {
    if labels.len() > MAX_LABELS {
        return Err(InvalidLabel::TooMany(labels.len()));
    }
    for (key, value) in labels {
        let mut chars = key.chars();
        let key_ok = key.len() <= MAX_LABEL_LEN
            && chars
                .next()
                .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            && chars.all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-' | '/')
            });
        if !key_ok {
            return Err(InvalidLabel::Key(cut(key)));
        }
        let value_ok = value.len() <= MAX_LABEL_LEN
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !value_ok {
            return Err(InvalidLabel::Value(cut(value)));
        }
    }
    Ok(())
}

/// `key=value`, as a command line writes a label or a selector.
pub fn parse(text: &str) -> Result<(String, String), InvalidLabel> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| InvalidLabel::Form(cut(text)))?;
    let one = Labels::from([(key.to_owned(), value.to_owned())]);
    check(&one)?;
    Ok((key.to_owned(), value.to_owned()))
}

/// Whether `labels` hold every `key=value` of `selector`.
pub fn matches(labels: &Labels, selector: &[(String, String)]) -> bool {
    selector
        .iter()
        .all(|(key, value)| labels.get(key) == Some(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_bounded_and_printable() {
        let ok = Labels::from([
            ("team".into(), "infra".into()),
            ("app.io/tier".into(), "".into()),
        ]);
        assert_eq!(check(&ok), Ok(()));
        for (key, value) in [
            ("", "x"),
            ("Team", "x"),
            ("-a", "x"),
            ("a b", "x"),
            ("team", "in fra"),
            ("team", "x\u{1b}"),
            ("team", &"v".repeat(64)),
            (&"k".repeat(64), "x"),
        ] {
            let one = Labels::from([(key.to_owned(), value.to_owned())]);
            assert!(check(&one).is_err(), "{key:?}={value:?}");
        }
        let many: Labels = (0..17).map(|i| (format!("k{i}"), "v".into())).collect();
        assert_eq!(check(&many), Err(InvalidLabel::TooMany(17)));
    }

    #[test]
    fn selectors_parse_and_match_every_pair() {
        assert_eq!(parse("team=infra"), Ok(("team".into(), "infra".into())));
        assert!(parse("team").is_err());
        assert!(parse("Team=x").is_err());
        let labels = Labels::from([
            ("team".into(), "infra".into()),
            ("env".into(), "prod".into()),
        ]);
        let team = vec![("team".to_owned(), "infra".to_owned())];
        assert!(matches(&labels, &team));
        assert!(matches(&labels, &[]));
        let both = vec![team[0].clone(), ("env".to_owned(), "dev".to_owned())];
        assert!(!matches(&labels, &both));
    }
}
