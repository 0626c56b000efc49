//! Webhook signatures: HMAC-SHA256 over the raw body, compared in constant
//! time, for the `github` and `generic` providers.
//!
//! Both providers send `sha256=<64 hex digits>`: GitHub in
//! `X-Hub-Signature-256`, the generic provider in a header of the same form.
//! The signature covers the exact bytes received, so verify before parsing
//! anything, and parse the same bytes afterwards.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use thiserror::Error;

type HmacSha256 = Hmac<Sha256>;

const PREFIX: &str = "sha256=";
const DIGEST_HEX_LEN: usize = 64;

/// Why a delivery is refused. Every variant means "answer 401, record
/// nothing"; they differ only for the operator's logs.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SignatureError {
    #[error("the delivery has no signature header")]
    Missing,
    #[error("the signature header is malformed: {0}")]
    Malformed(&'static str),
    #[error("the signature does not match the body")]
    Mismatch,
    /// An empty key makes every signature forgeable, so it verifies nothing.
    #[error("the instance has an empty webhook secret")]
    EmptySecret,
}

/// Checks `header` (`sha256=<hex>`, hex in either case) against the body.
pub fn verify(secret: &[u8], body: &[u8], header: Option<&str>) -> Result<(), SignatureError> {
    if secret.is_empty() {
        return Err(SignatureError::EmptySecret);
    }
    let header = header.ok_or(SignatureError::Missing)?;
    let hex_digest = header
        .trim()
        .strip_prefix(PREFIX)
        .ok_or(SignatureError::Malformed("expected sha256=<hex>"))?;
    if hex_digest.len() != DIGEST_HEX_LEN {
        return Err(SignatureError::Malformed("expected 64 hex digits"));
    }
    let expected =
        hex::decode(hex_digest).map_err(|_| SignatureError::Malformed("not hexadecimal"))?;
    mac(secret, body)
        .ok_or(SignatureError::Mismatch)?
        .verify_slice(&expected)
        .map_err(|_| SignatureError::Mismatch)
}

/// The header value a sender computes for `body`: `sha256=<lowercase hex>`.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    match mac(secret, body) {
        Some(mac) => format!("{PREFIX}{}", hex::encode(mac.finalize().into_bytes())),
        // Unreachable (see `mac`); an empty header never verifies.
        None => String::new(),
    }
}

/// HMAC accepts keys of any length (long ones are hashed first), so this is
/// always `Some`; the `Option` only keeps the impossible case fail-closed
/// instead of panicking.
fn mac(secret: &[u8], body: &[u8]) -> Option<HmacSha256> {
    let mut mac = <HmacSha256 as Mac>::new_from_slice(secret).ok()?;
    mac.update(body);
    Some(mac)
}

#[cfg(test)]
#[path = "webhook/tests.rs"]
mod tests;
