//! Files and directories beneath one directory fd, reached without ever
//! following a symlink: the only way ApplyPatch touches a workspace.
//!
//! The path check in `workspace::path` runs on paths, and an agent's own
//! commands can swap any directory of its workspace for a symlink between
//! that check and the write. So every operation here starts from the root's
//! fd, opened once, and resolves the path again at the moment of use: with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` where the kernel has it,
//! else one component at a time with `O_NOFOLLOW | O_DIRECTORY`. A symlink
//! anywhere on the way, planted before or during the call, fails with
//! `ELOOP`; nothing is ever done by absolute path. Mount points are crossed
//! (a workspace may hold one); an agent cannot mount in the daemon's view.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use nix::fcntl::{self, AtFlags, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{self, FileStat, Mode, SFlag};
use nix::unistd::{self, UnlinkatFlags};

/// How a path beneath the root is resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// One `openat2` call; the kernel refuses symlinks and escapes.
    Openat2,
    /// One `openat(O_NOFOLLOW)` per component: kernels before 5.6, or a
    /// seccomp filter that refuses `openat2`.
    Walk,
}

/// Set once `openat2` has been refused, so later calls walk directly.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

impl How {
    /// `openat2` unless it is known to be missing.
    pub fn detect() -> How {
        if NO_OPENAT2.load(Ordering::Relaxed) {
            How::Walk
        } else {
            How::Openat2
        }
    }
}

/// Always added: the fds are the daemon's, never a child's.
const CLOEXEC: OFlag = OFlag::O_CLOEXEC;
/// Opening an intermediate directory.
const DIR: OFlag = OFlag::O_RDONLY
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_NOFOLLOW);
/// `openat2` gives `EAGAIN` when a concurrent rename may have moved the
/// walk; a few retries, then the error.
const EAGAIN_RETRIES: usize = 8;

/// An open directory that paths are resolved beneath.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
    how: How,
}

impl Root {
    /// Opens `canonical` (absolute, no symlink in it) from `/`, refusing a
    /// symlink in any component: the root is pinned here, once, and every
    /// later operation is relative to this fd.
    pub fn open(canonical: &Path, how: How) -> io::Result<Root> {
        let slash = fcntl::open("/", DIR | CLOEXEC, Mode::empty())?;
        let slash = Root { fd: slash, how };
        let below = canonical
            .strip_prefix("/")
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let fd = slash.open_at(below, DIR, Mode::empty())?;
        Ok(Root { fd, how: slash.how })
    }

    /// Opens `rel` (plain names only) with `flags`; `O_NOFOLLOW` and
    /// `O_CLOEXEC` are always added.
    pub fn open_at(&self, rel: &Path, flags: OFlag, mode: Mode) -> io::Result<OwnedFd> {
        let names = names(rel)?;
        let flags = flags | OFlag::O_NOFOLLOW | CLOEXEC;
        if names.is_empty() {
            return Ok(fcntl::openat(&self.fd, ".", flags, mode)?);
        }
        if self.how == How::Openat2 && !NO_OPENAT2.load(Ordering::Relaxed) {
            match open2(self.fd.as_fd(), rel, flags, mode) {
                // ENOSYS: no such call; EPERM: a seccomp filter refused it
                // (openat2 has no EPERM of its own for these flags).
                Err(Errno::ENOSYS | Errno::EPERM) => NO_OPENAT2.store(true, Ordering::Relaxed),
                other => return Ok(other?),
            }
        }
        walk(self.fd.as_fd(), &names, flags, mode)
    }

    /// The directory holding `rel`, and `rel`'s last name. Fails with
    /// `NotFound` if the directory does not exist.
    pub fn parent<'p>(&self, rel: &'p Path) -> io::Result<(OwnedFd, &'p OsStr)> {
        let (dir, name) = split(rel)?;
        Ok((self.open_at(dir, DIR, Mode::empty())?, name))
    }

    /// Like [`Root::parent`], creating the missing directories (each
    /// `mkdirat` beneath an fd, and its directory synced so the new entry
    /// survives a crash).
    pub fn make_parent<'p>(&self, rel: &'p Path) -> io::Result<(OwnedFd, &'p OsStr)> {
        let (dir, name) = split(rel)?;
        match self.open_at(dir, DIR, Mode::empty()) {
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            other => return Ok((other?, name)),
        }
        let mut at = fcntl::openat(&self.fd, ".", DIR | CLOEXEC, Mode::empty())?;
        for part in names(dir)? {
            at = match fcntl::openat(&at, part, DIR | CLOEXEC, Mode::empty()) {
                Err(Errno::ENOENT) => {
                    match stat::mkdirat(&at, part, Mode::from_bits_truncate(0o777)) {
                        Ok(()) | Err(Errno::EEXIST) => {}
                        Err(err) => return Err(err.into()),
                    }
                    unistd::fsync(&at)?;
                    fcntl::openat(&at, part, DIR | CLOEXEC, Mode::empty())
                        .map_err(|err| explain(at.as_fd(), part, err))?
                }
                other => other.map_err(|err| explain(at.as_fd(), part, err))?,
            };
        }
        Ok((at, name))
    }
}

