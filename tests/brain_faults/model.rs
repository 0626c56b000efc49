//! Model endpoints that misbehave, for both model brains at once: one
//! agent per fault and API, all turning together against one endpoint per
//! API. The daemon runs with two retries, a 10 ms backoff, waits cut at
//! 1.5 s and a 400 ms idle bound, so every fault ends within seconds.

use std::time::Duration;

use holarchy::api::pb;
use holarchy::client::Clients;

use crate::common::{self, data_dir, eventually, send, Daemon};
use crate::endpoint::{self, Api, Endpoint, Fault};
use crate::{finished, others_are_served, settled};

const ANTHROPIC_KEY: &str = "sk-ant-stub-0123456789abcdef";
/// `--model-retry-cap-ms`.
const CAP: Duration = Duration::from_millis(1500);
/// `--model-idle-timeout-ms`.
const IDLE: Duration = Duration::from_millis(400);

async fn daemon(root: &tempfile::TempDir) -> Daemon {
    Daemon::start_with_env(
        &data_dir(root),
        &[
            "--model-retries",
            "2",
            "--model-retry-base-ms",
            "10",
            "--model-retry-cap-ms",
            "1500",
            "--model-idle-timeout-ms",
            "400",
        ],
        &[
            ("TEST_MODEL_KEY", "test-key"),
            ("TEST_ANTHROPIC_KEY", ANTHROPIC_KEY),
        ],
    )
    .await
}

/// An agent named `marker` on `api`'s brain at `endpoint`.
async fn agent(c: &mut Clients, api: Api, endpoint: &Endpoint, marker: &str) -> String {
    let kind = match api {
        Api::OpenAi => pb::brain_config::Kind::Openai(pb::OpenAiBrain {
            base_url: format!("http://{}/v1", endpoint.addr),
            model: "stub-model".into(),
            api_key_env: "TEST_MODEL_KEY".into(),
            temperature: None,
            max_steps: Some(4),
        }),
        Api::Anthropic => pb::brain_config::Kind::Anthropic(pb::AnthropicBrain {
            base_url: format!("http://{}", endpoint.addr),
            model: "claude-stub".into(),
            api_key_env: "TEST_ANTHROPIC_KEY".into(),
            max_tokens: Some(1024),
            temperature: None,
            max_steps: Some(4),
        }),
    };
    let name = format!("{marker}-{api:?}").to_lowercase();
    common::create_on(c, &name, pb::BrainConfig { kind: Some(kind) }).await
}

/// What a fault's turn must come to: the reply, or words of the failure.
enum Expect {
    Reply(&'static str),
    Failure(&'static [&'static str]),
}

/// Every marker's agent on both APIs gets one message; each turn settles
/// as `expect` says, with `asked` requests per marker. Returns the two
/// endpoints, for checks of when they were asked.
async fn run(
    c: &mut Clients,
    markers: &'static [&'static str],
    handler: endpoint::Handler,
    expect: impl Fn(&str) -> (Expect, usize),
) -> [Endpoint; 2] {
    let endpoints = [
        endpoint::start(Api::OpenAi, markers, handler).await,
        endpoint::start(Api::Anthropic, markers, handler).await,
    ];
    let mut agents = Vec::new();
    for (api, endpoint) in [Api::OpenAi, Api::Anthropic].into_iter().zip(&endpoints) {
        for marker in markers {
            let id = agent(c, api, endpoint, marker).await;
            send(c, &id, &format!("please answer ({marker})")).await;
            agents.push((api, *marker, id));
        }
    }
    for (api, endpoint) in [Api::OpenAi, Api::Anthropic].into_iter().zip(&endpoints) {
        for (_, marker, id) in agents.iter().filter(|(a, _, _)| *a == api) {
            let message = settled(c, id, 1).await.remove(0);
            let (outcome, detail) = finished(c, &message).await;
            let (expected, asked) = expect(marker);
            let what = format!("{api:?} {marker}");
            match expected {
                Expect::Reply(reply) => {
                    assert_eq!(outcome, "completed", "{what}: {detail}");
                    assert_eq!(message.reply, reply, "{what}");
                }
                Expect::Failure(words) => {
                    assert_eq!(outcome, "failed", "{what}");
                    assert_eq!(message.status, pb::MessageStatus::Failed as i32, "{what}");
                    for word in words {
                        assert!(detail.contains(word), "{what}: `{word}` missing: {detail}");
                    }
                    assert!(
                        !detail.contains(ANTHROPIC_KEY) && !detail.contains("test-key"),
                        "{what}: a key in {detail}"
                    );
                }
            }
            assert_eq!(endpoint.asked(marker).len(), asked, "{what}: requests");
        }
    }
    endpoints
}

