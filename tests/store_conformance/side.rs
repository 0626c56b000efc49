//! The stores outside the batch path: instances swapped by digest, inbound
//! events kept once per dedupe key (and a webhook body once per replay
//! window), schedule progress, approvals decided once and listed while
//! open, and agents' context records.

use holarchy_actors::store::{ContextRecord, ReplayGuard};
use holarchy_actors::{ApprovalStore, ContextStore, InboundStore, InstanceStore, StoreError};
use holarchy_composition::approval::{ApprovalRecord, ApprovalStatus};
use holarchy_composition::event::{from_github, InboundEvent};
use holarchy_composition::instance::InstanceRecord;
use holarchy_composition::manifest::InstanceSpec;
use holarchy_composition::schedule::ScheduleState;
use holarchy_supervision::{AgentId, ApprovalId, RunId, ToolLimits};

use crate::harness::Harness;

const HOUR_MS: u64 = 3_600_000;
const BODY: &[u8] = br#"{"action":"opened","issue":{"number":7}}"#;

fn instance(name: &str, skills: &[&str], at_ms: u64) -> InstanceRecord {
    let spec = InstanceSpec {
        name: name.into(),
        role: None,
        brain: None,
        skills: skills.iter().map(|s| (*s).to_owned()).collect(),
        ingress: Vec::new(),
        limits: ToolLimits::default(),
        context_tokens: None,
        mcp_servers: Vec::new(),
        network: Default::default(),
    };
    InstanceRecord {
        digest: spec.digest(),
        spec,
        created_at_ms: at_ms,
        updated_at_ms: at_ms,
    }
}

fn delivery(id: &str, at_ms: u64) -> InboundEvent {
    from_github("issues", id, BODY, 1 << 20, at_ms).expect("an event")
}

fn guard(window_ms: u64) -> ReplayGuard<'static> {
    ReplayGuard {
        digest: "sha256:body",
        window_ms,
    }
}

fn parked(agent: AgentId) -> ApprovalRecord {
    ApprovalRecord {
        id: ApprovalId::generate(),
        agent_id: agent,
        instance: None,
        run_id: RunId::generate(),
        tool: "ExecCommand".into(),
        input: "{}".into(),
        layer: "config".into(),
        status: ApprovalStatus::Pending,
        delivered: false,
        created_at_ms: 1,
        decided_at_ms: None,
        place: None,
    }
}

fn refused(outcome: Result<(), StoreError>) {
    assert!(
        matches!(outcome, Err(StoreError::Precondition(_))),
        "not refused: {outcome:?}"
    );
}

pub async fn an_instance_is_swapped_only_from_the_digest_it_expects<H: Harness>() {
    let (_place, store) = H::create().await;
    let first = instance("alpha", &["review"], 1);
    let second = instance("alpha", &["review", "triage"], 2);
    assert_ne!(first.digest, second.digest);
    store
        .swap_instance("alpha", None, Some(&first))
        .expect("created");
    refused(store.swap_instance("alpha", None, Some(&first)));
    refused(store.swap_instance("alpha", Some("sha256:other"), Some(&second)));
    assert_eq!(store.instance("alpha").expect("reads"), Some(first.clone()));
    store
        .swap_instance("alpha", Some(&first.digest), Some(&second))
        .expect("replaced");
    assert_eq!(
        store.instance("alpha").expect("reads"),
        Some(second.clone())
    );

    let beta = instance("beta", &[], 3);
    store
        .swap_instance("beta", None, Some(&beta))
        .expect("created");
    assert_eq!(
        store.instances().expect("lists"),
        [second.clone(), beta.clone()],
        "by name"
    );
    refused(store.swap_instance("alpha", Some(&first.digest), None));
    store
        .swap_instance("alpha", Some(&second.digest), None)
        .expect("deleted");
    assert_eq!(store.instance("alpha").expect("reads"), None);
    // "Absent" is a state a swap can expect, too.
    store
        .swap_instance("alpha", None, None)
        .expect("still absent");
    refused(store.swap_instance("beta", None, None));
    assert_eq!(store.instances().expect("lists"), [beta]);
}

