//! End-to-end: `ReplayService` on the real daemon. Recorded turns of a
//! command brain (a real program per step, with tool calls that write
//! notes and files) replayed through the same brain come out the same and
//! change nothing; candidates that differ are classed as they differ; a
//! kill mid-replay leaves it interrupted, to be resumed; model brains are
//! replayed against a loopback server.

mod common;
#[path = "replay/harness.rs"]
mod harness;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::http::{listen, Reply};
use common::{create_on, data_dir, eventually_within, handled, send, Daemon};
use harness::{brain_py, ended, page, snapshot, start};
use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::{json, Value};
use tonic::Code;

/// Sends `count` messages that note, ask for and mention things, in turn,
/// and waits until each is handled.
async fn record_turns(c: &mut Clients, agent: &str, count: usize) {
    for i in 0..count {
        let text = match i % 3 {
            0 => format!("note: k{i} value {i}"),
            1 => format!("ask: k{}", i - 1),
            _ => format!("plain {i}"),
        };
        send(c, agent, &text).await;
    }
    eventually_within("every turn handled", Duration::from_secs(240), || {
        let c = c.clone();
        let agent = agent.to_owned();
        async move {
            let all = common::messages(&mut c.clone(), &agent).await;
            (all.len() == count
                && all
                    .iter()
                    .all(|m| m.status == pb::MessageStatus::Handled as i32))
            .then_some(())
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_brain_replayed_against_itself_is_the_same_and_changes_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let agent = create_on(&mut c, "recorded", brain_py(&[])).await;
    let turns = 30;
    record_turns(&mut c, &agent, turns).await;
    let before = snapshot(&mut c, &agent).await;
    assert!(before.notes_len() >= 10, "the turns wrote notes");

    let same = start(&mut c, &agent, pb::ReplayCandidate::default(), 4).await;
    let same = ended(&c, &same.replay_id).await;
    assert_eq!(same.status, "completed", "{same:?}");
    assert_eq!(
        (same.selected, same.same),
        (turns as u32, turns as u32),
        "{same:?}"
    );
    assert_eq!(same.unrecorded_calls, 0);
    let differing = page(&mut c, &same.replay_id, true).await;
    assert!(differing.turns.is_empty(), "{:?}", differing.turns);
    // Every turn's report holds both sides, calls and all.
    let all = page(&mut c, &same.replay_id, false).await;
    assert_eq!(all.turns.len(), turns);
    let noted = &all.turns[0];
    let recorded = noted.recorded.as_ref().expect("recorded");
    assert_eq!(recorded.steps.len(), 3, "{noted:?}");
    assert_eq!(recorded.steps[0].calls[0].tool, "MemoryWrite");
    assert_eq!(noted.recorded, noted.candidate);

    // A candidate that may not write notes: the same calls, other text.
    let denied = start(
        &mut c,
        &agent,
        pb::ReplayCandidate {
            deny_tools: vec!["MemoryWrite".into()],
            label: "no notes".into(),
            ..Default::default()
        },
        2,
    )
    .await;
    let denied = ended(&c, &denied.replay_id).await;
    assert_eq!(
        denied.same_tools_different_text,
        (turns / 3) as u32,
        "{denied:?}"
    );
    assert_eq!(denied.same, (turns - turns / 3) as u32, "{denied:?}");
    let report = page(&mut c, &denied.replay_id, true).await;
    let reply = &report.turns[0].candidate.as_ref().expect("candidate").reply;
    assert!(reply.ends_with("(refused)"), "{reply}");

    // A candidate asking for a note no turn asked for is answered "not
    // recorded", and counted.
    let other = start(
        &mut c,
        &agent,
        pb::ReplayCandidate {
            brain: Some(brain_py(&["--other-key"])),
            ..Default::default()
        },
        2,
    )
    .await;
    let other = ended(&c, &other.replay_id).await;
    assert_eq!(other.different_tools, (turns / 3) as u32, "{other:?}");
    assert_eq!(other.unrecorded_calls, (turns / 3) as u64, "{other:?}");
    let report = page(&mut c, &other.replay_id, true).await;
    let reply = &report.turns[0].candidate.as_ref().expect("candidate").reply;
    assert!(reply.contains("not recorded"), "{reply}");

    // Three replays later, nothing of the agent changed: records, the
    // whole event log, its notes, its workspace's files.
    assert_eq!(snapshot(&mut c, &agent).await, before);
    let listed = c
        .replays
        .list_replays(pb::ListReplaysRequest {})
        .await
        .expect("listed")
        .into_inner()
        .replays;
    assert_eq!(listed.len(), 3);
    assert_eq!(listed[0].replay_id, other.replay_id, "newest first");
    assert_eq!(listed[1].candidate_label, "no notes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_cut_by_a_kill_is_interrupted_resumed_and_deleted() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let agent = create_on(&mut c, "recorded", brain_py(&[])).await;
    let turns = 12;
    record_turns(&mut c, &agent, turns).await;
    let slow = pb::ReplayCandidate {
        brain: Some(brain_py(&["--slow"])),
        ..Default::default()
    };
    let replay = start(&mut c, &agent, slow, 1).await;
    let id = replay.replay_id.clone();
    eventually_within("two turns replayed", Duration::from_secs(60), || {
        let mut c = c.clone();
        let id = id.clone();
        async move { (harness::get(&mut c, &id).await.replayed >= 2).then_some(()) }
    })
    .await;
    // A live turn goes on while the replay runs.
    send(&mut c, &agent, "plain live").await;
    handled(&c, &agent, turns + 1).await;
    let deleted = c
        .replays
        .delete_replay(pb::ReplayRequest {
            replay_id: id.clone(),
        })
        .await
        .expect_err("a running replay is not deleted");
    assert_eq!(deleted.code(), Code::FailedPrecondition, "{deleted:?}");

    daemon.kill9();
    let daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let cut = harness::get(&mut c, &id).await;
    assert_eq!(cut.status, "interrupted", "{cut:?}");
    assert!(cut.replayed >= 2 && cut.replayed < cut.selected, "{cut:?}");
    // The agent is as the kill left it, and works.
    send(&mut c, &agent, "plain after").await;
    handled(&c, &agent, turns + 2).await;

    let resumed = c
        .replays
        .resume_replay(pb::ReplayRequest {
            replay_id: id.clone(),
        })
        .await
        .expect("resumed")
        .into_inner();
    assert_eq!(resumed.status, "running");
    eventually_within("more turns replayed", Duration::from_secs(60), || {
        let mut c = c.clone();
        let id = id.clone();
        async move { (harness::get(&mut c, &id).await.replayed > cut.replayed).then_some(()) }
    })
    .await;
    let cancelled = c
        .replays
        .cancel_replay(pb::ReplayRequest {
            replay_id: id.clone(),
        })
        .await
        .expect("cancelled")
        .into_inner();
    assert_eq!(cancelled.status, "cancelled", "{cancelled:?}");
    let reports = page(&mut c, &id, false).await.turns;
    assert_eq!(reports.len() as u32, cancelled.replayed);
    let mut indices: Vec<u32> = reports.iter().map(|t| t.index).collect();
    indices.dedup();
    assert_eq!(indices.len(), reports.len(), "a turn reported twice");
    let again = c
        .replays
        .cancel_replay(pb::ReplayRequest {
            replay_id: id.clone(),
        })
        .await
        .expect_err("not running");
    assert_eq!(again.code(), Code::FailedPrecondition);

    c.replays
        .delete_replay(pb::ReplayRequest {
            replay_id: id.clone(),
        })
        .await
        .expect("deleted");
    let gone = c
        .replays
        .get_replay(pb::GetReplayRequest {
            replay_id: id,
            ..Default::default()
        })
        .await
        .expect_err("deleted");
    assert_eq!(gone.code(), Code::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_and_scripted_turns_replay_from_their_message() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let agent = common::create(&mut c, "scripted", None).await;
    for i in 0..5 {
        let script = json!({
            "reply": format!("noted {i}"),
            "tool_calls": [{"name": "MemoryWrite", "input": {"key": format!("k{i}"), "text": "x"}}],
        });
        send(&mut c, &agent, &script.to_string()).await;
    }
    handled(&c, &agent, 5).await;
    let same = start(&mut c, &agent, pb::ReplayCandidate::default(), 1).await;
    let same = ended(&c, &same.replay_id).await;
    assert_eq!((same.selected, same.same), (5, 5), "{same:?}");
    // A brain that reads context cannot be shown what a scripted turn's
    // brain never saw: each turn says so.
    let command = start(
        &mut c,
        &agent,
        pb::ReplayCandidate {
            brain: Some(brain_py(&[])),
            ..Default::default()
        },
        1,
    )
    .await;
    let command = ended(&c, &command.replay_id).await;
    assert_eq!(command.errors, 5, "{command:?}");
    let turn = &page(&mut c, &command.replay_id, true).await.turns[0];
    assert!(turn.error.contains("not recorded"), "{turn:?}");

    let refused = |request: pb::StartReplayRequest| {
        let mut c = c.clone();
        async move {
            c.replays
                .start_replay(request)
                .await
                .expect_err("refused")
                .code()
        }
    };
    let valid = pb::StartReplayRequest {
        agent_id: agent.clone(),
        ..Default::default()
    };
    let nobody = pb::StartReplayRequest {
        agent_id: "agt_01M8M2G2BQ8MM0KWXYF1CHASAS".into(),
        ..valid.clone()
    };
    assert_eq!(refused(nobody).await, Code::NotFound);
    let too_many = pb::StartReplayRequest {
        max_turns: 20_000,
        ..valid.clone()
    };
    assert_eq!(refused(too_many).await, Code::InvalidArgument);
    let relative = pb::StartReplayRequest {
        candidate: Some(pb::ReplayCandidate {
            skills_dir: "skills".into(),
            ..Default::default()
        }),
        ..valid.clone()
    };
    assert_eq!(refused(relative).await, Code::InvalidArgument);
    let backwards = pb::StartReplayRequest {
        from_ms: 20,
        to_ms: 10,
        ..valid.clone()
    };
    assert_eq!(refused(backwards).await, Code::InvalidArgument);
    let bad_run = pb::StartReplayRequest {
        run_ids: vec!["run_nonsense".into()],
        ..valid
    };
    assert_eq!(refused(bad_run).await, Code::InvalidArgument);
    let unknown = c
        .replays
        .get_replay(pb::GetReplayRequest {
            replay_id: "rpl_01M8M2G2BQ8MM0KWXYF1CHASAS".into(),
            ..Default::default()
        })
        .await
        .expect_err("no such replay");
    assert_eq!(unknown.code(), Code::NotFound);
    let listed = c
        .replays
        .list_replays(pb::ListReplaysRequest {})
        .await
        .expect("listed")
        .into_inner();
    assert_eq!(listed.replays.len(), 2, "a refused request stores nothing");
}

/// A loopback chat-completions server: `ask` calls `MemoryGet`, anything
/// else is answered with `prefix` and the message; each answer reports
/// tokens.
async fn model_server(prefix: &'static str) -> String {
    let calls = Arc::new(AtomicUsize::new(0));
    let addr = listen(move |request| {
        calls.fetch_add(1, Ordering::SeqCst);
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let user = messages
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned();
        let has_result = messages.iter().any(|m| m["role"] == "tool");
        let message = if user.contains("ask") && !has_result {
            json!({ "role": "assistant", "content": null, "tool_calls": [{ "id": "c1", "type": "function",
                "function": { "name": "MemoryGet", "arguments": json!({"key": "k"}).to_string() } }] })
        } else {
            let said = user.rsplit("] ").next().unwrap_or_default();
            json!({ "role": "assistant", "content": format!("{prefix} {said}") })
        };
        let answer = json!({ "choices": [{ "message": message }],
            "usage": { "prompt_tokens": 100, "completion_tokens": 10 } });
        async move {
            Reply {
                status: 200,
                headers: Vec::new(),
                body: answer.to_string(),
            }
        }
    })
    .await;
    format!("http://{addr}/v1")
}

fn openai(base_url: &str) -> pb::BrainConfig {
    pb::BrainConfig {
        kind: Some(pb::brain_config::Kind::Openai(pb::OpenAiBrain {
            base_url: base_url.into(),
            model: "stub-model".into(),
            api_key_env: "TEST_MODEL_KEY".into(),
            temperature: Some(0.0),
            max_steps: Some(4),
        })),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_brain_is_replayed_against_a_loopback_server_with_its_tokens() {
    let recorded_with = model_server("said").await;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with_env(
        &data_dir(&root),
        &["--model-retries", "0"],
        &[("TEST_MODEL_KEY", "test-key")],
    )
    .await;
    let mut c = daemon.clients().await;
    let agent = create_on(&mut c, "modelled", openai(&recorded_with)).await;
    send(&mut c, &agent, "hello").await;
    send(&mut c, &agent, "ask about k").await;
    send(&mut c, &agent, "bye").await;
    handled(&c, &agent, 3).await;

    let same = start(&mut c, &agent, pb::ReplayCandidate::default(), 1).await;
    let same = ended(&c, &same.replay_id).await;
    assert_eq!((same.selected, same.same), (3, 3), "{same:?}");
    // Four model calls each side: one per plain turn, two for the ask.
    assert_eq!(
        (same.recorded_tokens, same.candidate_tokens),
        (440, 440),
        "{same:?}"
    );

    let candidate_with = model_server("wrote").await;
    let other = start(
        &mut c,
        &agent,
        pb::ReplayCandidate {
            brain: Some(openai(&candidate_with)),
            ..Default::default()
        },
        1,
    )
    .await;
    let other = ended(&c, &other.replay_id).await;
    assert_eq!(other.same_tools_different_text, 3, "{other:?}");
    let turn = &page(&mut c, &other.replay_id, true).await.turns[0];
    let (recorded, candidate) = (
        turn.recorded.as_ref().expect("recorded"),
        turn.candidate.as_ref().expect("candidate"),
    );
    assert_eq!(recorded.reply, "said hello");
    assert_eq!(candidate.reply, "wrote hello");
    assert_eq!(
        (candidate.prompt_tokens, candidate.completion_tokens),
        (100, 10)
    );
}

/// The triage example's brain and skill as an instance that takes
/// published events (the example's own takes GitHub webhooks).
const TRIAGE: &str = r#"
name = "triage"
skills = ["labels"]

[role]
prompt_file = "roles/triage.md"

[brain.command]
program = "BRAIN"

[[ingress]]
source = "publish"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_skills_folder_answers_load_skill_and_a_role_changes_the_labels() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/triage");
    let root = tempfile::tempdir().expect("tempdir");
    // Candidate skills lie under a skill folder of the daemon's own.
    let candidates = root.path().join("candidates");
    let skills = candidates.join("v2");
    std::fs::create_dir_all(skills.join("labels")).expect("skill folder");
    let daemon = Daemon::start_with(
        &data_dir(&root),
        &[
            "--skills-dir",
            &format!("{example}/skills"),
            "--skills-dir",
            candidates.to_str().expect("utf-8"),
        ],
    )
    .await;
    let mut c = daemon.clients().await;
    let role = std::fs::read_to_string(format!("{example}/roles/triage.md")).expect("role");
    let manifest = TRIAGE.replace("BRAIN", &format!("{example}/brain.py"));
    c.instances
        .apply_instance(pb::ApplyInstanceRequest {
            manifest,
            files: [("roles/triage.md".to_owned(), role)].into(),
        })
        .await
        .expect("applied");
    let issues = [
        (1, "Crash on start", "a bug since 2.1"),
        (2, "The docs are stale", "the install page"),
        (3, "Slow search", "no idea why"),
    ];
    for (number, title, body) in issues {
        let payload = json!({"issue": {"number": number, "title": title, "body": body}});
        c.instances
            .publish_event(pb::PublishEventRequest {
                instance: "triage".into(),
                r#type: "issue.opened".into(),
                subject: format!("issue#{number}"),
                dedupe_key: format!("issue-{number}"),
                payload_json: payload.to_string(),
                ..Default::default()
            })
            .await
            .expect("published");
    }
    let agent = harness::agent_named(&mut c, "triage").await;
    handled(&c, &agent, 3).await;
    let replies: Vec<String> = common::messages(&mut c, &agent)
        .await
        .into_iter()
        .map(|m| m.reply)
        .collect();
    assert!(replies[0].ends_with("label needs-triage"), "{replies:?}");

    // A skills folder whose `labels` lists `crash` and `slow` first; one
    // outside the daemon's skill folders is refused.
    let outside = c
        .replays
        .start_replay(pb::StartReplayRequest {
            agent_id: agent.clone(),
            candidate: Some(pb::ReplayCandidate {
                skills_dir: root.path().to_str().expect("utf-8").into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect_err("outside the skill folders");
    assert_eq!(outside.code(), Code::InvalidArgument, "{outside:?}");
    assert!(outside.message().contains("--skills-dir"), "{outside:?}");
    std::fs::write(
        skills.join("labels/SKILL.md"),
        "---\nname: labels\ndescription: The labels, newest rule\ntools: [LoadSkill]\n---\nPick the first label whose word is in the title.\n\n- crash\n- slow\n- docs\n- needs-triage\n",
    )
    .expect("skill written");
    let relabel = start(
        &mut c,
        &agent,
        pb::ReplayCandidate {
            skills_dir: skills.to_str().expect("utf-8").into(),
            ..Default::default()
        },
        1,
    )
    .await;
    let relabel = ended(&c, &relabel.replay_id).await;
    assert_eq!(
        (relabel.same, relabel.same_tools_different_text),
        (1, 2),
        "{relabel:?}"
    );
    let turns = page(&mut c, &relabel.replay_id, true).await.turns;
    let replies: Vec<&str> = turns
        .iter()
        .map(|t| t.candidate.as_ref().expect("candidate").reply.as_str())
        .collect();
    assert_eq!(replies, ["issue#1: label crash", "issue#3: label slow"]);
    // The call was the same: answered from the folder, not "not recorded".
    assert_eq!(relabel.unrecorded_calls, 0);
}
