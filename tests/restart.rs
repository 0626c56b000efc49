//! End-to-end restart safety: `kill -9` the daemon after acknowledged
//! writes, start it again, and find everything that was acknowledged.

mod common;
#[path = "restart/cut_timers.rs"]
mod cut_timers;
#[path = "restart/damaged.rs"]
mod damaged;
#[path = "restart/disk_full.rs"]
mod disk_full;
#[path = "restart/held_approvals.rs"]
mod held_approvals;
#[path = "restart/held_flushes.rs"]
mod held_flushes;

use std::collections::{HashMap, HashSet};

use common::{create, data_dir, events, handled, messages, Daemon};
use holarchy::api::pb;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_after_acknowledged_writes_loses_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let mut daemon = Daemon::start(&dir).await;
    let c = daemon.clients().await;

    // Concurrent clients: 12 agents, 8 messages each, all acknowledged.
    let mut tasks = Vec::new();
    for a in 0..12 {
        let mut c = c.clone();
        tasks.push(tokio::spawn(async move {
            let id = create(&mut c, &format!("crash-{a}"), Some("boot")).await;
            let mut acked = Vec::new();
            for m in 0..8 {
                let reply = c
                    .agents
                    .send_message(pb::SendMessageRequest {
                        agent_id: id.clone(),
                        text: format!("m{m}"),
                        dedupe_key: format!("key-{m}"),
                    })
                    .await
                    .expect("acknowledged")
                    .into_inner();
                acked.push(reply.message_id);
            }
            (id, acked)
        }));
    }
    let mut acked: HashMap<String, Vec<String>> = HashMap::new();
    for task in tasks {
        let (id, ids) = task.await.expect("client task");
        acked.insert(id, ids);
    }
    // Messages handled before the crash must not be handled again. The
    // check means something only if some were: wait for every agent's
    // first message (its boot) to be handled, not for the rest, which may
    // still be queued or in flight when the kill comes.
    let mut handled_before: HashSet<String> = HashSet::new();
    let mut c = c;
    for id in acked.keys() {
        common::eventually("the agent's first message handled", || {
            let mut c = c.clone();
            let id = id.clone();
            async move {
                let first = messages(&mut c, &id).await.into_iter().next()?;
                (first.status == pb::MessageStatus::Handled as i32).then_some(())
            }
        })
        .await;
    }
    for id in acked.keys() {
        for m in messages(&mut c, id).await {
            if m.status == pb::MessageStatus::Handled as i32 {
                handled_before.insert(m.message_id);
            }
        }
    }
    assert!(
        handled_before.len() >= acked.len(),
        "only {} messages handled before the kill",
        handled_before.len()
    );
    daemon.kill9();
    drop(c);

    let daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let status = common::status(&mut c).await;
    assert_eq!(status.public_agents, 12);
    assert_eq!(status.recovered_agents, 12);

    for (id, ids) in &acked {
        let summary = common::get_agent(&mut c, id).await;
        assert_eq!(summary.state, pb::LifecycleState::Active as i32);
        let all = handled(&c, id, 9).await;
        let present: HashSet<_> = all.iter().map(|m| m.message_id.clone()).collect();
        for message_id in ids {
            assert!(
                present.contains(message_id),
                "acknowledged {message_id} lost"
            );
        }
        for m in &all {
            assert_eq!(m.reply, format!("ack: {}", m.text));
            if handled_before.contains(&m.message_id) {
                assert_eq!(m.attempts, 1, "{} was handled twice", m.message_id);
            }
        }
        // Retrying an acknowledged send after the crash is still deduplicated.
        let again = c
            .agents
            .send_message(pb::SendMessageRequest {
                agent_id: id.clone(),
                text: "m0".into(),
                dedupe_key: "key-0".into(),
            })
            .await
            .expect("retry")
            .into_inner();
        assert!(again.duplicate);
        assert_eq!(&again.message_id, &ids[0]);
    }

    // The log stays dense across the crash: no gap, no repeat.
    let log = events(&mut c, 0).await;
    let cursors: Vec<_> = log.iter().map(|e| e.cursor).collect();
    assert_eq!(cursors, (1..=log.len() as u64).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_restart_recovers_agents_and_names() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "keeper", Some("remember me")).await;
    handled(&c, &id, 1).await;
    assert!(daemon
        .terminate(std::time::Duration::from_secs(15))
        .await
        .success());
    drop(c);

    let daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let got = c
        .agents
        .get_agent(pb::GetAgentRequest {
            agent: Some(pb::get_agent_request::Agent::Name("keeper".into())),
        })
        .await
        .expect("found by name")
        .into_inner()
        .agent
        .expect("summary");
    assert_eq!(got.agent_id, id);
    assert_eq!(got.activity, pb::Activity::Idle as i32);
    let all = messages(&mut c, &id).await;
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].attempts, 1, "a handled message is not handled again");
    let refused = c
        .agents
        .create_agent(pb::CreateAgentRequest {
            context_tokens: None,
            mcp_servers: Vec::new(),
            network: String::new(),
            name: "keeper".into(),
            initial_message: None,
            brain: None,
            labels: Default::default(),
        })
        .await
        .expect_err("name still taken");
    assert_eq!(refused.code(), tonic::Code::AlreadyExists, "{refused:?}");
    assert!(refused.message().contains("keeper"), "{refused:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_agent_keeps_its_queue_through_kill_9_and_resumes() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "sleepy", None).await;
    let paused = c
        .agents
        .pause_agent(pb::PauseAgentRequest {
            agent_id: id.clone(),
        })
        .await
        .expect("paused")
        .into_inner();
    assert_eq!(paused.state, pb::LifecycleState::Paused as i32);
    let sent = common::send(&mut c, &id, "wait for me").await;

    // A stale or missing run cannot be aborted.
    let refused = c
        .agents
        .abort_run(pb::AbortRunRequest {
            agent_id: id.clone(),
            run_id: "run_01KAAAAAAAAAAAAAAAAAAAAAAA".into(),
        })
        .await
        .expect_err("no such run");
    assert_eq!(
        refused.code(),
        tonic::Code::FailedPrecondition,
        "{refused:?}"
    );
    assert!(refused.message().contains("run"), "{refused:?}");

    daemon.kill9();
    drop(c);
    let daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let summary = common::get_agent(&mut c, &id).await;
    assert_eq!(summary.state, pb::LifecycleState::Paused as i32);
    assert_eq!(summary.queue_length, 1);
    let waiting = messages(&mut c, &id).await;
    assert_eq!(
        (waiting[0].message_id.as_str(), waiting[0].status),
        (sent.as_str(), pb::MessageStatus::Queued as i32)
    );

    c.agents
        .resume_agent(pb::ResumeAgentRequest {
            agent_id: id.clone(),
        })
        .await
        .expect("resumed");
    let all = handled(&c, &id, 1).await;
    assert_eq!(all[0].reply, "ack: wait for me");
}