pub async fn an_inbound_event_is_kept_once_per_dedupe_key<H: Harness>() {
    let (_place, store) = H::create().await;
    let first = delivery("d-1", 1_000);
    let kept = store.put_inbound("hook", &first).expect("kept");
    assert!(!kept.duplicate);
    assert_eq!(kept.event, first);
    // The same delivery again, normalised anew: the first one comes back.
    let again = store
        .put_inbound("hook", &delivery("d-1", 2_000))
        .expect("found");
    assert!(again.duplicate);
    assert_eq!(again.event, first);
    assert_eq!(
        store.inbound("hook", &first.dedupe_key).expect("reads"),
        Some(first.clone())
    );
    // Another instance's keys are its own.
    let elsewhere = store
        .put_inbound("other", &delivery("d-1", 3_000))
        .expect("kept");
    assert!(!elsewhere.duplicate);
    assert_eq!(store.inbound("hook", "github:none").expect("reads"), None);

    store.forget_instance("hook").expect("forgotten");
    assert_eq!(
        store.inbound("hook", &first.dedupe_key).expect("reads"),
        None
    );
    assert!(store
        .inbound("other", &first.dedupe_key)
        .expect("reads")
        .is_some());
    let fresh = store
        .put_inbound("hook", &delivery("d-1", 4_000))
        .expect("kept");
    assert!(!fresh.duplicate, "a forgotten instance starts clean");
}

pub async fn a_webhook_body_is_a_replay_within_its_window<H: Harness>() {
    let (_place, store) = H::create().await;
    let first = delivery("d-1", 1_000);
    let kept = store
        .put_inbound_unless_replayed("hook", &first, guard(HOUR_MS))
        .expect("kept");
    assert!(!kept.duplicate);

    // The same delivery again: its dedupe key answers.
    let again = store
        .put_inbound_unless_replayed("hook", &delivery("d-1", 2_000), guard(HOUR_MS))
        .expect("found");
    assert_eq!((again.duplicate, again.event.id), (true, first.id.clone()));
    // The same body under a new delivery id: the first event, and nothing
    // kept under the new key.
    let replay = store
        .put_inbound_unless_replayed("hook", &delivery("d-2", 3_000), guard(HOUR_MS))
        .expect("found");
    assert_eq!(
        (replay.duplicate, replay.event.id),
        (true, first.id.clone())
    );
    assert_eq!(store.inbound("hook", "github:d-2").expect("reads"), None);
    // Another instance's bodies are its own.
    let elsewhere = store
        .put_inbound_unless_replayed("other", &delivery("d-2", 3_000), guard(HOUR_MS))
        .expect("kept");
    assert!(!elsewhere.duplicate);

    // Past the window the body is new again, and remembered anew.
    let late = delivery("d-3", 1_000 + HOUR_MS);
    let kept_late = store
        .put_inbound_unless_replayed("hook", &late, guard(HOUR_MS))
        .expect("kept");
    assert!(!kept_late.duplicate);
    let after_late = store
        .put_inbound_unless_replayed("hook", &delivery("d-4", 2_000 + HOUR_MS), guard(HOUR_MS))
        .expect("found");
    assert_eq!((after_late.duplicate, after_late.event.id), (true, late.id));

    // An instance deleted forgets its bodies with its events.
    store.forget_instance("hook").expect("forgotten");
    let fresh = store
        .put_inbound_unless_replayed("hook", &delivery("d-5", 3_000 + HOUR_MS), guard(HOUR_MS))
        .expect("kept");
    assert!(!fresh.duplicate);
}

