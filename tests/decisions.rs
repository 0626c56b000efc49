//! The decision log through the real daemon: every turn of an instance's
//! agent, and of the children it spawns, records exactly one `decided`
//! event, right before the turn's `run_finished`; it is the brain's own
//! when the brain gives one that holds (scripted and command brains alike),
//! else the one read off the turn, with a refused explicit decision noted
//! in its reason. A plain agent records none.

mod common;

use std::path::Path;

use common::{events, handled, send, Daemon};
use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::{json, Value};

/// A command brain that always escalates, saying so explicitly.
const ESCALATING_BRAIN: &str = r#"#!/bin/sh
cat >/dev/null
printf '%s\n' '{"reply":"filed","decision":{"kind":"escalate","reason":"needs a human","target":"issue#12","requires_approval":true}}'
"#;

/// An agent's turns, in order: each `run_finished` with the `decided`
/// event just before it among the agent's events, if there is one.
async fn turns(c: &mut Clients, agent: &str) -> Vec<(Value, Option<Value>)> {
    let mine: Vec<pb::Event> = events(c, 0)
        .await
        .into_iter()
        .filter(|e| e.agent_id == agent)
        .collect();
    let detail = |e: &pb::Event| -> Value { serde_json::from_str(&e.detail_json).expect("JSON") };
    let decided = mine.iter().filter(|e| e.kind == "decided").count();
    let mut out = Vec::new();
    for (i, event) in mine.iter().enumerate() {
        if event.kind != "run_finished" {
            continue;
        }
        let before = i
            .checked_sub(1)
            .map(|j| &mine[j])
            .filter(|e| e.kind == "decided")
            .map(detail);
        if let Some(before) = &before {
            assert_eq!(before["run_id"], event.run_id, "{before}");
        }
        out.push((detail(event), before));
    }
    let paired = out.iter().filter(|(_, d)| d.is_some()).count();
    assert_eq!(
        decided, paired,
        "every decision sits right before its turn's end"
    );
    out
}

/// The decision of the agent's `n`th turn (from 0), which must have one.
async fn decision(c: &mut Clients, agent: &str, n: usize) -> Value {
    let all = turns(c, agent).await;
    let (finished, decided) = all.get(n).unwrap_or_else(|| panic!("turn {n} of {all:?}"));
    assert_eq!(finished["outcome"], "completed", "{finished}");
    let decided = decided
        .clone()
        .unwrap_or_else(|| panic!("turn {n} recorded no decision: {finished}"));
    assert!(
        decided["idempotency_key"]
            .as_str()
            .is_some_and(|k| !k.is_empty()),
        "{decided}"
    );
    decided
}

async fn turn(c: &mut Clients, agent: &str, n: usize, text: &str) -> Value {
    send(c, agent, text).await;
    handled(c, agent, n + 1).await;
    decision(c, agent, n).await
}

