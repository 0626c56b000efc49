use holarchy_composition::event::{from_generic, from_github, from_publish, from_schedule};
use holarchy_composition::manifest::{Ingress, InstanceSpec, Provider};
use holarchy_supervision::ToolLimits;

use super::*;

fn spec(ingress: Vec<Ingress>) -> InstanceSpec {
    InstanceSpec {
        name: "maintainer".into(),
        role: None,
        brain: None,
        skills: Vec::new(),
        ingress,
        limits: ToolLimits::default(),
        context_tokens: None,
        mcp_servers: Vec::new(),
        network: Default::default(),
    }
}

fn github(events: &[&str]) -> Ingress {
    Ingress::Webhook {
        provider: Provider::Github,
        secret_env: "GH_WEBHOOK_SECRET".into(),
        events: events.iter().map(|e| e.to_string()).collect(),
        replay_window_s: None,
    }
}

fn issue_opened() -> InboundEvent {
    from_github("issues", "d-1", br#"{"action":"opened"}"#, 1 << 20, 1).expect("event")
}

#[test]
fn a_webhook_event_routes_by_provider_and_event_name() {
    let event = issue_opened();
    assert_eq!(route(&spec(vec![github(&[])]), &event), Route::Take);
    assert_eq!(route(&spec(vec![github(&["issues"])]), &event), Route::Take);
    assert_eq!(
        route(&spec(vec![github(&["pull_request"])]), &event),
        Route::Ignore
    );
    // `issues` is the name; `issues.opened` is not matched as one.
    assert_eq!(
        route(&spec(vec![github(&["issues.opened"])]), &event),
        Route::Ignore
    );
    let generic_only = spec(vec![Ingress::Webhook {
        provider: Provider::Generic,
        secret_env: "HOOK_SECRET".into(),
        events: Vec::new(),
        replay_window_s: None,
    }]);
    assert_eq!(route(&generic_only, &event), Route::Undeclared);
    let generic = from_generic(br#"{"type":"deploy"}"#, 1 << 20, 1).expect("event");
    assert_eq!(route(&generic_only, &generic), Route::Take);
    assert_eq!(route(&spec(vec![github(&[])]), &generic), Route::Undeclared);
}

#[test]
fn schedule_and_publish_events_need_their_own_ingress() {
    let published = from_publish("maintainer", "note", "", "", "k-1", "{}", 1).expect("event");
    let fired = from_schedule("maintainer", "0", 60_000, "{}").expect("event");
    let schedule = Ingress::Schedule {
        cron: "* * * * *".into(),
        timezone: None,
        payload: "{}".into(),
    };
    assert_eq!(
        route(&spec(vec![Ingress::Publish]), &published),
        Route::Take
    );
    assert_eq!(
        route(&spec(vec![Ingress::Trigger]), &published),
        Route::Undeclared
    );
    assert_eq!(route(&spec(vec![schedule.clone()]), &fired), Route::Take);
    assert_eq!(
        route(&spec(vec![Ingress::Publish]), &fired),
        Route::Undeclared
    );
    assert_eq!(route(&spec(vec![schedule]), &published), Route::Undeclared);
}

#[test]
fn an_event_that_fits_is_the_contract_json() {
    let event = issue_opened();
    let text = message_text(&event);
    let view: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(view, event.to_json());
    assert!(view.get("payload_truncated").is_none());
}

#[test]
fn a_large_payload_is_cut_to_fit_a_message() {
    // Quotes escape to two bytes each, so the cut must allow for escaping.
    let body = format!(
        r#"{{"action":"opened","text":"{}"}}"#,
        "\\\"é".repeat(60_000)
    );
    let event = from_github("issues", "d-2", body.as_bytes(), 1 << 20, 1).expect("event");
    assert!(event.payload.len() > MAX_MESSAGE_LEN);
    let text = message_text(&event);
    assert!(text.len() <= MAX_MESSAGE_LEN, "{}", text.len());
    let view: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(view["payload_truncated"], true);
    assert_eq!(view["payload_bytes"], event.payload.len());
    assert_eq!(view["id"], event.id.as_str());
    assert_eq!(view["dedupe_key"], "github:d-2");
    let cut = view["payload"].as_str().expect("a prefix, as text");
    assert!(event.payload.starts_with(cut));
    assert!(cut.len() > MAX_MESSAGE_LEN / 8, "keeps a useful prefix");
}

#[test]
fn message_dedupe_keys_stay_within_the_message_bound() {
    assert_eq!(message_dedupe_key("github:d-1"), "event:github:d-1");
    let long = format!("publish:maintainer:{}", "k".repeat(200));
    let hashed = message_dedupe_key(&long);
    assert!(hashed.len() <= MAX_DEDUPE_KEY_LEN);
    assert!(hashed.starts_with("event:sha256:"));
    assert_ne!(hashed, message_dedupe_key(&format!("{long}x")));
}
