use super::*;
use proptest::prelude::*;

const LIMIT: usize = DEFAULT_MAX_PAYLOAD_BYTES;

fn github(event: &str, delivery: &str, body: &str) -> Result<InboundEvent, EventError> {
    from_github(event, delivery, body.as_bytes(), LIMIT, 1_700_000_000_000)
}

#[test]
fn github_issue_with_action() {
    let body = r#"{"action":"opened","issue":{"number":12},"repository":{"full_name":"acme/app"},"sender":{"login":"ada"}}"#;
    let event = github("issues", "d-1", body).expect("accepted");
    assert_eq!(event.source, "webhook:github");
    assert_eq!(event.kind, "issues.opened");
    assert_eq!(event.scope, "acme/app");
    assert_eq!(event.subject, "issue#12");
    assert_eq!(event.dedupe_key, "github:d-1");
    assert_eq!(event.payload, body);
    assert_eq!(event.at_ms, 1_700_000_000_000);
    assert!(
        event.id.parse::<holarchy_supervision::InboundId>().is_ok(),
        "{}",
        event.id
    );
}

#[test]
fn github_fallbacks() {
    let pr = github(
        "pull_request",
        "d",
        r#"{"action":"closed","pull_request":{"number":3},"issue":{"number":9}}"#,
    )
    .expect("accepted");
    assert_eq!(pr.subject, "pull_request#3");
    assert_eq!(pr.scope, "github");

    let push = github("push", "d", r#"{"sender":{"login":"ada"},"action":7}"#).expect("accepted");
    assert_eq!(
        push.kind, "push",
        "a non-string action is not part of the type"
    );
    assert_eq!(push.subject, "ada");

    let ping = github("ping", "d", "{}").expect("accepted");
    assert_eq!(ping.subject, "ping");
}

#[test]
fn github_refusals() {
    assert_eq!(github("issues", "d", "[1]"), Err(EventError::NotAnObject));
    assert!(matches!(
        github("issues", "d", "{"),
        Err(EventError::InvalidJson(_))
    ));
    assert_eq!(
        github("", "d", "{}"),
        Err(EventError::Empty("the X-GitHub-Event header"))
    );
    assert_eq!(
        github("issues", "", "{}"),
        Err(EventError::Empty("the X-GitHub-Delivery header"))
    );
    assert_eq!(
        github("is sues", "d", "{}"),
        Err(EventError::Whitespace("the X-GitHub-Event header"))
    );
    let long_action = format!(r#"{{"action":"{}"}}"#, "a".repeat(MAX_FIELD_BYTES));
    assert!(matches!(
        github("issues", "d", &long_action),
        Err(EventError::TooLong { field: "type", .. })
    ));
    assert_eq!(
        from_github("issues", "d", b"{\"a\":1}", 4, 0),
        Err(EventError::PayloadTooLarge { size: 7, limit: 4 })
    );
}

#[test]
fn github_derived_fields_are_truncated_at_a_char_boundary() {
    let name = "é".repeat(200); // 400 bytes
    let body = format!(r#"{{"repository":{{"full_name":"{name}"}},"sender":{{"login":"a\nb"}}}}"#);
    let event = github("star", "d", &body).expect("accepted");
    assert_eq!(event.scope, "é".repeat(128));
    assert_eq!(event.subject, "ab", "control characters are dropped");
}

#[test]
fn generic_defaults_and_keys() {
    let body = br#"{"n":1}"#;
    let event = from_generic(body, LIMIT, 5).expect("accepted");
    assert_eq!(
        (
            event.kind.as_str(),
            event.scope.as_str(),
            event.subject.as_str()
        ),
        ("generic", "generic", "generic")
    );
    assert_eq!(
        event.dedupe_key,
        format!("generic:sha256:{}", hex::encode(Sha256::digest(body)))
    );
    assert_eq!(event.source, "webhook:generic");

    let named = br#"{"type":"deploy.done","scope":"prod","subject":"v1.2","dedupe_key":"k9","dedupe":null}"#;
    let event = from_generic(named, LIMIT, 5).expect("accepted");
    assert_eq!(event.kind, "deploy.done");
    assert_eq!(event.scope, "prod");
    assert_eq!(event.subject, "v1.2");
    assert_eq!(
        event.dedupe_key, "generic:k9",
        "the body's key names the event"
    );
}

#[test]
fn generic_refusals() {
    let refuse = |body: &str| from_generic(body.as_bytes(), LIMIT, 0);
    assert_eq!(refuse(r#"{"type":3}"#), Err(EventError::NotAString("type")));
    assert_eq!(refuse(r#"{"type":""}"#), Err(EventError::Empty("type")));
    assert_eq!(
        refuse(r#"{"dedupe_key":""}"#),
        Err(EventError::Empty("dedupe_key"))
    );
    assert_eq!(
        refuse(r#"{"subject":"a\u0007"}"#),
        Err(EventError::ControlCharacters("subject"))
    );
    let long_scope = format!(r#"{{"scope":"{}"}}"#, "s".repeat(MAX_FIELD_BYTES + 1));
    assert!(matches!(
        refuse(&long_scope),
        Err(EventError::TooLong { field: "scope", .. })
    ));
    // A key that fits alone but not with its prefix is refused, not cut.
    let long_key = format!(r#"{{"dedupe_key":"{}"}}"#, "k".repeat(MAX_FIELD_BYTES));
    assert!(matches!(
        refuse(&long_key),
        Err(EventError::TooLong {
            field: "dedupe_key",
            ..
        })
    ));
    assert!(matches!(
        from_generic(b"{\"a\":\"\xff\"}", LIMIT, 0),
        Err(EventError::InvalidJson(_))
    ));
}

#[test]
fn schedule_event_names_its_slot() {
    let event = from_schedule(
        "maintainer",
        "a1b2c3d4e5f6",
        1_000,
        r#"{"kind":"daily-report"}"#,
    )
    .expect("accepted");
    assert_eq!(event.dedupe_key, "schedule:maintainer:a1b2c3d4e5f6:1000");
    assert_eq!(event.kind, "schedule");
    assert_eq!(event.source, "schedule");
    assert_eq!(event.at_ms, 1_000);
    assert_eq!(event.scope, "maintainer");
    assert!(matches!(
        from_schedule("m", "0", 0, "not json"),
        Err(EventError::InvalidJson(_))
    ));
}

#[test]
fn publish_scopes_the_key_to_the_instance() {
    let event =
        from_publish("maint", "report.ready", "r-7", "", "k1", "[1,2]", 9).expect("accepted");
    assert_eq!(event.dedupe_key, "publish:maint:k1");
    assert_eq!(event.scope, "maint");
    assert_eq!(event.source, "publish");
    assert_eq!(event.payload, "[1,2]");
    assert_eq!(
        from_publish("maint", "x", "", "", "", "{}", 9),
        Err(EventError::Empty("dedupe_key"))
    );
    assert!(matches!(
        from_publish("maint", "x", "", "", "k", "", 9),
        Err(EventError::InvalidJson(_))
    ));
}

#[test]
fn json_view_uses_the_contract_names() {
    let event = from_publish(
        "maint",
        "report.ready",
        "r-7",
        "team",
        "k1",
        r#"{"a":[1]}"#,
        1_700_000_000_123,
    )
    .expect("accepted");
    let json = event.to_json();
    assert_eq!(json["type"], "report.ready");
    assert_eq!(json["at"], "2023-11-14T22:13:20.123Z");
    assert_eq!(json["at_ms"], 1_700_000_000_123u64);
    assert_eq!(
        json["payload"]["a"][0], 1,
        "the payload is embedded, not a string"
    );
    assert_eq!(json["dedupe_key"], "publish:maint:k1");
    assert!(json.get("kind").is_none());
}

#[test]
fn events_round_trip_through_bincode() {
    let config = bincode::config::standard();
    let event = github("issues", "d", r#"{"action":"opened"}"#).expect("accepted");
    let bytes = bincode::serde::encode_to_vec(&event, config).expect("encodes");
    let (back, _): (InboundEvent, usize) =
        bincode::serde::decode_from_slice(&bytes, config).expect("decodes");
    assert_eq!(back, event);
}

fn assert_within_bounds(event: &InboundEvent, limit: usize) -> Result<(), TestCaseError> {
    for (name, field) in [
        ("type", &event.kind),
        ("scope", &event.scope),
        ("subject", &event.subject),
        ("dedupe_key", &event.dedupe_key),
    ] {
        prop_assert!(
            field.len() <= MAX_FIELD_BYTES,
            "{name} is {} bytes",
            field.len()
        );
        prop_assert!(!field.chars().any(char::is_control), "{name} = {field:?}");
    }
    prop_assert!(!event.kind.is_empty() && !event.dedupe_key.is_empty());
    prop_assert!(event.payload.len() <= limit);
    prop_assert!(serde_json::from_str::<Value>(&event.payload).is_ok());
    Ok(())
}

/// Bodies that are JSON objects with the fields the normalisers read, so
/// that the properties reach the accepting paths, not only the parse error.
fn json_body() -> impl Strategy<Value = Vec<u8>> {
    let text = prop_oneof![".{0,8}", ".{250,300}", "[a-z.]{1,20}"];
    let value = prop_oneof![
        text.clone().prop_map(Value::String),
        any::<u64>().prop_map(Value::from),
        Just(Value::Null),
    ];
    let keys = proptest::sample::select(
        &[
            "type",
            "scope",
            "subject",
            "dedupe_key",
            "action",
            "sender",
            "issue",
            "repository",
        ][..],
    );
    proptest::collection::btree_map(keys, value, 0..6).prop_map(|fields| {
        let mut object = Map::new();
        for (key, value) in fields {
            let value = match key {
                "sender" => serde_json::json!({ "login": value }),
                "issue" => serde_json::json!({ "number": value }),
                "repository" => serde_json::json!({ "full_name": value }),
                _ => value,
            };
            object.insert(key.to_string(), value);
        }
        serde_json::to_vec(&object).unwrap_or_default()
    })
}

fn any_body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![json_body(), proptest::collection::vec(any::<u8>(), 0..200)]
}

proptest! {
    #[test]
    fn github_never_panics_and_stays_in_bounds(event in prop_oneof!["[a-z_]{1,20}", ".{0,300}"], delivery in prop_oneof!["[a-f0-9-]{1,40}", ".{0,300}"], body in any_body(), limit in 0usize..400) {
        if let Ok(accepted) = from_github(&event, &delivery, &body, limit, 0) {
            assert_within_bounds(&accepted, limit)?;
        }
    }

    #[test]
    fn generic_never_panics_and_stays_in_bounds(body in any_body(), limit in 0usize..400) {
        if let Ok(accepted) = from_generic(&body, limit, 0) {
            assert_within_bounds(&accepted, limit)?;
        }
    }

    #[test]
    fn publish_and_schedule_never_panic(instance in prop_oneof!["[a-z]{1,80}", ".{0,80}"], kind in prop_oneof!["[a-z.]{1,40}", ".{0,40}"], subject in ".{0,40}", key in ".{0,300}", payload in prop_oneof![".{0,40}", "\\{\\}", "[0-9]{1,5}"]) {
        if let Ok(accepted) = from_publish(&instance, &kind, &subject, "", &key, &payload, 0) {
            assert_within_bounds(&accepted, DEFAULT_MAX_PAYLOAD_BYTES)?;
        }
        if let Ok(accepted) = from_schedule(&instance, "3", 60_000, &payload) {
            assert_within_bounds(&accepted, DEFAULT_MAX_PAYLOAD_BYTES)?;
        }
    }

    #[test]
    fn the_same_delivery_gives_the_same_key(delivery in "[a-f0-9-]{1,40}", body in json_body()) {
        let first = from_github("issues", &delivery, &body, LIMIT, 1);
        let again = from_github("issues", &delivery, &body, LIMIT, 2);
        prop_assert_eq!(first.map(|e| e.dedupe_key), again.map(|e| e.dedupe_key));
        let first = from_generic(&body, LIMIT, 1);
        let again = from_generic(&body, LIMIT, 2);
        if let (Ok(first), Ok(again)) = (first, again) {
            prop_assert_eq!(first.dedupe_key, again.dedupe_key);
            prop_assert_ne!(first.id, again.id);
        }
    }

    #[test]
    fn different_github_deliveries_give_different_keys(a in "[a-f0-9-]{1,40}", b in "[a-f0-9-]{1,40}") {
        prop_assume!(a != b);
        let first = from_github("ping", &a, b"{}", LIMIT, 0).map(|e| e.dedupe_key);
        let second = from_github("ping", &b, b"{}", LIMIT, 0).map(|e| e.dedupe_key);
        prop_assert!(first.is_ok());
        prop_assert_ne!(first, second);
    }
}
