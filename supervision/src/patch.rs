//! Unified diffs (the output of `diff -u` and `git diff`) as pure text: [`parse`]
//! reads a patch into one [`FilePatch`] per file, and [`apply`] applies one of
//! them to that file's content. This is what the `ApplyPatch` tool runs on;
//! reading and writing the files, and checking that their paths stay inside the
//! workspace, are the caller's, so this module sees only strings.
//!
//! Application follows GNU `patch` with fuzz 0: hunks apply in order and never
//! overlap, a hunk's old lines (context and removed) must match exactly, and a
//! hunk that does not match where its header says is looked for at the nearest
//! offset, in both directions, never before the end of the previous hunk.
//! Lines keep their endings (`\r\n` stays, the `\r` is part of the line) and
//! `\ No newline at end of file` is honoured, so applying `diff -u a b` to `a`
//! gives `b` byte for byte.
//!
//! Supported: several files in one patch; text before, between and after the
//! file sections (commit messages, `index`, mode and similarity lines, the
//! `-- ` signature of `git format-patch`); creation and deletion through
//! `/dev/null` and through git's `new file mode` / `deleted file mode`, also
//! without hunks (an empty file); renames, with or without edits, where the
//! caller deletes [`FilePatch::old_path`] and writes [`FilePatch::new_path`];
//! git's C-quoted paths (`"a/caf\303\251"`); empty context lines whose leading
//! space an editor stripped. Refused with an error: binary patches, copies
//! (`copy from`), combined (merge) diffs, and hunks whose header counts do not
//! match their body. Mode-only git sections change no content and are skipped.
//! A file the patch does not create must exist, so `diff -N`'s convention of
//! an empty, epoch-dated old file for a new one is refused too.
//!
//! [`parse`] reads the text (git's additions are in `git`), [`apply`] matches
//! and splices lines.

use std::fmt;

mod apply;
mod git;
mod parse;

pub use apply::{apply, apply_detailed};
pub use parse::parse;

/// One file's part of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePatch {
    /// The path patched, `None` when the patch creates the file (`--- /dev/null`).
    pub old_path: Option<String>,
    /// The path written, `None` when the patch deletes the file (`+++ /dev/null`).
    /// When both are set and differ, the file is renamed: the caller writes the
    /// result here and deletes `old_path`.
    pub new_path: Option<String>,
    /// In file order; empty for a git section that only creates an empty file,
    /// deletes one or renames one.
    pub hunks: Vec<Hunk>,
}

impl FilePatch {
    /// The path the patch writes: the new one, or the old one when it deletes.
    pub fn path(&self) -> &str {
        self.new_path
            .as_deref()
            .or(self.old_path.as_deref())
            .unwrap_or_default()
    }

    /// Whether the file moves: the caller must then also delete `old_path`.
    pub fn is_rename(&self) -> bool {
        matches!((&self.old_path, &self.new_path), (Some(old), Some(new)) if old != new)
    }
}

/// One `@@ -old_start,old_len +new_start,new_len @@` hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// 1-based; when `old_len` is 0 it is the line after which the hunk goes.
    pub old_start: usize,
    pub old_len: usize,
    pub new_start: usize,
    pub new_len: usize,
    pub lines: Vec<HunkLine>,
}

impl Hunk {
    /// The lines the file has before the hunk applies.
    pub fn old_lines(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().filter_map(|line| match line {
            HunkLine::Context(text) | HunkLine::Removed(text) => Some(text.as_str()),
            HunkLine::Added(_) => None,
        })
    }

    /// The lines the file has after the hunk applies.
    pub fn new_lines(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().filter_map(|line| match line {
            HunkLine::Context(text) | HunkLine::Added(text) => Some(text.as_str()),
            HunkLine::Removed(_) => None,
        })
    }
}

/// A line of a hunk's body. The text keeps its line ending (`"x\n"`, `"x\r\n"`),
/// and has none only for a line marked `\ No newline at end of file`, so that
/// joining lines gives the file's bytes back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    Context(String),
    Removed(String),
    Added(String),
}

impl HunkLine {
    pub fn text(&self) -> &str {
        match self {
            HunkLine::Context(text) | HunkLine::Removed(text) | HunkLine::Added(text) => text,
        }
    }

