//! The data directory and the directories the daemon keeps in it: made
//! 0700 when the daemon creates them, refused at start when another user
//! owns one or others may write into it (they could plant a token file, a
//! socket or store files).

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use tracing::warn;

/// Why a directory is not safe to serve from.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error("{0} is not a directory")]
    NotDirectory(PathBuf),
    #[error("{path} belongs to uid {owner}, not to the daemon's user (uid {uid})")]
    Owner { path: PathBuf, owner: u32, uid: u32 },
    #[error("{path} has mode {mode:04o}: other users may write into it; `chmod 700` it")]
    Writable { path: PathBuf, mode: u32 },
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

/// Makes `dir` (and any missing parent) with mode 0700, or checks the one
/// that is there. Parents that already exist are not checked: the data
/// directory's own mode and owner are what guard its files.
pub fn prepare(dir: &Path) -> Result<(), DirError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| DirError::Io {
            action: "create",
            path: dir.to_owned(),
            source,
        })?;
    check(dir)
}

/// A directory that the daemon's user owns and nobody else may write into.
/// Readable by others is allowed but warned about: the token file and the
/// socket carry their own 0600 modes.
pub fn check(dir: &Path) -> Result<(), DirError> {
    let meta = std::fs::metadata(dir).map_err(|source| DirError::Io {
        action: "inspect",
        path: dir.to_owned(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(DirError::NotDirectory(dir.to_owned()));
    }
    let uid = nix::unistd::geteuid().as_raw();
    if meta.uid() != uid {
        return Err(DirError::Owner {
            path: dir.to_owned(),
            owner: meta.uid(),
            uid,
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(DirError::Writable {
            path: dir.to_owned(),
            mode,
        });
    }
    if mode & 0o077 != 0 {
        warn!(dir = %dir.display(), mode = format!("{mode:04o}"), "directory is readable by other users; 0700 is safer");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path)
            .expect("exists")
            .permissions()
            .mode()
            & 0o7777
    }

    #[test]
    fn a_new_directory_and_its_new_parents_are_0700() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("a/b");
        prepare(&dir).expect("made");
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&root.path().join("a")), 0o700);
        prepare(&dir).expect("made twice");
    }

    #[test]
    fn a_directory_others_may_write_into_is_refused() {
        let root = tempfile::tempdir().expect("tempdir");
        for loose in [0o777, 0o770, 0o1777, 0o702] {
            let dir = root.path().join(format!("d{loose:o}"));
            std::fs::create_dir(&dir).expect("mkdir");
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(loose)).expect("chmod");
            let err = prepare(&dir).expect_err("refused");
            assert!(matches!(err, DirError::Writable { .. }), "{err}");
        }
        let file = root.path().join("file");
        std::fs::write(&file, "").expect("write");
        assert!(matches!(check(&file), Err(DirError::NotDirectory(_))));
        let readable = root.path().join("readable");
        std::fs::create_dir(&readable).expect("mkdir");
        std::fs::set_permissions(&readable, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        prepare(&readable).expect("readable is allowed");
    }
}