pub async fn schedule_states_are_kept_until_their_instance_is_forgotten<H: Harness>() {
    let (_place, store) = H::create().await;
    assert_eq!(
        store.schedule_state("hook", "nightly").expect("reads"),
        ScheduleState::default(),
        "a schedule that never fired"
    );
    let mut state = ScheduleState::default();
    state.fired(5_000);
    store
        .put_schedule_state("hook", "nightly", state)
        .expect("kept");
    state.fired(9_000);
    store
        .put_schedule_state("hook", "nightly", state)
        .expect("replaced");
    let mut other = ScheduleState::default();
    other.fired(1_000);
    store
        .put_schedule_state("hook", "hourly", other)
        .expect("kept");
    store
        .put_schedule_state("elsewhere", "nightly", other)
        .expect("kept");
    assert_eq!(
        store.schedule_state("hook", "nightly").expect("reads"),
        state
    );
    assert_eq!(
        store.schedule_state("hook", "hourly").expect("reads"),
        other
    );

    store.forget_instance("hook").expect("forgotten");
    assert_eq!(
        store.schedule_state("hook", "nightly").expect("reads"),
        ScheduleState::default()
    );
    assert_eq!(
        store.schedule_state("elsewhere", "nightly").expect("reads"),
        other
    );
}

pub async fn an_approval_is_decided_once_and_listed_while_open<H: Harness>() {
    let (_place, store) = H::create().await;
    let (first_agent, second_agent) = (AgentId::generate(), AgentId::generate());
    let a1 = parked(first_agent);
    let b1 = parked(second_agent);
    let a2 = parked(first_agent);
    for record in [&a1, &b1, &a2] {
        store.insert_approval(record).expect("inserted");
    }
    refused(store.insert_approval(&a1));
    assert_eq!(store.approval(a1.id).expect("reads"), Some(a1.clone()));
    assert_eq!(
        store.approvals(None, 10).expect("history"),
        [a1.clone(), b1.clone(), a2.clone()],
        "oldest first"
    );
    assert_eq!(
        store.approvals(None, 2).expect("history"),
        [a1.clone(), b1.clone()]
    );
    assert_eq!(
        store.approvals(Some(first_agent), 10).expect("history"),
        [a1.clone(), a2.clone()]
    );

    let denied = ApprovalRecord {
        status: ApprovalStatus::Denied {
            reason: "no".into(),
        },
        decided_at_ms: Some(2),
        ..a1.clone()
    };
    store
        .swap_approval(&ApprovalStatus::Pending, &denied)
        .expect("decided");
    let running = ApprovalRecord {
        status: ApprovalStatus::Running,
        ..a1.clone()
    };
    refused(store.swap_approval(&ApprovalStatus::Pending, &running));
    refused(store.swap_approval(&ApprovalStatus::Pending, &parked(first_agent)));
    // Decided but not told: still open, so a start tells it.
    assert_eq!(
        store.open_approvals(Some(first_agent), 10).expect("open"),
        [denied.clone(), a2.clone()]
    );
    let told = ApprovalRecord {
        delivered: true,
        ..denied.clone()
    };
    store.swap_approval(&denied.status, &told).expect("told");
    assert_eq!(
        store.open_approvals(Some(first_agent), 10).expect("open"),
        std::slice::from_ref(&a2)
    );
    assert_eq!(
        store.open_approvals(None, 10).expect("open"),
        [a2.clone(), b1.clone()],
        "by agent, then oldest first"
    );
    assert_eq!(
        store.open_approvals(None, 1).expect("open"),
        std::slice::from_ref(&a2)
    );
    assert_eq!(
        store.approvals(Some(first_agent), 10).expect("history"),
        [told, a2]
    );
}

pub async fn context_records_are_replaced_and_forgotten<H: Harness>() {
    let (_place, store) = H::create().await;
    let (agent, other) = (AgentId::generate(), AgentId::generate());
    assert_eq!(store.context_record(agent).expect("reads"), None);
    let first = ContextRecord {
        summary: "the first summary".into(),
        compactions: 1,
        run_id: "run_1".into(),
        updated_at_ms: 1,
    };
    store.put_context_record(agent, &first).expect("kept");
    store.put_context_record(other, &first).expect("kept");
    let second = ContextRecord {
        summary: "the first summary, and more".into(),
        compactions: 2,
        run_id: "run_2".into(),
        updated_at_ms: 2,
    };
    store.put_context_record(agent, &second).expect("replaced");
    assert_eq!(store.context_record(agent).expect("reads"), Some(second));
    store.forget_context(agent).expect("forgotten");
    store.forget_context(agent).expect("forgotten again");
    assert_eq!(store.context_record(agent).expect("reads"), None);
    assert_eq!(store.context_record(other).expect("reads"), Some(first));
}
