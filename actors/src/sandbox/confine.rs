//! The second stage of a unit: a run of this binary that sets the task's
//! resource limits, confines itself with Landlock to the paths its spec
//! allows, clears the signal state the unit left it (see
//! [`super::signals`]), and then becomes the program (`exec`). The
//! confinement is inherited by everything the program starts and cannot
//! be undone.

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;

use landlock::{
    path_beneath_rules, Access, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError,
    RulesetStatus, Scope, ABI,
};
use nix::sys::resource::{getrlimit, setrlimit, Resource};

use super::UnitSpec;

/// The Landlock ABI whose rights are asked for: filesystem rights up to
/// device ioctls (V5) and the V6 scopes (no signals or abstract sockets
/// across the domain's edge). Older kernels enforce what they can.
pub const ABI_WANTED: ABI = ABI::V6;

/// Device files a program may read and write. Not the rest of `/dev`:
/// `/dev/shm` would be memory and a channel shared by every agent, and
/// terminals (`/dev/tty`, `/dev/pts`) may be an operator's, where a
/// program could read keystrokes or inject input.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// Runs the second stage: `args` is `[spec, "--", program, args...]`.
pub fn main(args: &[OsString]) -> i32 {
    let Some((spec, argv)) = super::parse_args(args) else {
        eprintln!("holarchy confine: bad arguments");
        return 125;
    };
    let Some((program, program_args)) = argv.split_first() else {
        eprintln!("holarchy confine: no program");
        return 125;
    };
    // A session of its own: no controlling terminal (the daemon's, if it
    // was started from one) to read from or inject into.
    if let Err(err) = nix::unistd::setsid() {
        eprintln!("holarchy: cannot start a session for the command: {err}");
        return 126;
    }
    if let Err(err) = limit(&spec) {
        eprintln!("holarchy: cannot limit the command: {err}");
        return 126;
    }
    // Probed only for a policy that needs it: most commands run with the
    // full network, and each probe makes rulesets.
    let tcp_rules = !spec.network.is_full() && probe_abi() >= 4;
    let cut = match super::network::cut(&spec.network, tcp_rules) {
        Ok(cut) => cut,
        Err(err) => {
            eprintln!("holarchy: cannot cut the command's network: {err}");
            return 126;
        }
    };
    if let Err(err) = restrict(&spec, cut) {
        eprintln!("holarchy: cannot confine the command: {err}");
        return 126;
    }
    // Last, so the unit's stop signals stay held until the program can
    // take them: one sent meanwhile is delivered by this unblocking.
    if let Err(err) = super::signals::reset_for_exec() {
        eprintln!("holarchy: cannot reset the command's signals: {err}");
        return 126;
    }
    let err = std::process::Command::new(program)
        .args(program_args)
        .exec();
    eprintln!("holarchy: cannot run {}: {err}", program.to_string_lossy());
    127
}

/// Per-task resource limits. Processes are limited per user by the
/// kernel, counting every thread, so the bound is what the user runs now
/// plus the task's share, within the hard limit (and the kernel does not
/// apply it to root: docs/security.md).
fn limit(spec: &UnitSpec) -> nix::Result<()> {
    setrlimit(
        Resource::RLIMIT_NOFILE,
        spec.max_open_files,
        spec.max_open_files,
    )?;
    let (_, hard) = getrlimit(Resource::RLIMIT_NPROC)?;
    let nproc = user_threads().saturating_add(spec.max_processes).min(hard);
    setrlimit(Resource::RLIMIT_NPROC, nproc, nproc)?;
    setrlimit(Resource::RLIMIT_CORE, 0, 0)
}

/// Threads of this process's user, counted in `/proc` (the kernel's
/// RLIMIT_NPROC counts threads, not processes).
fn user_threads() -> u64 {
    let Ok(uid) = std::fs::metadata("/proc/self").map(|m| m.uid()) else {
        return 0;
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(is_pid))
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid))
        .map(|e| std::fs::read_dir(e.path().join("task")).map_or(1, |tasks| tasks.count() as u64))
        .sum()
}

fn is_pid(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit())
}

/// Confines this process (and so the program it becomes) to the spec's
/// paths: read-write beneath its workspaces, read-only beneath the system
/// paths, read-write on a few device files; nothing else, no signals to
/// and no ptrace of processes outside (the daemon, its other tasks). When
/// its network was `cut` by TCP rules, only the ports its policy allows.
pub fn restrict(spec: &UnitSpec, cut: super::network::Cut) -> Result<RulesetStatus, RulesetError> {
    let abi = ABI_WANTED;
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(abi))?;
    let network = super::network::handled(cut, abi);
    if !network.is_empty() {
        ruleset = ruleset.handle_access(network)?;
    }
    let created = ruleset
        .scope(Scope::AbstractUnixSocket | Scope::Signal)?
        .create()?;
    let status = super::network::rules(created, &spec.network)?
        .add_rules(path_beneath_rules(
            &spec.read_only,
            AccessFs::from_read(abi),
        ))?
        .add_rules(path_beneath_rules(
            &spec.read_write,
            AccessFs::from_all(abi),
        ))?
        .add_rules(path_beneath_rules(
            DEVICES,
            AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev,
        ))?
        .restrict_self()?;
    Ok(status.ruleset)
}

/// The highest Landlock ABI this kernel enforces, 0 if none: probed by
/// creating (not applying) a ruleset that requires each ABI in turn.
pub fn probe_abi() -> u8 {
    use landlock::{CompatLevel, Compatible};
    let levels = [
        (ABI::V6, 6),
        (ABI::V5, 5),
        (ABI::V4, 4),
        (ABI::V3, 3),
        (ABI::V2, 2),
        (ABI::V1, 1),
    ];
    for (abi, level) in levels {
        let created = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))
            .and_then(|r| {
                if level >= 6 {
                    r.scope(Scope::AbstractUnixSocket | Scope::Signal)
                } else {
                    Ok(r)
                }
            })
            .and_then(Ruleset::create);
        if created.is_ok() {
            return level;
        }
    }
    0
}
