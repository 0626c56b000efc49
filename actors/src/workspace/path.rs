//! Resolving a path an agent names against its attached workspaces, for the
//! workspace tools (issue 7): the result is always inside one attached
//! root, whatever `..`, absolute paths or symlinks the request holds.
//!
//! A path is resolved in two parts: its longest existing prefix is
//! canonicalised by the OS (which follows every symlink), and the rest, which
//! does not exist yet and so holds no symlink, is appended component by
//! component with `..` refused. The whole is then checked, component-wise,
//! against the canonical roots.
//!
//! The check is on paths, so it holds only at the instant it runs: an
//! agent's commands can swap a directory of its workspace for a symlink
//! right after. A caller that then opens, writes, renames or removes a file
//! must not do it by this path; it resolves the path again beneath the
//! root's fd without following symlinks (as `apply_patch::beneath` does).

use std::io;
use std::path::{Component, Path, PathBuf};

/// Why a path was refused.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("`{0}` is outside the attached workspaces")]
    Outside(PathBuf),
    #[error("`{0}` climbs (`..`) out of a directory that does not exist yet")]
    ClimbsFromMissing(PathBuf),
    #[error("`{path}` cannot be resolved: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("`{0}` passes through a symlink whose target does not exist")]
    DanglingLink(PathBuf),
    #[error("an empty path names nothing")]
    Empty,
}

/// The attached roots of one agent, canonicalised once.
#[derive(Debug, Clone)]
pub struct Roots(Vec<PathBuf>);

impl Roots {
    /// Canonicalises each root; a root that does not exist is an error.
    pub fn new<I, P>(roots: I) -> Result<Self, PathError>
    where
        I: IntoIterator<Item = P>,
        P: AsRef<Path>,
    {
        roots
            .into_iter()
            .map(|root| {
                let root = root.as_ref();
                std::fs::canonicalize(root).map_err(|source| PathError::Io {
                    path: root.to_owned(),
                    source,
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Roots)
    }

    /// Canonicalises each root, leaving out those that are gone (a removed
    /// worktree still attached, a deleted directory): nothing resolves into
    /// them, and the others still work.
    pub fn existing<I, P>(roots: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: AsRef<Path>,
    {
        Roots(
            roots
                .into_iter()
                .filter_map(|root| std::fs::canonicalize(root).ok())
                .collect(),
        )
    }

    /// Whether `canonical` (already canonical) lies in one of the roots.
    pub fn contains(&self, canonical: &Path) -> bool {
        self.0.iter().any(|root| canonical.starts_with(root))
    }

    /// Resolves `requested`, relative to `cwd` unless absolute, to a
    /// canonical path inside one of the roots. The path need not exist.
    pub fn resolve(&self, cwd: &Path, requested: &Path) -> Result<PathBuf, PathError> {
        if requested.as_os_str().is_empty() {
            return Err(PathError::Empty);
        }
        let joined = if requested.is_absolute() {
            requested.to_owned()
        } else {
            cwd.join(requested)
        };
        let resolved = canonical_with_missing_tail(&joined)?;
        if self.contains(&resolved) {
            Ok(resolved)
        } else {
            Err(PathError::Outside(requested.to_owned()))
        }
    }
}

/// Canonicalises the longest existing prefix of `path` and appends the rest.
fn canonical_with_missing_tail(path: &Path) -> Result<PathBuf, PathError> {
    // Rebuilding from components drops interior and trailing `.`, so that
    // `link/.` is probed as `link`: otherwise the `lstat` below would follow
    // a dangling `link` and take it for a missing name.
    let mut existing: PathBuf = path.components().collect();
    let mut tail: Vec<std::ffi::OsString> = Vec::new();
    loop {
        match std::fs::canonicalize(&existing) {
            Ok(mut canonical) => {
                for part in tail.iter().rev() {
                    canonical.push(part);
                }
                return Ok(canonical);
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                // A dangling symlink is "not found" too, but it exists: what
                // it points at is unknown, so it is never followed.
                if existing.symlink_metadata().is_ok() {
                    return Err(PathError::DanglingLink(path.to_owned()));
                }
                let Some(last) = existing.components().next_back() else {
                    return Err(PathError::Io {
                        path: path.to_owned(),
                        source: err,
                    });
                };
                match last {
                    Component::Normal(name) => tail.push(name.to_owned()),
                    Component::CurDir => {}
                    Component::ParentDir => {
                        return Err(PathError::ClimbsFromMissing(path.to_owned()))
                    }
                    Component::RootDir | Component::Prefix(_) => {
                        return Err(PathError::Io {
                            path: path.to_owned(),
                            source: err,
                        })
                    }
                }
                if !existing.pop() {
                    return Err(PathError::Io {
                        path: path.to_owned(),
                        source: err,
                    });
                }
            }
            Err(source) => {
                return Err(PathError::Io {
                    path: path.to_owned(),
                    source,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests;
