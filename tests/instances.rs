//! Instances through the real daemon: a manifest applied once is applied
//! (and applying it again changes nothing), its role reaches the brain and
//! a changed role reaches it from the next turn, its constraints hold on
//! every call (and on the children it spawns), its skills are listed and
//! loaded, and bad manifests change nothing.

mod common;

use std::path::Path;

use common::{eventually, handled, send, tool_call, Daemon};
use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::json;
use tonic::Code;

/// A command brain that replies with the role version it was given.
const ROLE_BRAIN: &str = r#"#!/bin/sh
version=$(cat | grep -o '"version":"sha256:[0-9a-f]*"' | head -n 1 | cut -d '"' -f 4)
printf '{"reply":"role %s"}\n' "${version:-none}"
"#;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// A skills folder with `triage` and `release-notes`.
fn skills(root: &Path) -> String {
    let dir = root.join("skills");
    write(
        &dir.join("triage/SKILL.md"),
        "---\nname: triage\ndescription: Sort new issues\ntools: [AgentGet]\n---\nLabel every issue by area.\n",
    );
    write(&dir.join("triage/labels.txt"), "bug\nfeature\n");
    write(
        &dir.join("release-notes/SKILL.md"),
        "---\nname: release-notes\ndescription: Draft notes\n---\nList merged changes.\n",
    );
    dir.to_string_lossy().into_owned()
}

async fn apply(
    c: &mut Clients,
    manifest: &str,
    files: &[(&str, &str)],
) -> Result<pb::ApplyInstanceResponse, tonic::Status> {
    c.instances
        .apply_instance(pb::ApplyInstanceRequest {
            manifest: manifest.to_owned(),
            files: files
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        })
        .await
        .map(tonic::Response::into_inner)
}

