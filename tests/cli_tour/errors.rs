//! What the CLI says when a command fails: where it looked and what to do,
//! each cause once, nothing on stdout, an exit code by kind of failure
//! (docs/operations.md, "Exit codes"), and JSON on stderr under `--json`.
//! And the ways a message's text is given: as typed, `-` for stdin,
//! `@FILE`, with a warning for JSON that does not parse.

use serde_json::Value;

use crate::cli::{handled, text, until, Holarchy, Run};
use crate::common::{data_dir, Daemon};

/// The exit codes docs/operations.md documents.
const UNAVAILABLE: i32 = 3;
const NOT_FOUND: i32 = 4;
const DENIED: i32 = 5;
const INVALID: i32 = 6;
const PRECONDITION: i32 = 7;

/// A failed run: its exit code, nothing on stdout, and its stderr.
fn failed(run: &Run, code: i32) -> String {
    assert_eq!(
        run.status.code(),
        Some(code),
        "exit code; stderr:\n{}",
        run.stderr
    );
    assert_eq!(run.stdout, "", "nothing on stdout when a command fails");
    run.stderr.clone()
}

/// The one JSON object a failed `--json` run writes to stderr.
fn json_error(run: &Run) -> Value {
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line of JSON: {}", run.stderr);
    let value: Value = serde_json::from_str(lines[0]).expect("stderr is JSON");
    value["error"].clone()
}

/// Where the daemon serves TCP, once its log says so (the line may come
/// just after the socket answers).
fn tcp_addr(daemon: &Daemon) -> String {
    until("the daemon to log its tcp address", || {
        daemon
            .log()
            .lines()
            .filter(|l| l.contains("listening on tcp"))
            .find_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("addr=")))
            .map(str::to_owned)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_daemon_the_cli_says_how_to_start_one_and_exits_unavailable() {
    let root = tempfile::tempdir().expect("tempdir");
    let nowhere = root.path().join("nowhere");
    let cli = Holarchy::data_dir(&nowhere);

    let said = failed(&cli.run(&["agent", "list"]), UNAVAILABLE);
    let socket = nowhere.join("holarchy.sock");
    assert!(
        said.contains(&format!("cannot reach the daemon at {}", socket.display())),
        "{said}"
    );
    assert!(
        said.contains(&format!("holarchy serve --data-dir {}", nowhere.display())),
        "says how to start it: {said}"
    );
    assert_eq!(
        said.matches("No such file or directory").count(),
        1,
        "each cause once: {said}"
    );

    let error = json_error(&cli.run(&["--json", "status"]));
    assert_eq!(error["kind"], "unavailable");
    assert_eq!(error["exit_code"], UNAVAILABLE);
    assert!(text(&error, "hint").contains("holarchy serve"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_takes_host_port_and_the_data_dirs_token_and_https_needs_a_tls_daemon() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start_with(&data_dir(&root), &["--listen", "127.0.0.1:0"]).await;
    let addr = tcp_addr(&daemon);

    // HOST:PORT, no scheme, and the token read from <data-dir>/token.
    let local = Holarchy::data_dir(&daemon.data_dir).with_flags(&["--addr", &addr]);
    assert!(local.ok(&["agent", "list"]).starts_with("NAME"));
    let status = local.json_one(&["status"]);
    assert_eq!(status["pid"], daemon.pid());

    // https:// to a daemon serving plain text: the handshake fails before
    // any call, so the token never leaves; the CLI says it cannot reach it.
    let tls = format!("https://{addr}");
    let refused = failed(
        &Holarchy::data_dir(&daemon.data_dir).run(&["--addr", &tls, "status"]),
        UNAVAILABLE,
    );
    assert!(refused.contains("cannot reach the daemon"), "{refused}");
    // --ca means TLS: with a plain-text address it is refused outright.
    let ca = root.path().join("ca.pem");
    std::fs::write(&ca, "not read").expect("writes");
    let refused = failed(
        &Holarchy::data_dir(&daemon.data_dir).run(&[
            "--addr",
            &addr,
            "--ca",
            ca.to_str().expect("utf-8"),
            "status",
        ]),
        INVALID,
    );
    assert!(refused.contains("--addr https://"), "{refused}");

    // A wrong token: refused, nothing printed (no table header), and a
    // hint where the right one lives.
    let wrong = Holarchy::tcp_flags(&addr, "not-the-token-at-all");
    let said = failed(&wrong.run(&["agent", "list"]), DENIED);
    assert!(said.contains("unauthenticated"), "{said}");
    assert!(said.contains("<data-dir>/token"), "{said}");
    let error = json_error(&wrong.run(&["--json", "agent", "list"]));
    assert_eq!(error["kind"], "denied");
    assert_eq!(error["grpc_code"], "unauthenticated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_kind_of_refusal_has_its_own_exit_code() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);

    let missing = failed(&cli.run(&["agent", "get", "nobody"]), NOT_FOUND);
    assert!(missing.contains("not found"), "{missing}");
    let error = json_error(&cli.run(&["--json", "agent", "get", "nobody"]));
    assert_eq!(
        (error["kind"].as_str(), error["exit_code"].as_i64()),
        (Some("not_found"), Some(i64::from(NOT_FOUND)))
    );

    cli.ok(&["agent", "create", "twice"]);
    let taken = failed(&cli.run(&["agent", "create", "twice"]), PRECONDITION);
    assert!(taken.contains("already exists"), "{taken}");
    assert!(
        taken.contains("holarchy agent delete"),
        "says what frees it: {taken}"
    );

    failed(&cli.run(&["task", "get", "not-a-task-id"]), INVALID);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_comes_from_stdin_or_a_file_and_broken_json_is_warned() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    cli.ok(&["agent", "create", "reader"]);

    let piped = cli.run_with_stdin(&["agent", "send", "reader", "-"], "from a pipe\n");
    assert!(piped.status.success(), "{}", piped.stderr);
    let file = root.path().join("note.txt");
    std::fs::write(&file, "from a file").expect("written");
    let at_file = format!("@{}", file.display());
    cli.ok(&["agent", "send", "reader", &at_file]);
    let missing = failed(
        &cli.run(&["agent", "send", "reader", "@/no/such/file"]),
        NOT_FOUND,
    );
    assert!(
        missing.contains("@@"),
        "says how to send a literal @: {missing}"
    );

    let broken = cli.run(&["agent", "send", "reader", r#"{"reply":"on it""#]);
    assert!(broken.status.success(), "sent anyway: {}", broken.stderr);
    assert!(
        broken.stderr.contains("looks like JSON but does not parse"),
        "{}",
        broken.stderr
    );
    let fine = cli.run(&["agent", "send", "reader", r#"{"reply":"on it"}"#]);
    assert_eq!(fine.stderr, "", "valid JSON is not warned about");

    let all = handled(&cli, "reader", 4);
    let texts: Vec<&str> = all.iter().map(|m| text(m, "text")).collect();
    assert_eq!(
        texts,
        [
            "from a pipe\n",
            "from a file",
            r#"{"reply":"on it""#,
            r#"{"reply":"on it"}"#
        ]
    );
}
