//! Reading a patch: file sections, hunk headers and bodies, and the
//! `\ No newline at end of file` marker. Git's extensions are in [`super::git`].

use super::git::{finish_git, strip_git_prefixes, unquote, GitSection};
use super::{stated_start, FilePatch, Hunk, HunkLine, PatchError};

/// Reads a patch. Each file section comes out in patch order; the same path may
/// appear in more than one (a series of commits), in which case each applies to
/// what the previous left.
pub fn parse(text: &str) -> Result<Vec<FilePatch>, PatchError> {
    let mut parser = Parser {
        lines: text.split_inclusive('\n').collect(),
        at: 0,
    };
    let mut files = Vec::new();
    let mut git: Option<GitSection> = None;
    while let Some(raw) = parser.peek(0) {
        let line = head(raw);
        let line_no = parser.line_no();
        if let Some(names) = line.strip_prefix("diff --git ") {
            files.extend(finish_git(git.take())?);
            git = Some(GitSection::new(names, line_no));
        } else if line.starts_with("--- ") && parser.peek(1).is_some_and(|l| l.starts_with("+++ "))
        {
            files.push(parser.file_section(git.take())?);
            continue;
        } else if line == "GIT binary patch"
            || (line.starts_with("Binary files ") && line.ends_with(" differ"))
        {
            let path = git.as_ref().and_then(GitSection::path);
            return Err(PatchError::Binary {
                path: path.unwrap_or_else(|| line.to_owned()),
            });
        } else if line.starts_with("@@ ") {
            return Err(PatchError::malformed(
                line_no,
                "a hunk with no `--- old` / `+++ new` file header before it",
            ));
        } else if let Some(section) = git.as_mut() {
            if !section.absorb(line, line_no)? {
                // Anything else ends the git header: prose, or the next patch.
                files.extend(finish_git(git.take())?);
            }
        }
        parser.at += 1;
    }
    files.extend(finish_git(git)?);
    if files.is_empty() {
        return Err(PatchError::Empty);
    }
    Ok(files)
}

/// A header line without its line ending, `\r` included: headers are not
/// content, and a patch saved with CRLF still has readable headers.
fn head(raw: &str) -> &str {
    let line = raw.strip_suffix('\n').unwrap_or(raw);
    line.strip_suffix('\r').unwrap_or(line)
}

struct Parser<'a> {
    lines: Vec<&'a str>,
    at: usize,
}

/// Which sides of a file have had their unterminated last line.
#[derive(Default)]
struct Ended {
    old: bool,
    new: bool,
}

