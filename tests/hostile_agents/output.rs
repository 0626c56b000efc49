//! Hostile agents: commands that print without end or escape their task.

use std::time::{Duration, Instant};

use holarchy::api::pb;

use crate::common::{create, data_dir, eventually, exec, processes_with, Daemon};

/// The resident memory of a process, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

async fn task_status(c: &mut holarchy::client::Clients, task_id: &str) -> String {
    crate::common::get_task(c, task_id).await.status
}

/// Two gibibytes printed as fast as the pipe takes them: the daemon reads
/// with backpressure (one piece in flight per stream, the ring on disk),
/// so its memory stays flat. The store's page cache is made small here so
/// what is measured is the output path, not a cache filling up to its
/// (separately bounded) size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gigabytes_of_output_keep_the_daemons_memory_flat() {
    const GIB: u64 = 1024 * 1024 * 1024;
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with(
        &data_dir(&root),
        &[
            "--task-output-rate",
            "100000000000",
            "--store-cache-mib",
            "8",
        ],
    )
    .await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "firehose", None).await;
    let started_rss = rss(daemon.pid());
    let out = exec(&mut c, &id, "head -c 2G /dev/zero", 100).await;
    let task_id = out["task_handle"]["task_id"]
        .as_str()
        .expect("task id")
        .to_owned();
    let mut peak = started_rss;
    let deadline = Instant::now() + Duration::from_secs(600);
    while task_status(&mut c, &task_id).await == "running" {
        peak = peak.max(rss(daemon.pid()));
        assert!(Instant::now() < deadline, "2 GiB took over 10 minutes");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(task_status(&mut c, &task_id).await, "completed");
    // Page through what the ring kept to find where the output ends.
    let mut offset = 0;
    loop {
        let page = c
            .tasks
            .read_task_output(pb::ReadTaskOutputRequest {
                task_id: task_id.clone(),
                offset,
            })
            .await
            .expect("output")
            .into_inner();
        if page.next_offset == offset {
            break;
        }
        offset = page.next_offset;
    }
    assert_eq!(offset, 2 * GIB, "every byte was taken");
    let grew = peak.saturating_sub(started_rss);
    eprintln!(
        "2 GiB printed: daemon RSS {} MiB at start, {} MiB at peak",
        started_rss >> 20,
        peak >> 20
    );
    assert!(
        grew < 64 * 1024 * 1024,
        "the daemon grew by {} MiB while a command printed 2 GiB",
        grew / (1024 * 1024)
    );
}

/// A command that puts children out of its process group and session
/// (`setsid`, a double fork) still ends whole: by `TaskStop`, by archiving
/// its agent, and by a `kill -9` of the daemon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escaped_children_die_with_their_task_their_agent_and_the_daemon() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    // The shell ignores SIGTERM, so a stop must still end everything once
    // its grace is over, whatever left the group.
    // Markers unique to this test process: the machine is shared, and
    // another run's sleeps must not count here.
    let marker = |case: u32| format!("{case}{:07}", std::process::id());
    let escape = |marker: &str| {
        format!(
            "trap '' TERM; setsid sleep {marker}1 & (setsid sh -c 'sleep {marker}2 &' &) ; \
             nohup sleep {marker}3 >/dev/null 2>&1 & sleep {marker}4"
        )
    };
    let started = |marker: &str| sleeps(marker).len() == 4;

    // TaskStop.
    let id = create(&mut c, "escaper", None).await;
    let out = exec(&mut c, &id, &escape(&marker(1)), 300).await;
    let task_id = out["task_handle"]["task_id"].as_str().expect("task");
    eventually("four sleeps start", || async {
        started(&marker(1)).then_some(())
    })
    .await;
    c.tasks
        .stop_task(pb::StopTaskRequest {
            task_id: task_id.into(),
        })
        .await
        .expect("stop");
    gone_within("TaskStop", &marker(1), Duration::from_secs(6)).await;

    // Archive.
    let id = create(&mut c, "escaper-2", None).await;
    exec(&mut c, &id, &escape(&marker(2)), 300).await;
    eventually("four sleeps start", || async {
        started(&marker(2)).then_some(())
    })
    .await;
    c.agents
        .archive_agent(pb::ArchiveAgentRequest {
            agent_id: id.clone(),
        })
        .await
        .expect("archive");
    gone_within("archive", &marker(2), Duration::from_secs(6)).await;

    // kill -9 of the daemon: its units die with it and take their trees.
    let id = create(&mut c, "escaper-3", None).await;
    exec(&mut c, &id, &escape(&marker(3)), 300).await;
    eventually("four sleeps start", || async {
        started(&marker(3)).then_some(())
    })
    .await;
    daemon.kill9();
    gone_within("kill -9 of the daemon", &marker(3), Duration::from_secs(6)).await;
}

/// The `sleep` processes whose argument starts with `marker` (not the
/// shells or units whose command lines merely mention them).
fn sleeps(marker: &str) -> Vec<String> {
    let prefix = format!("sleep {marker}");
    processes_with(&prefix)
        .into_iter()
        .filter(|p| {
            p.split_once(": ")
                .is_some_and(|(_, cmd)| cmd.starts_with(&prefix))
        })
        .collect()
}

async fn gone_within(what: &str, marker: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let left = sleeps(marker);
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "after {what}, still running: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
