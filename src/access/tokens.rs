//! Scoped tokens: their text, how one is made, and how a bearer is found
//! to be one.
//!
//! A token reads `hlt1_<id>_<secret>`: the id (a ULID) finds its record
//! at once, and only the SHA-256 of the 64-hex-digit secret is stored, so
//! a copy of the store opens nothing. Records are read through a short
//! cache: a daemon asks its store at most once per [`RECHECK`] per token,
//! and a revocation made on another daemon of the same database is obeyed
//! within that time (on this one, at once).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use holarchy_actors::StoreError;
use sha2::{Digest, Sha256};

use super::{AccessStore, TokenRecord};

/// What every token's text starts with; the `1` is the format's version.
pub const PREFIX: &str = "hlt1_";

/// How long a token's record read from the store is trusted before it is
/// read again.
pub const RECHECK: Duration = Duration::from_secs(2);

/// Random bytes in a token's secret.
const SECRET_BYTES: usize = 32;

/// The most tokens a daemon keeps (revoked ones included): `token create`
/// past it is refused until old ones are removed.
pub const MAX_TOKENS: usize = 10_000;

/// The longest `--name` of a token.
pub const MAX_NAME: usize = 100;

/// A token's text cut into its parts, if it has this format.
pub fn parse(bearer: &[u8]) -> Option<(&str, &[u8])> {
    let text = std::str::from_utf8(bearer).ok()?;
    let rest = text.strip_prefix(PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    if id.len() != 26 || ulid::Ulid::from_string(id).is_err() || secret.len() != SECRET_BYTES * 2 {
        return None;
    }
    Some((id, secret.as_bytes()))
}

pub fn hash(secret: &[u8]) -> [u8; 32] {
    Sha256::digest(secret).into()
}

/// A token just made: its record, and its whole text, shown once.
pub struct Issued {
    pub record: TokenRecord,
    pub text: String,
}

/// Why a token could not be made.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    #[error("no randomness from the system: {0}")]
    Random(String),
}

/// Makes a token's id and secret; the caller fills in the rest of the
/// record and stores it.
pub fn issue(template: TokenRecord) -> Result<Issued, IssueError> {
    let mut secret = [0u8; SECRET_BYTES];
    getrandom::fill(&mut secret).map_err(|err| IssueError::Random(err.to_string()))?;
    let secret = hex::encode(secret);
    let id = ulid::Ulid::new().to_string();
    let text = format!("{PREFIX}{id}_{secret}");
    let record = TokenRecord {
        id,
        hash: hash(secret.as_bytes()),
        ..template
    };
    Ok(Issued { record, text })
}

/// The tokens as a daemon checks them: the store, read through a cache of
/// records by id.
pub struct Tokens {
    store: Arc<dyn AccessStore>,
    cache: Mutex<HashMap<String, (Instant, Option<TokenRecord>)>>,
}

/// The most records cached; past it the cache is emptied (a caller
/// cycling through made-up ids must not grow it).
const MAX_CACHED: usize = 4096;

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("record", &self.record)
            .field("text", &"<redacted>")
            .finish()
    }
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens").finish_non_exhaustive()
    }
}

impl Tokens {
    pub fn new(store: Arc<dyn AccessStore>) -> Self {
        Self {
            store,
            cache: Mutex::new(HashMap::new()),
        }
    }

    pub fn store(&self) -> &Arc<dyn AccessStore> {
        &self.store
    }

    /// The record of the stored token `bearer` is, if it is one that may
    /// be used at `now_ms`. Reads the store (blocking) when the cached
    /// record is older than [`RECHECK`].
    pub fn check(&self, bearer: &[u8], now_ms: u64) -> Result<Option<TokenRecord>, StoreError> {
        let Some((id, secret)) = parse(bearer) else {
            return Ok(None);
        };
        let record = self.record(id)?;
        let Some(record) = record else {
            return Ok(None);
        };
        // The hash of a guess says nothing of the stored one's bytes, so
        // comparing hashes needs no constant-time care.
        if record.hash != hash(secret) || !record.usable(now_ms) {
            return Ok(None);
        }
        Ok(Some(record))
    }

    fn record(&self, id: &str) -> Result<Option<TokenRecord>, StoreError> {
        if let Some((read_at, record)) = self.cached(id) {
            if read_at.elapsed() < RECHECK {
                return Ok(record);
            }
        }
        let record = self.store.token(id)?;
        self.remember(id, record.clone());
        Ok(record)
    }

    fn cached(&self, id: &str) -> Option<(Instant, Option<TokenRecord>)> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.get(id).cloned()
    }

    fn remember(&self, id: &str, record: Option<TokenRecord>) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(id.to_owned(), (Instant::now(), record));
    }

    /// Writes `record` and makes this daemon's cache see it at once.
    pub fn put(&self, record: &TokenRecord) -> Result<(), StoreError> {
        self.store.put_token(record)?;
        self.remember(&record.id, Some(record.clone()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Role;

    fn template() -> TokenRecord {
        TokenRecord {
            id: String::new(),
            hash: [0; 32],
            role: Role::Viewer,
            namespace: "default".into(),
            name: "t".into(),
            created_at_ms: 1,
            created_by: "uid:0".into(),
            expires_at_ms: None,
            revoked_at_ms: None,
        }
    }

    #[test]
    fn an_issued_token_parses_back_to_its_id_and_hashed_secret() {
        let issued = issue(template()).expect("randomness");
        let (id, secret) = parse(issued.text.as_bytes()).expect("parses");
        assert_eq!(id, issued.record.id);
        assert_eq!(hash(secret), issued.record.hash);
        assert!(!issued.text.contains(&hex::encode(issued.record.hash)));
    }

    #[test]
    fn other_texts_are_not_tokens() {
        let issued = issue(template()).expect("randomness");
        for bad in [
            "",
            "hlt1_",
            "0123456789abcdef0123456789abcdef",
            &issued.text[..issued.text.len() - 1],
            &format!("{}0", issued.text),
            &issued.text.replace("hlt1_", "hlt2_"),
        ] {
            assert!(parse(bad.as_bytes()).is_none(), "{bad}");
        }
    }

    #[test]
    fn revoked_and_expired_tokens_are_not_usable() {
        let mut record = template();
        assert!(record.usable(10));
        record.expires_at_ms = Some(10);
        assert!(record.usable(9));
        assert!(!record.usable(10));
        record.expires_at_ms = None;
        record.revoked_at_ms = Some(5);
        assert!(!record.usable(1));
    }
}