impl<'a> Parser<'a> {
    fn peek(&self, ahead: usize) -> Option<&'a str> {
        self.lines.get(self.at + ahead).copied()
    }

    fn line_no(&self) -> usize {
        self.at + 1
    }

    fn starts_file(&self, ahead: usize) -> bool {
        self.peek(ahead).is_some_and(|l| l.starts_with("--- "))
            && self.peek(ahead + 1).is_some_and(|l| l.starts_with("+++ "))
    }

    /// From a `--- ` line (with `+++ ` after it) through the file's last hunk.
    fn file_section(&mut self, git: Option<GitSection>) -> Result<FilePatch, PatchError> {
        let header_no = self.line_no();
        let old = header_path(head(self.peek(0).unwrap_or_default()), "--- ", header_no)?;
        let new = header_path(
            head(self.peek(1).unwrap_or_default()),
            "+++ ",
            header_no + 1,
        )?;
        self.at += 2;
        if old.is_none() && new.is_none() {
            return Err(PatchError::malformed(
                header_no,
                "both sides of the file are /dev/null",
            ));
        }
        let (old_path, new_path) = strip_git_prefixes(old, new);
        let mut file = FilePatch {
            old_path,
            new_path,
            hunks: Vec::new(),
        };
        if git.is_some_and(|g| g.copy) {
            return Err(PatchError::Unsupported {
                path: file.path().to_owned(),
                what: "copying a file (`copy from` / `copy to`)",
            });
        }
        let mut ended = Ended::default();
        loop {
            // Blank lines between hunks are an editor's, not the diff's.
            let mut ahead = 0;
            while self.peek(ahead).is_some_and(|l| head(l).is_empty()) {
                ahead += 1;
            }
            if !self.peek(ahead).is_some_and(|l| l.starts_with("@@ ")) {
                break;
            }
            self.at += ahead;
            let number = file.hunks.len() + 1;
            let hunk_no = self.line_no();
            let hunk = self.hunk(file.path(), number, &mut ended)?;
            if let Some(previous) = file.hunks.last() {
                let previous_end = stated_start(previous).saturating_add(previous.old_len);
                if stated_start(&hunk) < previous_end {
                    let reason = format!(
                        "hunk {number} of `{}` starts before hunk {} ends: hunks go in file order",
                        file.path(),
                        number - 1
                    );
                    return Err(PatchError::malformed(hunk_no, reason));
                }
            }
            file.hunks.push(hunk);
        }
        if file.hunks.is_empty() {
            return Err(PatchError::malformed(
                header_no,
                format!("`{}` has a file header but no `@@` hunk", file.path()),
            ));
        }
        Ok(file)
    }

    fn hunk(&mut self, path: &str, number: usize, ended: &mut Ended) -> Result<Hunk, PatchError> {
        let header_no = self.line_no();
        let header = head(self.peek(0).unwrap_or_default());
        let (old_start, old_len, new_start, new_len) = ranges(header).ok_or_else(|| {
            PatchError::malformed(
                header_no,
                format!("`{header}` is not a hunk header `@@ -start,count +start,count @@`"),
            )
        })?;
        if (old_start == 0 && old_len > 0) || (new_start == 0 && new_len > 0) {
            return Err(PatchError::malformed(
                header_no,
                "a hunk with lines cannot start at line 0",
            ));
        }
        if old_len == 0 && new_len == 0 {
            return Err(PatchError::malformed(header_no, "a hunk with no lines"));
        }
        self.at += 1;
        let body = self.at;
        let mismatch = |this: &Self| {
            let (old_found, new_found) = count_body(&this.lines[body..]);
            PatchError::CountMismatch {
                path: path.to_owned(),
                hunk: number,
                line: header_no,
                old_len,
                new_len,
                old_found,
                new_found,
            }
        };
        let (mut old_left, mut new_left) = (old_len, new_len);
        let mut lines: Vec<HunkLine> = Vec::new();
        while old_left > 0 || new_left > 0 {
            let Some(raw) = self.peek(0) else {
                return Err(mismatch(self));
            };
            let content = raw.strip_suffix('\n').unwrap_or(raw);
            // Only the marker takes a line's newline away, so a patch whose text
            // was cut after its last line still ends that line.
            let text = |body: &str| format!("{body}\n");
            let line = match content.as_bytes().first() {
                // An editor stripped the space of an empty context line.
                None => HunkLine::Context(text("")),
                Some(b'\r') if content == "\r" => HunkLine::Context(text("\r")),
                Some(b' ') => HunkLine::Context(text(&content[1..])),
                Some(b'-') => HunkLine::Removed(text(&content[1..])),
                Some(b'+') => HunkLine::Added(text(&content[1..])),
                Some(b'\\') => {
                    self.no_newline(&mut lines, ended)?;
                    self.at += 1;
                    continue;
                }
                Some(_) => return Err(mismatch(self)),
            };
            let (on_old, on_new) = sides(&line);
            if (on_old && old_left == 0) || (on_new && new_left == 0) {
                return Err(mismatch(self));
            }
            if (on_old && ended.old) || (on_new && ended.new) {
                return Err(PatchError::malformed(
                    self.line_no(),
                    "a line after the one marked `\\ No newline at end of file`",
                ));
            }
            old_left -= usize::from(on_old);
            new_left -= usize::from(on_new);
            lines.push(line);
            self.at += 1;
        }
        if self.peek(0).is_some_and(|l| l.starts_with('\\')) {
            self.no_newline(&mut lines, ended)?;
            self.at += 1;
        }
        if self.body_goes_on() {
            return Err(mismatch(self));
        }
        Ok(Hunk {
            old_start,
            old_len,
            new_start,
            new_len,
            lines,
        })
    }

    /// Whether the line after a complete hunk still looks like its body, which
    /// means the header undercounts it.
    fn body_goes_on(&self) -> bool {
        let Some(raw) = self.peek(0) else {
            return false;
        };
        match raw.as_bytes().first() {
            Some(b' ' | b'+') => true,
            // `-- ` opens the signature of `git format-patch`.
            Some(b'-') => head(raw) != "-- " && !self.starts_file(0),
            _ => false,
        }
    }

    /// Applies `\ No newline at end of file` to the line before it.
    fn no_newline(&self, lines: &mut [HunkLine], ended: &mut Ended) -> Result<(), PatchError> {
        let misplaced = || {
            PatchError::malformed(
                self.line_no(),
                "`\\ No newline at end of file` must follow a hunk line, once",
            )
        };
        let last = lines.last_mut().ok_or_else(misplaced)?;
        let (on_old, on_new) = sides(last);
        if last.text_mut().pop().is_none_or(|c| c != '\n') {
            return Err(misplaced());
        }
        ended.old |= on_old;
        ended.new |= on_new;
        Ok(())
    }
}

