//! Operators' OIDC bearer tokens (`serve --oidc-issuer`): a JWT signed by
//! the configured issuer's keys (a JWKS file, read again on SIGHUP), for
//! the configured audience, with a role claim.
//!
//! Only public-key algorithms are taken (RSA, ECDSA, EdDSA), chosen by
//! the key the token's `kid` names, never by the token alone: an `oct`
//! (shared secret) key in the set is ignored, so a token signed with
//! HS256 over a public key cannot pass.

use std::path::PathBuf;
use std::sync::Arc;

use arc_swap::ArcSwap;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};

use super::Role;

/// The largest JWKS file read.
const MAX_JWKS_BYTES: u64 = 1024 * 1024;

/// The longest bearer taken as a JWT.
pub const MAX_JWT_BYTES: usize = 8 * 1024;

/// The longest subject kept, in bytes.
const MAX_SUBJECT: usize = 128;

/// Clock skew allowed on `exp` and `nbf`, in seconds.
const LEEWAY_S: u64 = 60;

/// How the daemon checks OIDC tokens.
#[derive(Debug, Clone)]
pub struct OidcConfig {
    /// The `iss` every token must carry.
    pub issuer: String,
    /// The `aud` every token must carry.
    pub audience: String,
    /// The issuer's public keys, as a JWKS document.
    pub jwks: PathBuf,
    /// The claim holding `viewer`, `operator` or `admin`.
    pub role_claim: String,
    /// The claim holding the namespace (absent: `default`).
    pub namespace_claim: String,
}

/// Why the keys could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is over {MAX_JWKS_BYTES} bytes")]
    TooBig { path: PathBuf },
    #[error("{path} is not a JWKS document ({{\"keys\": [...]}}): {detail}")]
    NotJwks { path: PathBuf, detail: String },
    #[error("{path} holds no public key with a `kid` this daemon can use (RSA, EC P-256/P-384, Ed25519)")]
    NoKeys { path: PathBuf },
}

/// Why a token was refused; said to the caller, so it names no key.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("the token names no key (`kid`) the issuer's keys hold")]
    UnknownKey,
    #[error("the token is not valid: {0}")]
    Invalid(String),
    #[error("the token's `{0}` claim is missing or not viewer, operator or admin")]
    NoRole(String),
    #[error(
        "the token's namespace `{0}` does not exist here: only `default` does in this release"
    )]
    Namespace(String),
}

/// One usable key: what it verifies with and which algorithms it takes.
struct Key {
    id: String,
    decoding: DecodingKey,
    algorithms: Vec<Algorithm>,
}

/// A verified caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// `sub`, cut and cleaned.
    pub subject: String,
    pub role: Role,
    /// The claim's namespace, or `default`.
    pub namespace: String,
}

pub struct Oidc {
    config: OidcConfig,
    keys: ArcSwap<Vec<Key>>,
}

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oidc")
            .field("config", &self.config)
            .field("keys", &self.keys.load().len())
            .finish()
    }
}

impl Oidc {
    /// Reads the keys; refuses a start whose keys cannot be used.
    pub fn load(config: OidcConfig) -> Result<Arc<Self>, LoadError> {
        let keys = read_keys(&config.jwks)?;
        Ok(Arc::new(Self {
            config,
            keys: ArcSwap::from_pointee(keys),
        }))
    }

    /// Reads the keys again (the issuer rotated them); on failure keeps
    /// the ones in use.
    pub fn reload(&self) -> Result<usize, LoadError> {
        let keys = read_keys(&self.config.jwks)?;
        let count = keys.len();
        self.keys.store(Arc::new(keys));
        Ok(count)
    }

    /// Whether `bearer` looks like a JWT (three dot-separated parts); only
    /// then is it checked here.
    pub fn looks_like_jwt(bearer: &[u8]) -> bool {
        bearer.len() <= MAX_JWT_BYTES && bearer.iter().filter(|b| **b == b'.').count() == 2
    }

