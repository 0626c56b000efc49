//! The TCP bearer token: where it comes from (the command line, the
//! environment, or `<data-dir>/token`), the checks that refuse a weak token
//! or an unsafe token file, and the check of a request's `authorization`.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read as _, Write as _};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use tracing::{info, warn};

/// The shortest token accepted, in bytes. Not a flag: a floor on a secret
/// is not something to lower.
pub const MIN_TOKEN_LEN: usize = 16;

/// The largest token file read; a real one is 64 bytes.
const MAX_TOKEN_FILE: u64 = 4096;

/// Random bytes in a generated token (hex-encoded, so twice as many
/// characters).
const GENERATED_BYTES: usize = 32;

/// The token as the operator gave it, before any check. Taking the values
/// rather than reading the environment here lets `main` capture secrets
/// once and scrub them from the process environment.
#[derive(Clone, Default)]
pub struct GivenToken {
    /// `--token`: other processes can read it in `/proc/<pid>/cmdline`.
    pub command_line: Option<String>,
    /// `HOLARCHY_TOKEN`; set but empty is `Some("")`, and refused.
    pub environment: Option<String>,
}

impl fmt::Debug for GivenToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = |v: &Option<String>| v.as_ref().map(|_| "<redacted>");
        f.debug_struct("GivenToken")
            .field("command_line", &shown(&self.command_line))
            .field("environment", &shown(&self.environment))
            .finish()
    }
}

/// A token that passed the checks: at least [`MIN_TOKEN_LEN`] bytes of
/// visible ASCII. Never printed.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether an `authorization` header value carries this token. The
    /// comparison takes the same time however much of the token matched.
    pub fn admits(&self, authorization: Option<&[u8]>) -> bool {
        let Some(given) = authorization.and_then(|h| h.strip_prefix(b"Bearer ")) else {
            return false;
        };
        // A checked token is never empty, so this is belt and braces: an
        // empty bearer must never match anything.
        !given.is_empty() && constant_time_eq(given, self.0.as_bytes())
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// Why the daemon refuses to start with the token it was given.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("the token from {origin} is empty: give one of at least {MIN_TOKEN_LEN} bytes, or give none and the daemon writes one to <data-dir>/token")]
    Empty { origin: String },
    #[error("the token from {origin} is {len} bytes: it must be at least {MIN_TOKEN_LEN}")]
    Short { origin: String, len: usize },
    #[error("the token from {origin} may only hold visible ASCII characters (no spaces or control characters)")]
    Characters { origin: String },
    #[error("token file {0} is a symbolic link: it must be a regular file")]
    Symlink(PathBuf),
    #[error("token file {0} is not a regular file")]
    NotRegular(PathBuf),
    #[error("token file {path} belongs to uid {owner}, not to the daemon's user (uid {uid})")]
    Owner { path: PathBuf, owner: u32, uid: u32 },
    #[error("token file {path} has mode {mode:04o}: others may read or change it; `chmod 600` it")]
    Mode { path: PathBuf, mode: u32 },
    #[error("token file {0} is larger than {MAX_TOKEN_FILE} bytes")]
    TooLarge(PathBuf),
    #[error("cannot {action} token file {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
}

/// The token TCP clients must present: the command line's, else the
/// environment's, else the token file's, else a new one written to the
/// token file.
pub fn resolve(given: &GivenToken, token_file: &Path) -> Result<Token, TokenError> {
    if let Some(token) = check_given(given)? {
        return Ok(token);
    }
    match read_file(token_file)? {
        Some(text) => check(&text, &format!("token file {}", token_file.display())),
        None => {
            let token = Token(generate(token_file)?);
            write_file(token_file, token.as_str())?;
            info!(file = %token_file.display(), "wrote a new tcp token");
            Ok(token)
        }
    }
}

