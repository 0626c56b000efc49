//! `POST /ingress/<provider>/<instance>`: a signed delivery is one turn of
//! the instance's agent; a bad signature, an oversized body, an unknown
//! instance or provider record nothing, and an unknown instance answers as
//! a bad signature does; a replay is answered as one and not delivered
//! again; an event the instance does not list is ignored; the generic
//! provider's header is checked alike, against the secret current at each
//! delivery.

use holarchy_composition::webhook::sign;
use serde_json::{json, Value};

use super::{event_messages, received};
use crate::common::apply_instance as apply;
use crate::common::{data_dir, free_addr, handled, messages, Daemon};

const SECRET: &str = "webhook-secret-for-tests-0123456789";

const TRIAGE: &str = r#"
name = "triage"

[[ingress]]
source = "webhook"
provider = "github"
secret_env = "GH_WEBHOOK_SECRET"
events = ["issues"]
"#;

/// One HTTP/1.1 request on a fresh connection; the status and the body
/// as JSON.
pub(super) async fn post(
    addr: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> (u16, Value) {
    crate::common::http::post(addr, path, headers, body)
        .await
        .unwrap_or_else(|err| panic!("POST {path} to {addr}: {err}"))
}

/// A GitHub delivery's headers, signed with `secret`.
pub(super) fn github(
    event: &str,
    delivery: &str,
    body: &[u8],
    secret: &str,
) -> Vec<(&'static str, String)> {
    vec![
        ("X-GitHub-Event", event.to_owned()),
        ("X-GitHub-Delivery", delivery.to_owned()),
        ("X-Hub-Signature-256", sign(secret.as_bytes(), body)),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_delivery_is_one_turn_and_nothing_else_is_recorded() {
    let root = tempfile::tempdir().expect("tempdir");
    let http = free_addr();
    let daemon = Daemon::start_with_env(
        &data_dir(&root),
        &["--http-listen", &http, "--max-webhook-bytes", "4096"],
        &[("GH_WEBHOOK_SECRET", SECRET)],
    )
    .await;
    let mut c = daemon.clients().await;
    let agent = apply(&mut c, TRIAGE).await;
    let path = "/ingress/github/triage";
    let body = json!({
        "action": "opened",
        "issue": { "number": 12, "title": "crash on start" },
        "repository": { "full_name": "acme/app" },
    })
    .to_string();
    let body = body.as_bytes();

    // Refusals first: none of them may leave a trace.
    let wrong = github("issues", "d-1", body, "not-the-secret");
    assert_eq!(post(&http, path, &wrong, body).await.0, 401);
    let mut unsigned = github("issues", "d-1", body, SECRET);
    unsigned.retain(|(name, _)| *name != "X-Hub-Signature-256");
    assert_eq!(post(&http, path, &unsigned, body).await.0, 401);
    // Signed, but the body was changed on the way.
    let tampered = br#"{"action":"deleted"}"#;
    assert_eq!(
        post(
            &http,
            path,
            &github("issues", "d-1", body, SECRET),
            tampered
        )
        .await
        .0,
        401
    );
    let big = vec![b' '; 5000];
    let (status, _) = post(&http, path, &github("issues", "d-big", &big, SECRET), &big).await;
    assert_eq!(status, 413);
    // No instance, or no webhook of that provider: the answer of a bad
    // signature (see the enumeration test below).
    let signed = github("issues", "d-1", body, SECRET);
    assert_eq!(
        post(&http, "/ingress/github/nobody", &signed, body).await.0,
        401
    );
    assert_eq!(
        post(&http, "/ingress/generic/triage", &signed, body)
            .await
            .0,
        401
    );
    assert_eq!(
        post(&http, "/ingress/gitlab/triage", &signed, body).await.0,
        404
    );
    let not_json = b"not json";
    let (status, _) = post(
        &http,
        path,
        &github("issues", "d-x", not_json, SECRET),
        not_json,
    )
    .await;
    assert_eq!(status, 400);
    assert!(messages(&mut c, &agent).await.is_empty());
    assert!(received(&mut c).await.is_empty());

    let (status, accepted) = post(&http, path, &signed, body).await;
    assert_eq!(status, 202, "{accepted}");
    assert_eq!(accepted["duplicate"], false);
    let event_id = accepted["event_id"]
        .as_str()
        .expect("an event id")
        .to_owned();

    // The same delivery again: the same event, and no second message.
    let (status, replayed) = post(&http, path, &signed, body).await;
    assert_eq!(status, 200, "{replayed}");
    assert_eq!(replayed["duplicate"], true);
    assert_eq!(replayed["event_id"], event_id.as_str());

    // A verified event the instance does not list is ignored.
    let pr = br#"{"action":"opened","pull_request":{"number":3}}"#;
    let (status, ignored) = post(&http, path, &github("pull_request", "d-2", pr, SECRET), pr).await;
    assert_eq!(status, 202, "{ignored}");
    assert_eq!(ignored["ignored"], true);

    handled(&c, &agent, 1).await;
    let events = event_messages(&mut c, &agent).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(messages(&mut c, &agent).await.len(), 1);
    let (message, event) = &events[0];
    assert_eq!(event["id"], event_id.as_str());
    assert_eq!(event["source"], "webhook:github");
    assert_eq!(event["type"], "issues.opened");
    assert_eq!(event["scope"], "acme/app");
    assert_eq!(event["subject"], "issue#12");
    assert_eq!(event["dedupe_key"], "github:d-1");
    assert_eq!(event["payload"]["issue"]["title"], "crash on start");
    assert_eq!(message.reply, format!("ack: {}", message.text));
    assert_eq!(message.attempts, 1);

    let logged = received(&mut c).await;
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0]["event_id"], event_id.as_str());
    assert_eq!(logged[0]["instance"], "triage");
    assert_eq!(logged[0]["type"], "issues.opened");
    assert_eq!(logged[0]["subject"], "issue#12");
}

/// Without the secret, a sender learns nothing of which instances exist:
/// a missing instance, an instance without a webhook of that provider and
/// one with it answer a bad or missing signature alike, body included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsigned_delivery_cannot_tell_a_missing_instance_from_one_that_exists() {
    let root = tempfile::tempdir().expect("tempdir");
    let http = free_addr();
    let daemon = Daemon::start_with_env(
        &data_dir(&root),
        &["--http-listen", &http],
        &[("GH_WEBHOOK_SECRET", SECRET)],
    )
    .await;
    let mut c = daemon.clients().await;
    apply(&mut c, TRIAGE).await;
    apply(
        &mut c,
        "name = \"quiet\"\n[[ingress]]\nsource = \"publish\"\n",
    )
    .await;
    let body = br#"{"action":"opened","issue":{"number":1}}"#;
    let wrong = github("issues", "d-1", body, "a-guess");
    let mut unsigned = wrong.clone();
    unsigned.retain(|(name, _)| *name != "X-Hub-Signature-256");
    // Signed with a secret of another instance: still no proof for these.
    let other = github("issues", "d-1", body, SECRET);
    let mut answers = Vec::new();
    for path in [
        "/ingress/github/triage",
        "/ingress/github/nobody",
        "/ingress/github/quiet",
        "/ingress/generic/triage",
    ] {
        for headers in [&wrong, &unsigned] {
            answers.push((path, post(&http, path, headers, body).await));
        }
        if path != "/ingress/github/triage" {
            answers.push((path, post(&http, path, &other, body).await));
        }
    }
    let first = answers[0].1.clone();
    assert_eq!(first.0, 401, "{first:?}");
    for (path, answer) in &answers {
        assert_eq!(answer, &first, "{path}");
    }
    assert!(received(&mut c).await.is_empty());
}

