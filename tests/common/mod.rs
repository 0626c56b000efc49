//! Helpers for black-box tests: start the real `holarchy` binary on a
//! temporary data directory, wait for it to report SERVING, connect the
//! generated tonic clients, and kill or stop it.

#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use holarchy::api::pb;
use holarchy::client::{self, Clients, Target};
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{health_check_response::ServingStatus, HealthCheckRequest};

pub mod contract;
pub mod http;
pub mod installed;
#[path = "../support/postgres.rs"]
pub mod pg_server;
pub mod reflect;
pub mod runner;
pub mod workspaces;

pub const DEADLINE: Duration = Duration::from_secs(30);

/// A running daemon. Dropping it kills the process.
pub struct Daemon {
    child: Option<Child>,
    pub data_dir: PathBuf,
}

impl Daemon {
    /// Starts `holarchy serve` on `data_dir` with extra arguments and waits
    /// until its health service reports SERVING.
    pub async fn start_with(data_dir: &Path, extra: &[&str]) -> Daemon {
        Self::start_with_env(data_dir, extra, &[]).await
    }

    /// As `start_with`, with extra environment variables for the daemon.
    pub async fn start_with_env(data_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Daemon {
        Self::start_under(&[], data_dir, extra, env).await
    }

    /// As `start_with_env`, started by `wrapper` (a program and its
    /// arguments that `exec`s the rest of its command line, as `nohup`
    /// does), so the daemon inherits what the wrapper sets up.
    pub async fn start_under(
        wrapper: &[&str],
        data_dir: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Daemon {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(data_dir.with_extension("log"))
            .expect("daemon log opens");
        let holarchy = env!("CARGO_BIN_EXE_holarchy");
        let mut command = match wrapper.split_first() {
            None => Command::new(holarchy),
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(holarchy);
                command
            }
        };
        command
            .arg("serve")
            .arg("--data-dir")
            .arg(data_dir)
            .args(extra);
        // A test that names its own store keeps it.
        if !extra.contains(&"--store") {
            if let Some(database) = pg_server::store_for(data_dir).await {
                command.arg("--store").arg(database);
            }
        }
        let child = command
            // The caller's shell must not point the daemon elsewhere or
            // hand it a token the test does not know.
            .env_remove("HOLARCHY_TOKEN")
            .env_remove("HOLARCHY_DATA_DIR")
            .env_remove("HOLARCHY_STORE")
            .env_remove("HOLARCHY_STORE_PASSWORD")
            .envs(env.iter().copied())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("holarchy binary starts");
        let mut daemon = Daemon {
            child: Some(child),
            data_dir: data_dir.to_owned(),
        };
        daemon.wait_serving().await;
        daemon
    }

    pub async fn start(data_dir: &Path) -> Daemon {
        Self::start_with(data_dir, &[]).await
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).expect("daemon running")
    }

