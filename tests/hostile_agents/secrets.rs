//! Hostile agents: commands that go after the daemon's secrets.

use holarchy::api::pb;
use serde_json::json;

use crate::common::{
    command_brain, create, create_on, data_dir, events, exec, handled, script, send, tool_call,
    Daemon,
};

const API_KEY: &str = "sk-hostile-test-0123456789abcdef";

/// Every text of the event log, for searching.
async fn event_log(c: &mut holarchy::client::Clients) -> String {
    events(c, 0)
        .await
        .iter()
        .map(|e| format!("{} {}\n", e.text, e.detail_json))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_read_the_token_the_store_or_the_daemons_environment() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with_env(
        &data_dir(&root),
        &["--listen", "127.0.0.1:0"],
        &[("OPENAI_API_KEY", API_KEY)],
    )
    .await;
    let token = std::fs::read_to_string(daemon.data_dir.join("token")).expect("token file");
    let token = token.trim();
    let mut c = daemon.clients().await;
    let id = create(&mut c, "snoop", None).await;
    let pid = daemon.pid();
    // The agent's home is <data-dir>/workspaces/<id>: the token is two up.
    let probe = format!(
        "exec 2>&1; cat ../../token; ls ../../db; cat /proc/{pid}/environ | tr '\\0' '\\n'; \
         cat /proc/{pid}/mem; ls -l /proc/{pid}/cwd; echo end"
    );
    let out = exec(&mut c, &id, &probe, 10_000).await;
    let text = out["task_handle"]["initial_output"]
        .as_str()
        .expect("output");
    assert!(text.ends_with("end\n"), "{text}");
    // The probe did read the daemon's environment, and found it scrubbed.
    assert!(text.contains("OPENAI_API_KEY=*****"), "{text}");
    for denied in ["../../token", "../../db", "/mem", "/cwd"] {
        assert!(
            text.lines()
                .any(|l| l.contains(denied) && l.contains("denied")),
            "{denied} was not denied: {text}"
        );
    }
    assert!(!text.contains(token) && !text.contains(API_KEY), "{text}");
    let log = event_log(&mut c).await;
    assert!(!log.contains(token) && !log.contains(API_KEY), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_given_on_the_command_line_is_scrubbed_from_the_process_table() {
    let root = tempfile::tempdir().expect("tempdir");
    let token = "cmdline-token-0123456789abcdef";
    let daemon = Daemon::start_with(
        &data_dir(&root),
        &["--listen", "127.0.0.1:0", "--token", token],
    )
    .await;
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", daemon.pid())).expect("cmdline");
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(cmdline.contains("--token *****"), "{cmdline}");
    assert!(!cmdline.contains(token), "{cmdline}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_token_copied_into_output_or_a_work_item_is_redacted() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "leaky", None).await;
    let calls = json!([
        { "name": "CreateExternalTrigger", "input": { "reason": "webhook" } },
        { "name": "ExecCommand", "input": {
            // Printed in two writes, so the token straddles two reads.
            "command": "printf 'T={{results[0].token}}' | head -c 20; sleep 0.2; printf 'T={{results[0].token}}' | tail -c +21; echo",
            "yield_ms": 10_000 } },
        { "name": "update_work_item", "input": { "objective": "remember {{results[0].token}}" } },
    ]);
    send(&mut c, &id, &script(calls)).await;
    handled(&c, &id, 1).await;
    let (failed, created) = tool_call(&mut c, &id, "CreateExternalTrigger").await;
    assert!(!failed, "{created}");
    let (failed, ran) = tool_call(&mut c, &id, "ExecCommand").await;
    assert!(!failed, "{ran}");
    let task_id = ran["task_handle"]["task_id"].as_str().expect("task id");
    let output = c
        .tasks
        .read_task_output(pb::ReadTaskOutputRequest {
            task_id: task_id.into(),
            offset: 0,
        })
        .await
        .expect("output")
        .into_inner();
    let text: String = output
        .chunks
        .iter()
        .map(|chunk| String::from_utf8_lossy(&chunk.data).into_owned())
        .collect();
    assert_eq!(text.trim(), "T=htr_<redacted>", "{text}");
    let log = event_log(&mut c).await;
    assert!(log.contains("remember htr_<redacted>"), "{log}");
    let leaked = log.match_indices("htr_").any(|(at, _)| {
        log[at + 4..]
            .bytes()
            .take(64)
            .filter(u8::is_ascii_hexdigit)
            .count()
            == 64
    });
    assert!(!leaked, "a trigger token reached the event log: {log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_data_directory_and_its_ancestors_are_never_workspaces() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "grabby", None).await;
    let data = std::fs::canonicalize(&daemon.data_dir).expect("data dir");
    let targets = [
        data.clone(),
        data.join("workspaces"),
        data.parent().expect("parent").to_owned(),
        "/".into(),
    ];
    for (n, target) in targets.iter().enumerate() {
        let path = target.display().to_string();
        send(
            &mut c,
            &id,
            &script(json!([{ "name": "AttachWorkspace", "input": { "path": path } }])),
        )
        .await;
        handled(&c, &id, 2 * n + 1).await;
        let (failed, out) = tool_call(&mut c, &id, "AttachWorkspace").await;
        assert!(failed, "{path} was attached: {out}");
        assert!(out.to_string().contains("daemon's own files"), "{out}");
        send(
            &mut c,
            &id,
            &script(json!([{ "name": "UseWorkspace", "input": { "path": path } }])),
        )
        .await;
        handled(&c, &id, 2 * n + 2).await;
        let (failed, out) = tool_call(&mut c, &id, "UseWorkspace").await;
        assert!(failed, "{path} was used: {out}");
        assert!(out.to_string().contains("daemon's own files"), "{out}");
        let refused = c
            .workspaces
            .attach_workspace(pb::AttachWorkspaceRequest {
                agent_id: id.clone(),
                path,
                workspace_id: String::new(),
            })
            .await
            .expect_err("an operator cannot attach it either");
        assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
        assert!(
            refused.message().contains("daemon's own files"),
            "{refused:?}"
        );
    }
    let list = c
        .workspaces
        .list_workspaces(pb::ListWorkspacesRequest {
            agent_id: id.clone(),
            page_token: String::new(),
        })
        .await
        .expect("list")
        .into_inner();
    assert_eq!(list.workspaces.len(), 1, "only the home: {list:?}");
}

/// The daemon's socket is the operators' door, and agents' programs run as
/// the daemon's user: the daemon refuses connections from its descendants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_talk_to_the_daemons_socket() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "knocker", None).await;
    // An HTTP/2 preface and an empty SETTINGS frame: a gRPC server answers
    // with its own SETTINGS; a refused connection is closed unanswered.
    let script = [
        "import socket",
        "s = socket.socket(socket.AF_UNIX)",
        "s.settimeout(5)",
        "s.connect(SOCKET)",
        "try:",
        r"    s.sendall(b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n' + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))",
        "    answer = s.recv(9)",
        "except OSError:",
        "    answer = b''",
        "print('answered' if answer else 'closed')",
    ]
    .join("\n")
    .replace("SOCKET", &format!("'{}'", daemon.socket().display()));
    let knock = format!("/usr/bin/python3 - <<'PY'\n{script}\nPY\n");
    let out = exec(&mut c, &id, &knock, 10_000).await;
    let text = out["task_handle"]["initial_output"]
        .as_str()
        .expect("output");
    assert_eq!(text.trim(), "closed", "{text}");
    assert!(
        daemon.log().contains("refused a local connection"),
        "{}",
        daemon.log()
    );
    // Operators (this test, not a descendant of the daemon) still get in.
    create(&mut c, "still-open", None).await;
}

/// A command brain is confined like a command: it runs in its agent's
/// private directory and can read neither the token nor the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_brain_cannot_read_the_token_or_the_store() {
    let root = tempfile::tempdir().expect("tempdir");
    // TCP on, so there is a token file to go after.
    let daemon = Daemon::start_with(&data_dir(&root), &["--listen", "127.0.0.1:0"]).await;
    let token = std::fs::read_to_string(daemon.data_dir.join("token")).expect("token file");
    let mut c = daemon.clients().await;
    // Its directory is <data-dir>/tmp/<agent>: the token is two up.
    let snoop =
        r#"printf '{"reply":"%s"}' "$( (cat ../../token; ls ../../db) 2>&1 | tr -d '\n"')""#;
    let brain = command_brain("/bin/sh", &["-c", snoop]);
    let id = create_on(&mut c, "nosy-brain", brain).await;
    send(&mut c, &id, "what can you see?").await;
    let reply = handled(&c, &id, 1).await[0].reply.clone();
    assert!(
        reply.matches("Permission denied").count() >= 2,
        "the brain read something: {reply}"
    );
    assert!(!reply.contains(token.trim()), "{reply}");
}

/// The variables an agent gives `ExecCommand` reach its command, inside the
/// confinement, and never the unit that confines it: there a loader
/// variable (`LD_PRELOAD`) would run the agent's code unconfined.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_variables_reach_its_command_but_not_the_unit_around_it() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = crate::common::Daemon::start(&crate::common::data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let id = crate::common::create(&mut c, "env-setter", None).await;
    let probe = "echo \"own=$AGENT_PROBE\"; echo \"unit=$(tr '\\0' '\\n' < /proc/$PPID/environ | grep -c AGENT_PROBE)\"; echo \"preload=$LD_PRELOAD\"; echo \"unit_path=$(tr '\\0' '\\n' < /proc/$PPID/environ | grep -c '^PATH=')\"";
    let script = crate::common::script(json!([{ "name": "ExecCommand", "input": {
        "command": probe,
        "env": { "AGENT_PROBE": "it's here", "LD_PRELOAD": "/nonexistent/agent.so" },
        "yield_ms": 10_000u64,
    } }]));
    crate::common::send(&mut c, &id, &script).await;
    crate::common::handled(&c, &id, 1).await;
    let out = crate::common::tool_output(&mut c, &id, "ExecCommand").await;
    let text = out["task_handle"]["initial_output"]
        .as_str()
        .expect("output");
    assert!(text.contains("own=it's here"), "{out}");
    // The unit's environment was read (it has PATH), without the variable.
    assert!(text.contains("unit_path=1"), "{out}");
    assert!(
        text.contains("unit=0"),
        "the unit saw the agent's variable: {out}"
    );
    assert!(text.contains("preload=/nonexistent/agent.so"), "{out}");

    // A name the shell could not take is refused, and nothing runs.
    let bad = crate::common::script(json!([{ "name": "ExecCommand", "input": {
        "command": "echo ran",
        "env": { "X=1; touch /tmp/pwned #": "v" },
    } }]));
    crate::common::send(&mut c, &id, &bad).await;
    crate::common::handled(&c, &id, 2).await;
    let (failed, refused) = crate::common::tool_call(&mut c, &id, "ExecCommand").await;
    assert!(failed, "{refused}");
    assert!(refused.to_string().contains("variable name"), "{refused}");
}
