//! A record damaged on disk (bytes flipped or cut while the daemon was
//! down): the daemon starts, fails the agent it belongs to with the
//! reason, holds that agent's descendants down (not archived), names the
//! record in `status`, and every other agent serves.

use std::path::Path;

use holarchy::api::pb;
use holarchy::client::Clients;
use holarchy_supervision::AgentId;
use serde_json::json;

use crate::common::{self, create, data_dir, handled, send, Daemon};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_record_fails_its_agent_and_the_others_serve() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;

    // `lead` supervises a private child; its own record will be flipped.
    let lead = create(&mut c, "lead", None).await;
    let spawn =
        json!({ "tool_calls": [{ "name": "SpawnAgent", "input": { "initial_message": "wait" } }] });
    send(&mut c, &lead, &spawn.to_string()).await;
    handled(&c, &lead, 1).await;
    let child = common::tool_output(&mut c, &lead, "SpawnAgent").await["agent_id"]
        .as_str()
        .expect("child id")
        .to_owned();
    // `queued` has a message waiting whose record will be cut.
    let queued = create(&mut c, "queued", None).await;
    c.agents
        .pause_agent(pb::PauseAgentRequest {
            agent_id: queued.clone(),
        })
        .await
        .expect("paused");
    let waiting = send(&mut c, &queued, "never read back").await;
    let healthy = create(&mut c, "healthy", None).await;

    daemon.kill9();
    drop(c);
    damage(&dir, &lead, &queued, &waiting);

    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    check_served(&mut c, &healthy, "after the damage").await;
    let status = common::status(&mut c).await;
    assert_eq!(status.damaged_count, 2, "{status:?}");
    // lead, its child, and queued.
    assert_eq!(status.held_agents, 3, "{status:?}");
    let named: Vec<(&str, &str)> = status
        .damaged_records
        .iter()
        .map(|d| (d.tree.as_str(), d.agent_id.as_str()))
        .collect();
    assert!(
        named.contains(&("public_agents", lead.as_str())),
        "{named:?}"
    );
    assert!(named.contains(&("messages", queued.as_str())), "{named:?}");

    // The agent whose message is damaged is failed, with the reason.
    let summary = common::get_agent(&mut c, &queued).await;
    assert_eq!(summary.state, pb::LifecycleState::Failed as i32);
    let reasons: Vec<String> = common::events(&mut c, 0)
        .await
        .into_iter()
        .filter(|e| e.agent_id == queued && e.kind == "agent_state_changed")
        .map(|e| e.text + &e.detail_json)
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("damaged_record") && r.contains("messages")),
        "{reasons:?}"
    );
    // The one whose own record is damaged answers DATA_LOSS, saying where
    // to look; the listing leaves it out and still lists the others.
    let refused = c
        .agents
        .get_agent(pb::GetAgentRequest {
            agent: Some(pb::get_agent_request::Agent::AgentId(lead.clone())),
        })
        .await
        .expect_err("its record cannot be read");
    assert_eq!(refused.code(), tonic::Code::DataLoss, "{refused:?}");
    assert!(refused.message().contains("holarchy status"), "{refused:?}");
    let listed = list_names(&mut c).await;
    assert!(
        listed.contains(&"healthy".to_owned()) && listed.contains(&"queued".to_owned()),
        "{listed:?}"
    );
    // The child is held down with its supervisor, not archived for good.
    assert_eq!(
        common::get_agent(&mut c, &child).await.state,
        pb::LifecycleState::Active as i32
    );
    // The operator's status names the records in human output.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .args(["status", "--data-dir"])
        .arg(&dir)
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("damaged    2 records") && text.contains(&lead),
        "{text}"
    );

    // Every start finds the damage again, and changes nothing for good.
    daemon.kill9();
    drop(c);
    let daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let status = common::status(&mut c).await;
    assert_eq!(
        (status.damaged_count, status.held_agents),
        (2, 3),
        "{status:?}"
    );
    assert_eq!(
        common::get_agent(&mut c, &child).await.state,
        pb::LifecycleState::Active as i32
    );
    check_served(&mut c, &healthy, "after a second start").await;
}

/// Flips the version byte of `lead`'s record and cuts the record of the
/// message `queued` is waiting on in half, straight in the store.
fn damage(dir: &Path, lead: &str, queued: &str, waiting: &str) {
    let db = sled::open(dir.join("db")).expect("store opens");
    let agents = db.open_tree("public_agents").expect("tree");
    let key = lead.parse::<AgentId>().expect("agent id").to_bytes();
    let mut bytes = agents
        .get(key)
        .expect("reads")
        .expect("lead's record")
        .to_vec();
    bytes[0] ^= 0xff;
    agents.insert(key, bytes).expect("writes");
    let messages = db.open_tree("messages").expect("tree");
    let key = common::sled_message_key(queued, waiting);
    let bytes = messages
        .get(&key)
        .expect("reads")
        .expect("the message")
        .to_vec();
    messages
        .insert(key, &bytes[..bytes.len() / 2])
        .expect("writes");
    db.flush().expect("flushed");
}

async fn check_served(c: &mut Clients, agent_id: &str, when: &str) {
    let before = common::messages(c, agent_id).await.len();
    send(c, agent_id, when).await;
    let all = handled(c, agent_id, before + 1).await;
    assert_eq!(all[before].reply, format!("ack: {when}"));
}

async fn list_names(c: &mut Clients) -> Vec<String> {
    c.agents
        .list_agents(pb::ListAgentsRequest::default())
        .await
        .expect("lists")
        .into_inner()
        .agents
        .into_iter()
        .map(|a| a.name)
        .collect()
}
