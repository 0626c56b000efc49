//! Runs the `holarchy` binary as a CLI client, the way an operator types
//! it: by socket (`--data-dir` or `HOLARCHY_DATA_DIR`) or by TCP (`--addr`
//! and `--token`, or their variables), and reads what it prints.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::DEADLINE;

/// The variables the CLI reads; cleared for every run so a test talks
/// only to the daemon it names, whatever the environment of `cargo test`.
const CLIENT_VARIABLES: [&str; 4] = [
    "HOLARCHY_DATA_DIR",
    "HOLARCHY_SOCKET",
    "HOLARCHY_ADDR",
    "HOLARCHY_TOKEN",
];

/// How the client reaches its daemon: leading flags and variables.
#[derive(Clone, Debug, Default)]
pub struct Holarchy {
    flags: Vec<OsString>,
    env: Vec<(&'static str, OsString)>,
}

/// What one run of the client did.
#[derive(Debug)]
pub struct Run {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Holarchy {
    /// Through the daemon's Unix socket, named by `--data-dir`.
    pub fn data_dir(dir: &Path) -> Self {
        Self {
            flags: vec!["--data-dir".into(), dir.into()],
            env: Vec::new(),
        }
    }

    /// Through the daemon's Unix socket, named by `HOLARCHY_DATA_DIR`.
    pub fn data_dir_variable(dir: &Path) -> Self {
        Self {
            flags: Vec::new(),
            env: vec![("HOLARCHY_DATA_DIR", dir.into())],
        }
    }

    /// Over TCP, with `--addr` and `--token`.
    pub fn tcp_flags(url: &str, token: &str) -> Self {
        Self {
            flags: vec!["--addr".into(), url.into(), "--token".into(), token.into()],
            env: Vec::new(),
        }
    }

    /// Over TCP, with `HOLARCHY_ADDR` and `HOLARCHY_TOKEN`.
    pub fn tcp_variables(url: &str, token: &str) -> Self {
        Self {
            flags: Vec::new(),
            env: vec![
                ("HOLARCHY_ADDR", url.into()),
                ("HOLARCHY_TOKEN", token.into()),
            ],
        }
    }

    /// With more leading flags.
    pub fn with_flags(mut self, flags: &[&str]) -> Self {
        self.flags.extend(flags.iter().map(OsString::from));
        self
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_holarchy"));
        for name in CLIENT_VARIABLES {
            command.env_remove(name);
        }
        command
            .args(&self.flags)
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null());
        command
    }

    /// Runs `holarchy <args>` to its end.
    pub fn run(&self, args: &[&str]) -> Run {
        let out = self
            .command(args)
            .output()
            .expect("the holarchy binary runs");
        Run {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// With a variable set for each run (`TERM`, say).
    pub fn with_env(mut self, name: &'static str, value: &str) -> Self {
        self.env.push((name, value.into()));
        self
    }

    /// Runs `holarchy <args>` to its end with its stderr written to the
    /// file `log`, as a service manager or `2>log` would have it; the
    /// run's `stderr` is what the file then holds.
    pub fn run_logged(&self, args: &[&str], log: &Path) -> Run {
        let file = std::fs::File::create(log).expect("the log file");
        let out = self
            .command(args)
            .stderr(file)
            .output()
            .expect("the holarchy binary runs");
        let logged = std::fs::read(log).expect("the log file read");
        Run {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&logged).into_owned(),
        }
    }

    /// Runs `holarchy <args>` with `input` on its standard input.
    pub fn run_with_stdin(&self, args: &[&str], input: &str) -> Run {
        use std::io::Write as _;
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the holarchy binary starts");
        let mut stdin = child.stdin.take().expect("piped stdin");
        stdin.write_all(input.as_bytes()).expect("stdin written");
        drop(stdin);
        let out = child.wait_with_output().expect("the holarchy binary runs");
        Run {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Its stdout; the command must succeed.
    pub fn ok(&self, args: &[&str]) -> String {
        let run = self.run(args);
        assert!(
            run.status.success(),
            "holarchy {args:?} failed ({}):\n{}",
            run.status,
            run.stderr
        );
        run.stdout
    }

    /// With `--json`: every line of stdout as a JSON object.
    pub fn json(&self, args: &[&str]) -> Vec<Value> {
        let mut with_json = vec!["--json"];
        with_json.extend_from_slice(args);
        self.ok(&with_json)
            .lines()
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|err| {
                    panic!("holarchy {args:?} printed non-JSON {line:?}: {err}")
                })
            })
            .collect()
    }