const ANY_EVENT: &str = r#"
name = "watcher"

[[ingress]]
source = "webhook"
provider = "github"
secret_env = "GH_WEBHOOK_SECRET"
"#;

/// Neither `X-GitHub-Delivery` nor `X-GitHub-Event` is signed: a captured
/// body sent again under a new delivery id, or another event name, is
/// the first event again (200, its id), not a new one; the instance
/// remembers it across a `kill -9`. `replay_window = "0"` turns that off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_body_sent_again_under_new_headers_is_a_replay() {
    let root = tempfile::tempdir().expect("tempdir");
    let http = free_addr();
    let env = [("GH_WEBHOOK_SECRET", SECRET)];
    let mut daemon =
        Daemon::start_with_env(&data_dir(&root), &["--http-listen", &http], &env).await;
    let mut c = daemon.clients().await;
    let agent = apply(&mut c, ANY_EVENT).await;
    let path = "/ingress/github/watcher";
    let body = br#"{"action":"opened","issue":{"number":5},"repository":{"full_name":"acme/app"}}"#;

    let (status, first) = post(&http, path, &github("issues", "d-1", body, SECRET), body).await;
    assert_eq!(status, 202, "{first}");
    let event_id = first["event_id"].as_str().expect("an id").to_owned();
    for (event, delivery) in [("issues", "d-2"), ("issue_comment", "d-3")] {
        let headers = github(event, delivery, body, SECRET);
        let (status, replay) = post(&http, path, &headers, body).await;
        assert_eq!(status, 200, "{event} {delivery}: {replay}");
        assert_eq!(replay["duplicate"], true);
        assert_eq!(replay["event_id"], event_id.as_str());
    }
    handled(&c, &agent, 1).await;

    drop(c);
    daemon.kill9();
    let daemon = Daemon::start_with_env(&data_dir(&root), &["--http-listen", &http], &env).await;
    let mut c = daemon.clients().await;
    let (status, replay) = post(&http, path, &github("issues", "d-4", body, SECRET), body).await;
    assert_eq!(status, 200, "{replay}");
    assert_eq!(replay["event_id"], event_id.as_str());
    // A different body is a different event.
    let other = br#"{"action":"closed","issue":{"number":5}}"#;
    let (status, _) = post(&http, path, &github("issues", "d-5", other, SECRET), other).await;
    assert_eq!(status, 202);
    handled(&c, &agent, 2).await;
    let events = event_messages(&mut c, &agent).await;
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(received(&mut c).await.len(), 2);

    // With the window off, the delivery id alone names an event.
    let open = apply(
        &mut c,
        &format!(
            "{}replay_window = \"0\"\n",
            ANY_EVENT.replace("watcher", "open")
        ),
    )
    .await;
    let path = "/ingress/github/open";
    let (first, _) = post(&http, path, &github("issues", "d-1", body, SECRET), body).await;
    let (second, _) = post(&http, path, &github("issues", "d-2", body, SECRET), body).await;
    assert_eq!((first, second), (202, 202));
    handled(&c, &open, 2).await;
}

