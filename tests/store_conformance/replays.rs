//! What replays keep: the inputs of recorded turns (each agent's newest
//! few, their role and catalog once by digest) and the replays with their
//! reports, paged by index and deleted whole.

use holarchy::replay::model::{
    Budget, CandidateSpec, ReplayRecord, ReplaySpec, ReplayStatus, Summary, TurnReport,
};
use holarchy::replay::store::ReplayStore;
use holarchy_actors::replay::Decided;
use holarchy_actors::{SharedInput, TurnInputRecord, TurnInputs};
use holarchy_supervision::{AgentId, ReplayId, RunId};

use crate::harness::Harness;

fn input(shared: &str, n: u64) -> TurnInputRecord {
    TurnInputRecord {
        brain: "command".into(),
        agent: format!("{{\"turn\":{n}}}"),
        context: "{\"recent_turns\":[]}".into(),
        shared: shared.into(),
        max_steps: 8,
        logs_decision: false,
        done: n.is_multiple_of(2),
        at_ms: n,
    }
}

pub async fn turn_inputs_keep_the_newest_and_share_their_role_and_catalog<H: Harness>() {
    let (_place, store) = H::create().await;
    let (agent, other) = (AgentId::generate(), AgentId::generate());
    let shared = SharedInput {
        role: None,
        catalog: "[{\"name\":\"AgentGet\"}]".into(),
    };
    let digest = shared.digest();
    let mut runs = Vec::new();
    for n in 0..12 {
        // Run ids are made in time order: wait for the clock to move.
        std::thread::sleep(std::time::Duration::from_millis(2));
        let run = RunId::generate();
        let first = (n == 0).then_some(&shared);
        store
            .put_turn_input(agent, run, &input(&digest, n), first, 5)
            .expect("recorded");
        runs.push(run);
    }
    let other_run = RunId::generate();
    store
        .put_turn_input(other, other_run, &input(&digest, 99), None, 5)
        .expect("recorded");
    holarchy_actors::Store::durable(store.as_ref())
        .await
        .expect("durable");
    for (n, run) in runs.iter().enumerate() {
        let kept = store.turn_input(agent, *run).expect("reads");
        if n < 7 {
            assert_eq!(kept, None, "turn {n} is past the newest five");
        } else {
            assert_eq!(kept, Some(input(&digest, n as u64)), "turn {n}");
        }
    }
    assert_eq!(store.shared_input(&digest).expect("reads"), Some(shared));
    store.forget_turn_inputs(agent).expect("forgotten");
    store.forget_turn_inputs(agent).expect("forgotten again");
    assert_eq!(store.turn_input(agent, runs[11]).expect("reads"), None);
    assert_eq!(
        store.turn_input(other, other_run).expect("reads"),
        Some(input(&digest, 99))
    );
}

fn replay(agent: AgentId) -> ReplayRecord {
    ReplayRecord {
        id: ReplayId::generate(),
        namespace: "default".into(),
        spec: ReplaySpec {
            agent_id: agent,
            from_ms: None,
            to_ms: Some(9),
            run_ids: vec![RunId::generate()],
            max_turns: 10,
            candidate: CandidateSpec {
                role_prompt: Some("be brief".into()),
                deny_tools: vec!["ExecCommand".into()],
                ..CandidateSpec::default()
            },
            budget: Budget {
                max_tokens: 0,
                max_wall_ms: 1000,
                concurrency: 2,
            },
            until_ms: 42,
        },
        status: ReplayStatus::Running,
        reason: String::new(),
        selected: 5,
        summary: Summary::default(),
        created_ms: 1,
        updated_ms: 1,
    }
}

fn report(agent: AgentId, index: u32, class: &str) -> TurnReport {
    TurnReport {
        index,
        run_id: RunId::generate(),
        agent_id: agent,
        at_ms: u64::from(index),
        class: class.into(),
        recorded: Decided {
            reply: Some(format!("turn {index}")),
            ..Decided::default()
        },
        candidate: Decided::default(),
        unrecorded_calls: index,
        recorded_usage: None,
        candidate_usage: None,
        error: None,
    }
}

pub async fn replays_and_their_reports_are_paged_and_deleted<H: Harness>() {
    let (_place, store) = H::create().await;
    let agent = AgentId::generate();
    let first = replay(agent);
    std::thread::sleep(std::time::Duration::from_millis(2));
    let mut second = replay(agent);
    store.put_replay(&first).expect("kept");
    store.put_replay(&second).expect("kept");
    second.status = ReplayStatus::Interrupted;
    store.put_replay(&second).expect("replaced");
    assert_eq!(
        store.replays().expect("listed"),
        [first.clone(), second.clone()]
    );
    let reports: Vec<_> = (0..5).map(|i| report(agent, i, "same")).collect();
    store.put_reports(first.id, &reports[..3]).expect("kept");
    store
        .put_reports(first.id, &reports[2..])
        .expect("kept, one again");
    let changed = report(agent, 2, "different_tools");
    store
        .put_reports(first.id, std::slice::from_ref(&changed))
        .expect("replaced");
    holarchy_actors::Store::durable(store.as_ref())
        .await
        .expect("durable");
    assert_eq!(
        store.reports(first.id, None, 2).expect("page"),
        reports[..2]
    );
    let rest = store.reports(first.id, Some(1), 10).expect("page");
    assert_eq!(rest, [changed, reports[3].clone(), reports[4].clone()]);
    assert_eq!(store.reported(first.id).expect("indices"), [0, 1, 2, 3, 4]);
    assert!(store.reports(second.id, None, 10).expect("page").is_empty());
    store.delete_replay(first.id).expect("deleted");
    store.delete_replay(first.id).expect("deleted again");
    holarchy_actors::Store::durable(store.as_ref())
        .await
        .expect("durable");
    assert_eq!(store.replay(first.id).expect("reads"), None);
    assert!(store.reported(first.id).expect("indices").is_empty());
    assert_eq!(store.replay(second.id).expect("reads"), Some(second));
}
