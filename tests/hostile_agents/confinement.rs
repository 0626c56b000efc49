//! Hostile agents: commands that try to leave their confinement. Each test
//! pins one promise of docs/security.md ("What a program may touch" and the
//! `serve` flags that bound it) so that removing the rule that keeps it, a
//! Landlock scope, a path rule, a flag's check, fails here.

use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::json;

use crate::common::{
    create, data_dir, exec, get_task, handled, script, send, status, tool_call, Daemon, DEADLINE,
};

/// The text a command printed before `exec` returned.
fn initial_output(out: &serde_json::Value) -> &str {
    out["task_handle"]["initial_output"]
        .as_str()
        .unwrap_or_else(|| panic!("no output: {out}"))
}

/// Landlock's signal scope needs ABI 6; below it the promise is not made
/// (docs/security.md), so a test of it must not pass by accident there.
async fn assert_fully_confined(c: &mut Clients) {
    let status = status(c).await;
    assert!(
        status.sandbox_landlock_abi >= 6,
        "this kernel cannot scope signals, so the promise cannot be checked: {}",
        status.sandbox
    );
}

/// A command can signal neither the daemon nor the processes of another
/// task (of another agent): Landlock's signal scope stops both at the
/// domain's edge, even for a program running as the daemon's user or root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_can_signal_neither_the_daemon_nor_another_tasks_processes() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    assert_fully_confined(&mut c).await;
    let victim = create(&mut c, "victim", None).await;
    let attacker = create(&mut c, "attacker", None).await;

    let out = exec(&mut c, &victim, "echo pid=$$; exec sleep 60", 500).await;
    let task_id = out["task_handle"]["task_id"]
        .as_str()
        .expect("task id")
        .to_owned();
    let pid: u32 = initial_output(&out)
        .trim()
        .strip_prefix("pid=")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid: {out}"));

    // Signal 0 asks the kernel the same permission question as any other
    // signal without ending the daemon should it be let through.
    let daemon_pid = daemon.pid();
    let probe =
        format!("exec 2>&1; kill -0 {daemon_pid}; echo daemon=$?; kill -KILL {pid}; echo task=$?");
    let out = exec(&mut c, &attacker, &probe, 10_000).await;
    let text = initial_output(&out);
    for line in ["daemon=1", "task=1"] {
        assert!(text.contains(line), "a signal got through ({line}): {text}");
    }
    assert_eq!(text.matches("Operation not permitted").count(), 2, "{text}");
    // The signals were refused, not lost: the victim still runs, and so
    // does the daemon that answers.
    assert!(
        Path::new(&format!("/proc/{pid}")).exists(),
        "the victim's process is gone"
    );
    assert_eq!(get_task(&mut c, &task_id).await.status, "running");
}

/// `--task-wall-time`: a command that runs past it is killed, whole, and
/// its output says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_past_its_wall_time_is_killed_and_says_why() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with(&data_dir(&root), &["--task-wall-time", "1"]).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "overrunner", None).await;
    let started = Instant::now();
    let out = exec(&mut c, &id, "echo started; sleep 30; echo finished", 200).await;
    let task_id = out["task_handle"]["task_id"].as_str().expect("task id");
    // Well before the command's own end (30 s), however slow the machine.
    let ended = loop {
        let task = get_task(&mut c, task_id).await;
        if task.status != "running" {
            break task;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "still running past its wall time: {task:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(ended.status, "failed", "{ended:?}");
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
    assert!(text.contains("started"), "{text}");
    assert!(!text.contains("finished"), "{text}");
    assert!(
        text.contains("ran past its wall time of 1000 ms and was killed"),
        "the reason is not in the output: {text}"
    );
}

/// A pseudo-terminal of the test's own: the master, and the slave's path.
/// A confined command must not write to the slave, as it must not to an
/// operator's terminal.
#[allow(unsafe_code)]
fn open_pty() -> (std::fs::File, PathBuf) {
    // SAFETY: plain libc calls on a descriptor this function owns; the
    // name buffer outlives `ptsname_r`, which writes at most its length.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_NONBLOCK);
        assert!(master >= 0, "posix_openpt failed");
        let file = std::fs::File::from(OwnedFd::from_raw_fd(master));
        assert_eq!(libc::grantpt(master), 0, "grantpt");
        assert_eq!(libc::unlockpt(master), 0, "unlockpt");
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(
            libc::ptsname_r(master, name.as_mut_ptr(), name.len()),
            0,
            "ptsname_r"
        );
        let name = std::ffi::CStr::from_ptr(name.as_ptr());
        (file, PathBuf::from(name.to_string_lossy().into_owned()))
    }
}