/// `name`'s status in `dir`, the name itself and not what it may point at;
/// `None` if there is no such name.
pub fn status(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Option<FileStat>> {
    match stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(st)),
        Err(Errno::ENOENT) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// Whether a status is that of a regular file.
pub fn is_file(st: &FileStat) -> bool {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG
}

/// Removes the name `name` from `dir` (a symlink is removed, not followed).
pub fn unlink(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    Ok(unistd::unlinkat(dir, name, UnlinkatFlags::NoRemoveDir)?)
}

/// Renames `from` to `to`, both in `dir`.
pub fn rename(dir: BorrowedFd<'_>, from: &OsStr, to: &OsStr) -> io::Result<()> {
    Ok(fcntl::renameat(dir, from, dir, to)?)
}

/// Syncs a directory, so the names changed in it survive a crash.
pub fn sync(dir: BorrowedFd<'_>) -> io::Result<()> {
    Ok(unistd::fsync(dir)?)
}

/// One `openat2` beneath `dir`, retried on `EAGAIN`.
fn open2(dir: BorrowedFd<'_>, rel: &Path, flags: OFlag, mode: Mode) -> Result<OwnedFd, Errno> {
    // Mode is only allowed with O_CREAT/O_TMPFILE.
    let mode = if flags.intersects(OFlag::O_CREAT | OFlag::O_TMPFILE) {
        mode
    } else {
        Mode::empty()
    };
    // RESOLVE_NO_SYMLINKS covers the last name too, and says ELOOP; with
    // O_NOFOLLOW the kernel would skip it there and say ENOTDIR instead.
    let flags = flags.difference(OFlag::O_NOFOLLOW);
    let how = OpenHow::new().flags(flags).mode(mode).resolve(
        ResolveFlag::RESOLVE_BENEATH
            | ResolveFlag::RESOLVE_NO_SYMLINKS
            | ResolveFlag::RESOLVE_NO_MAGICLINKS,
    );
    let mut tries = 0;
    loop {
        match fcntl::openat2(dir, rel, how) {
            Err(Errno::EAGAIN) if tries < EAGAIN_RETRIES => tries += 1,
            other => return other,
        }
    }
}

/// Opens `names` beneath `dir` one at a time, each with `O_NOFOLLOW`: a
/// symlink at any step fails rather than being followed.
fn walk(dir: BorrowedFd<'_>, names: &[&OsStr], flags: OFlag, mode: Mode) -> io::Result<OwnedFd> {
    let Some((last, through)) = names.split_last() else {
        return Ok(fcntl::openat(dir, ".", flags, mode)?);
    };
    let mut at: Option<OwnedFd> = None;
    for part in through {
        let from = at.as_ref().map_or(dir, AsFd::as_fd);
        let next = fcntl::openat(from, *part, DIR | CLOEXEC, Mode::empty())
            .map_err(|err| explain(from, part, err))?;
        at = Some(next);
    }
    let from = at.as_ref().map_or(dir, AsFd::as_fd);
    fcntl::openat(from, *last, flags, mode).map_err(|err| explain(from, last, err).into())
}

/// `O_DIRECTORY | O_NOFOLLOW` on a symlink says `ENOTDIR`; say `ELOOP`, as
/// `openat2` does, so a link in the way reads as one.
fn explain(dir: BorrowedFd<'_>, name: &OsStr, err: Errno) -> Errno {
    if err != Errno::ENOTDIR {
        return err;
    }
    match stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK => {
            Errno::ELOOP
        }
        _ => err,
    }
}

/// `rel`'s components, which must all be plain names: the caller strips
/// the root from a canonical path, so `..`, `.` and `/` mean a bug.
fn names(rel: &Path) -> io::Result<Vec<&OsStr>> {
    rel.components()
        .map(|part| match part {
            Component::Normal(name) => Ok(name),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "only plain names are resolved beneath a root",
            )),
        })
        .collect()
}

/// `rel`'s directory and last name.
fn split(rel: &Path) -> io::Result<(&Path, &OsStr)> {
    match (rel.parent(), rel.file_name()) {
        (Some(dir), Some(name)) => Ok((dir, name)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the workspace root is not a file",
        )),
    }
}

#[cfg(test)]
mod tests;
