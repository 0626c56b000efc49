//! What a stdio MCP server may read beyond the system's paths, and what
//! its launcher is told, worked out before it starts:
//!
//! - its own files: the program when named by path, and each argument
//!   that is an existing absolute path;
//! - the *package folder* of each of those (and of the program found on
//!   `PATH`), read-only by default, because a script alone does not run:
//!   Node resolves its imports in the `node_modules` folders above it. The
//!   folder is, for a path inside a `node_modules` folder, that whole
//!   folder (the outermost one on the path: an install's hoisted
//!   dependencies sit there); otherwise the nearest folder above the file
//!   that holds a `package.json` (a project checked out and built in
//!   place, its `node_modules` inside it). A default folder that would
//!   hold or sit inside what the daemon protects, or hold the agents'
//!   private directories, is left out (the operator can still name a
//!   narrower one);
//! - the configuration's `read_only` paths, checked the same way, where a
//!   bad one refuses the start with the reason.
//!
//! (`npx` and `uvx` are run from what their caches hold: see
//! [`super::launch`].) Everything here is read-only: a server writes only
//! in its private directory and the configuration's `read_write`
//! directories.

use std::path::{Component, Path, PathBuf};

use tracing::debug;

use super::config::StdioConfig;
use crate::sandbox::SandboxConfig;

/// What a server is given besides its private directory.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Grants {
    /// Paths it may read (and execute) beneath.
    pub read_only: Vec<PathBuf>,
}

/// Why a path may not be granted for reading; said after the path.
#[derive(Debug, thiserror::Error)]
pub enum Ungrantable {
    #[error("is the root of the file system")]
    Root,
    #[error("is, holds or is inside {}, which the daemon protects", .0.display())]
    Protected(PathBuf),
    #[error("holds {}, the agents' private directories", .0.display())]
    HoldsPrivate(PathBuf),
}

/// Why a configuration's `read_only` path refuses the server's start.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    #[error("`read_only` path {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("`read_only` path {} {why}", path.display())]
    Refused { path: PathBuf, why: Ungrantable },
}

