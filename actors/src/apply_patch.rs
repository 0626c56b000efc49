//! `ApplyPatch`: a unified diff applied inside the agent's active
//! workspace. All or nothing: every path is resolved and every hunk applied
//! in memory first, so a patch that does not apply, or names a path outside
//! the workspace, leaves every file as it was. Each file is then replaced
//! by a rename of a synced temporary file beside it, so a reader (or a
//! crash) sees the old content or the new, never a mix.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use holarchy_supervision::patch::{self, PatchError};
use holarchy_supervision::AgentId;

use crate::workspace_path::{PathError, Roots};
use crate::workspace_plane::{self, WorkspaceError};
use crate::Ctx;

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
    workspace_plane::ensure_home(ctx, agent_id)?;
    let view = workspace_plane::view(ctx, agent_id)?;
    let root = workspace_plane::active_root(&view);
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
    let root = std::fs::canonicalize(root).map_err(|source| ApplyError::Io {
        path: root.display().to_string(),
        source,
    })?;
    let roots = Roots::new([&root]).map_err(|source| ApplyError::Path {
        path: root.display().to_string(),
        source,
    })?;
    let files = patch::parse(text)?;
    let mut plan = Plan {
        root,
        files: BTreeMap::new(),
    };
    for file in &files {
        let resolve = |name: &str| {
            roots
                .resolve(cwd, Path::new(name))
                .map_err(|source| ApplyError::Path {
                    path: name.to_owned(),
                    source,
                })
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
    write_all(&plan.files)
}

/// Every file the patch touches, as it was and as it will be.
struct Plan {
    root: PathBuf,
    files: BTreeMap<PathBuf, Planned>,
}

impl Plan {
    fn shown(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .unwrap_or(path)
            .display()
            .to_string()
    }

    /// The file's content as the patch has left it so far.
    fn current(&mut self, path: &Path) -> Result<Option<String>, ApplyError> {
        if let Some(planned) = self.files.get(path) {
            return Ok(planned.after.clone());
        }
        let shown = self.shown(path);
        let before = read(path, &shown)?;
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
fn read(path: &Path, shown: &str) -> Result<Option<String>, ApplyError> {
    match std::fs::symlink_metadata(path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ApplyError::Io {
                path: shown.to_owned(),
                source,
            })
        }
        Ok(meta) if !meta.is_file() => return Err(ApplyError::NotAFile(shown.to_owned())),
        Ok(_) => {}
    }
    let bytes = std::fs::read(path).map_err(|source| ApplyError::Io {
        path: shown.to_owned(),
        source,
    })?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| ApplyError::NotText(shown.to_owned()))
}

/// Writes every planned file; if one fails, puts it and those already
/// written back, so the patch lands whole or not at all.
fn write_all(plan: &BTreeMap<PathBuf, Planned>) -> Result<Vec<Changed>, ApplyError> {
    let mut done: Vec<(&PathBuf, &Planned)> = Vec::new();
    let mut changed = Vec::new();
    for (path, planned) in plan {
        if planned.before == planned.after {
            continue;
        }
        if let Err(err) = put(path, planned.after.as_deref(), &planned.shown) {
            // It may have failed after its rename (syncing the directory).
            let _ = put(path, planned.before.as_deref(), &planned.shown);
            for (path, planned) in done.iter().rev() {
                let _ = put(path, planned.before.as_deref(), &planned.shown);
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
/// name survives a crash.
fn put(path: &Path, content: Option<&str>, shown: &str) -> Result<(), ApplyError> {
    let io = |source| ApplyError::Io {
        path: shown.to_owned(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("/"));
    let sync_dir = || std::fs::File::open(dir).and_then(|d| d.sync_all());
    let Some(content) = content else {
        return match std::fs::remove_file(path) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(io(err)),
            _ => sync_dir().map_err(io),
        };
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    // A name of its own, opened only if new: a link an agent planted at a
    // guessable name can neither redirect the write nor be shared by two
    // patches at once.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let temp = dir.join(format!(
        ".{}.holarchy-patch-{}-{}-{nanos}",
        name.unwrap_or_default(),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
    ));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        file.write_all(content.as_bytes())?;
        if let Ok(meta) = std::fs::metadata(path) {
            file.set_permissions(meta.permissions())?;
        }
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        sync_dir()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written.map_err(io)
}

#[cfg(test)]
mod tests;
