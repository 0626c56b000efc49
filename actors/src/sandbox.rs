//! Confinement of everything an agent runs (commands, command brains).
//!
//! The daemon never starts an agent's program itself. It starts a *unit*
//! ([`unit`]): this same binary, run with a hidden first argument, which
//! supervises one program as one killable whole and starts it through
//! [`confine`], which applies the task's limits and Landlock rules and then
//! becomes the program:
//!
//! ```text
//! daemon ── unit (subreaper, dies with the daemon) ── program (confined) ── ...
//! ```
//!
//! What a program may touch: its agent's attached workspaces and a private
//! temporary directory (read-write), the system's paths (read-only), a few
//! device files. Never the store, the token, other agents' homes, or the
//! daemon's `/proc` entries (Landlock forbids ptrace-like access across the
//! domain's edge).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub mod confine;
pub mod network;
pub mod signals;
pub mod unit;

/// The first argument that makes this binary a unit.
pub const UNIT_ARG: &str = "__holarchy-unit";
/// The first argument that makes this binary a unit's second stage.
pub const CONFINE_ARG: &str = "__holarchy-confine";

/// System paths a program may read and execute from.
pub const SYSTEM_READ_ONLY: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/proc",
    "/sys",
    "/run/systemd/resolve",
];

/// How what agents run is confined and bounded.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// The program started as each unit: this binary, whose `main` calls
    /// [`run_if_unit`] first. A runtime embedded in another program (a
    /// test binary) must point this at the `holarchy` binary before its
    /// agents run commands.
    pub unit_program: PathBuf,
    /// Paths programs may read and execute from.
    pub read_only: Vec<PathBuf>,
    /// Where each agent's private temporary directory (its `TMPDIR` and
    /// `HOME`) lives: `<root>/<agent id>`.
    pub tmp_root: PathBuf,
    /// Paths no workspace may be, be inside or hold: the data directory,
    /// the daemon's own program, the daemon user's credentials, and
    /// whatever the operator adds (configuration, secrets).
    pub protected: Vec<PathBuf>,
    /// When not empty, the only places workspaces may be attached beneath.
    pub allowed_roots: Vec<PathBuf>,
    pub limits: TaskLimits,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            unit_program: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("holarchy")),
            read_only: SYSTEM_READ_ONLY.iter().map(PathBuf::from).collect(),
            tmp_root: std::env::temp_dir().join("holarchy-tmp"),
            protected: default_protected(),
            allowed_roots: Vec::new(),
            limits: TaskLimits::default(),
        }
    }
}

/// Credentials and configuration of the daemon's user, by its `HOME`.
const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".config",
    ".netrc",
    ".git-credentials",
    ".local/share",
];

/// What no workspace may touch whatever the operator says: the daemon's
/// program (units run it unconfined; a workspace holding it could replace
/// it) and its user's credentials.
fn default_protected() -> Vec<PathBuf> {
    let program = std::env::current_exe().ok();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    program
        .into_iter()
        .chain(
            home.into_iter()
                .flat_map(|home| HOME_SECRETS.iter().map(move |name| home.join(name))),
        )
        .collect()
}

/// Bounds of one task (a command, or one step of a command brain).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskLimits {
    /// Processes the task may run at once, beyond what its user runs.
    pub max_processes: u64,
    /// Files each of its processes may hold open.
    pub max_open_files: u64,
    /// Bytes of output a second the daemon takes from it; past it, its
    /// pipe fills and the program waits.
    pub output_bytes_per_sec: u64,
    /// How long it may run before it is killed; `None` for no bound.
    pub wall_time: Option<Duration>,
}

impl Default for TaskLimits {
    fn default() -> Self {
        Self {
            max_processes: 256,
            max_open_files: 1024,
            output_bytes_per_sec: 8 * 1024 * 1024,
            wall_time: Some(Duration::from_secs(3600)),
        }
    }
}

/// What a unit is told: who its daemon is, what its program may touch and
/// its bounds. Passed as JSON on its command line (nothing in it is secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitSpec {
    pub daemon_pid: i32,
    pub read_write: Vec<PathBuf>,
    pub read_only: Vec<PathBuf>,
    pub max_processes: u64,
    pub max_open_files: u64,
    /// 0: no bound.
    pub wall_time_ms: u64,
    /// Asked to stop (SIGTERM), the unit passes SIGTERM on and kills the
    /// whole tree after this long.
    pub stop_grace_ms: u64,
    /// What network the program may reach (see [`confine::network`]).
    #[serde(default)]
    pub network: holarchy_supervision::NetworkPolicy,
}

impl SandboxConfig {
    /// The spec of a unit whose program may write beneath `writable`.
    pub fn spec(
        &self,
        writable: Vec<PathBuf>,
        extra_read_only: Vec<PathBuf>,
        stop_grace: Duration,
    ) -> UnitSpec {
        let mut read_only = self.read_only.clone();
        read_only.extend(extra_read_only);
        UnitSpec {
            daemon_pid: std::process::id() as i32,
            read_write: writable,
            read_only,
            max_processes: self.limits.max_processes,
            max_open_files: self.limits.max_open_files,
            wall_time_ms: self.limits.wall_time.map_or(0, millis),
            stop_grace_ms: millis(stop_grace),
            network: holarchy_supervision::NetworkPolicy::Full,
        }
    }

    /// The agent's private temporary directory, made if need be.
    pub fn tmp_dir(&self, owner: impl std::fmt::Display) -> std::io::Result<PathBuf> {
        let dir = self.tmp_root.join(owner.to_string());
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// Removes an ended agent's private temporary directory and whatever
    /// its programs left there: an agent must not fill the disk by ending.
    pub fn remove_tmp_dir(&self, owner: impl std::fmt::Display) -> std::io::Result<()> {
        match std::fs::remove_dir_all(self.tmp_root.join(owner.to_string())) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        }
    }