/// A generic instance whose secret is in the daemon's variable `env`.
fn generic_hook(env: &str) -> String {
    format!(
        "name = \"deployer\"\n\n[[ingress]]\nsource = \"webhook\"\nprovider = \"generic\"\nsecret_env = \"{env}\"\n"
    )
}

/// A generic delivery's headers, signed with `secret`.
fn generic(body: &[u8], secret: &str) -> Vec<(&'static str, String)> {
    vec![("X-Holarchy-Signature-256", sign(secret.as_bytes(), body))]
}

/// The generic provider checks `X-Holarchy-Signature-256` as GitHub's is
/// checked: missing, wrong, under GitHub's header name, or over another
/// body, the delivery is refused (401) and nothing is recorded; right, it
/// is taken. A rotated secret (the instance re-applied with a new
/// `secret_env`, or the daemon restarted with a new value) is the one the
/// next delivery is checked against: the old one is refused from then on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generic_delivery_is_taken_only_with_the_current_secrets_signature() {
    const OLD: &str = "generic-secret-old-0123456789abcdef";
    const NEW: &str = "generic-secret-new-0123456789abcdef";
    const NEWEST: &str = "generic-secret-newest-0123456789abcd";
    let root = tempfile::tempdir().expect("tempdir");
    let http = free_addr();
    let mut daemon = Daemon::start_with_env(
        &data_dir(&root),
        &["--http-listen", &http],
        &[
            ("DEPLOY_HOOK_SECRET", OLD),
            ("DEPLOY_HOOK_NEXT_SECRET", NEW),
        ],
    )
    .await;
    let mut c = daemon.clients().await;
    let agent = apply(&mut c, &generic_hook("DEPLOY_HOOK_SECRET")).await;
    let path = "/ingress/generic/deployer";
    let body = br#"{"type":"deploy","dedupe_key":"d-1"}"#;

    let mut refusals = vec![
        ("unsigned", Vec::new()),
        ("wrong secret", generic(body, "not-the-secret")),
        ("another body", generic(b"{}", OLD)),
    ];
    let mut misnamed = github("deploy", "d-1", body, OLD);
    misnamed.retain(|(name, _)| *name == "X-Hub-Signature-256");
    refusals.push(("GitHub's header", misnamed));
    for (what, headers) in &refusals {
        let (status, answer) = post(&http, path, headers, body).await;
        assert_eq!(status, 401, "{what}: {answer}");
    }
    assert!(received(&mut c).await.is_empty());

    let (status, taken) = post(&http, path, &generic(body, OLD), body).await;
    assert_eq!(status, 202, "{taken}");
    handled(&c, &agent, 1).await;

    // Rotated live: the instance now names the next secret's variable.
    apply(&mut c, &generic_hook("DEPLOY_HOOK_NEXT_SECRET")).await;
    let second = br#"{"type":"deploy","dedupe_key":"d-2"}"#;
    let (status, answer) = post(&http, path, &generic(second, OLD), second).await;
    assert_eq!(status, 401, "the old secret still works: {answer}");
    let (status, answer) = post(&http, path, &generic(second, NEW), second).await;
    assert_eq!(status, 202, "{answer}");
    handled(&c, &agent, 2).await;

    // Rotated across a restart: the variable's value changed.
    drop(c);
    daemon.kill9();
    let daemon = Daemon::start_with_env(
        &data_dir(&root),
        &["--http-listen", &http],
        &[("DEPLOY_HOOK_NEXT_SECRET", NEWEST)],
    )
    .await;
    let mut c = daemon.clients().await;
    let third = br#"{"type":"deploy","dedupe_key":"d-3"}"#;
    let (status, answer) = post(&http, path, &generic(third, NEW), third).await;
    assert_eq!(status, 401, "the replaced value still works: {answer}");
    let (status, answer) = post(&http, path, &generic(third, NEWEST), third).await;
    assert_eq!(status, 202, "{answer}");
    handled(&c, &agent, 3).await;
    let keys: Vec<Value> = event_messages(&mut c, &agent)
        .await
        .into_iter()
        .map(|(_, event)| event["dedupe_key"].clone())
        .collect();
    assert_eq!(
        keys,
        ["generic:d-1", "generic:d-2", "generic:d-3"],
        "exactly the signed deliveries"
    );
    assert_eq!(received(&mut c).await.len(), 3);
}