    pub fn socket(&self) -> PathBuf {
        self.data_dir.join("holarchy.sock")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.with_extension("log")).unwrap_or_default()
    }

    async fn wait_serving(&mut self) {
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("daemon exited early with {status}:\n{}", self.log());
                }
            }
            if let Ok(channel) = client::channel(&Target::Unix(self.socket())).await {
                let reply = HealthClient::new(channel)
                    .check(HealthCheckRequest {
                        service: String::new(),
                    })
                    .await;
                if let Ok(reply) = reply {
                    if reply.into_inner().status == ServingStatus::Serving as i32 {
                        return;
                    }
                }
            }
            assert!(
                started.elapsed() < DEADLINE,
                "daemon not serving in time:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `holarchy <args>` over the daemon's socket: its stdout, after
    /// checking it succeeded.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_holarchy"))
            .arg("--socket")
            .arg(self.socket())
            .args(args)
            .output()
            .expect("the CLI runs");
        assert!(
            out.status.success(),
            "holarchy {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8")
    }

    /// The bearer token the daemon wrote to `<data-dir>/token`.
    pub fn token(&self) -> String {
        std::fs::read_to_string(self.data_dir.join("token")).expect("token written")
    }

    pub async fn clients(&self) -> Clients {
        client::connect(&Target::Unix(self.socket()))
            .await
            .expect("connects")
    }

    /// Clients, or `None` while the daemon does not listen.
    pub async fn clients_now(&self) -> Option<Clients> {
        client::connect(&Target::Unix(self.socket())).await.ok()
    }

    /// Whether the process is still alive.
    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// `kill -9`: no shutdown code runs.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("SIGKILL delivered");
            child.wait().expect("reaped");
        }
    }

    /// SIGTERM, then waits for the exit (at most `within`).
    pub async fn terminate(&mut self, within: Duration) -> ExitStatus {
        self.sigterm();
        self.wait_exit(within).await
    }

    /// Sends SIGTERM: a graceful shutdown begins.
    pub fn sigterm(&self) {
        let sent = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status()
            .expect("kill runs");
        assert!(sent.success());
    }

    /// Waits for the daemon to exit (at most `within`); kills it and
    /// panics past that.
    pub async fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let mut child = self.child.take().expect("daemon running");
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait().expect("waits") {
                return status;
            }
            if started.elapsed() > within {
                let _ = child.kill();
                panic!(
                    "daemon did not exit within {within:?} of SIGTERM:\n{}",
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A loopback address with a port free right now.
pub fn free_addr() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("free port")
        .local_addr()
        .expect("addr")
        .port();
    format!("127.0.0.1:{port}")
}

/// Clients over TCP to `listen` (`host:port`), with `token` if any.
pub async fn tcp_clients(listen: &str, token: Option<&str>) -> Clients {
    client::connect(&Target::Tcp {
        url: format!("http://{listen}"),
        token: token.map(str::to_owned),
        tls: Default::default(),
    })
    .await
    .expect("connects")
}

/// The daemon's `GetStatus`.
pub async fn status(c: &mut Clients) -> pb::GetStatusResponse {
    c.runtime
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("status")
        .into_inner()
}

/// Polls a synchronous `check` (in-process tests) until it holds, or
/// panics after the deadline.
pub async fn until<F: FnMut() -> bool>(what: &str, mut check: F) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A fresh data directory inside a temporary folder that outlives restarts.
pub fn data_dir(root: &tempfile::TempDir) -> PathBuf {
    root.path().join("data")
}

/// Polls `check` until it returns `Some`, or panics after the deadline.
pub async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_within(what, DEADLINE, check).await
}