/// The token from the command line (which wins) or the environment, if
/// either was given, checked. A daemon without TCP checks it too: a weak
/// token is refused wherever it is given.
pub fn check_given(given: &GivenToken) -> Result<Option<Token>, TokenError> {
    if let Some(text) = &given.command_line {
        let token = check(text, "--token")?;
        warn!("the token was given with --token, which other processes can read in /proc; prefer HOLARCHY_TOKEN or the token file");
        return Ok(Some(token));
    }
    match &given.environment {
        Some(text) => check(text, "HOLARCHY_TOKEN").map(Some),
        None => Ok(None),
    }
}

fn check(text: &str, origin: &str) -> Result<Token, TokenError> {
    let origin = origin.to_owned();
    if text.is_empty() {
        return Err(TokenError::Empty { origin });
    }
    if !text.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(TokenError::Characters { origin });
    }
    if text.len() < MIN_TOKEN_LEN {
        return Err(TokenError::Short {
            origin,
            len: text.len(),
        });
    }
    Ok(Token(text.to_owned()))
}

/// Reads the token file, or `None` when there is none. The checks run on
/// the opened file (not the path), so the file cannot be swapped between
/// check and read.
fn read_file(path: &Path) -> Result<Option<String>, TokenError> {
    let io_err = |action| {
        move |source| TokenError::Io {
            action,
            path: path.to_owned(),
            source,
        }
    };
    // O_NONBLOCK: opening a FIFO planted here must not hang the start.
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) if err.raw_os_error() == Some(libc::ELOOP) => {
            return Err(TokenError::Symlink(path.to_owned()))
        }
        Err(err) => return Err(io_err("open")(err)),
    };
    check_file(&file, path)?;
    let mut text = String::new();
    file.take(MAX_TOKEN_FILE + 1)
        .read_to_string(&mut text)
        .map_err(io_err("read"))?;
    if text.len() as u64 > MAX_TOKEN_FILE {
        return Err(TokenError::TooLarge(path.to_owned()));
    }
    Ok(Some(text.trim().to_owned()))
}

/// A regular file of ours that nobody else may read or write.
fn check_file(file: &File, path: &Path) -> Result<(), TokenError> {
    let meta = file.metadata().map_err(|source| TokenError::Io {
        action: "inspect",
        path: path.to_owned(),
        source,
    })?;
    if !meta.file_type().is_file() {
        return Err(TokenError::NotRegular(path.to_owned()));
    }
    let uid = nix::unistd::geteuid().as_raw();
    if meta.uid() != uid {
        return Err(TokenError::Owner {
            path: path.to_owned(),
            owner: meta.uid(),
            uid,
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(TokenError::Mode {
            path: path.to_owned(),
            mode,
        });
    }
    Ok(())
}

/// A new token: 32 bytes from the kernel's random source, hex-encoded.
fn generate(token_file: &Path) -> Result<String, TokenError> {
    let mut bytes = [0u8; GENERATED_BYTES];
    File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .map_err(|source| TokenError::Io {
            action: "make a random",
            path: token_file.to_owned(),
            source,
        })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes the token file so that it exists either whole, with mode 0600,
/// or not at all: written to a fresh temporary file (O_EXCL, O_NOFOLLOW,
/// created 0600, so no moment where it is readable), synced, then linked
/// into place, which fails rather than replace a file that appeared since.
fn write_file(path: &Path, token: &str) -> Result<(), TokenError> {
    let io_err = |action| {
        move |source| TokenError::Io {
            action,
            path: path.to_owned(),
            source,
        }
    };
    let temp = path.with_extension("new");
    // We hold the data directory's lock: a file here is a crashed start's.
    match std::fs::remove_file(&temp) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => return Err(io_err("remove a stale temporary")(err)),
    }
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)
        .map_err(io_err("create"))?;
    file.write_all(token.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io_err("write"))?;
    drop(file);
    let linked = std::fs::hard_link(&temp, path).map_err(io_err("link"));
    let _ = std::fs::remove_file(&temp);
    linked?;
    if let Some(dir) = path.parent() {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err("sync the directory of"))?;
    }
    Ok(())
}