/// The places every process of the machine shares, tried directly: the
/// shared temporary directory, shared memory, the controlling terminal and
/// a terminal's slave. Each is refused by Landlock (Permission denied), not
/// by chance (a missing file, a process without a terminal), and nothing
/// lands there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_cannot_write_to_shared_temp_shared_memory_or_terminals() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "leaker", None).await;
    let (mut master, slave) = open_pty();
    let marker = format!("holarchy-leak-{}", std::process::id());
    let tmp = Path::new("/tmp").join(&marker);
    let shm = Path::new("/dev/shm").join(&marker);
    let targets = [
        tmp.clone(),
        shm.clone(),
        PathBuf::from("/dev/tty"),
        slave.clone(),
    ];
    let probe: String = targets
        .iter()
        .map(|t| format!("(echo leaked > {}) 2>&1; echo \"rc=$?\"; ", t.display()))
        .chain(["echo end".to_owned()])
        .collect();
    let out = exec(&mut c, &id, &probe, 10_000).await;
    let text = initial_output(&out);
    assert!(text.ends_with("end\n"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let mut open = Vec::new();
    for target in &targets {
        let path = target.display().to_string();
        // The shell's error for this target, and the status after it.
        let at = lines.iter().position(|l| l.contains(&format!("{path}:")));
        let refused = at.is_some_and(|at| {
            lines[at].ends_with("Permission denied")
                && lines.get(at + 1).is_some_and(|rc| *rc != "rc=0")
        });
        if !refused {
            open.push(path);
        }
    }
    assert!(open.is_empty(), "not refused by Landlock: {open:?}\n{text}");
    assert!(!tmp.exists(), "{} was written", tmp.display());
    assert!(!shm.exists(), "{} was written", shm.display());
    let mut buf = [0u8; 64];
    match master.read(&mut buf) {
        Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the terminal {} got something: {other:?}", slave.display()),
    }
}

/// Runs `holarchy serve` where Landlock's syscalls answer ENOSYS (a seccomp
/// filter set in the child before `exec`), as on a kernel without Landlock.
/// Returns the child and its log's path.
#[allow(unsafe_code)]
fn serve_without_landlock(dir: &Path, args: &[&str]) -> (std::process::Child, PathBuf) {
    use std::os::unix::process::CommandExt;
    // landlock_create_ruleset: the same number on every architecture.
    const LANDLOCK_CREATE_RULESET: u32 = 444;
    let program = [
        // Load the syscall number (offset 0 of seccomp_data).
        libc::sock_filter {
            code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
            jt: 0,
            jf: 0,
            k: 0,
        },
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: LANDLOCK_CREATE_RULESET,
        },
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
        },
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ALLOW,
        },
    ];
    let log = dir.with_extension("serve.log");
    let mut command = Command::new(env!("CARGO_BIN_EXE_holarchy"));
    command
        .arg("serve")
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .env_remove("HOLARCHY_TOKEN")
        .env_remove("HOLARCHY_DATA_DIR")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log file"));
    // SAFETY: between fork and exec the closure makes two `prctl` calls
    // (async-signal-safe) on a filter built before the fork, and allocates
    // nothing.
    unsafe {
        command.pre_exec(move || {
            let filter = libc::sock_fprog {
                len: program.len() as u16,
                filter: program.as_ptr().cast_mut(),
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &filter as *const libc::sock_fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    (command.spawn().expect("holarchy starts"), log)
}

/// Waits for `child` to exit, or for its log to show `line`; kills it
/// then. Returns whether it exited and its log.
fn exit_or_line(mut child: std::process::Child, log: &Path, line: &str) -> (bool, String) {
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(status) = child.try_wait().expect("waits") {
            return (!status.success(), text);
        }
        if text.contains(line) || started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            return (false, text);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `--require-sandbox` refuses to start where agents' programs could not be
/// confined; without it the same daemon starts and warns.
#[test]
fn require_sandbox_refuses_a_kernel_without_landlock() {
    let root = tempfile::tempdir().expect("tempdir");
    let serving = "runtime recovered";
    let (child, log) = serve_without_landlock(&root.path().join("plain"), &[]);
    let (refused, text) = exit_or_line(child, &log, serving);
    assert!(!refused && text.contains(serving), "{text}");
    assert!(
        text.contains("not fully confined") && text.contains("has no Landlock"),
        "the filter did not hide Landlock, so nothing is tried: {text}"
    );

    let (child, log) = serve_without_landlock(&root.path().join("strict"), &["--require-sandbox"]);
    let (refused, text) = exit_or_line(child, &log, serving);
    assert!(refused, "started without a sandbox: {text}");
    assert!(
        text.contains("--require-sandbox: agents' programs cannot be fully confined"),
        "{text}"
    );
}

/// An operator's `AttachWorkspace` of `path`: `Ok` or the refusal's code
/// and message.
async fn attach(c: &mut Clients, agent: &str, path: &Path) -> Result<(), (tonic::Code, String)> {
    c.workspaces
        .attach_workspace(pb::AttachWorkspaceRequest {
            agent_id: agent.into(),
            path: path.display().to_string(),
            workspace_id: String::new(),
        })
        .await
        .map(drop)
        .map_err(|s| (s.code(), s.message().to_owned()))
}

/// An agent's own `AttachWorkspace` of `path`: whether it failed, and its
/// output.
async fn agent_attach(c: &mut Clients, agent: &str, path: &Path, turn: usize) -> (bool, String) {
    let call =
        json!([{ "name": "AttachWorkspace", "input": { "path": path.display().to_string() } }]);
    send(c, agent, &script(call)).await;
    handled(c, agent, turn).await;
    let (failed, out) = tool_call(c, agent, "AttachWorkspace").await;
    (failed, out.to_string())
}

fn made(dir: PathBuf) -> PathBuf {
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::canonicalize(dir).expect("canonical")
}

/// `--workspace-allow DIR`: workspaces only beneath it, for operators and
/// agents alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspace_allow_keeps_workspaces_beneath_its_directories() {
    let root = tempfile::tempdir().expect("tempdir");
    let allowed = made(root.path().join("allowed"));
    let inside = made(allowed.join("project"));
    let outside = made(root.path().join("elsewhere"));
    let daemon = Daemon::start_with(
        &data_dir(&root),
        &["--workspace-allow", &allowed.display().to_string()],
    )
    .await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "mover", None).await;

    let (code, message) = attach(&mut c, &id, &outside)
        .await
        .expect_err("attached outside the allowed directory");
    assert_eq!(code, tonic::Code::PermissionDenied, "{message}");
    assert!(message.contains("--workspace-allow"), "{message}");
    let (failed, out) = agent_attach(&mut c, &id, &outside, 1).await;
    assert!(failed && out.contains("--workspace-allow"), "{out}");

    attach(&mut c, &id, &inside)
        .await
        .expect("a directory beneath the allowed one attaches");
    let (failed, out) = agent_attach(&mut c, &id, &allowed, 2).await;
    assert!(!failed, "{out}");
}

/// `--protect PATH`: no workspace may be the path, lie inside it or hold
/// it; its siblings stay free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protect_keeps_workspaces_off_the_path_its_insides_and_its_ancestors() {
    let root = tempfile::tempdir().expect("tempdir");
    let parent = made(root.path().join("config"));
    let protected = made(parent.join("secrets"));
    let inside = made(protected.join("keys"));
    let sibling = made(parent.join("public"));
    let daemon = Daemon::start_with(
        &data_dir(&root),
        &["--protect", &protected.display().to_string()],
    )
    .await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "grabber", None).await;

    for (n, path) in [&protected, &inside, &parent].into_iter().enumerate() {
        let (code, message) = attach(&mut c, &id, path)
            .await
            .expect_err("attached a protected path");
        assert_eq!(code, tonic::Code::PermissionDenied, "{message}");
        assert!(message.contains("daemon's own files"), "{message}");
        let (failed, out) = agent_attach(&mut c, &id, path, n + 1).await;
        assert!(failed && out.contains("daemon's own files"), "{out}");
    }
    attach(&mut c, &id, &sibling)
        .await
        .expect("a sibling of the protected path attaches");
}
