//! End-to-end: agents run on the command brain (a real program per step)
//! through the real daemon: tools, children, failures, and brain changes.

mod common;

use common::{command_brain, create_on, data_dir, eventually, handled, send, Daemon};
use holarchy::api::pb;

fn example(name: &str) -> String {
    format!("{}/examples/brains/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_drives_an_agent_through_exec_command_and_spawn_agent() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let id = create_on(
        &mut c,
        "pythonic",
        command_brain("python3", &[&example("agent.py")]),
    )
    .await;

    send(&mut c, &id, "hello").await;
    send(&mut c, &id, "run: echo hello from a tool").await;
    let all = handled(&c, &id, 2).await;
    assert_eq!(all[0].reply, "echo: hello");
    assert_eq!(all[1].reply, "ran: hello from a tool");

    // The child runs on the same brain, finishes, and reports back.
    send(&mut c, &id, "delegate: finish: 42 widgets").await;
    let all = eventually("the child's result handled by the parent", || {
        let mut c = c.clone();
        let id = id.clone();
        async move {
            let all = common::messages(&mut c, &id).await;
            all.iter()
                .any(|m| {
                    m.provenance == "child_result" && m.status == pb::MessageStatus::Handled as i32
                })
                .then_some(all)
        }
    })
    .await;
    assert!(
        all[2].reply.starts_with("delegated to agt_"),
        "{}",
        all[2].reply
    );
    let result = all
        .iter()
        .find(|m| m.provenance == "child_result")
        .expect("result");
    assert_eq!(result.text, "42 widgets");
    assert!(
        result.reply.starts_with("child agt_") && result.reply.ends_with("reported: 42 widgets"),
        "{}",
        result.reply
    );
    let tasks = c
        .tasks
        .list_tasks(pb::ListTasksRequest {
            agent_id: id.clone(),
            ..Default::default()
        })
        .await
        .expect("tasks")
        .into_inner();
    let child_task = tasks
        .tasks
        .iter()
        .find(|t| t.task_kind == "child_agent_task")
        .expect("child task");
    assert_eq!(
        (child_task.status.as_str(), child_task.output.as_str()),
        ("completed", "42 widgets")
    );
    let child = common::get_agent(&mut c, &child_task.child_agent_id).await;
    assert!(
        matches!(
            child.brain.and_then(|b| b.kind),
            Some(pb::brain_config::Kind::Command(_))
        ),
        "inherited"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_program_fails_the_turn_with_its_output_and_the_agent_carries_on() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let broken = command_brain(
        "sh",
        &["-c", "echo half an answer; echo it went wrong >&2; exit 3"],
    );
    let id = create_on(&mut c, "broken", broken).await;
    send(&mut c, &id, "try").await;
    let failed = eventually("the turn to fail", || {
        let mut c = c.clone();
        let id = id.clone();
        async move {
            let all = common::messages(&mut c, &id).await;
            all.into_iter()
                .find(|m| m.status == pb::MessageStatus::Failed as i32)
        }
    })
    .await;
    let events = common::events(&mut c, 0).await;
    let finished = events
        .iter()
        .find(|e| e.kind == "run_finished" && e.message_id == failed.message_id)
        .expect("run finished");
    assert_eq!(finished.text, "failed");
    for words in ["exit status: 3", "half an answer", "it went wrong"] {
        assert!(
            finished.detail_json.contains(words),
            "`{words}` missing: {}",
            finished.detail_json
        );
    }

    // Bad JSON fails too; then a brain change takes effect at the next turn.
    let chatty = command_brain("sh", &["-c", "echo not json"]);
    c.agents
        .update_agent_brain(pb::UpdateAgentBrainRequest {
            agent_id: id.clone(),
            brain: Some(chatty),
        })
        .await
        .expect("updated");
    send(&mut c, &id, "again").await;
    eventually("the second turn to fail", || {
        let mut c = c.clone();
        let id = id.clone();
        async move {
            let all = common::messages(&mut c, &id).await;
            (all.iter()
                .filter(|m| m.status == pb::MessageStatus::Failed as i32)
                .count()
                == 2)
                .then_some(())
        }
    })
    .await;
    let shell = command_brain(&example("echo.sh"), &[]);
    c.agents
        .update_agent_brain(pb::UpdateAgentBrainRequest {
            agent_id: id.clone(),
            brain: Some(shell),
        })
        .await
        .expect("updated");
    send(&mut c, &id, "third time").await;
    let last = eventually("the shell brain's reply", || {
        let mut c = c.clone();
        let id = id.clone();
        async move {
            let all = common::messages(&mut c, &id).await;
            all.into_iter()
                .find(|m| m.status == pb::MessageStatus::Handled as i32)
        }
    })
    .await;
    assert!(
        last.reply.starts_with("a shell brain read "),
        "{}",
        last.reply
    );

    let refused = c
        .agents
        .update_agent_brain(pb::UpdateAgentBrainRequest {
            agent_id: id.clone(),
            brain: Some(pb::BrainConfig {
                kind: Some(pb::brain_config::Kind::Openai(pb::OpenAiBrain {
                    base_url: "http://127.0.0.1:1".into(),
                    model: "m".into(),
                    api_key_env: "sk-secret-key".into(),
                    temperature: None,
                    max_steps: None,
                })),
            }),
        })
        .await
        .expect_err("a key in place of a variable name");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    assert!(refused.message().contains("api_key_env"), "{refused:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_catalog_follows_the_profile_and_carries_schemas() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let id = common::create(&mut c, "catalogued", None).await;
    let tools = c
        .agents
        .list_tools(pb::ListToolsRequest { agent_id: id })
        .await
        .expect("tools")
        .into_inner()
        .tools;
    let names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
    for wanted in [
        "AgentGet",
        "SpawnAgent",
        "ExecCommand",
        "Sleep",
        "CreateExternalTrigger",
        "update_work_item",
    ] {
        assert!(names.contains(&wanted), "{wanted} missing from {names:?}");
    }
    for tool in &tools {
        let schema: serde_json::Value =
            serde_json::from_str(&tool.input_schema_json).expect("schema is JSON");
        assert_eq!(schema["type"], "object", "{}", tool.name);
        assert!(!tool.description.is_empty() && !tool.plane.is_empty());
    }
}
