//! OIDC bearer tokens against the real daemon over TCP: a JWT from the
//! configured issuer, signed by a key of its JWKS (keys this test makes),
//! is a caller with the role its claim names; a token for another
//! audience, from another issuer, expired, signed by a stranger's key, or
//! with no role is refused; the keys are read again on SIGHUP.

mod common;

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{data_dir, Daemon};
use holarchy::api::pb;
use serde_json::json;
use tonic::Code;

const ISSUER: &str = "https://login.example.test";
const AUDIENCE: &str = "holarchy-tests";

/// base64url without padding, as JOSE writes it.
fn b64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// An issuer's signing key: P-256, with its id.
struct Signer {
    kid: String,
    key: rcgen::KeyPair,
}

impl Signer {
    fn new(kid: &str) -> Signer {
        Signer {
            kid: kid.to_owned(),
            key: rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("a key"),
        }
    }

    fn jwk(&self) -> serde_json::Value {
        let point = self.key.public_key_raw();
        assert_eq!(point.len(), 65, "an uncompressed P-256 point");
        json!({
            "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": self.kid,
            "x": b64url(&point[1..33]), "y": b64url(&point[33..]),
        })
    }

    fn sign(&self, claims: serde_json::Value) -> String {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        let key = jsonwebtoken::EncodingKey::from_ec_der(&self.key.serialize_der());
        jsonwebtoken::encode(&header, &claims, &key).expect("signed")
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("time")
        .as_secs()
}

fn claims(sub: &str, role: &str) -> serde_json::Value {
    json!({ "iss": ISSUER, "aud": AUDIENCE, "sub": sub, "exp": now() + 600, "holarchy_role": role })
}

fn write_jwks(path: &Path, signers: &[&Signer]) {
    let keys: Vec<_> = signers.iter().map(|s| s.jwk()).collect();
    std::fs::write(path, json!({ "keys": keys }).to_string()).expect("jwks written");
}

async fn who(listen: &str, token: &str) -> Result<pb::WhoAmIResponse, tonic::Status> {
    common::tcp_clients(listen, Some(token))
        .await
        .access
        .who_am_i(pb::WhoAmIRequest {})
        .await
        .map(tonic::Response::into_inner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_issuers_token_is_a_caller_with_its_role_and_nothing_else_is() {
    let root = tempfile::tempdir().expect("tempdir");
    let issuer = Signer::new("k1");
    let rotated = Signer::new("k2");
    let stranger = Signer::new("k1");
    let jwks = root.path().join("jwks.json");
    write_jwks(&jwks, &[&issuer]);
    let listen = common::free_addr();
    let daemon = Daemon::start_with(
        &data_dir(&root),
        &[
            "--listen",
            &listen,
            "--oidc-issuer",
            ISSUER,
            "--oidc-audience",
            AUDIENCE,
            "--oidc-jwks",
            jwks.to_str().expect("utf-8"),
        ],
    )
    .await;

    let operator = issuer.sign(claims("alice@example.test", "operator"));
    let me = who(&listen, &operator).await.expect("alice is known");
    assert_eq!(
        (me.caller.as_str(), me.role.as_str()),
        ("oidc:alice@example.test", "operator")
    );
    let mut alice = common::tcp_clients(&listen, Some(&operator)).await;
    let agent_id = common::create(&mut alice, "made-by-alice", None).await;
    let viewer = issuer.sign(claims("bob", "viewer"));
    let mut bob = common::tcp_clients(&listen, Some(&viewer)).await;
    let refused = bob
        .agents
        .pause_agent(pb::PauseAgentRequest {
            agent_id: agent_id.clone(),
        })
        .await
        .expect_err("a viewer");
    assert_eq!(refused.code(), Code::PermissionDenied);
    let mut admin = daemon.clients().await;
    let trail = admin
        .access
        .list_audit(pb::ListAuditRequest::default())
        .await
        .expect("the trail")
        .into_inner()
        .entries;
    let callers: Vec<_> = trail
        .iter()
        .map(|e| (e.caller.as_str(), e.outcome.as_str()))
        .collect();
    assert_eq!(
        callers,
        [
            ("oidc:alice@example.test", "OK"),
            ("oidc:bob", "PERMISSION_DENIED")
        ]
    );

    let mut wrong = Vec::new();
    wrong.push(("another audience", issuer.sign(json!({ "iss": ISSUER, "aud": "other", "sub": "x", "exp": now() + 600, "holarchy_role": "admin" }))));
    wrong.push(("another issuer", issuer.sign(json!({ "iss": "https://evil.test", "aud": AUDIENCE, "sub": "x", "exp": now() + 600, "holarchy_role": "admin" }))));
    wrong.push(("expired", issuer.sign(json!({ "iss": ISSUER, "aud": AUDIENCE, "sub": "x", "exp": now() - 3600, "holarchy_role": "admin" }))));
    wrong.push((
        "no role",
        issuer.sign(json!({ "iss": ISSUER, "aud": AUDIENCE, "sub": "x", "exp": now() + 600 })),
    ));
    wrong.push(("a made-up role", issuer.sign(claims("x", "root"))));
    wrong.push(("a namespace that is no name", issuer.sign(json!({ "iss": ISSUER, "aud": AUDIENCE, "sub": "x", "exp": now() + 600, "holarchy_role": "admin", "holarchy_namespace": "B/../c" }))));
    wrong.push((
        "a stranger's key under the same kid",
        stranger.sign(claims("x", "admin")),
    ));
    wrong.push((
        "a key not yet published",
        rotated.sign(claims("x", "admin")),
    ));
    // HS256 with the issuer's public key as the secret: the classic
    // confusion. Only the key's own algorithm is taken.
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    header.kid = Some("k1".into());
    let confused = jsonwebtoken::encode(
        &header,
        &claims("x", "admin"),
        &jsonwebtoken::EncodingKey::from_secret(issuer.key.public_key_raw()),
    )
    .expect("signed");
    wrong.push(("HS256 over the public key", confused));
    for (what, token) in &wrong {
        let refused = who(&listen, token).await.expect_err(what);
        assert_eq!(refused.code(), Code::Unauthenticated, "{what}: {refused:?}");
    }

    // The issuer rotates its keys: after a SIGHUP the new one is taken.
    write_jwks(&jwks, &[&issuer, &rotated]);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.pid() as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .expect("SIGHUP sent");
    let fresh = rotated.sign(claims("carol", "viewer"));
    common::eventually("the rotated key is taken", || {
        let (listen, fresh) = (listen.clone(), fresh.clone());
        async move { who(&listen, &fresh).await.ok() }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(10)).await;
}
