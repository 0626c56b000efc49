//! Files an instance manifest names (`role.prompt_file`), read by the CLI
//! beside the manifest and sent to the daemon with it. A manifest may come
//! from anyone (a repository, a colleague), and what is read here leaves
//! the machine: a role goes to the model provider with every brain step.
//! So a named file must be a regular file inside the manifest's folder,
//! also once symbolic links are followed, and no more than its bound is
//! ever read.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

/// Why a file a manifest names was not read. Each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum BesideError {
    #[error("{field} `{path}` must be a relative path inside the manifest's folder (no absolute path, no `..`)")]
    NotInside { field: &'static str, path: String },
    #[error("{field} `{path}` leads to {target}, outside the manifest's folder {folder}: put the file itself inside that folder")]
    Escapes {
        field: &'static str,
        path: String,
        target: PathBuf,
        folder: PathBuf,
    },
    #[error("{field} `{path}` is not a regular file: name a file inside the manifest's folder")]
    NotRegular { field: &'static str, path: String },
    #[error("{field} `{path}` is over {limit} bytes, the limit: shorten it")]
    TooLarge {
        field: &'static str,
        path: String,
        limit: usize,
    },
    #[error("{field} `{path}` is not UTF-8 text")]
    NotText { field: &'static str, path: String },
    #[error("cannot read {field} `{path}` in the manifest's folder {folder}: {source}")]
    Io {
        field: &'static str,
        path: String,
        folder: PathBuf,
        source: std::io::Error,
    },
}

/// The text of `path`, named by the manifest's `field`, in `folder` (the
/// manifest's; empty for the current one), at most `limit` bytes.
pub fn read_beside(
    folder: &Path,
    field: &'static str,
    path: &str,
    limit: usize,
) -> Result<String, BesideError> {
    let named = Path::new(path);
    let plain = named
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if path.is_empty() || !plain {
        return Err(BesideError::NotInside {
            field,
            path: path.to_owned(),
        });
    }
    let folder = if folder.as_os_str().is_empty() {
        Path::new(".")
    } else {
        folder
    };
    let io = |source| BesideError::Io {
        field,
        path: path.to_owned(),
        folder: folder.to_owned(),
        source,
    };
    let folder = std::fs::canonicalize(folder).map_err(io)?;
    let target = std::fs::canonicalize(folder.join(named)).map_err(io)?;
    if !target.starts_with(&folder) {
        return Err(BesideError::Escapes {
            field,
            path: path.to_owned(),
            target,
            folder,
        });
    }
    let not_regular = || BesideError::NotRegular {
        field,
        path: path.to_owned(),
    };
    // Checked before opening: opening a device or a FIFO may block or act.
    if !std::fs::metadata(&target).map_err(io)?.is_file() {
        return Err(not_regular());
    }
    // And again on what was opened, in case the path changed meanwhile;
    // neither a link nor a FIFO's wait for a writer is taken then.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&target)
        .map_err(io)?;
    if !file.metadata().map_err(io)?.is_file() {
        return Err(not_regular());
    }
    let bytes = read_at_most(file, limit)
        .map_err(io)?
        .ok_or(BesideError::TooLarge {
            field,
            path: path.to_owned(),
            limit,
        })?;
    String::from_utf8(bytes).map_err(|_| BesideError::NotText {
        field,
        path: path.to_owned(),
    })
}

/// All of `file` if it holds at most `limit` bytes; `None` if it holds
/// more, after reading one byte past the limit and no further.
pub fn read_at_most(file: File, limit: usize) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    let bound = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    file.take(bound).read_to_end(&mut bytes)?;
    Ok((bytes.len() <= limit).then_some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIELD: &str = "role.prompt_file";
    const LIMIT: usize = 32 * 1024;

    /// A manifest's folder holding `roles/triage.md`, and a file beside
    /// the folder (outside it).
    fn folder() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let root = tempfile::tempdir().expect("tempdir");
        let folder = root.path().join("manifests");
        std::fs::create_dir_all(folder.join("roles")).expect("mkdir");
        std::fs::write(folder.join("roles/triage.md"), "You sort issues.").expect("role");
        let outside = root.path().join("secret.txt");
        std::fs::write(&outside, "not for the model").expect("secret");
        (root, folder, outside)
    }

    #[test]
    fn a_relative_regular_file_inside_the_folder_is_read() {
        let (_root, folder, _) = folder();
        for path in ["roles/triage.md", "./roles/triage.md"] {
            let text = read_beside(&folder, FIELD, path, LIMIT).expect("read");
            assert_eq!(text, "You sort issues.");
        }
        // A link that stays inside is the file it names.
        std::os::unix::fs::symlink("roles/triage.md", folder.join("current.md")).expect("link");
        let text = read_beside(&folder, FIELD, "current.md", LIMIT).expect("read");
        assert_eq!(text, "You sort issues.");
        // Exactly the limit is taken.
        std::fs::write(folder.join("full.md"), "x".repeat(LIMIT)).expect("full");
        let text = read_beside(&folder, FIELD, "full.md", LIMIT).expect("read");
        assert_eq!(text.len(), LIMIT);
    }

    #[test]
    fn absolute_paths_and_parent_steps_are_refused() {
        let (_root, folder, _) = folder();
        for path in [
            "/etc/passwd",
            "../secret.txt",
            "roles/../../secret.txt",
            "roles/../roles/triage.md",
            "",
        ] {
            let err = read_beside(&folder, FIELD, path, LIMIT).expect_err(path);
            assert!(
                matches!(err, BesideError::NotInside { .. }),
                "{path}: {err}"
            );
            let said = err.to_string();
            assert!(
                said.contains("must be a relative path inside the manifest's folder"),
                "{said}"
            );
        }
    }

    #[test]
    fn a_link_out_of_the_folder_is_refused() {
        let (_root, folder, outside) = folder();
        std::os::unix::fs::symlink(&outside, folder.join("out.md")).expect("link");
        std::os::unix::fs::symlink("/dev/zero", folder.join("zero.md")).expect("link");
        std::os::unix::fs::symlink("../..", folder.join("roles/up")).expect("link");
        for path in ["out.md", "zero.md", "roles/up/secret.txt"] {
            let err = read_beside(&folder, FIELD, path, LIMIT).expect_err(path);
            assert!(matches!(err, BesideError::Escapes { .. }), "{path}: {err}");
            assert!(err.to_string().contains("outside the manifest's folder"));
        }
    }

    #[test]
    fn what_is_not_a_regular_file_is_refused_without_waiting() {
        let (_root, folder, _) = folder();
        let fifo = folder.join("pipe.md");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("fifo");
        for path in ["pipe.md", "roles"] {
            let err = read_beside(&folder, FIELD, path, LIMIT).expect_err(path);
            assert!(
                matches!(err, BesideError::NotRegular { .. }),
                "{path}: {err}"
            );
            assert!(err.to_string().contains("is not a regular file"));
        }
    }

    #[test]
    fn a_file_over_the_limit_is_refused_naming_the_limit() {
        let (_root, folder, _) = folder();
        std::fs::write(folder.join("big.md"), "x".repeat(LIMIT + 1)).expect("big");
        let err = read_beside(&folder, FIELD, "big.md", LIMIT).expect_err("too big");
        assert!(matches!(err, BesideError::TooLarge { .. }), "{err}");
        assert!(err.to_string().contains("over 32768 bytes"), "{err}");
    }

    #[test]
    fn a_missing_file_or_one_not_text_says_which() {
        let (_root, folder, _) = folder();
        let err = read_beside(&folder, FIELD, "roles/none.md", LIMIT).expect_err("missing");
        assert!(err
            .to_string()
            .contains("cannot read role.prompt_file `roles/none.md`"));
        std::fs::write(folder.join("bin.md"), [0xff, 0xfe]).expect("binary");
        let err = read_beside(&folder, FIELD, "bin.md", LIMIT).expect_err("binary");
        assert!(matches!(err, BesideError::NotText { .. }), "{err}");
    }
}