/// [`eventually`] with a deadline of its own, for a wait on a volume of
/// work (thousands of turns) whose time depends on how busy the machine
/// is: the test checks that the work is done, not how fast.
pub async fn eventually_within<T, F, Fut>(what: &str, deadline: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(started.elapsed() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn create(clients: &mut Clients, name: &str, initial: Option<&str>) -> String {
    clients
        .agents
        .create_agent(pb::CreateAgentRequest {
            context_tokens: None,
            mcp_servers: Vec::new(),
            network: String::new(),
            name: name.into(),
            initial_message: initial.map(str::to_owned),
            brain: None,
            labels: Default::default(),
        })
        .await
        .expect("agent created")
        .into_inner()
        .agent_id
}

pub async fn send(clients: &mut Clients, agent_id: &str, text: &str) -> String {
    clients
        .agents
        .send_message(pb::SendMessageRequest {
            agent_id: agent_id.into(),
            text: text.into(),
            dedupe_key: String::new(),
        })
        .await
        .expect("message accepted")
        .into_inner()
        .message_id
}

pub async fn messages(clients: &mut Clients, agent_id: &str) -> Vec<pb::Message> {
    message_pages(clients, agent_id)
        .await
        .into_iter()
        .flat_map(|page| page.messages)
        .collect()
}

/// Every page of the agent's messages, following page tokens.
pub async fn message_pages(clients: &mut Clients, agent_id: &str) -> Vec<pb::ListMessagesResponse> {
    let mut pages = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = clients
            .agents
            .list_messages(pb::ListMessagesRequest {
                agent_id: agent_id.into(),
                page_size: 1000,
                page_token,
            })
            .await
            .expect("messages listed")
            .into_inner();
        page_token = page.next_page_token.clone();
        pages.push(page);
        if page_token.is_empty() {
            return pages;
        }
    }
}

/// Waits until the agent has at least `count` messages, all handled.
pub async fn handled(clients: &Clients, agent_id: &str, count: usize) -> Vec<pb::Message> {
    eventually("messages handled", || {
        let mut clients = clients.clone();
        let agent_id = agent_id.to_owned();
        async move {
            let all = messages(&mut clients, &agent_id).await;
            let done = all.len() >= count
                && all
                    .iter()
                    .all(|m| m.status == pb::MessageStatus::Handled as i32);
            done.then_some(all)
        }
    })
    .await
}

/// Every event after `after`, without following.
pub async fn events(clients: &mut Clients, after: u64) -> Vec<pb::Event> {
    use tokio_stream::StreamExt;
    let mut stream = clients
        .agents
        .watch_events(pb::WatchEventsRequest {
            after_cursor: after,
            follow: false,
            agent_id: String::new(),
        })
        .await
        .expect("watch opens")
        .into_inner();
    let mut out = Vec::new();
    while let Some(event) = stream.next().await {
        out.push(event.expect("event"));
    }
    out
}

/// An agent's summary, by id.
pub async fn get_agent(c: &mut Clients, agent_id: &str) -> pb::AgentSummary {
    get_agent_result(c, agent_id).await.agent.expect("summary")
}

/// GetAgent's whole answer: the summary and what its memory holds.
pub async fn get_agent_result(c: &mut Clients, agent_id: &str) -> pb::AgentGetResult {
    c.agents
        .get_agent(pb::GetAgentRequest {
            agent: Some(pb::get_agent_request::Agent::AgentId(agent_id.into())),
        })
        .await
        .expect("agent")
        .into_inner()
}

/// The task handle behind `task_id`; panics if the daemon does not know it.
pub async fn get_task(c: &mut Clients, task_id: &str) -> pb::TaskHandle {
    c.tasks
        .get_task(pb::GetTaskRequest {
            task_id: task_id.into(),
        })
        .await
        .expect("task")
        .into_inner()
}

/// Creates a public agent `name` on `brain` and returns its id.
pub async fn create_on(clients: &mut Clients, name: &str, brain: pb::BrainConfig) -> String {
    clients
        .agents
        .create_agent(pb::CreateAgentRequest {
            context_tokens: None,
            mcp_servers: Vec::new(),
            network: String::new(),
            name: name.into(),
            initial_message: None,
            brain: Some(brain),
            labels: Default::default(),
        })
        .await
        .expect("created")
        .into_inner()
        .agent_id
}

/// A command brain running `program args`, with a 20 s step timeout.
pub fn command_brain(program: &str, args: &[&str]) -> pb::BrainConfig {
    pb::BrainConfig {
        kind: Some(pb::brain_config::Kind::Command(pb::CommandBrain {
            program: program.into(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: Default::default(),
            timeout_ms: 20_000,
        })),
    }
}

/// A scripted-brain message making these tool calls.
pub fn script(calls: serde_json::Value) -> String {
    serde_json::json!({ "tool_calls": calls }).to_string()
}

/// The agent's latest call of `tool`: whether it failed, and its output
/// as JSON.
pub async fn tool_call(c: &mut Clients, agent_id: &str, tool: &str) -> (bool, serde_json::Value) {
    let detail: serde_json::Value = events(c, 0)
        .await
        .iter()
        .rev()
        .find(|e| e.kind == "tool_called" && e.agent_id == agent_id && e.text == tool)
        .map(|e| serde_json::from_str(&e.detail_json).expect("detail is JSON"))
        .unwrap_or_else(|| panic!("{agent_id} never called {tool}"));
    let output = detail["output"].as_str().expect("output text");
    let output = serde_json::from_str(output).expect("output JSON");
    (detail["is_error"] == true, output)
}

/// The output (as JSON) of the agent's latest call of `tool`, which must
/// have succeeded.
pub async fn tool_output(c: &mut Clients, agent_id: &str, tool: &str) -> serde_json::Value {
    let (failed, output) = tool_call(c, agent_id, tool).await;
    assert!(!failed, "{tool} failed: {output}");
    output
}

/// Runs `command` through the agent's ExecCommand (waiting up to
/// `yield_ms`) and returns the tool's output.
pub async fn exec(c: &mut Clients, agent: &str, command: &str, yield_ms: u64) -> serde_json::Value {
    let before = messages(c, agent).await.len();
    let script = serde_json::json!({ "tool_calls": [{ "name": "ExecCommand", "input": { "command": command, "yield_ms": yield_ms } }] });
    send(c, agent, &script.to_string()).await;
    handled(c, agent, before + 1).await;
    tool_output(c, agent, "ExecCommand").await
}

/// Processes whose command line contains `marker`.
pub fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(marker) {
                found.push(format!(
                    "{}: {cmdline}",
                    entry.file_name().to_string_lossy()
                ));
            }
        }
    }
    found
}

