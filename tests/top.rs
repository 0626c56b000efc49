//! `holarchy top` and `RuntimeService.GetActivity` end to end, against the
//! real binary: busy agents and a long queue (a paused agent's) show in the
//! right lists with the right numbers, over the Unix socket and over TCP,
//! as a plain frame and as JSON; the longest queue reaches `/metrics`; a
//! list longer than the bound is refused; in a terminal (tmux, when
//! installed) the keys work. The ignored test measures the call at 100,000
//! idle agents.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{create, data_dir, exec, free_addr, handled, script, send, Daemon};
use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Runs the CLI with `args`; its stdout (a pipe, not a terminal).
fn cli(args: &[&str], token: Option<&str>) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_holarchy"));
    command
        .args(args)
        .env_remove("HOLARCHY_TOKEN")
        .env_remove("HOLARCHY_ADDR")
        .env_remove("HOLARCHY_SOCKET")
        .env_remove("HOLARCHY_DATA_DIR");
    if let Some(token) = token {
        command.env("HOLARCHY_TOKEN", token);
    }
    let out = command.output().expect("the CLI runs");
    assert!(
        out.status.success(),
        "holarchy {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The rows of a plain frame's table under `title`, split on whitespace,
/// without the header line.
fn section(frame: &str, title: &str) -> Vec<Vec<String>> {
    let mut lines = frame
        .lines()
        .skip_while(|l| *l != title)
        .skip(1)
        .take_while(|l| !l.is_empty());
    let header = lines.next().unwrap_or_default();
    if header == "(none)" {
        return Vec::new();
    }
    lines
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

/// The row whose first cell (a name) is `name`.
fn row<'a>(rows: &'a [Vec<String>], name: &str) -> &'a [String] {
    rows.iter()
        .find(|r| r[0] == name)
        .unwrap_or_else(|| panic!("{name} not listed in {rows:?}"))
}

/// A task's or wait's row split where its text ends: the text (words
/// joined), then the id's tail, `owner` and the cells after it.
fn split_at_owner<'a>(row: &'a [String], owner: &str) -> (String, &'a [String]) {
    let at = row
        .iter()
        .position(|c| c == owner)
        .unwrap_or_else(|| panic!("no owner {owner} in {row:?}"));
    (row[..at - 1].join(" "), &row[at - 1..])
}

/// Whether `cell` is a tail of `id` that any command takes for it: its
/// last six characters or more, never the whole id.
fn is_tail(cell: &str, id: &str) -> bool {
    cell.len() >= 6 && cell.len() < id.len() && id.ends_with(cell)
}

/// `/metrics` from the HTTP listener.
async fn metrics(addr: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("sent");
    let mut body = String::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_string(&mut body))
        .await
        .expect("answered in time")
        .expect("read");
    body
}

async fn activity(c: &mut Clients, limit: u32) -> Result<pb::GetActivityResponse, tonic::Status> {
    c.runtime
        .get_activity(pb::GetActivityRequest { limit })
        .await
        .map(tonic::Response::into_inner)
}