/// A variable of the daemon's environment, `None` when unset or empty.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The daemon's own environment, as [`grants`] reads it.
pub fn daemon_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The grants of server `config` (as it will be run: see
/// [`super::launch`]), with `var` the daemon's environment.
pub fn grants(
    config: &StdioConfig,
    sandbox: &SandboxConfig,
    var: Env<'_>,
) -> Result<Grants, GrantError> {
    let mut grants = Grants::default();
    let program = resolve_program(&config.command, var);
    let own: Vec<PathBuf> = program
        .iter()
        .cloned()
        .chain(
            config
                .args
                .iter()
                .map(PathBuf::from)
                .filter(|p| p.is_absolute() && p.exists()),
        )
        .collect();
    for path in &own {
        // As named (a link, say, in `node_modules/.bin`) and as it is.
        grants.read_only.push(path.clone());
        let Ok(real) = std::fs::canonicalize(path) else {
            continue;
        };
        if let Some(folder) = package_folder(&real) {
            match check(&folder, sandbox) {
                Ok(()) => grants.read_only.push(folder),
                Err(why) => debug!(
                    folder = %folder.display(),
                    why = %why,
                    "mcp: a package folder is not granted by default"
                ),
            }
        }
        grants.read_only.push(real);
    }
    for path in &config.read_only {
        let real = std::fs::canonicalize(path).map_err(|source| GrantError::Unreadable {
            path: path.clone(),
            source,
        })?;
        check(&real, sandbox).map_err(|why| GrantError::Refused {
            path: path.clone(),
            why,
        })?;
        grants.read_only.push(real);
    }
    grants.read_only.sort();
    grants.read_only.dedup();
    Ok(grants)
}

/// The program as the unit will run it: its path, or the first match on
/// the daemon's `PATH` (which servers inherit).
fn resolve_program(command: &str, var: Env<'_>) -> Option<PathBuf> {
    let named = Path::new(command);
    if named.is_absolute() {
        return named.exists().then(|| named.to_path_buf());
    }
    if command.contains('/') {
        return None;
    }
    let path = var("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(command))
        .find(|candidate| candidate.is_file())
}

/// The folder a script's package lives in (see the module's opening): the
/// outermost `node_modules` on its path, else the nearest folder above it
/// with a `package.json`. `None` for a file of neither.
pub fn package_folder(file: &Path) -> Option<PathBuf> {
    let mut prefix = PathBuf::new();
    for component in file.components() {
        prefix.push(component);
        if component == Component::Normal("node_modules".as_ref()) {
            return Some(prefix);
        }
    }
    file.ancestors()
        .skip(1)
        .find(|dir| dir.join("package.json").is_file())
        .map(Path::to_path_buf)
}

/// Why a read-only grant of `path` is refused: the file system's root,
/// or a path that holds or sits inside one the daemon protects (its data
/// directory, its program, its user's credentials), or that holds the
/// agents' private directories.
pub fn check(path: &Path, sandbox: &SandboxConfig) -> Result<(), Ungrantable> {
    if path.parent().is_none() {
        return Err(Ungrantable::Root);
    }
    let protected = sandbox.protected.iter().filter_map(|p| {
        // Compared as they are on disk, so a link cannot hide one.
        std::fs::canonicalize(p).ok().or_else(|| Some(p.clone()))
    });
    for p in protected {
        if p.starts_with(path) || path.starts_with(&p) {
            return Err(Ungrantable::Protected(p));
        }
    }
    let tmp = std::fs::canonicalize(&sandbox.tmp_root).unwrap_or_else(|_| sandbox.tmp_root.clone());
    if tmp.starts_with(path) {
        return Err(Ungrantable::HoldsPrivate(tmp));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_in_node_modules_has_the_outermost_node_modules_as_its_folder() {
        let file = Path::new("/srv/app/node_modules/@scope/pkg/node_modules/dep/dist/index.js");
        assert_eq!(
            package_folder(file),
            Some(PathBuf::from("/srv/app/node_modules"))
        );
    }

    #[test]
    fn a_script_outside_node_modules_has_the_nearest_package_json_as_its_folder() {
        let root = tempfile::tempdir().expect("tempdir");
        let project = root.path().join("server");
        std::fs::create_dir_all(project.join("dist/lib")).expect("dirs");
        std::fs::write(project.join("package.json"), "{}").expect("package.json");
        let script = project.join("dist/lib/index.js");
        std::fs::write(&script, "").expect("script");
        assert_eq!(package_folder(&script), Some(project));
        let loose = root.path().join("loose.js");
        std::fs::write(&loose, "").expect("loose");
        assert_eq!(package_folder(&loose), None);
    }

    #[test]
    fn grants_never_reach_what_the_daemon_protects() {
        let root = tempfile::tempdir().expect("tempdir");
        let data = root.path().join("data");
        let tmp = root.path().join("tmp");
        std::fs::create_dir_all(&data).expect("data");
        std::fs::create_dir_all(&tmp).expect("tmp");
        let sandbox = SandboxConfig {
            protected: vec![data.clone()],
            tmp_root: tmp.clone(),
            ..SandboxConfig::default()
        };
        assert!(check(Path::new("/"), &sandbox).is_err());
        assert!(check(root.path(), &sandbox).is_err(), "holds the data");
        assert!(check(&data.join("store"), &sandbox).is_err(), "inside it");
        let elsewhere = root.path().join("elsewhere");
        assert!(check(&elsewhere, &sandbox).is_ok());
        let config = StdioConfig {
            command: "node".into(),
            args: vec![],
            env: vec![],
            read_write: vec![],
            read_only: vec![data],
            network: Default::default(),
        };
        let refused = grants(&config, &sandbox, &daemon_env)
            .expect_err("refused")
            .to_string();
        assert!(refused.contains("protects"), "{refused}");
    }
}
