//! Cutting a program's network, in the unit's second stage, as its agent's
//! [`NetworkPolicy`] says.
//!
//! Two mechanisms, the stronger first:
//! - a network namespace of its own, holding only a loopback interface:
//!   no protocol reaches out (TCP, UDP, ICMP alike). It needs
//!   `CAP_SYS_ADMIN` (a daemon run as root), or a user namespace made
//!   first where the kernel lets unprivileged users make them;
//! - Landlock's TCP rules (ABI 4, Linux 6.7): connecting and binding only
//!   to the ports allowed. They leave UDP and other protocols open.
//!
//! `none` takes the namespace when it can, Landlock's rules otherwise;
//! a port list takes Landlock's rules (a namespace would cut the ports it
//! allows). A policy the kernel can enforce neither way is refused, never
//! run with the network it forbids.

use holarchy_supervision::NetworkPolicy;
use landlock::{Access, AccessNet, NetPort, RulesetCreated, RulesetCreatedAttr, RulesetError};
use nix::sched::CloneFlags;

/// How a program's network was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Nothing to cut: the policy is `full`.
    Nothing,
    /// A namespace of its own: only its loopback.
    Namespace,
    /// Landlock's TCP rules (the ports allowed, or none).
    TcpRules,
}

#[derive(Debug, thiserror::Error)]
pub enum CutError {
    #[error(
        "the agent's network policy is `{0}`, and this kernel can enforce it neither with a \
         network namespace nor with Landlock's TCP rules (Linux 6.7 or later)"
    )]
    Unenforceable(NetworkPolicy),
    #[error("cannot bring up the loopback interface: {0}")]
    Loopback(std::io::Error),
}

/// Cuts this process's network as `policy` says, before the Landlock
/// ruleset is made; `tcp_rules` says whether the kernel enforces TCP
/// rules. Returns how, for [`rules`].
pub fn cut(policy: &NetworkPolicy, tcp_rules: bool) -> Result<Cut, CutError> {
    match policy {
        NetworkPolicy::Full => Ok(Cut::Nothing),
        NetworkPolicy::None => match own_namespace() {
            Ok(()) => {
                loopback_up().map_err(CutError::Loopback)?;
                Ok(Cut::Namespace)
            }
            Err(_) if tcp_rules => Ok(Cut::TcpRules),
            Err(_) => Err(CutError::Unenforceable(policy.clone())),
        },
        NetworkPolicy::Ports(_) if tcp_rules => Ok(Cut::TcpRules),
        NetworkPolicy::Ports(_) => Err(CutError::Unenforceable(policy.clone())),
    }
}

/// Adds the TCP rules `cut` chose to a ruleset that handles
/// [`AccessNet`]: a connection to each allowed port, nothing else.
pub fn rules(
    ruleset: RulesetCreated,
    policy: &NetworkPolicy,
) -> Result<RulesetCreated, RulesetError> {
    let ports = match policy {
        NetworkPolicy::Ports(ports) => ports.as_slice(),
        _ => &[],
    };
    ruleset.add_rules(
        ports
            .iter()
            .map(|port| Ok::<_, RulesetError>(NetPort::new(*port, AccessNet::ConnectTcp))),
    )
}

/// The network rights a ruleset handles when `cut` chose TCP rules.
pub fn handled(cut: Cut, abi: landlock::ABI) -> landlock::BitFlags<AccessNet> {
    match cut {
        Cut::TcpRules => AccessNet::from_all(abi),
        Cut::Nothing | Cut::Namespace => landlock::BitFlags::empty(),
    }
}

/// Moves this process into a network namespace of its own; through a
/// user namespace of its own first when it lacks the capability.
fn own_namespace() -> nix::Result<()> {
    if nix::sched::unshare(CloneFlags::CLONE_NEWNET).is_ok() {
        return Ok(());
    }
    let uid = nix::unistd::getuid();
    let gid = nix::unistd::getgid();
    nix::sched::unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET)?;
    // The same ids inside as outside, so the program's files keep their
    // owner; `setgroups` must be denied before an unprivileged gid map.
    let write = |path: &str, text: String| {
        std::fs::write(path, text)
            .map_err(|e| nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(nix::libc::EPERM)))
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))
}

/// Brings up the namespace's loopback interface, which starts down.
#[allow(unsafe_code)]
fn loopback_up() -> std::io::Result<()> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: `socket` has no memory effects; the descriptor it returns is
    // owned (and closed) by `OwnedFd` from here on.
    let fd = unsafe { nix::libc::socket(nix::libc::AF_INET, nix::libc::SOCK_DGRAM, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: `ifreq` is plain data, valid when zeroed.
    let mut request: nix::libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
        *slot = *byte as nix::libc::c_char;
    }
    // SAFETY: both calls read and write only `request`, an `ifreq` that
    // outlives them, as SIOCGIFFLAGS and SIOCSIFFLAGS expect.
    unsafe {
        if nix::libc::ioctl(socket.as_raw_fd(), nix::libc::SIOCGIFFLAGS, &mut request) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        request.ifr_ifru.ifru_flags |= (nix::libc::IFF_UP | nix::libc::IFF_RUNNING) as i16;
        if nix::libc::ioctl(socket.as_raw_fd(), nix::libc::SIOCSIFFLAGS, &request) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Can this daemon give a program a network namespace of its own? Probed
/// in a short-lived child, so the daemon's own network is never touched.
#[allow(unsafe_code)]
pub fn probe_namespace() -> bool {
    use std::os::unix::process::CommandExt;
    let mut probe = std::process::Command::new("/bin/true");
    probe
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: the closure makes only `unshare` system calls (no
    // allocation, no lock), which are async-signal-safe, as `pre_exec`
    // requires in the child of a threaded process.
    unsafe {
        probe.pre_exec(|| {
            if nix::sched::unshare(CloneFlags::CLONE_NEWNET).is_ok()
                || nix::sched::unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET).is_ok()
            {
                Ok(())
            } else {
                Err(std::io::Error::from_raw_os_error(nix::libc::EPERM))
            }
        });
    }
    probe.status().is_ok_and(|status| status.success())
}