    /// The caller `bearer` names, if the issuer signed it for this daemon.
    pub fn verify(&self, bearer: &[u8]) -> Result<Verified, Refused> {
        let token = std::str::from_utf8(bearer).map_err(|_| Refused::Invalid("not text".into()))?;
        let header =
            jsonwebtoken::decode_header(token).map_err(|err| Refused::Invalid(err.to_string()))?;
        let kid = header.kid.ok_or(Refused::UnknownKey)?;
        let keys = self.keys.load();
        let key = keys
            .iter()
            .find(|k| k.id == kid)
            .ok_or(Refused::UnknownKey)?;
        let mut validation = Validation::new(key.algorithms[0]);
        validation.algorithms = key.algorithms.clone();
        validation.set_issuer(&[&self.config.issuer]);
        validation.set_audience(&[&self.config.audience]);
        validation.leeway = LEEWAY_S;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data = jsonwebtoken::decode::<serde_json::Value>(token, &key.decoding, &validation)
            .map_err(|err| Refused::Invalid(err.to_string()))?;
        let claims = data.claims;
        let role = claims
            .get(&self.config.role_claim)
            .and_then(|v| v.as_str())
            .and_then(Role::parse)
            .ok_or_else(|| Refused::NoRole(self.config.role_claim.clone()))?;
        let namespace = match claims.get(&self.config.namespace_claim) {
            None => holarchy_supervision::namespace::DEFAULT.to_owned(),
            Some(value) => {
                let text = value.as_str().unwrap_or("?");
                holarchy_supervision::namespace::check(text)
                    .map_err(|_| Refused::Namespace(clean(text, 64)))?;
                text.to_owned()
            }
        };
        let subject = claims.get("sub").and_then(|v| v.as_str()).unwrap_or("");
        Ok(Verified {
            subject: clean(subject, MAX_SUBJECT),
            role,
            namespace,
        })
    }
}

/// `text` cut to `max` bytes with control characters replaced: it is
/// printed in the audit trail.
fn clean(text: &str, max: usize) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if out.len() + c.len_utf8() > max {
            break;
        }
        out.push(if c.is_control() { '?' } else { c });
    }
    out
}

fn read_keys(path: &PathBuf) -> Result<Vec<Key>, LoadError> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).map_err(|source| LoadError::Read {
        path: path.clone(),
        source,
    })?;
    let mut text = String::new();
    file.take(MAX_JWKS_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|source| LoadError::Read {
            path: path.clone(),
            source,
        })?;
    if text.len() as u64 > MAX_JWKS_BYTES {
        return Err(LoadError::TooBig { path: path.clone() });
    }
    let set: JwkSet = serde_json::from_str(&text).map_err(|err| LoadError::NotJwks {
        path: path.clone(),
        detail: err.to_string(),
    })?;
    let keys: Vec<Key> = set
        .keys
        .iter()
        .filter_map(|jwk| {
            let id = jwk.common.key_id.clone()?;
            let algorithms = match &jwk.algorithm {
                AlgorithmParameters::RSA(_) => vec![
                    Algorithm::RS256,
                    Algorithm::RS384,
                    Algorithm::RS512,
                    Algorithm::PS256,
                    Algorithm::PS384,
                    Algorithm::PS512,
                ],
                AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
                    EllipticCurve::P256 => vec![Algorithm::ES256],
                    EllipticCurve::P384 => vec![Algorithm::ES384],
                    _ => return None,
                },
                AlgorithmParameters::OctetKeyPair(_) => vec![Algorithm::EdDSA],
                // A shared secret is no issuer's public key.
                AlgorithmParameters::OctetKey(_) => return None,
            };
            let decoding = DecodingKey::from_jwk(jwk).ok()?;
            Some(Key {
                id,
                decoding,
                algorithms,
            })
        })
        .collect();
    if keys.is_empty() {
        return Err(LoadError::NoKeys { path: path.clone() });
    }
    Ok(keys)
}
