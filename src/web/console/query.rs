//! The query string of a console request: `key=value` pairs,
//! percent-decoded, bounded in count, and the checks of the values the
//! routes take (page sizes, page tokens, offsets).

use std::collections::HashMap;

/// Most parameters one query may carry; the routes take at most three.
const MAX_PARAMS: usize = 8;

/// Decoded parameters; a repeated key keeps its last value.
#[derive(Debug, Default)]
pub struct Query(HashMap<String, String>);

/// Why a query or one of its values was refused: the text of the 400
/// answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("at most {MAX_PARAMS} query parameters")]
    TooMany,
    #[error("a malformed %-escape in the query")]
    Escape,
    #[error("the query is not UTF-8")]
    NotUtf8,
    #[error("limit must be a number from 1 to {max}")]
    Limit { max: u32 },
    #[error("{key} must be a non-negative number")]
    Number { key: String },
    #[error("malformed page token")]
    PageToken,
}

pub fn parse(raw: &str) -> Result<Query, QueryError> {
    let mut params = HashMap::new();
    for (i, pair) in raw.split('&').filter(|p| !p.is_empty()).enumerate() {
        if i >= MAX_PARAMS {
            return Err(QueryError::TooMany);
        }
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        params.insert(decode(key)?, decode(value)?);
    }
    Ok(Query(params))
}

impl Query {
    /// The value of `key`; empty when absent.
    pub fn text(&self, key: &str) -> &str {
        self.0.get(key).map_or("", String::as_str)
    }

    /// A page size: `default` when absent, else 1 to `max`.
    pub fn limit(&self, default: u32, max: u32) -> Result<u32, QueryError> {
        match self.0.get("limit") {
            None => Ok(default),
            Some(text) => match text.parse::<u32>() {
                Ok(n) if (1..=max).contains(&n) => Ok(n),
                _ => Err(QueryError::Limit { max }),
            },
        }
    }

    /// A non-negative number under `key`, or `None` when absent.
    pub fn number(&self, key: &str) -> Result<Option<u64>, QueryError> {
        match self.0.get(key) {
            None => Ok(None),
            Some(text) => text.parse().map(Some).map_err(|_| QueryError::Number {
                key: key.to_owned(),
            }),
        }
    }

    /// A page token as the gRPC listing gave it: passed on as is, after a
    /// check of its size and characters (ids and offsets).
    pub fn page(&self) -> Result<String, QueryError> {
        let token = self.text("page");
        if token.len() > 64
            || !token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(QueryError::PageToken);
        }
        Ok(token.to_owned())
    }
}

/// Percent-decoding, `+` as a space; malformed escapes and text that is
/// not UTF-8 are refused.
fn decode(text: &str) -> Result<String, QueryError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or(QueryError::Escape)?;
                out.push(hex);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| QueryError::NotUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_decoded_and_bounded() {
        let q = parse("q=ops%2Dlead+x&limit=20&page=").expect("parses");
        assert_eq!(q.text("q"), "ops-lead x");
        assert_eq!(q.limit(50, 500), Ok(20));
        assert_eq!(q.page().as_deref(), Ok(""));
        assert!(parse("q=%zz").is_err());
        assert!(parse("q=%e2%28").is_err());
        assert!(parse(&"a=1&".repeat(9)).is_err());
    }

    #[test]
    fn limits_and_tokens_are_checked() {
        let q = parse("limit=0").expect("parses");
        assert!(q.limit(50, 500).is_err());
        let q = parse("limit=501").expect("parses");
        assert!(q.limit(50, 500).is_err());
        let q = parse("").expect("parses");
        assert_eq!(q.limit(50, 500), Ok(50));
        let q = parse("page=..%2Fx").expect("parses");
        assert!(q.page().is_err());
        let q = parse("offset=-1").expect("parses");
        assert!(q.number("offset").is_err());
    }
}
