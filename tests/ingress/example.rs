//! The worked example of docs/composition.md, as shipped in
//! `examples/triage`: the operator applies its manifest with the CLI, a
//! signed GitHub delivery arrives, and the instance's python brain loads
//! its skill, labels the issue under its role, and records its decision.

use std::process::Command;

use serde_json::{json, Value};

use super::webhooks::{github, post};
use crate::common::{data_dir, eventually, free_addr, messages, Daemon};

const SECRET: &str = "worked-example-secret-0123456789";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worked_triage_example_labels_a_new_issue() {
    let root = tempfile::tempdir().expect("tempdir");
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/triage");
    let http = free_addr();
    let skills = format!("{example}/skills");
    let daemon = Daemon::start_with_env(
        &data_dir(&root),
        &["--skills-dir", &skills, "--http-listen", &http],
        &[("GH_WEBHOOK_SECRET", SECRET)],
    )
    .await;
    let applied = Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .arg("--data-dir")
        .arg(&daemon.data_dir)
        .args(["instance", "apply", &format!("{example}/triage.toml")])
        .env_remove("HOLARCHY_ADDR")
        .env_remove("HOLARCHY_TOKEN")
        .output()
        .expect("the CLI runs");
    let said = String::from_utf8_lossy(&applied.stdout);
    assert!(
        applied.status.success(),
        "{said} {}",
        String::from_utf8_lossy(&applied.stderr)
    );
    assert!(said.starts_with("created triage"), "{said}");

    let body = json!({
        "action": "opened",
        "issue": { "number": 7, "title": "The docs are stale" },
        "repository": { "full_name": "acme/app" },
    })
    .to_string();
    let headers = github("issues", "delivery-7", body.as_bytes(), SECRET);
    let (status, answer) = post(&http, "/ingress/github/triage", &headers, body.as_bytes()).await;
    assert_eq!(status, 202, "{answer}");

    let mut c = daemon.clients().await;
    let agent = c
        .agents
        .get_agent(holarchy::api::pb::GetAgentRequest {
            agent: Some(holarchy::api::pb::get_agent_request::Agent::Name(
                "triage".into(),
            )),
        })
        .await
        .expect("the instance's agent")
        .into_inner()
        .agent
        .expect("summary")
        .agent_id;
    let reply = eventually("the triage reply", || {
        let mut c = c.clone();
        let agent = agent.clone();
        async move {
            messages(&mut c, &agent)
                .await
                .into_iter()
                .find(|m| !m.reply.is_empty())
                .map(|m| m.reply)
        }
    })
    .await;
    assert_eq!(reply, "issue#7: label docs");
    let decided: Vec<Value> = crate::common::events(&mut c, 0)
        .await
        .iter()
        .filter(|e| e.kind == "decided" && e.agent_id == agent)
        .map(|e| serde_json::from_str(&e.detail_json).expect("detail"))
        .collect();
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["kind"], "comment");
    assert_eq!(decided[0]["explicit"], true);
    assert_eq!(decided[0]["target"], "issue#7");
}
