//! `SpawnAgent` with `context: fork` through the daemon: the forked child's
//! brain is given its parent's work item and recent turns; a fresh child's
//! is not.

use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::{json, Value};

use crate::common::workspaces::run;
use crate::common::{command_brain, create_on, data_dir, handled, messages, Daemon};

/// A command brain (jq) that follows a message holding a JSON decision, as
/// the scripted brain does, and otherwise replies with what it inherited:
/// the children's replies then show what their brain was given.
fn echo_inherited_brain() -> pb::BrainConfig {
    let decide = r#"if .step == 1 and (.message.text | startswith("{"))
        then (.message.text | fromjson)
        elif .step == 1 then { reply: (.context.inherited | tojson) }
        else { reply: "done" } end"#;
    command_brain("jq", &["-c", decide])
}

/// What the child's brain saw as `context.inherited`, from its first reply.
async fn inherited_of(c: &Clients, child: &str) -> Value {
    let first = handled(c, child, 1).await.remove(0);
    serde_json::from_str(&first.reply).expect("the reply is the inherited JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forked_child_sees_its_parents_work_and_recent_turns_and_a_fresh_one_does_not() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let parent = create_on(&mut c, "planner", echo_inherited_brain()).await;
    crate::common::send(&mut c, &parent, "we ship on friday").await;
    handled(&c, &parent, 1).await;
    run(
        &mut c,
        &parent,
        json!([{ "name": "update_work_item", "input": { "objective": "ship 1.0" } }]),
    )
    .await;

    let (forked, _) = crate::spawn(
        &mut c,
        &parent,
        json!({ "context": "fork", "initial_message": "write the notes" }),
    )
    .await;
    let (fresh, _) = crate::spawn(
        &mut c,
        &parent,
        json!({ "initial_message": "write the notes" }),
    )
    .await;

    let seen = inherited_of(&c, &forked).await;
    assert_eq!(seen["from_agent_id"], parent.as_str(), "{seen}");
    assert_eq!(seen["work_item"]["objective"], "ship 1.0", "{seen}");
    let turns: Vec<&str> = seen["recent_turns"]
        .as_array()
        .expect("recent turns")
        .iter()
        .map(|t| t["text"].as_str().expect("text"))
        .collect();
    assert!(turns.contains(&"we ship on friday"), "{seen}");
    // Its own handoff is its message, not part of what it inherited.
    let child_messages = messages(&mut c, &forked).await;
    assert_eq!(child_messages[0].text, "write the notes");

    assert_eq!(inherited_of(&c, &fresh).await, Value::Null);
}