const REFUSALS: &[&str] = &[
    "resets-once",
    "resets-always",
    "limited-bare",
    "limited-always",
    "errs-after",
    "overloaded-bare",
    "overloaded-long",
];

/// Resets, 429, 500 and 529, with and without `Retry-After`: retried at
/// most twice, a `Retry-After` honoured but cut to the cap (a server
/// asking for an hour gets 1.5 s), and a fault that persists fails the
/// turn with the last reason and the count of retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_endpoints_that_reset_or_refuse_are_retried_within_bounds() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(&root).await;
    let mut c = daemon.clients().await;
    let handler: endpoint::Handler = |marker, n| match (marker, n) {
        ("resets-always", _) | ("resets-once", 0) => Fault::Reset,
        ("limited-always", _) => Fault::Status(429, Some("3600")),
        ("limited-bare", 0) => Fault::Status(429, None),
        ("errs-after", 0) => Fault::Status(500, Some("1")),
        ("overloaded-bare", 0) => Fault::Status(529, None),
        ("overloaded-long", 0) => Fault::Status(529, Some("3600")),
        _ => Fault::Answer("answered in the end"),
    };
    let endpoints = run(&mut c, REFUSALS, handler, |marker| match marker {
        "resets-always" => (
            Expect::Failure(&["request failed", "gave up after 2 retries"]),
            3,
        ),
        "limited-always" => (
            Expect::Failure(&[
                "429 Too Many Requests",
                "limited-always answered 429",
                "gave up after 2 retries",
            ]),
            3,
        ),
        _ => (Expect::Reply("answered in the end"), 2),
    })
    .await;

    for endpoint in &endpoints {
        let gap = |marker: &str| {
            let at = endpoint.asked(marker);
            at[1] - at[0]
        };
        // The backoff alone waits some 10 ms: these waited as told.
        assert!(
            gap("errs-after") >= Duration::from_millis(900),
            "{:?}",
            gap("errs-after")
        );
        for marker in ["overloaded-long", "limited-always"] {
            let waited = gap(marker);
            assert!(
                waited >= CAP - Duration::from_millis(100) && waited < CAP * 3,
                "{marker}: asked an hour, waited {waited:?}"
            );
        }
        assert!(gap("limited-bare") < CAP, "{:?}", gap("limited-bare"));
    }
    others_are_served(&mut c, "bystander").await;
}

const STALLS: &[&str] = &[
    "stalls-stream-once",
    "stalls-stream-always",
    "stalls-body-always",
    "stalls-headers-always",
];

/// An endpoint that falls silent before its headers, in the middle of a
/// whole answer's body or in the middle of a stream: each attempt is
/// abandoned after the idle bound (its connection closed) and asked
/// again, and a silence that persists fails the turn saying where.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_endpoints_that_stall_are_abandoned_at_the_idle_timeout() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = daemon(&root).await;
    let mut c = daemon.clients().await;
    let handler: endpoint::Handler = |marker, n| match (marker, n) {
        ("stalls-stream-once", 0) | ("stalls-stream-always", _) => Fault::StallStream,
        ("stalls-body-always", _) => Fault::StallBody,
        ("stalls-headers-always", _) => Fault::StallHeaders,
        _ => Fault::Answer("answered after a silence"),
    };
    let started = std::time::Instant::now();
    let endpoints = run(&mut c, STALLS, handler, |marker| match marker {
        "stalls-stream-always" => (
            Expect::Failure(&["the stream was silent for 400ms", "gave up after 2 retries"]),
            3,
        ),
        "stalls-body-always" => (
            Expect::Failure(&["the body was silent for 400ms", "gave up after 2 retries"]),
            3,
        ),
        "stalls-headers-always" => (
            Expect::Failure(&["no answer within 400ms", "gave up after 2 retries"]),
            3,
        ),
        _ => (Expect::Reply("answered after a silence"), 2),
    })
    .await;
    // Three silences of 400 ms and two short waits each, all at once.
    let took = started.elapsed();
    assert!(took < Duration::from_secs(15), "the stalls took {took:?}");
    for endpoint in &endpoints {
        let at = endpoint.asked("stalls-stream-once");
        assert!(
            at[1] - at[0] >= IDLE,
            "asked again after {:?}",
            at[1] - at[0]
        );
        // Every abandoned attempt's connection was closed by the daemon.
        eventually("stalled connections closed", || async {
            (endpoint.stalled_open() == 0).then_some(())
        })
        .await;
    }
    others_are_served(&mut c, "bystander").await;
}