/// A new agent, paused: what it is sent stays queued.
async fn paused(c: &mut Clients, name: &str) -> String {
    let id = create(c, name, None).await;
    c.agents
        .pause_agent(pb::PauseAgentRequest {
            agent_id: id.clone(),
        })
        .await
        .expect("paused");
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_shows_busy_agents_long_queues_tasks_and_waits_over_the_socket_and_tcp() {
    let root = tempfile::tempdir().expect("tempdir");
    let (listen, http) = (free_addr(), free_addr());
    let daemon = Daemon::start_with(
        &data_dir(&root),
        &["--listen", &listen, "--http-listen", &http],
    )
    .await;
    let mut c = daemon.clients().await;

    // Six turns for one agent; seven messages waiting on a paused one.
    let busy = create(&mut c, "busy", None).await;
    for i in 0..6 {
        send(&mut c, &busy, &format!("job {i}")).await;
    }
    handled(&c, &busy, 6).await;
    let stuck = paused(&mut c, "stuck").await;
    for i in 0..7 {
        send(&mut c, &stuck, &format!("later {i}")).await;
    }
    // A command still running, and a timer an hour away.
    let worker = create(&mut c, "worker", None).await;
    exec(&mut c, &worker, "sleep 120", 50).await;
    let sleeper = create(&mut c, "sleeper", None).await;
    let sleep = script(
        json!([{ "name": "Sleep", "input": { "duration_ms": 3_600_000, "reason": "release window" } }]),
    );
    send(&mut c, &sleeper, &sleep).await;
    handled(&c, &sleeper, 1).await;

    let socket = daemon.socket();
    let socket = socket.to_str().expect("utf-8 path");
    let frame = cli(&["--socket", socket, "top", "--once"], None);
    // Names first, ids cut to their tails, as `agent list` prints them:
    // no whole id anywhere.
    for id in [&busy, &stuck, &worker, &sleeper] {
        assert!(!frame.contains(id.as_str()), "{id} whole in\n{frame}");
    }
    let busiest = section(&frame, "BUSIEST AGENTS");
    // NAME AGENT VIS STATE QUEUE TURNS/MIN RUN
    assert_eq!(busiest[0][0], "busy", "the busiest first:\n{frame}");
    assert!(is_tail(&busiest[0][1], &busy), "{frame}");
    assert_eq!(busiest[0][2..6], ["public", "active", "0", "6"]);
    let queues = section(&frame, "LONGEST QUEUES");
    assert_eq!(
        queues.len(),
        1,
        "only the paused agent has a queue:\n{frame}"
    );
    assert!(is_tail(&queues[0][1], &stuck), "{frame}");
    assert_eq!(
        [&queues[0][..1], &queues[0][2..6]].concat(),
        ["stuck", "public", "paused", "7", "0"]
    );
    // LABEL TASK OWNER KIND AGE: the owner by its name, which the
    // daemon's answer carries; the label (the command) may be words.
    let tasks = section(&frame, "RUNNING TASKS");
    let (task_label, task_rest) = split_at_owner(&tasks[0], "worker");
    assert_eq!(task_label, "sleep 120", "{frame}");
    assert_eq!(task_rest[1..3], ["worker", "command"], "{frame}");
    // REASON WAIT OWNER KIND FIRES IN
    let waits = section(&frame, "ARMED WAITS");
    let (wait_reason, wait_rest) = split_at_owner(&waits[0], "sleeper");
    assert_eq!(wait_reason, "release window", "{frame}");
    assert_eq!(wait_rest[1..3], ["sleeper", "timer"], "{frame}");
    assert!(
        frame.contains("queued 7 (longest 7), tasks 1, waits 1"),
        "{frame}"
    );

    // Over TCP with the token: the same lists, as a frame and as JSON.
    let addr = format!("http://{listen}");
    let token = daemon.token();
    let frame = cli(&["--addr", &addr, "top", "--limit", "5"], Some(&token));
    assert_eq!(row(&section(&frame, "LONGEST QUEUES"), "stuck")[4], "7");
    assert_eq!(row(&section(&frame, "BUSIEST AGENTS"), "busy")[5], "6");
    let json: Value = serde_json::from_str(&cli(&["--addr", &addr, "--json", "top"], Some(&token)))
        .expect("one JSON object");
    assert_eq!(json["longest_queues"][0]["agent_id"], stuck.as_str());
    assert_eq!(json["longest_queues"][0]["queue_length"], 7);
    assert_eq!(json["longest_queues"][0]["state"], "paused");
    assert_eq!(json["busiest"][0]["name"], "busy");
    assert_eq!(json["totals"]["queue_max"], 7);
    assert!(
        json["totals"]["turns_finished"].as_u64() >= Some(8),
        "{json}"
    );
    assert_eq!(json["armed_waits"][0]["reason"], "release window");
    // Scripts keep every id whole, and get the owners' names besides.
    assert_eq!(json["running_tasks"][0]["owner_agent_id"], worker.as_str());
    assert_eq!(json["running_tasks"][0]["owner_name"], "worker");
    assert_eq!(json["armed_waits"][0]["owner_agent_id"], sleeper.as_str());
    assert_eq!(json["armed_waits"][0]["owner_name"], "sleeper");
    let whole = |list: &str, field: &str| json[list][0][field].as_str().expect("an id").to_owned();
    assert!(is_tail(&task_rest[0], &whole("running_tasks", "task_id")));
    assert!(is_tail(&wait_rest[0], &whole("armed_waits", "wait_id")));

    let scraped = metrics(&http).await;
    assert!(
        scraped.contains("holarchy_agent_queue_max 7\n"),
        "{scraped}"
    );

    // Resumed, the queue drains: the agent leaves the queue list.
    c.agents
        .resume_agent(pb::ResumeAgentRequest {
            agent_id: stuck.clone(),
        })
        .await
        .expect("resumed");
    handled(&c, &stuck, 7).await;
    let after = activity(&mut c, 10).await.expect("activity");
    assert!(after.longest_queues.is_empty(), "{after:?}");
    let drained = after.busiest.iter().find(|a| a.agent_id == stuck);
    assert_eq!(drained.map(|a| a.recent_turns), Some(7), "{after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_are_bounded_and_a_bigger_limit_is_invalid() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    for name in ["a", "b", "c"] {
        let id = create(&mut c, name, None).await;
        send(&mut c, &id, "hello").await;
        handled(&c, &id, 1).await;
    }
    for limit in [101, 1000, u32::MAX] {
        let refused = activity(&mut c, limit).await.expect_err("over the bound");
        assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
        assert!(refused.message().contains("at most 100"), "{refused:?}");
    }
    assert_eq!(
        activity(&mut c, 100)
            .await
            .expect("at the bound")
            .busiest
            .len(),
        3
    );
    assert_eq!(
        activity(&mut c, 0)
            .await
            .expect("the default")
            .busiest
            .len(),
        3
    );
    let one = activity(&mut c, 1).await.expect("one each");
    assert_eq!(one.busiest.len(), 1);
    assert_eq!(one.totals.map(|t| t.turns_finished), Some(3));

    // The CLI refuses it before calling.
    let out = Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .args([
            "--socket",
            daemon.socket().to_str().expect("utf-8"),
            "top",
            "--limit",
            "101",
        ])
        .output()
        .expect("runs");
    assert!(!out.status.success());
}

/// A tmux server of this test's own (its own socket name), killed when
/// dropped.
struct Tmux(String);

impl Tmux {
    fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.0)
            .args(args)
            .output()
            .expect("tmux runs")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "top"]).stdout).into_owned()
    }

    fn keys(&self, keys: &str) {
        assert!(self.run(&["send-keys", "-t", "top", keys]).status.success());
    }

    /// Waits until the screen satisfies `check`.
    async fn until(&self, what: &str, check: impl Fn(&str) -> bool) {
        let started = Instant::now();
        loop {
            let screen = self.screen();
            if check(&screen) {
                return;
            }
            assert!(
                started.elapsed() < common::DEADLINE,
                "timed out waiting for {what}:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// `holarchy top` on `daemon`'s socket, redrawn every 0.3 s, in a
/// 150x30 tmux session of its own (`label` tells the tests' servers
/// apart); `None`, said on stderr, when tmux is not installed.
fn top_in_tmux(daemon: &Daemon, label: &str) -> Option<Tmux> {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipped: tmux is not installed (apt-get install tmux to run this test)");
        return None;
    }
    let tmux = Tmux(format!("holarchy-top-{}-{label}", std::process::id()));
    let program = format!(
        "env -u HOLARCHY_TOKEN -u HOLARCHY_ADDR {} --socket {} top --interval 0.3",
        env!("CARGO_BIN_EXE_holarchy"),
        daemon.socket().display()
    );
    let started = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "150",
        "-y",
        "30",
        &program,
    ]);
    assert!(started.status.success(), "{started:?}");
    Some(tmux)
}