fn run_key(decided: &Value) -> String {
    format!("run:{}", decided["run_id"].as_str().expect("run id"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_turn_of_an_instance_records_one_decision_given_or_derived() {
    let root = tempfile::tempdir().expect("tmp");
    let daemon = Daemon::start(&common::data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let lead = common::apply_instance(&mut c, "name = \"lead\"\n[brain.scripted]\n").await;

    // A turn that calls a tool, without saying why: derived.
    let called = turn(
        &mut c,
        &lead,
        0,
        &common::script(json!([{ "name": "AgentGet", "input": {} }])),
    )
    .await;
    assert_eq!(called["kind"], "tool_calls", "{called}");
    assert_eq!(called["target"], "AgentGet");
    assert_eq!(called["explicit"], false);
    assert_eq!(called["requires_approval"], false);
    assert_eq!(called["instance"], "lead");
    assert_eq!(called["idempotency_key"], run_key(&called));

    // A turn that only replies: a comment.
    let replied = turn(&mut c, &lead, 1, "hello").await;
    assert_eq!(replied["kind"], "comment", "{replied}");
    assert_eq!(replied["target"], Value::Null);
    assert_eq!(replied["explicit"], false);

    // The brain's own decision, with its own key.
    let given = json!({
        "reply": "a human should look",
        "decision": { "kind": "escalate", "reason": "needs a human", "target": "issue#12", "idempotency_key": "issue#12:escalate" },
    });
    let explicit = turn(&mut c, &lead, 2, &given.to_string()).await;
    assert_eq!(explicit["kind"], "escalate", "{explicit}");
    assert_eq!(explicit["explicit"], true);
    assert_eq!(explicit["reason"], "needs a human");
    assert_eq!(explicit["target"], "issue#12");
    assert_eq!(explicit["idempotency_key"], "issue#12:escalate");

    // A decision outside the vocabulary fails nothing: the turn completes,
    // and the derived decision says the brain's was refused, and why.
    let outside =
        json!({ "reply": "merged", "decision": { "kind": "merge", "reason": "tests pass" } });
    let refused = turn(&mut c, &lead, 3, &outside.to_string()).await;
    assert_eq!(refused["kind"], "comment", "{refused}");
    assert_eq!(refused["explicit"], false);
    let reason = refused["reason"].as_str().expect("reason");
    assert!(
        reason.contains("refused") && reason.contains("merge"),
        "{reason}"
    );
    assert_eq!(refused["idempotency_key"], run_key(&refused));

    // A turn that does nothing.
    let idle = turn(&mut c, &lead, 4, "{}").await;
    assert_eq!(idle["kind"], "no_op", "{idle}");

    // Its child carries the composition, so its turns record decisions too.
    let spawn = json!([{ "name": "SpawnAgent", "input": { "initial_message": "hi" } }]);
    let spawned = turn(&mut c, &lead, 5, &common::script(spawn)).await;
    assert_eq!(spawned["target"], "SpawnAgent", "{spawned}");
    let child = common::tool_output(&mut c, &lead, "SpawnAgent").await["agent_id"]
        .as_str()
        .expect("child id")
        .to_owned();
    handled(&c, &child, 1).await;
    let childs = decision(&mut c, &child, 0).await;
    assert_eq!(childs["kind"], "comment", "{childs}");
    assert_eq!(childs["instance"], "lead");

    // Every turn of the instance's agent has exactly one decision.
    let all = turns(&mut c, &lead).await;
    assert_eq!(all.len(), 6);
    assert!(all.iter().all(|(_, decided)| decided.is_some()), "{all:?}");

    // A plain agent, on the same brain, records none.
    let plain = common::create(&mut c, "plain", None).await;
    send(&mut c, &plain, "hello").await;
    send(
        &mut c,
        &plain,
        &common::script(json!([{ "name": "AgentGet", "input": {} }])),
    )
    .await;
    handled(&c, &plain, 2).await;
    let plain_turns = turns(&mut c, &plain).await;
    assert_eq!(plain_turns.len(), 2, "{plain_turns:?}");
    assert!(
        plain_turns.iter().all(|(_, decided)| decided.is_none()),
        "{plain_turns:?}"
    );
    let any: Vec<pb::Event> = events(&mut c, 0)
        .await
        .into_iter()
        .filter(|e| e.kind == "decided" && e.agent_id == plain)
        .collect();
    assert!(any.is_empty(), "{any:?}");
}

fn executable(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_brain_gives_its_decision_in_its_output() {
    let root = tempfile::tempdir().expect("tmp");
    let brain = root.path().join("escalate.sh");
    executable(&brain, ESCALATING_BRAIN);
    let daemon = Daemon::start(&common::data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let manifest = format!(
        "name = \"triager\"\n[brain.command]\nprogram = \"{}\"\n",
        brain.display()
    );
    let agent = common::apply_instance(&mut c, &manifest).await;
    let decided = turn(&mut c, &agent, 0, "issue 12 opened").await;
    assert_eq!(decided["kind"], "escalate", "{decided}");
    assert_eq!(decided["explicit"], true);
    assert_eq!(decided["requires_approval"], true);
    assert_eq!(decided["target"], "issue#12");
    assert_eq!(decided["instance"], "triager");
    // No key given: the run's.
    assert_eq!(decided["idempotency_key"], run_key(&decided));
    let said = common::messages(&mut c, &agent).await;
    assert_eq!(said[0].reply, "filed");
}
