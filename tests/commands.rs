//! End-to-end: the command plane through the real daemon: output streamed
//! to completion, stdin, stop without orphans, the bounded output ring, and
//! commands cut short by `kill -9`.

mod common;

use common::{create, data_dir, eventually, exec, handled, processes_with, Daemon};
use holarchy::api::pb;
use tokio_stream::StreamExt;

/// Asks `agent` to run `command`; returns the ExecCommand result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_command_returns_its_output_and_a_long_one_streams_to_completion() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "runner", None).await;

    let quick = exec(&mut c, &id, "echo out; echo err >&2; exit 3", 5_000).await;
    assert_eq!(quick["task_handle"]["status"], "failed");
    assert_eq!(quick["exit"], "exit code 3");
    let text = quick["task_handle"]["initial_output"]
        .as_str()
        .expect("output");
    assert!(text.contains("out\n") && text.contains("err\n"), "{text}");

    let long = exec(
        &mut c,
        &id,
        "for i in 1 2 3 4; do echo line $i; sleep 0.3; done",
        100,
    )
    .await;
    assert_eq!(long["task_handle"]["status"], "running");
    let task_id = long["task_handle"]["task_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let mut stream = c
        .tasks
        .follow_task_output(pb::ReadTaskOutputRequest {
            task_id: task_id.clone(),
            offset: 0,
        })
        .await
        .expect("follow")
        .into_inner();
    let mut bytes = Vec::new();
    let mut next = 0;
    while let Some(chunk) = tokio::time::timeout(common::DEADLINE, stream.next())
        .await
        .expect("streams")
    {
        let chunk = chunk.expect("chunk");
        assert_eq!(chunk.offset, next, "chunks are contiguous");
        assert_eq!(chunk.stream, "stdout");
        next += chunk.data.len() as u64;
        bytes.extend(chunk.data);
    }
    assert_eq!(
        String::from_utf8_lossy(&bytes),
        "line 1\nline 2\nline 3\nline 4\n"
    );
    let done = common::get_task(&mut c, &task_id).await;
    assert_eq!(
        (done.status.as_str(), done.exit.as_str()),
        ("completed", "exit code 0")
    );
    // The owner heard of it with task-result provenance.
    let all = handled(&c, &id, 3).await;
    let result = all
        .iter()
        .find(|m| m.provenance == "task_result")
        .expect("task result message");
    assert!(
        result.text.contains("completed") && result.text.contains("line 4"),
        "{}",
        result.text
    );
    // Reads resume from an offset.
    let rest = c
        .tasks
        .read_task_output(pb::ReadTaskOutputRequest { task_id, offset: 7 })
        .await
        .expect("read")
        .into_inner();
    assert_eq!(rest.output, "line 2\nline 3\nline 4\n");
    assert_eq!(rest.next_offset, 28);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_reaches_the_command_and_stop_leaves_no_process_behind() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "shell", None).await;

    let reader = exec(&mut c, &id, "read line; echo got $line", 100).await;
    let reader_id = reader["task_handle"]["task_id"]
        .as_str()
        .expect("id")
        .to_owned();
    c.tasks
        .send_task_input(pb::SendTaskInputRequest {
            task_id: reader_id.clone(),
            text: "hello\n".into(),
        })
        .await
        .expect("stdin");
    let done = eventually("the reader to finish", || {
        let mut c = c.clone();
        let reader_id = reader_id.clone();
        async move {
            let t = common::get_task(&mut c, &reader_id).await;
            (t.status == "completed").then_some(t)
        }
    })
    .await;
    assert_eq!(done.output, "got hello\n");

    // A sleeper with a grandchild in the same process group.
    let marker = format!("{}", 1000 + std::process::id() % 1000);
    let sleeper = exec(
        &mut c,
        &id,
        &format!("sleep {marker}.25 & sleep {marker}.5; wait"),
        100,
    )
    .await;
    let sleeper_id = sleeper["task_handle"]["task_id"]
        .as_str()
        .expect("id")
        .to_owned();
    eventually("both sleeps running", || {
        let marker = marker.clone();
        async move { (processes_with(&format!("sleep {marker}.")).len() >= 2).then_some(()) }
    })
    .await;
    let stopped = c
        .tasks
        .stop_task(pb::StopTaskRequest {
            task_id: sleeper_id,
        })
        .await
        .expect("stop")
        .into_inner();
    assert_eq!(stopped.status, "stopped");
    assert!(stopped.exit.starts_with("signal"), "{}", stopped.exit);
    eventually("no process left", || {
        let marker = marker.clone();
        async move {
            processes_with(&format!("sleep {marker}."))
                .is_empty()
                .then_some(())
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_is_a_bounded_ring_that_counts_what_it_dropped() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with(&data_dir(&root), &["--output-capacity", "20000"]).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "noisy", None).await;
    let noisy = exec(&mut c, &id, "head -c 200000 /dev/zero | tr '\\0' x", 10_000).await;
    let task_id = noisy["task_handle"]["task_id"]
        .as_str()
        .expect("id")
        .to_owned();
    assert_eq!(noisy["task_handle"]["status"], "completed");
    let read = c
        .tasks
        .read_task_output(pb::ReadTaskOutputRequest { task_id, offset: 0 })
        .await
        .expect("read")
        .into_inner();
    assert_eq!(
        read.next_offset, 200_000,
        "the end offset counts every byte produced"
    );
    assert!(
        read.dropped_bytes >= 200_000 - 20_000 - 8192,
        "dropped {}",
        read.dropped_bytes
    );
    assert!(
        read.output.len() as u64 <= 20_000 + 8192,
        "kept {}",
        read.output.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_running_at_kill_9_is_interrupted_after_restart_and_its_group_is_gone() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "crashy", None).await;
    let marker = format!("{}", 2000 + std::process::id() % 1000);
    let sleeper = exec(&mut c, &id, &format!("sleep {marker}.75"), 100).await;
    let task_id = sleeper["task_handle"]["task_id"]
        .as_str()
        .expect("id")
        .to_owned();
    eventually("the sleep running", || {
        let marker = marker.clone();
        async move { (!processes_with(&format!("sleep {marker}.75")).is_empty()).then_some(()) }
    })
    .await;

    daemon.kill9();
    drop(c);
    let daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let ended = common::get_task(&mut c, &task_id).await;
    assert_eq!(ended.status, "interrupted");
    assert!(
        ended.output.contains("daemon restarted"),
        "{}",
        ended.output
    );
    assert!(
        processes_with(&format!("sleep {marker}.75")).is_empty(),
        "the process group is gone"
    );
    let all = handled(&c, &id, 2).await;
    assert!(all
        .iter()
        .any(|m| m.provenance == "task_result" && m.text.contains("interrupted")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archiving_an_agent_kills_its_running_commands() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "doomed", None).await;
    let marker = format!("{}", 3000 + std::process::id() % 1000);
    let sleeper = exec(&mut c, &id, &format!("sleep {marker}.5"), 100).await;
    let task_id = sleeper["task_handle"]["task_id"]
        .as_str()
        .expect("id")
        .to_owned();
    eventually("the sleep running", || {
        let marker = marker.clone();
        async move { (!processes_with(&format!("sleep {marker}.5")).is_empty()).then_some(()) }
    })
    .await;
    c.agents
        .archive_agent(pb::ArchiveAgentRequest { agent_id: id })
        .await
        .expect("archived");
    eventually("no process left", || {
        let marker = marker.clone();
        async move {
            processes_with(&format!("sleep {marker}.5"))
                .is_empty()
                .then_some(())
        }
    })
    .await;
    assert_eq!(common::get_task(&mut c, &task_id).await.status, "stopped");
}

#[tokio::test]
async fn an_archived_agent_leaves_nothing_in_its_temporary_directory() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "scratch", None).await;
    // A program fills its private TMPDIR, then the agent is archived.
    let fill = "head -c 100000 /dev/zero > \"$TMPDIR/junk\" && echo $TMPDIR";
    let out = exec(&mut c, &id, fill, 10_000).await;
    let tmp = out["task_handle"]["initial_output"]
        .as_str()
        .expect("output")
        .trim()
        .to_owned();
    assert!(
        std::path::Path::new(&tmp).join("junk").exists(),
        "the command wrote to {tmp}: {out}"
    );
    c.agents
        .archive_agent(pb::ArchiveAgentRequest { agent_id: id })
        .await
        .expect("archived");
    assert!(
        !std::path::Path::new(&tmp).exists(),
        "an archived agent's temporary directory is removed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_never_see_the_daemons_secrets() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with_env(
        &data_dir(&root),
        &[],
        &[("OPENAI_API_KEY", "sk-daemon-secret")],
    )
    .await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "curious", None).await;
    let out = exec(&mut c, &id, "env; echo end", 5_000).await;
    let text = out["task_handle"]["initial_output"]
        .as_str()
        .expect("output");
    assert!(text.contains("PATH=") && text.ends_with("end\n"), "{text}");
    assert!(
        !text.contains("sk-daemon-secret") && !text.contains("OPENAI_API_KEY"),
        "{text}"
    );
}

/// A command starts with no signal blocked or ignored, though its unit
/// blocks the ones it waits for and the daemon runs under `nohup` (SIGHUP
/// ignored): `kill -TERM` and `timeout(1)` work in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_starts_with_its_signals_reset_even_under_nohup() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_under(&["nohup"], &data_dir(&root), &[], &[]).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "runner", None).await;
    let out = exec(
        &mut c,
        &id,
        "grep -E '^Sig(Blk|Ign):' /proc/self/status",
        10_000,
    )
    .await;
    let text = out["task_handle"]["initial_output"]
        .as_str()
        .expect("output");
    common::assert_signals_reset("the command", text);
}