/// The interactive view in a real terminal (tmux): tab to the queues, `/`
/// filters the rows, enter opens the agent's messages and events, t its
/// subtree, esc comes back, r resumes and p pauses the selected agent (as
/// the daemon then reports), every table, pane title and notice shows
/// names first and ids as tails, a daemon gone is said to be retried, q
/// quits.
/// Skipped when tmux is not installed; the keys and frames are
/// unit-tested anyway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_interactive_view_answers_keys_in_a_terminal() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let stuck = paused(&mut c, "stuck").await;
    send(&mut c, &stuck, "later").await;

    let Some(tmux) = top_in_tmux(&daemon, "keys") else {
        return;
    };
    tmux.until("the first frame", |s| s.contains("longest queues (1)"))
        .await;
    tmux.keys("Tab");
    // Rows start with the name; the id shows as its tail only.
    let selected = "> stuck ".to_owned();
    let stuck_tail = &stuck[stuck.len() - 6..];
    tmux.until("the queue table", |s| {
        s.contains(&selected)
            && s.contains("QUEUE v")
            && s.contains(stuck_tail)
            && !s.contains(&stuck)
    })
    .await;

    // `/` filters: a text no row holds empties the table, esc brings it back.
    tmux.keys("/");
    tmux.keys("nomatch");
    tmux.until("the filter being typed", |s| {
        s.contains("filter: /nomatch_")
    })
    .await;
    tmux.keys("Enter");
    tmux.until("the filtered table", |s| {
        s.contains("longest queues (0)") && !s.contains(&selected)
    })
    .await;
    tmux.keys("Escape");
    tmux.until("the filter dropped", |s| s.contains(&selected))
        .await;
    tmux.keys("/");
    tmux.keys("STU");
    tmux.keys("Enter");
    tmux.until("a filter on the name, in any case", |s| {
        s.contains("filter: /STU") && s.contains(&selected)
    })
    .await;
    tmux.keys("Escape");
    // Each esc is seen before the next key: an esc and a key read together
    // are alt and that key.
    tmux.until("the filter dropped", |s| !s.contains("filter: /STU"))
        .await;

    // enter: the agent's messages and events; t: its subtree. Titles and
    // notices name the agent as its row does, never by its whole id.
    let named = format!("stuck ({stuck_tail})");
    tmux.keys("Enter");
    let pane = format!("messages and events of {named}");
    tmux.until("the messages pane", |s| {
        s.contains(&pane) && s.contains("later") && s.contains("agent_created")
    })
    .await;
    tmux.keys("Escape");
    tmux.until("the tables again", |s| !s.contains(&pane)).await;
    tmux.keys("t");
    let subtree = format!("subtree of {named}");
    tmux.until("the subtree pane", |s| {
        s.contains(&subtree) && s.contains("agent \"stuck\"") && !s.contains(&stuck)
    })
    .await;
    tmux.keys("Escape");
    tmux.until("the tables again", |s| {
        !s.contains(&subtree) && s.contains(&selected)
    })
    .await;

    // r resumes the selected agent: it handles what was queued.
    tmux.keys("r");
    tmux.until("the resume notice", |s| {
        s.contains(&format!("resumed {named}")) && !s.contains(&stuck)
    })
    .await;
    handled(&c, &stuck, 1).await;
    assert_eq!(
        common::get_agent(&mut c, &stuck).await.state,
        i32::from(pb::LifecycleState::Active)
    );
    // Now among the busiest: select it there and pause it with p.
    tmux.keys("BTab");
    tmux.until("the busiest table", |s| {
        s.contains("busiest agents (1)") && s.contains(&selected)
    })
    .await;
    tmux.keys("p");
    tmux.until("the pause notice", |s| {
        s.contains(&format!("paused {named}")) && !s.contains(&stuck)
    })
    .await;
    assert_eq!(
        common::get_agent(&mut c, &stuck).await.state,
        i32::from(pb::LifecycleState::Paused)
    );

    // A running task and an armed wait: each by its own words first, its
    // owner by name, no whole id.
    let lead = create(&mut c, "lead", None).await;
    let spawn = json!([{ "name": "SpawnAgent", "input": {
        "preset": "private_child", "initial_message": "check the logs" } }]);
    send(&mut c, &lead, &script(spawn)).await;
    let sleep = json!([{ "name": "Sleep", "input": {
        "duration_ms": 3_600_000, "reason": "release window" } }]);
    send(&mut c, &lead, &script(sleep)).await;
    handled(&c, &lead, 2).await;
    tmux.keys("Tab");
    tmux.keys("Tab");
    let owned_by_lead = |s: &str, text: &str| {
        s.lines()
            .any(|l| l.contains(&format!("> {text}")) && l.contains(" lead "))
            && !s.contains(&lead)
            && !s.contains("tsk_")
            && !s.contains("wat_")
    };
    tmux.until("the task table", |s| {
        s.contains("running tasks (1)") && owned_by_lead(s, "check the logs")
    })
    .await;
    tmux.keys("Tab");
    tmux.until("the wait table", |s| {
        s.contains("armed waits (1)") && owned_by_lead(s, "release window")
    })
    .await;

    // The daemon goes away: the view says so and keeps trying.
    drop(c);
    daemon.kill9();
    tmux.until("the disconnected line", |s| {
        s.contains("disconnected from the daemon, retrying")
    })
    .await;
    tmux.keys("q");
    let quit = Instant::now();
    while tmux.run(&["has-session", "-t", "top"]).status.success() {
        assert!(
            quit.elapsed() < common::DEADLINE,
            "q did not quit:\n{}",
            tmux.screen()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// In a terminal (tmux): `a` aborts the turn of the selected busy agent
/// (the daemon then reports its message aborted and the agent paused);
/// when the daemon stops the view says it is retrying, and once a daemon
/// serves the data directory again the view shows it live, with no key
/// pressed. Skipped when tmux is not installed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_abort_key_aborts_a_busy_agents_turn_and_the_view_comes_back_with_the_daemon() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    // A turn that takes 30 s unless aborted (its step's timeout is 20 s:
    // a turn that ends by itself fails, it is not aborted).
    let slow = common::create_on(&mut c, "slow", common::command_brain("sleep", &["30"])).await;
    let message = send(&mut c, &slow, "take your time").await;
    common::eventually("the slow turn to start", || {
        let mut c = c.clone();
        let slow = slow.clone();
        async move {
            let run = common::get_agent(&mut c, &slow).await.current_run_id;
            (!run.is_empty()).then_some(())
        }
    })
    .await;

    let Some(tmux) = top_in_tmux(&daemon, "abort") else {
        return;
    };
    // The busiest table has the focus, its first row selected.
    tmux.until("the busy agent selected", |s| {
        s.contains("busiest agents (1)") && s.contains("> slow ")
    })
    .await;
    tmux.keys("a");
    let named = format!("slow ({})", &slow[slow.len() - 6..]);
    tmux.until("the abort notice", |s| {
        s.contains(&format!("aborted the turn of {named}"))
    })
    .await;
    let status = common::eventually("the message aborted", || {
        let mut c = c.clone();
        let (slow, message) = (slow.clone(), message.clone());
        async move {
            let all = common::messages(&mut c, &slow).await;
            let status = all.iter().find(|m| m.message_id == message)?.status;
            (status != pb::MessageStatus::Handling as i32).then_some(status)
        }
    })
    .await;
    assert_eq!(status, pb::MessageStatus::Aborted as i32);
    let summary = common::get_agent(&mut c, &slow).await;
    assert_eq!(summary.state, pb::LifecycleState::Paused as i32);
    assert!(summary.current_run_id.is_empty(), "{summary:?}");
    // Still among the busiest (by turns a minute), its run gone, paused.
    tmux.until("the turn gone from the view", |s| {
        s.contains("turns running 0")
            && s.lines()
                .any(|l| l.contains("> slow ") && l.contains(" paused "))
    })
    .await;

    // The daemon stops: said and retried. Started again on the same data
    // directory (the same socket): the view is live again by itself, and
    // shows what happens on the new daemon.
    drop(c);
    let stopped = daemon.terminate(Duration::from_secs(20)).await;
    assert!(stopped.success(), "{stopped}");
    tmux.until("the disconnected line", |s| {
        s.contains("disconnected from the daemon, retrying")
    })
    .await;
    let daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;
    send(&mut c, &slow, "after the restart").await;
    tmux.until("the view back with the new daemon's queue", |s| {
        !s.contains("disconnected")
            && s.contains("longest queues (1)")
            && s.lines()
                .any(|l| l.contains("slow ") && l.contains(&slow[slow.len() - 6..]))
    })
    .await;
    tmux.keys("q");
}