async fn reply_to(c: &mut Clients, agent: &str, text: &str) -> String {
    let id = send(c, agent, text).await;
    let all = eventually("the reply", || {
        let mut c = c.clone();
        let agent = agent.to_owned();
        let id = id.clone();
        async move {
            let all = handled(&c, &agent, 1).await;
            let _ = &mut c;
            all.into_iter()
                .find(|m| m.message_id == id && !m.reply.is_empty())
        }
    })
    .await;
    all.reply
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_is_applied_once_and_its_role_reaches_the_brain_from_the_next_turn() {
    let root = tempfile::tempdir().expect("tmp");
    let brain = root.path().join("role-brain.sh");
    write(&brain, ROLE_BRAIN);
    std::fs::set_permissions(&brain, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let skills_dir = skills(root.path());
    let data = common::data_dir(&root);
    let daemon = Daemon::start_with(&data, &["--skills-dir", &skills_dir]).await;
    let mut c = daemon.clients().await;

    let manifest = format!(
        "name = \"lead\"\nskills = [\"triage\"]\n\n[role]\nprompt_file = \"roles/lead.md\"\n\n[brain.command]\nprogram = \"{}\"\n",
        brain.display()
    );
    let first = apply(&mut c, &manifest, &[("roles/lead.md", "You lead.")])
        .await
        .expect("applied");
    assert_eq!(first.change, "created");
    let instance = first.instance.expect("instance");
    let agent = instance.agent.clone().expect("its agent");
    assert_eq!(agent.name, "lead");
    assert_eq!(agent.instance, "lead");
    assert_eq!(agent.skills, ["triage"]);
    assert!(instance.role_version.starts_with("sha256:"));
    assert_eq!(agent.role_version, instance.role_version);

    // The same manifest again: nothing changes, not even the timestamps.
    let again = apply(&mut c, &manifest, &[("roles/lead.md", "You lead.")])
        .await
        .expect("applied");
    assert_eq!(again.change, "unchanged");
    let same = again.instance.expect("instance");
    assert_eq!(same.digest, instance.digest);
    assert_eq!(same.updated_at_ms, instance.updated_at_ms);

    let said = reply_to(&mut c, &agent.agent_id, "who are you?").await;
    assert_eq!(said, format!("role {}", instance.role_version));

    // A changed role: a new version, the same agent, seen by the next turn.
    let changed = apply(
        &mut c,
        &manifest,
        &[("roles/lead.md", "You lead, briefly.")],
    )
    .await
    .expect("applied");
    assert_eq!(changed.change, "updated");
    let updated = changed.instance.expect("instance");
    assert_ne!(updated.role_version, instance.role_version);
    assert_eq!(updated.agent.expect("agent").agent_id, agent.agent_id);
    let said = reply_to(&mut c, &agent.agent_id, "and now?").await;
    assert_eq!(said, format!("role {}", updated.role_version));

    // Bad manifests are refused with the reason and change nothing.
    let unknown = apply(
        &mut c,
        &manifest.replace("triage", "juggling"),
        &[("roles/lead.md", "You lead.")],
    )
    .await
    .expect_err("unknown skill");
    assert_eq!(unknown.code(), Code::InvalidArgument);
    assert!(
        unknown.message().contains("juggling"),
        "{}",
        unknown.message()
    );
    let unread = apply(&mut c, &manifest, &[])
        .await
        .expect_err("no role file");
    assert_eq!(unread.code(), Code::InvalidArgument);
    assert!(
        unread.message().contains("roles/lead.md"),
        "{}",
        unread.message()
    );
    let bad_tool = format!("{manifest}\n[constraints]\ndeny_tools = [\"Teleport\"]\n");
    let refused = apply(&mut c, &bad_tool, &[("roles/lead.md", "You lead.")])
        .await
        .expect_err("unknown tool");
    assert_eq!(refused.code(), Code::InvalidArgument);
    let secret = "name = \"hooked\"\n[[ingress]]\nsource = \"webhook\"\nprovider = \"github\"\nsecret_env = \"HOLARCHY_TEST_UNSET_SECRET\"\n";
    let unset = apply(&mut c, secret, &[])
        .await
        .expect_err("secret not set");
    assert_eq!(unset.code(), Code::FailedPrecondition);
    let now = c
        .instances
        .get_instance(pb::GetInstanceRequest {
            name: "lead".into(),
        })
        .await
        .expect("get")
        .into_inner();
    assert_eq!(
        now.digest, updated.digest,
        "refused applies changed nothing"
    );

    // A name held by an agent that is no instance's is not taken over.
    common::create(&mut c, "plain", None).await;
    let taken = apply(&mut c, "name = \"plain\"", &[])
        .await
        .expect_err("taken");
    assert_eq!(taken.code(), Code::FailedPrecondition);

    let listed = c
        .instances
        .list_instances(pb::ListInstancesRequest {})
        .await
        .expect("list")
        .into_inner()
        .instances;
    assert_eq!(
        listed.iter().map(|i| i.name.as_str()).collect::<Vec<_>>(),
        ["lead"]
    );

    let deleted = c
        .instances
        .delete_instance(pb::DeleteInstanceRequest {
            name: "lead".into(),
        })
        .await
        .expect("deleted")
        .into_inner();
    let gone = deleted.agent.expect("agent");
    assert_eq!(gone.state, pb::LifecycleState::Archived as i32);
    let missing = c
        .instances
        .get_instance(pb::GetInstanceRequest {
            name: "lead".into(),
        })
        .await
        .expect_err("deleted");
    assert_eq!(missing.code(), Code::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instances_constraints_hold_on_its_calls_and_its_childrens_and_its_skills_load() {
    let root = tempfile::tempdir().expect("tmp");
    let skills_dir = skills(root.path());
    let data = common::data_dir(&root);
    let daemon = Daemon::start_with(&data, &["--skills-dir", &skills_dir]).await;
    let mut c = daemon.clients().await;
    let manifest = "name = \"guarded\"\nskills = [\"triage\"]\n[brain.scripted]\n\n[constraints]\ndeny_tools = [\"ExecCommand\"]\n";
    let applied = apply(&mut c, manifest, &[]).await.expect("applied");
    let agent = applied
        .instance
        .and_then(|i| i.agent)
        .expect("agent")
        .agent_id;

    let marker = root.path().join("ran");
    let run = json!([{ "name": "ExecCommand", "input": { "command": format!("touch {}", marker.display()), "yield_ms": 2000 } }]);
    send(&mut c, &agent, &common::script(run)).await;
    handled(&c, &agent, 1).await;
    let (failed, output) = tool_call(&mut c, &agent, "ExecCommand").await;
    assert!(failed, "{output}");
    assert_eq!(output["kind"], "refused");
    assert!(
        output["error"]
            .as_str()
            .is_some_and(|e| e.contains("configuration")),
        "{output}"
    );
    assert!(!marker.exists(), "a denied command never runs");

    // No trigger ingress: the runtime withholds external triggers.
    let arm = json!([{ "name": "CreateExternalTrigger", "input": {} }]);
    send(&mut c, &agent, &common::script(arm)).await;
    handled(&c, &agent, 2).await;
    let (failed, output) = tool_call(&mut c, &agent, "CreateExternalTrigger").await;
    assert!(failed && output["kind"] == "refused", "{output}");

    // Its skill loads; a skill it was not composed with does not.
    let load = json!([{ "name": "LoadSkill", "input": { "name": "triage" } }]);
    send(&mut c, &agent, &common::script(load)).await;
    handled(&c, &agent, 3).await;
    let (failed, skill) = tool_call(&mut c, &agent, "LoadSkill").await;
    assert!(!failed, "{skill}");
    assert_eq!(skill["text"], "Label every issue by area.\n");
    assert_eq!(skill["files"], json!(["SKILL.md", "labels.txt"]));
    let other = json!([{ "name": "LoadSkill", "input": { "name": "release-notes" } }]);
    send(&mut c, &agent, &common::script(other)).await;
    handled(&c, &agent, 4).await;
    let (failed, output) = tool_call(&mut c, &agent, "LoadSkill").await;
    assert!(failed && output["kind"] == "not_found", "{output}");

    // A child inherits the instance's limits: it cannot run the command
    // its parent may not.
    let child_script = common::script(
        json!([{ "name": "ExecCommand", "input": { "command": format!("touch {}", marker.display()) } }]),
    );
    let spawn = json!([{ "name": "SpawnAgent", "input": { "initial_message": child_script } }]);
    send(&mut c, &agent, &common::script(spawn)).await;
    handled(&c, &agent, 5).await;
    let spawned = common::tool_output(&mut c, &agent, "SpawnAgent").await;
    let child = spawned["agent_id"].as_str().expect("child id").to_owned();
    let summary = common::get_agent(&mut c, &child).await;
    assert_eq!(summary.instance, "guarded");
    handled(&c, &child, 1).await;
    let (failed, output) = tool_call(&mut c, &child, "ExecCommand").await;
    assert!(failed && output["kind"] == "refused", "{output}");
    assert!(!marker.exists(), "the child's command never ran either");
    assert_eq!(summary.role_version, "", "no role to inherit");

    // A spawn may name a role of the child's own; the limits still pass down.
    let spawn = json!([{ "name": "SpawnAgent", "input": { "initial_message": "hello", "role": "You check links." } }]);
    send(&mut c, &agent, &common::script(spawn)).await;
    handled(&c, &agent, 6).await;
    let spawned = common::tool_output(&mut c, &agent, "SpawnAgent").await;
    let helper = spawned["agent_id"].as_str().expect("child id").to_owned();
    let summary = common::get_agent(&mut c, &helper).await;
    assert!(summary.role_version.starts_with("sha256:"), "{summary:?}");
    assert_eq!(summary.instance, "guarded");
}

/// An instance allowed two turns an hour; lifted to ten by applying
/// [`LIFTED`].
const LIMITED: &str = "name = \"paced\"\n[brain.scripted]\n[constraints]\nmax_turns_per_hour = 2\n";
const LIFTED: &str = "name = \"paced\"\n[brain.scripted]\n[constraints]\nmax_turns_per_hour = 10\n";

fn is_handled(m: &pb::Message) -> bool {
    m.status == pb::MessageStatus::Handled as i32
}

/// Applies [`LIMITED`], sends it three messages and waits for two turns;
/// the agent's id.
async fn limited_after_two_turns(c: &mut Clients) -> String {
    let applied = apply(c, LIMITED, &[]).await.expect("applied");
    let agent = applied
        .instance
        .and_then(|i| i.agent)
        .expect("agent")
        .agent_id;
    for text in ["one", "two", "three"] {
        send(c, &agent, text).await;
    }
    eventually("two turns", || {
        let mut c = c.clone();
        let agent = agent.clone();
        async move {
            let all = common::messages(&mut c, &agent).await;
            (all.iter().filter(|m| is_handled(m)).count() == 2).then_some(())
        }
    })
    .await;
    agent
}

/// Once the agent shows it put the third message's turn off (so the
/// limit was consulted and the absence of a third turn means something),
/// or ran it after all, the third message is still queued.
async fn third_still_held(c: &mut Clients, agent: &str) {
    eventually("the third turn deferred or run", || {
        let mut c = c.clone();
        let agent = agent.to_owned();
        async move {
            let deferred = common::get_agent(&mut c, &agent).await.turn_deferred;
            let all = common::messages(&mut c, &agent).await;
            let ran = all
                .get(2)
                .is_some_and(|m| m.status != pb::MessageStatus::Queued as i32);
            (deferred || ran).then_some(())
        }
    })
    .await;
    let all = common::messages(c, agent).await;
    let handled_now = all.iter().filter(|m| is_handled(m)).count();
    assert_eq!(handled_now, 2, "the third waits for the hour: {all:?}");
    assert_eq!(all[2].status, pb::MessageStatus::Queued as i32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hourly_turn_limit_defers_turns_until_an_apply_lifts_it() {
    let root = tempfile::tempdir().expect("tmp");
    let daemon = Daemon::start(&common::data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let agent = limited_after_two_turns(&mut c).await;
    third_still_held(&mut c, &agent).await;

    // Raised: the deferred turn runs now, without a restart.
    let raised = apply(&mut c, LIFTED, &[]).await.expect("applied");
    assert_eq!(raised.change, "updated");
    handled(&c, &agent, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hourly_turn_limit_holds_across_a_kill_9_restart() {
    let root = tempfile::tempdir().expect("tmp");
    let data = common::data_dir(&root);
    let mut daemon = Daemon::start(&data).await;
    let mut c = daemon.clients().await;
    let agent = limited_after_two_turns(&mut c).await;

    daemon.kill9();
    let daemon = Daemon::start(&data).await;
    let mut c = daemon.clients().await;
    // The restarted actor's window starts empty: what it reads back from
    // the store must still hold the third message for the hour.
    third_still_held(&mut c, &agent).await;

    // The limit still lifts as before.
    apply(&mut c, LIFTED, &[]).await.expect("applied");
    handled(&c, &agent, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_instance_takes_no_events_and_keeps_its_name_from_reuse() {
    let root = tempfile::tempdir().expect("tmp");
    let daemon = Daemon::start(&common::data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let manifest = "name = \"desk\"\n[brain.scripted]\n[[ingress]]\nsource = \"publish\"\n";
    let publish = |c: &mut Clients| {
        let mut c = c.clone();
        async move {
            c.instances
                .publish_event(pb::PublishEventRequest {
                    instance: "desk".into(),
                    r#type: "ticket.opened".into(),
                    dedupe_key: "t-1".into(),
                    payload_json: r#"{"n":1}"#.into(),
                    ..Default::default()
                })
                .await
                .expect("published")
                .into_inner()
        }
    };
    apply(&mut c, manifest, &[]).await.expect("applied");
    assert!(!publish(&mut c).await.duplicate);
    assert!(publish(&mut c).await.duplicate, "a retry is the same event");
    c.instances
        .delete_instance(pb::DeleteInstanceRequest {
            name: "desk".into(),
        })
        .await
        .expect("deleted");
    // The name stays with the archived agent: a new instance of it is
    // refused, and says why; the deleted one takes no events.
    let again = apply(&mut c, manifest, &[]).await.expect_err("name kept");
    assert_eq!(again.code(), Code::FailedPrecondition);
    assert!(
        again.message().contains("another name"),
        "{}",
        again.message()
    );
    let gone = c
        .instances
        .publish_event(pb::PublishEventRequest {
            instance: "desk".into(),
            r#type: "ticket.opened".into(),
            dedupe_key: "t-2".into(),
            ..Default::default()
        })
        .await
        .expect_err("no instance");
    assert_eq!(gone.code(), Code::NotFound);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_event_leaves_the_daemon_with_its_secrets_redacted() {
    let root = tempfile::tempdir().expect("tmp");
    let secret = "s3cr3t-value-0123456789";
    let daemon = Daemon::start_with_env(
        &common::data_dir(&root),
        &[],
        &[("PARTNER_API_KEY", secret)],
    )
    .await;
    let mut c = daemon.clients().await;
    common::apply_instance(
        &mut c,
        "name = \"desk\"\n[brain.scripted]\n[[ingress]]\nsource = \"publish\"\n",
    )
    .await;
    c.instances
        .publish_event(pb::PublishEventRequest {
            instance: "desk".into(),
            r#type: "ticket.opened".into(),
            dedupe_key: "t-1".into(),
            payload_json: json!({ "leaked": secret }).to_string(),
            ..Default::default()
        })
        .await
        .expect("published");
    let stored = c
        .instances
        .get_inbound_event(pb::GetInboundEventRequest {
            instance: "desk".into(),
            dedupe_key: "publish:desk:t-1".into(),
        })
        .await
        .expect("stored")
        .into_inner();
    assert!(
        !stored.payload_json.contains(secret),
        "{}",
        stored.payload_json
    );
    assert!(
        stored.payload_json.contains("leaked"),
        "{}",
        stored.payload_json
    );
}
