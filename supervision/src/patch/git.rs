//! What `git diff` adds to unified diffs: `diff --git` sections with their
//! extended headers (new, deleted, renamed, copied, binary), `a/` and `b/`
//! prefixes, and C-quoted paths.

use super::{FilePatch, PatchError};

/// Reads a C-quoted string as git writes it, returning it and the text after
/// the closing quote; `None` if it is not one or is not UTF-8.
pub(super) fn unquote(text: &str) -> Option<(String, &str)> {
    let bytes = text.as_bytes();
    if bytes.first() != Some(&b'"') {
        return None;
    }
    let mut out = Vec::new();
    let mut k = 1;
    loop {
        match *bytes.get(k)? {
            b'"' => break,
            b'\\' => {
                let escaped = *bytes.get(k + 1)?;
                k += 2;
                out.push(match escaped {
                    b'a' => 0x07,
                    b'b' => 0x08,
                    b'f' => 0x0c,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'v' => 0x0b,
                    b'0'..=b'7' => {
                        let digits = bytes.get(k - 1..k + 2)?;
                        k += 2;
                        let value = digits.iter().try_fold(0u32, |acc, &d| {
                            (b'0'..=b'7')
                                .contains(&d)
                                .then(|| acc * 8 + u32::from(d - b'0'))
                        })?;
                        u8::try_from(value).ok()?
                    }
                    other => other,
                });
            }
            byte => {
                out.push(byte);
                k += 1;
            }
        }
    }
    Some((String::from_utf8(out).ok()?, &text[k + 1..]))
}

/// A `diff --git` header and its extended lines, kept until the section either
/// reaches `---`/`+++` or ends without hunks.
pub(super) struct GitSection {
    line: usize,
    names: Option<(String, String)>,
    new_file: bool,
    deleted: bool,
    rename_from: Option<String>,
    rename_to: Option<String>,
    pub(super) copy: bool,
}

impl GitSection {
    pub(super) fn new(names: &str, line: usize) -> Self {
        Self {
            line,
            names: git_names(names),
            new_file: false,
            deleted: false,
            rename_from: None,
            rename_to: None,
            copy: false,
        }
    }

    pub(super) fn path(&self) -> Option<String> {
        self.rename_to
            .clone()
            .or_else(|| self.names.as_ref().map(|(_, new)| new.clone()))
    }

    /// Takes in an extended header line; `false` if `line` is not one.
    pub(super) fn absorb(&mut self, line: &str, line_no: usize) -> Result<bool, PatchError> {
        let path = |p: &str| -> Result<String, PatchError> {
            if p.starts_with('"') {
                let (path, _) = unquote(p).ok_or_else(|| {
                    PatchError::malformed(line_no, "a quoted path that does not unquote")
                })?;
                Ok(path)
            } else {
                Ok(p.to_owned())
            }
        };
        if line.starts_with("new file mode ") {
            self.new_file = true;
        } else if line.starts_with("deleted file mode ") {
            self.deleted = true;
        } else if let Some(p) = line
            .strip_prefix("rename from ")
            .or(line.strip_prefix("rename old "))
        {
            self.rename_from = Some(path(p)?);
        } else if let Some(p) = line
            .strip_prefix("rename to ")
            .or(line.strip_prefix("rename new "))
        {
            self.rename_to = Some(path(p)?);
        } else if line.starts_with("copy from ") || line.starts_with("copy to ") {
            self.copy = true;
        } else {
            const IGNORED: [&str; 5] = [
                "index ",
                "old mode ",
                "new mode ",
                "similarity index ",
                "dissimilarity index ",
            ];
            return Ok(IGNORED.iter().any(|p| line.starts_with(p)));
        }
        Ok(true)
    }
}

/// The file change of a git section that had no `---`/`+++` lines, if any:
/// mode-only sections change no content.
pub(super) fn finish_git(section: Option<GitSection>) -> Result<Option<FilePatch>, PatchError> {
    let Some(section) = section else {
        return Ok(None);
    };
    let unreadable = || {
        PatchError::malformed(
            section.line,
            "cannot tell the path from this `diff --git` line",
        )
    };
    if section.copy {
        return Err(PatchError::Unsupported {
            path: section.path().ok_or_else(unreadable)?,
            what: "copying a file (`copy from` / `copy to`)",
        });
    }
    let file = |old_path, new_path| {
        Ok(Some(FilePatch {
            old_path,
            new_path,
            hunks: Vec::new(),
        }))
    };
    if let (Some(from), Some(to)) = (&section.rename_from, &section.rename_to) {
        return file(Some(from.clone()), Some(to.clone()));
    }
    if !section.new_file && !section.deleted {
        return Ok(None);
    }
    let (old, new) = section.names.clone().ok_or_else(unreadable)?;
    if section.new_file {
        file(None, Some(new))
    } else {
        file(Some(old), None)
    }
}

/// The two paths of `diff --git a/x b/x`, prefixes stripped. Unquoted paths
/// with spaces are only readable when both are the same, which is the case for
/// every section that needs them (a rename names its paths on its own lines).
fn git_names(names: &str) -> Option<(String, String)> {
    let (old, new) = if names.starts_with('"') {
        let (old, rest) = unquote(names)?;
        let rest = rest.strip_prefix(' ')?;
        let new = match unquote(rest) {
            Some((new, "")) => new,
            Some(_) => return None,
            None => rest.to_owned(),
        };
        (old, new)
    } else if let Some(quoted) = names.find(" \"") {
        let (new, rest) = unquote(&names[quoted + 1..])?;
        if !rest.is_empty() {
            return None;
        }
        (names[..quoted].to_owned(), new)
    } else {
        let half = names.len() / 2;
        if names.len().is_multiple_of(2) || names.as_bytes().get(half) != Some(&b' ') {
            return None;
        }
        (
            names.get(..half)?.to_owned(),
            names.get(half + 1..)?.to_owned(),
        )
    };
    match strip_git_prefixes(Some(old), Some(new)) {
        (Some(old), Some(new)) if old == new => Some((old, new)),
        _ => None,
    }
}

/// Drops git's `a/` and `b/` only when both sides carry them (or are
/// /dev/null), so a plain `diff -u` of a directory named `a` keeps its path.
pub(super) fn strip_git_prefixes(
    old: Option<String>,
    new: Option<String>,
) -> (Option<String>, Option<String>) {
    let prefixed = old
        .as_deref()
        .is_none_or(|p| p.len() > 2 && p.starts_with("a/"))
        && new
            .as_deref()
            .is_none_or(|p| p.len() > 2 && p.starts_with("b/"));
    if !prefixed {
        return (old, new);
    }
    let strip = |path: Option<String>| path.map(|p| p[2..].to_owned());
    (strip(old), strip(new))
}