    /// With `--json`, a command that prints exactly one object.
    pub fn json_one(&self, args: &[&str]) -> Value {
        let mut lines = self.json(args);
        assert_eq!(lines.len(), 1, "holarchy {args:?} printed {lines:?}");
        lines.remove(0)
    }

    /// Its stderr, lowercased; the command must fail, and say why.
    pub fn fails(&self, args: &[&str]) -> String {
        let run = self.run(args);
        assert!(
            !run.status.success(),
            "holarchy {args:?} should have failed; it printed:\n{}",
            run.stdout
        );
        assert!(!run.stderr.trim().is_empty(), "a failure says why");
        run.stderr.to_lowercase()
    }

    /// Its stdout when run on a terminal (a pseudo-terminal of
    /// util-linux's `script`), line ends as `\n`; `None`, said on stderr,
    /// where `script` is not installed. The command must succeed.
    pub fn on_terminal(&self, args: &[&str]) -> Option<String> {
        if Command::new("script").arg("--version").output().is_err() {
            eprintln!("skipped: util-linux's `script` is not installed");
            return None;
        }
        let quote =
            |word: &std::ffi::OsStr| format!("'{}'", word.to_string_lossy().replace('\'', r"'\''"));
        let program = OsString::from(env!("CARGO_BIN_EXE_holarchy"));
        let line: Vec<String> = std::iter::once(program.as_os_str())
            .chain(self.flags.iter().map(OsString::as_os_str))
            .chain(args.iter().map(std::ffi::OsStr::new))
            .map(quote)
            .collect();
        let mut command = Command::new("script");
        for name in CLIENT_VARIABLES {
            command.env_remove(name);
        }
        let out = command
            .args(["--quiet", "--return", "--command"])
            .arg(line.join(" "))
            .arg("/dev/null")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .output()
            .expect("script runs");
        let stdout = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
        assert!(
            out.status.success(),
            "holarchy {args:?} failed on a terminal ({}):\n{stdout}",
            out.status
        );
        Some(stdout)
    }

    /// Starts `holarchy <args>` to read its stdout as it comes.
    pub fn follow(&self, args: &[&str]) -> Follow {
        let mut child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the holarchy binary starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Follow { child, lines }
    }
}

/// A client still running (`events --follow`, `task output --follow`).
/// Dropping it kills it.
pub struct Follow {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Follow {
    /// The next line of its output that `wanted` accepts, skipping others;
    /// panics at the deadline or if the output ends first.
    pub fn line_where(&mut self, what: &str, wanted: impl Fn(&str) -> bool) -> String {
        let mut lines = self.lines_until(what, wanted);
        lines.pop().expect("the wanted line")
    }

    /// Every line up to and with the next one `wanted` accepts.
    pub fn lines_until(&mut self, what: &str, wanted: impl Fn(&str) -> bool) -> Vec<String> {
        let started = Instant::now();
        let mut seen = Vec::new();
        loop {
            let left = DEADLINE.saturating_sub(started.elapsed());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let found = wanted(&line);
                    seen.push(line);
                    if found {
                        return seen;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("no line with {what} in time: {seen:#?}")
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("output ended before a line with {what}: {seen:#?}")
                }
            }
        }
    }

    /// The next line, whatever it is.
    pub fn next_line(&mut self) -> String {
        self.line_where("anything", |_| true)
    }

    /// Waits for the client to end on its own; its exit status.
    pub fn wait_exit(&mut self) -> ExitStatus {
        until("the follower to end", || {
            self.child.try_wait().expect("waits")
        })
    }
}

impl Drop for Follow {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `check` until it returns `Some`, or panics after the deadline.
pub fn until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(started.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The id a line such as `created ops agt_...` or `sent msg_...` ends with.
pub fn last_word(line: &str) -> String {
    line.split_whitespace()
        .last()
        .unwrap_or_else(|| panic!("an id in {line:?}"))
        .to_owned()
}

/// A string field of a JSON object.
pub fn text<'a>(value: &'a Value, field: &str) -> &'a str {
    value[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} is not text in {value}"))
}

/// The agent's messages (`--json agent messages`) once it has at least
/// `count` and all are handled.
pub fn handled(cli: &Holarchy, agent: &str, count: usize) -> Vec<Value> {
    until(&format!("{count} handled messages of {agent}"), || {
        let all = cli.json(&["agent", "messages", agent]);
        let done = all.len() >= count && all.iter().all(|m| m["status"] == "handled");
        done.then_some(all)
    })
}