    /// A command that runs `program args` in a unit under `spec`. The
    /// caller sets the environment (already scrubbed), the directory and
    /// the pipes.
    pub fn command(
        &self,
        spec: &UnitSpec,
        program: impl AsRef<std::ffi::OsStr>,
        args: &[String],
    ) -> Result<tokio::process::Command, serde_json::Error> {
        let mut command = tokio::process::Command::new(&self.unit_program);
        command
            .arg(UNIT_ARG)
            .arg(serde_json::to_string(spec)?)
            .arg("--")
            .arg(program)
            .args(args);
        Ok(command)
    }
}

/// Asks a unit to kill its whole tree now (SIGHUP) when dropped, unless
/// disarmed once the unit was reaped. A unit killed outright could not
/// reach what its program moved out of its group.
#[derive(Debug)]
pub struct UnitHangup(Option<u32>);

impl UnitHangup {
    /// Guards the unit with process id `pid` (none: nothing to guard).
    pub fn new(pid: Option<u32>) -> Self {
        Self(pid)
    }

    /// The unit was reaped: its pid may be another process's now.
    pub fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for UnitHangup {
    fn drop(&mut self) {
        if let Some(pid) = self.0.and_then(|p| i32::try_from(p).ok()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGHUP,
            );
        }
    }
}

fn millis(duration: Duration) -> u64 {
    duration.as_millis().try_into().unwrap_or(u64::MAX)
}

/// Runs this process as a unit or a unit's second stage when its first
/// argument says so. The binary's `main` calls it before anything else
/// (before a runtime or a thread starts).
pub fn run_if_unit() -> Option<ExitCode> {
    let args: Vec<OsString> = std::env::args_os().collect();
    let code = match args.get(1).and_then(|a| a.to_str()) {
        Some(UNIT_ARG) => unit::main(&args[2..]),
        Some(CONFINE_ARG) => confine::main(&args[2..]),
        _ => return None,
    };
    Some(ExitCode::from(u8::try_from(code).unwrap_or(125)))
}

/// `[spec, "--", program, args...]` -> the spec and the program's argv.
fn parse_args(args: &[OsString]) -> Option<(UnitSpec, &[OsString])> {
    let (spec, rest) = args.split_first()?;
    let spec: UnitSpec = serde_json::from_str(spec.to_str()?).ok()?;
    let (separator, argv) = rest.split_first()?;
    (separator == "--" && !argv.is_empty()).then_some((spec, argv))
}

/// What the kernel lets the daemon confine, probed once at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxReport {
    /// The Landlock ABI enforced; 0 when the kernel has none.
    pub landlock_abi: u8,
    /// Can a program get a network namespace of its own?
    pub network_namespace: bool,
}

impl SandboxReport {
    pub fn probe() -> Self {
        Self {
            landlock_abi: confine::probe_abi(),
            network_namespace: network::probe_namespace(),
        }
    }

    /// One line on how agents' network policies are enforced here.
    pub fn describe_network(&self) -> String {
        let tcp = self.landlock_abi >= 4;
        match (self.network_namespace, tcp) {
            (true, true) => "`none`: a network namespace of its own (only loopback); \
                 port lists: Landlock TCP rules (UDP not cut)"
                .into(),
            (true, false) => "`none`: a network namespace of its own (only loopback); \
                 port lists: refused (no Landlock TCP rules before Linux 6.7)"
                .into(),
            (false, true) => "`none` and port lists: Landlock TCP rules only \
                 (UDP and other protocols are not cut; no network namespace here)"
                .into(),
            (false, false) => "not enforceable here: commands under `none` or a port list \
                 are refused"
                .into(),
        }
    }

    /// Is every confinement the daemon asks for enforced?
    pub fn complete(&self) -> bool {
        self.landlock_abi >= 6
    }

    /// One line for logs and `GetStatus`.
    pub fn describe(&self) -> String {
        match self.landlock_abi {
            0 => "none: this kernel has no Landlock; agents' programs are not confined".into(),
            1..=5 => format!(
                "partial: Landlock ABI {} (filesystem and ptrace confined; signals and abstract sockets are not)",
                self.landlock_abi
            ),
            abi => format!(
                "full: Landlock ABI {abi} (filesystem, ptrace, signals, abstract sockets)"
            ),
        }
    }
}

/// The parent of process `pid`, from `/proc/<pid>/stat`.
pub fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses; fields resume
    // after the last ')': state, then ppid.
    stat.get(stat.rfind(')')? + 2..)?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// May process `pid`, a peer of the daemon's Unix socket, be an operator?
/// Not if the daemon started it (a command, a brain, git, or anything they
/// started: units are subreapers, so all of that stays beneath the
/// daemon), and not if it cannot be told: a peer that is gone (it may have
/// connected and exited, handing the socket to a child) or whose ancestry
/// cannot be read is refused. Agents' programs run as the daemon's user,
/// so the socket's mode alone does not keep them out.
pub fn is_operator_peer(pid: Option<i32>) -> bool {
    let Some(pid) = pid.filter(|p| *p > 0) else {
        return false;
    };
    let me = std::process::id() as i32;
    let mut at = pid;
    // Bounded: a chain of parents is shorter than the number of pids.
    for _ in 0..65_536 {
        match parent_of(at) {
            None => return false,
            Some(parent) if parent == me || at == me => return false,
            // Init, or a process from outside our pid namespace.
            Some(parent) if parent <= 1 => return true,
            Some(parent) => at = parent,
        }
    }
    false
}