fn sides(line: &HunkLine) -> (bool, bool) {
    match line {
        HunkLine::Context(_) => (true, true),
        HunkLine::Removed(_) => (true, false),
        HunkLine::Added(_) => (false, true),
    }
}

/// How many old and new lines a hunk body really has, for the error message.
fn count_body(lines: &[&str]) -> (usize, usize) {
    let (mut old, mut new, mut blanks) = (0, 0, 0);
    for (k, raw) in lines.iter().enumerate() {
        let content = raw.strip_suffix('\n').unwrap_or(raw);
        let next_is_new = lines.get(k + 1).is_some_and(|l| l.starts_with("+++ "));
        match content.as_bytes().first() {
            None => {
                blanks += 1;
                continue;
            }
            Some(b' ') => {
                old += 1;
                new += 1;
            }
            Some(b'-') if !(content.starts_with("--- ") && next_is_new) => old += 1,
            Some(b'+') => new += 1,
            Some(b'\\') => {}
            _ => break,
        }
        // Blank lines count as context only when the body goes on after them.
        old += blanks;
        new += blanks;
        blanks = 0;
    }
    (old, new)
}

/// `@@ -a[,b] +c[,d] @@ optional section`, a count left out meaning 1.
fn ranges(header: &str) -> Option<(usize, usize, usize, usize)> {
    let (spans, _section) = header.strip_prefix("@@ -")?.split_once(" @@")?;
    let (old, new) = spans.split_once(" +")?;
    let range = |span: &str| -> Option<(usize, usize)> {
        let number = |digits: &str| {
            (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
                .then(|| digits.parse().ok())
                .flatten()
        };
        match span.split_once(',') {
            Some((start, len)) => Some((number(start)?, number(len)?)),
            None => Some((number(span)?, 1)),
        }
    };
    let (old_start, old_len) = range(old)?;
    let (new_start, new_len) = range(new)?;
    Some((old_start, old_len, new_start, new_len))
}

/// The path of a `--- ` or `+++ ` line, `None` for `/dev/null`.
fn header_path(line: &str, prefix: &str, line_no: usize) -> Result<Option<String>, PatchError> {
    let rest = line.strip_prefix(prefix).unwrap_or(line);
    let path = if rest.starts_with('"') {
        unquote(rest)
            .ok_or_else(|| PatchError::malformed(line_no, "a quoted path that does not unquote"))?
            .0
    } else {
        // `diff -u` puts a tab and a timestamp after the path, and git a lone tab
        // after a path with spaces; without a tab, trailing blanks are noise.
        match rest.split_once('\t') {
            Some((path, _)) => path.to_owned(),
            None => rest.trim_end().to_owned(),
        }
    };
    match path.as_str() {
        "/dev/null" => Ok(None),
        "" => Err(PatchError::malformed(line_no, "a file header with no path")),
        _ => Ok(Some(path)),
    }
}