/// The key of `message` of `agent` in the sled store's `messages` tree:
/// what a test that damages a record on disk looks up.
pub fn sled_message_key(agent: &str, message: &str) -> Vec<u8> {
    let mut key = agent
        .parse::<holarchy_supervision::AgentId>()
        .expect("agent id")
        .to_bytes()
        .to_vec();
    key.extend_from_slice(
        &message
            .parse::<holarchy_supervision::MessageId>()
            .expect("message id")
            .to_bytes(),
    );
    key
}

/// Applies an instance manifest (no files) and returns its agent's id.
pub async fn apply_instance(c: &mut Clients, manifest: &str) -> String {
    c.instances
        .apply_instance(pb::ApplyInstanceRequest {
            manifest: manifest.to_owned(),
            files: Default::default(),
        })
        .await
        .expect("instance applied")
        .into_inner()
        .instance
        .and_then(|i| i.agent)
        .expect("the instance's agent")
        .agent_id
}

/// Checks the `SigBlk:` and `SigIgn:` lines of a program's
/// `/proc/self/status` (as `what` reported them): nothing blocked, and
/// none of the signals that stop or end a program ignored, so `kill` and
/// `timeout(1)` work inside it.
pub fn assert_signals_reset(what: &str, lines: &str) {
    let mask = |name: &str| {
        let line = lines
            .lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .unwrap_or_else(|| panic!("{what}: no `{name}` line in {lines:?}"));
        u64::from_str_radix(line.trim(), 16)
            .unwrap_or_else(|_| panic!("{what}: `{name}` is not hex in {lines:?}"))
    };
    assert_eq!(
        mask("SigBlk:"),
        0,
        "{what} starts with signals blocked: {lines}"
    );
    // Bit n - 1 stands for signal n.
    let ending = [
        signal_bit(1),
        signal_bit(2),
        signal_bit(3),
        signal_bit(15),
        signal_bit(17),
    ];
    let ignored = mask("SigIgn:");
    assert!(
        ending.iter().all(|bit| ignored & bit == 0),
        "{what} starts with HUP, INT, QUIT, TERM or CHLD ignored: {lines}"
    );
}

fn signal_bit(signal: u32) -> u64 {
    1 << (signal - 1)
}

/// The status code of `GET /readyz` on the daemon's HTTP listener.
pub async fn readyz(addr: &str) -> u16 {
    http_status(addr, "GET", "/readyz").await
}

/// The status code of a bodiless `method path` on the daemon's HTTP
/// listener.
pub async fn http_status(addr: &str, method: &str, path: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("asks");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("answer");
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

/// How many command tasks `agent` has started, running or ended.
pub async fn command_tasks(c: &mut Clients, agent: &str) -> usize {
    c.tasks
        .list_tasks(pb::ListTasksRequest {
            agent_id: agent.into(),
            page_size: 100,
            page_token: String::new(),
        })
        .await
        .expect("tasks")
        .into_inner()
        .tasks
        .iter()
        .filter(|t| t.task_kind == "command")
        .count()
}