/// Compares secrets without leaking, through timing, how much matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    const GOOD: &str = "0123456789abcdef";

    fn given(command_line: Option<&str>, environment: Option<&str>) -> GivenToken {
        GivenToken {
            command_line: command_line.map(str::to_owned),
            environment: environment.map(str::to_owned),
        }
    }

    #[test]
    fn empty_short_and_odd_tokens_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("token");
        for (flag, env) in [(Some(""), None), (None, Some("")), (Some(""), Some(GOOD))] {
            let err = resolve(&given(flag, env), &file).expect_err("empty refused");
            assert!(matches!(err, TokenError::Empty { .. }), "{err}");
        }
        let err = resolve(&given(Some(&GOOD[1..]), None), &file).expect_err("15 bytes");
        assert!(matches!(err, TokenError::Short { len: 15, .. }), "{err}");
        let err = resolve(&given(None, Some("0123456789 abcdef")), &file).expect_err("space");
        assert!(matches!(err, TokenError::Characters { .. }), "{err}");
        // Nothing was written while refusing.
        assert!(!file.exists());
    }

    #[test]
    fn the_command_line_wins_over_the_environment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("token");
        let other = "fedcba9876543210";
        let token = resolve(&given(Some(GOOD), Some(other)), &file).expect("token");
        assert_eq!(token.as_str(), GOOD);
        let token = resolve(&given(None, Some(other)), &file).expect("token");
        assert_eq!(token.as_str(), other);
    }

    #[test]
    fn a_generated_token_is_written_0600_and_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("token");
        let made = resolve(&GivenToken::default(), &file).expect("generated");
        assert_eq!(made.as_str().len(), 2 * GENERATED_BYTES);
        let mode = std::fs::metadata(&file)
            .expect("written")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = resolve(&GivenToken::default(), &file).expect("read back");
        assert_eq!(again.as_str(), made.as_str());
        assert!(!file.with_extension("new").exists());
    }

    #[test]
    fn unsafe_token_files_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("token");
        std::fs::write(&file, GOOD).expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let err = resolve(&GivenToken::default(), &file).expect_err("0644");
        assert!(matches!(err, TokenError::Mode { mode: 0o644, .. }), "{err}");

        let target = dir.path().join("elsewhere");
        std::fs::rename(&file, &target).expect("move");
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        std::os::unix::fs::symlink(&target, &file).expect("symlink");
        let err = resolve(&GivenToken::default(), &file).expect_err("symlink");
        assert!(matches!(err, TokenError::Symlink(_)), "{err}");

        std::fs::remove_file(&file).expect("unlink");
        std::fs::create_dir(&file).expect("mkdir");
        let err = resolve(&GivenToken::default(), &file).expect_err("directory");
        assert!(matches!(err, TokenError::NotRegular(_)), "{err}");
    }

    #[test]
    fn an_empty_token_file_is_refused_not_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("token");
        std::fs::write(&file, "\n").expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let err = resolve(&GivenToken::default(), &file).expect_err("empty file");
        assert!(matches!(err, TokenError::Empty { .. }), "{err}");
    }

    #[test]
    fn only_the_exact_bearer_is_admitted() {
        let token = check(GOOD, "test").expect("valid");
        assert!(token.admits(Some(format!("Bearer {GOOD}").as_bytes())));
        assert!(!token.admits(None));
        assert!(!token.admits(Some(b"Bearer ")));
        assert!(!token.admits(Some(b"Bearer")));
        assert!(!token.admits(Some(GOOD.as_bytes())));
        assert!(!token.admits(Some(format!("Bearer {GOOD}x").as_bytes())));
        assert!(!token.admits(Some(format!("Bearer {}", &GOOD[1..]).as_bytes())));
    }
}
