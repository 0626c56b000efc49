//! `ApplyPatch`: a unified diff applied inside the agent's active
//! workspace. All or nothing: every path is resolved and every hunk applied
//! in memory first, so a patch that does not apply, or names a path outside
//! the workspace, leaves every file as it was. Each file is then replaced
//! by a rename of a synced temporary file beside it, so a reader (or a
//! crash) sees the old content or the new, never a mix.
//!
//! The checked paths are only names: every read, create, rename and
//! unlink goes through [`beneath`], from the workspace root's fd, and fails
//! on a symlink anywhere on the way, so an agent swapping a directory for a
//! symlink while the patch runs cannot send it outside the workspace.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use holarchy_supervision::patch::{self, PatchError};
use holarchy_supervision::AgentId;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use crate::workspace::path::{PathError, Roots};
use crate::workspace::{self, WorkspaceError};
use crate::Ctx;

use beneath::{How, Root};

mod beneath;

/// Longest patch accepted, in bytes.
pub const MAX_PATCH_LEN: usize = 4 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("the patch must be 1 to {MAX_PATCH_LEN} bytes")]
    TooLarge,
    #[error(transparent)]
    Patch(#[from] PatchError),
    #[error("`{path}`: {source}")]
    Path {
        path: String,
        #[source]
        source: PathError,
    },
    #[error("`{0}` already exists: a patch may not rename onto it")]
    Exists(String),
    #[error("`{0}` is not a regular file")]
    NotAFile(String),
    #[error("`{0}` is, or lies under, a symlink that appeared after the check: ApplyPatch does not follow it")]
    Link(String),
    #[error("`{0}` is not UTF-8 text")]
    NotText(String),
    #[error("`{path}`: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// What happened to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Created,
    Modified,
    Deleted,
}

impl Change {
    pub const fn name(self) -> &'static str {
        match self {
            Change::Created => "created",
            Change::Modified => "modified",
            Change::Deleted => "deleted",
        }
    }
}

/// One file the patch changed, relative to the active directory's
/// workspace root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    pub path: PathBuf,
    pub change: Change,
}

/// One file's content before and after the patch.
struct Planned {
    shown: String,
    before: Option<String>,
    after: Option<String>,
}

/// Applies `text` for `agent_id` in its active workspace.
pub async fn apply(
    ctx: &Arc<Ctx>,
    agent_id: AgentId,
    text: &str,
) -> Result<Vec<Changed>, ApplyError> {
    if text.is_empty() || text.len() > MAX_PATCH_LEN {
        return Err(ApplyError::TooLarge);
    }
    workspace::ensure_home(ctx, agent_id)?;
    let view = workspace::view(ctx, agent_id)?;
    let root = workspace::active_root(&view);
    let cwd = view.place().dir;
    let text = text.to_owned();
    // File I/O and fsyncs: off the async workers.
    tokio::task::spawn_blocking(move || apply_in(&root, &cwd, &text))
        .await
        .map_err(|join| ApplyError::Io {
            path: String::new(),
            source: std::io::Error::other(join.to_string()),
        })?
}

/// Applies `text` with paths relative to `cwd`, confined to `root`.
pub fn apply_in(root: &Path, cwd: &Path, text: &str) -> Result<Vec<Changed>, ApplyError> {
    apply_with(root, cwd, text, How::detect())
}

/// [`apply_in`], resolving paths beneath the root as `how` says.
fn apply_with(root: &Path, cwd: &Path, text: &str, how: How) -> Result<Vec<Changed>, ApplyError> {
    let root = std::fs::canonicalize(root).map_err(|source| ApplyError::Io {
        path: root.display().to_string(),
        source,
    })?;
    // Pinned before any path is checked: what the checks below accept is
    // then only ever opened beneath this directory.
    let dir =
        Root::open(&root, how).map_err(|source| io_error(&root.display().to_string(), source))?;
    let roots = Roots::new([&root]).map_err(|source| ApplyError::Path {
        path: root.display().to_string(),
        source,
    })?;
    let files = patch::parse(text)?;
    let mut plan = Plan {
        dir,
        files: BTreeMap::new(),
    };
    for file in &files {
        // The checked path, relative to the root: plain names only.
        let resolve = |name: &str| {
            let path_error = |source| ApplyError::Path {
                path: name.to_owned(),
                source,
            };
            let resolved = roots.resolve(cwd, Path::new(name)).map_err(path_error)?;
            resolved
                .strip_prefix(&root)
                .map(Path::to_owned)
                .map_err(|_| path_error(PathError::Outside(PathBuf::from(name))))
        };
        let source = file.old_path.as_deref().map(resolve).transpose()?;
        let target = file.new_path.as_deref().map(resolve).transpose()?;
        match (source, target) {
            (Some(from), Some(to)) if from != to => {
                // A rename: the old file's content, patched, under the new
                // name, which must be free.
                let current = plan.current(&from)?;
                let after = patch::apply(current.as_deref(), file)?;
                if plan.current(&to)?.is_some() {
                    return Err(ApplyError::Exists(plan.shown(&to)));
                }
                plan.set(&from, None);
                plan.set(&to, after);
            }
            (Some(path), _) | (None, Some(path)) => {
                let current = plan.current(&path)?;
                let after = patch::apply(current.as_deref(), file)?;
                plan.set(&path, after);
            }
            (None, None) => {}
        }
    }
    write_all(&plan.dir, &plan.files)
}

/// Every file the patch touches, as it was and as it will be, keyed by its
/// path relative to the root.
struct Plan {
    dir: Root,
    files: BTreeMap<PathBuf, Planned>,
}