    fn text_mut(&mut self) -> &mut String {
        match self {
            HunkLine::Context(text) | HunkLine::Removed(text) | HunkLine::Added(text) => text,
        }
    }
}

/// Why a patch could not be read or applied. Hunks are numbered from 1 within
/// their file; `line` is a line of the patch text for parse errors and a line of
/// the file for [`Mismatch`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    #[error("the patch has no file sections: expected `--- old` and `+++ new` lines followed by `@@` hunks")]
    Empty,
    #[error("line {line} of the patch: {reason}")]
    Malformed { line: usize, reason: String },
    #[error("hunk {hunk} of `{path}` (line {line} of the patch): its header counts {old_len} old and {new_len} new lines, but its body has {old_found} old and {new_found} new")]
    CountMismatch {
        path: String,
        hunk: usize,
        line: usize,
        old_len: usize,
        new_len: usize,
        old_found: usize,
        new_found: usize,
    },
    #[error("`{path}`: binary patches are not supported, only text diffs")]
    Binary { path: String },
    #[error("`{path}`: {what} is not supported")]
    Unsupported { path: String, what: &'static str },
    #[error("`{path}` already exists, but the patch creates it")]
    AlreadyExists { path: String },
    #[error("`{path}` does not exist, but the patch changes it")]
    Missing { path: String },
    #[error("hunk {hunk} of `{path}` does not apply: {mismatch}")]
    DoesNotApply {
        path: String,
        hunk: usize,
        mismatch: Mismatch,
    },
    #[error("`{path}` is not deleted: the patch removes less than the whole file ({remaining} line(s) would remain)")]
    DeleteIncomplete { path: String, remaining: usize },
}

impl PatchError {
    /// Line `line` of the patch text does not parse, for `reason`.
    pub(crate) fn malformed(line: usize, reason: impl Into<String>) -> Self {
        PatchError::Malformed {
            line,
            reason: reason.into(),
        }
    }
}

/// Where a hunk failed, told at its expected place (lines of the file, 1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mismatch {
    /// A context line (`removed: false`) or removed line differs from the file.
    Differs { line: usize, removed: bool },
    /// The hunk needs lines up to `line`, but the file stops before.
    PastEnd { line: usize, file_lines: usize },
    /// The hunk ends the file without a final newline but does not reach its end.
    NotAtEnd,
    /// The hunk adds after the file's last line, which has no final newline.
    AfterUnterminated,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Told at the expected place, but the search went further than that.
        const NOWHERE: &str = "and no other place matches";
        match self {
            Mismatch::Differs { line, removed: false } => {
                write!(f, "context at line {line} differs, {NOWHERE}")
            }
            Mismatch::Differs { line, removed: true } => {
                write!(f, "the line it removes at line {line} differs, {NOWHERE}")
            }
            Mismatch::PastEnd { line, file_lines } => write!(
                f,
                "it needs line {line} but the file has only {file_lines} line(s), {NOWHERE}"
            ),
            Mismatch::NotAtEnd => write!(
                f,
                "it ends the file without a final newline but does not reach the end of the file"
            ),
            Mismatch::AfterUnterminated => write!(
                f,
                "it adds lines after the last line, which has no final newline (a hunk must replace it)"
            ),
        }
    }
}

/// The result of [`apply_detailed`]: the content, and where each hunk landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The new content, `None` when the file is deleted.
    pub content: Option<String>,
    /// One per hunk, in order.
    pub placements: Vec<Placement>,
}

/// Where a hunk applied, so the caller can tell the agent that its line numbers
/// were off, as GNU `patch` does ("Hunk #2 succeeded at 52 (offset 3 lines)").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// How many lines of the original precede the hunk's old lines.
    pub start: usize,
    /// `start` minus where the header put it.
    pub offset: isize,
}

/// How many lines of the file precede the hunk's old lines, per its header.
fn stated_start(hunk: &Hunk) -> usize {
    // The header of an empty old side names the line the hunk goes after.
    if hunk.old_len == 0 {
        hunk.old_start
    } else {
        hunk.old_start.saturating_sub(1)
    }
}

#[cfg(test)]
mod tests;