impl Plan {
    fn shown(&self, path: &Path) -> String {
        path.display().to_string()
    }

    /// The file's content as the patch has left it so far.
    fn current(&mut self, path: &Path) -> Result<Option<String>, ApplyError> {
        if let Some(planned) = self.files.get(path) {
            return Ok(planned.after.clone());
        }
        let shown = self.shown(path);
        let before = read(&self.dir, path, &shown)?;
        self.files.insert(
            path.to_owned(),
            Planned {
                shown,
                after: before.clone(),
                before: before.clone(),
            },
        );
        Ok(before)
    }

    /// Sets a file's new content; `current` has been called for it.
    fn set(&mut self, path: &Path, after: Option<String>) {
        if let Some(planned) = self.files.get_mut(path) {
            planned.after = after;
        }
    }
}

/// The file's text, or `None` if there is no file.
fn read(root: &Root, path: &Path, shown: &str) -> Result<Option<String>, ApplyError> {
    let io = |source| io_error(shown, source);
    if path.file_name().is_none() {
        // The root itself.
        return Err(ApplyError::NotAFile(shown.to_owned()));
    }
    let (dir, name) = match root.parent(path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        other => other.map_err(io)?,
    };
    match beneath::status(dir.as_fd(), name).map_err(io)? {
        None => return Ok(None),
        Some(st) if !beneath::is_file(&st) => return Err(ApplyError::NotAFile(shown.to_owned())),
        Some(_) => {}
    }
    // Non-blocking: a FIFO swapped in since the status must not hang the
    // open; it is then refused as not a file.
    let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    let fd = nix::fcntl::openat(
        &dir,
        name,
        flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|err| io(err.into()))?;
    let is_file = nix::sys::stat::fstat(&fd).is_ok_and(|st| beneath::is_file(&st));
    if !is_file {
        return Err(ApplyError::NotAFile(shown.to_owned()));
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| ApplyError::NotText(shown.to_owned()))
}

/// An I/O failure on `shown`; a symlink in the way (`ELOOP`), or a path
/// the kernel found escaping the root (`EXDEV`), gets its own error.
fn io_error(shown: &str, source: std::io::Error) -> ApplyError {
    match source.raw_os_error().map(nix::errno::Errno::from_raw) {
        Some(nix::errno::Errno::ELOOP | nix::errno::Errno::EXDEV) => {
            ApplyError::Link(shown.to_owned())
        }
        _ => ApplyError::Io {
            path: shown.to_owned(),
            source,
        },
    }
}

/// Writes every planned file; if one fails, puts it and those already
/// written back, so the patch lands whole or not at all.
fn write_all(root: &Root, plan: &BTreeMap<PathBuf, Planned>) -> Result<Vec<Changed>, ApplyError> {
    let mut done: Vec<(&PathBuf, &Planned)> = Vec::new();
    let mut changed = Vec::new();
    for (path, planned) in plan {
        if planned.before == planned.after {
            continue;
        }
        if let Err(err) = put(root, path, planned.after.as_deref(), &planned.shown) {
            // It may have failed after its rename (syncing the directory).
            let _ = put(root, path, planned.before.as_deref(), &planned.shown);
            for (path, planned) in done.iter().rev() {
                let _ = put(root, path, planned.before.as_deref(), &planned.shown);
            }
            return Err(err);
        }
        done.push((path, planned));
        changed.push(Changed {
            path: PathBuf::from(&planned.shown),
            change: match (&planned.before, &planned.after) {
                (None, _) => Change::Created,
                (Some(_), None) => Change::Deleted,
                (Some(_), Some(_)) => Change::Modified,
            },
        });
    }
    Ok(changed)
}

/// Replaces (or removes) one file atomically, keeping its permissions,
/// and syncs its directory: the tool reports success only once the new
/// name survives a crash. Every step is relative to the file's directory
/// fd, reached beneath the root without following a symlink.
fn put(root: &Root, path: &Path, content: Option<&str>, shown: &str) -> Result<(), ApplyError> {
    let io = |source| io_error(shown, source);
    let Some(content) = content else {
        let (dir, name) = match root.parent(path) {
            // No directory, so no file: nothing to remove.
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            other => other.map_err(io)?,
        };
        return match beneath::unlink(dir.as_fd(), name) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(io(err)),
            _ => beneath::sync(dir.as_fd()).map_err(io),
        };
    };
    let (dir, name) = root.make_parent(path).map_err(io)?;
    // A name of its own, opened only if new: a link an agent planted at a
    // guessable name can neither redirect the write nor be shared by two
    // patches at once.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let mut temp = std::ffi::OsString::from(".");
    temp.push(name);
    temp.push(format!(
        ".holarchy-patch-{}-{}-{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
    ));
    let written = (|| -> std::io::Result<()> {
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW;
        let fd = nix::fcntl::openat(
            &dir,
            temp.as_os_str(),
            flags | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o666),
        )?;
        let mut file = std::fs::File::from(fd);
        file.write_all(content.as_bytes())?;
        // The mode of the file replaced, if it is one (not of what a
        // symlink there might point at).
        if let Some(st) = beneath::status(dir.as_fd(), name)?.filter(beneath::is_file) {
            nix::sys::stat::fchmod(&file, Mode::from_bits_truncate(st.st_mode & 0o7777))?;
        }
        file.sync_all()?;
        beneath::rename(dir.as_fd(), &temp, name)?;
        beneath::sync(dir.as_fd())
    })();
    if written.is_err() {
        let _ = beneath::unlink(dir.as_fd(), &temp);
    }
    written.map_err(io)
}

#[cfg(test)]
mod tests;
