//! Applying one file's hunks to its content: exact matches of the old lines,
//! found at the stated place or at the nearest offset, as GNU `patch` does
//! with fuzz 0.

use super::{stated_start, Applied, FilePatch, Hunk, HunkLine, Mismatch, PatchError, Placement};

/// Applies one file's hunks to its current content (`None`: the file is
/// absent). Returns the new content, `None` when the patch deletes the file.
pub fn apply(original: Option<&str>, patch: &FilePatch) -> Result<Option<String>, PatchError> {
    apply_detailed(original, patch).map(|applied| applied.content)
}

/// [`apply`], also telling where each hunk landed.
pub fn apply_detailed(original: Option<&str>, patch: &FilePatch) -> Result<Applied, PatchError> {
    let path = patch.path();
    let text = match (original, &patch.old_path) {
        (Some(_), None) => {
            return Err(PatchError::AlreadyExists {
                path: path.to_owned(),
            })
        }
        (None, Some(old)) => return Err(PatchError::Missing { path: old.clone() }),
        (Some(text), Some(_)) => text,
        (None, None) => "",
    };
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = String::with_capacity(text.len());
    let mut done = 0;
    let mut carried: isize = 0;
    let mut placements = Vec::with_capacity(patch.hunks.len());
    for (index, hunk) in patch.hunks.iter().enumerate() {
        let want = Want::new(hunk);
        let stated = stated_start(hunk);
        let guess = stated.saturating_add_signed(carried);
        let Some(at) = want.locate(&lines, guess, done) else {
            return Err(PatchError::DoesNotApply {
                path: path.to_owned(),
                hunk: index + 1,
                mismatch: want.explain(&lines, guess.max(done)),
            });
        };
        out.extend(lines[done..at].iter().copied());
        out.extend(hunk.new_lines());
        done = at + want.old.len();
        carried = signed(at) - signed(stated);
        placements.push(Placement {
            start: at,
            offset: carried,
        });
    }
    out.extend(lines[done..].iter().copied());
    if patch.new_path.is_none() {
        if !out.is_empty() {
            return Err(PatchError::DeleteIncomplete {
                path: path.to_owned(),
                remaining: out.split_inclusive('\n').count(),
            });
        }
        return Ok(Applied {
            content: None,
            placements,
        });
    }
    Ok(Applied {
        content: Some(out),
        placements,
    })
}

fn signed(n: usize) -> isize {
    isize::try_from(n).unwrap_or(isize::MAX)
}

/// What one hunk needs of the file.
struct Want<'h> {
    old: Vec<(&'h str, bool)>,
    /// The new side ends without a newline, so the hunk must end the file.
    ends_file: bool,
    adds: bool,
}

impl<'h> Want<'h> {
    fn new(hunk: &'h Hunk) -> Self {
        let old = hunk
            .lines
            .iter()
            .filter_map(|line| match line {
                HunkLine::Context(text) => Some((text.as_str(), false)),
                HunkLine::Removed(text) => Some((text.as_str(), true)),
                HunkLine::Added(_) => None,
            })
            .collect();
        let ends_file = hunk.new_lines().last().is_some_and(|l| !l.ends_with('\n'));
        Self {
            old,
            ends_file,
            adds: hunk.new_lines().next().is_some(),
        }
    }

    /// The nearest place at or after `floor` where the hunk fits, trying after
    /// the guess before trying the same distance before it.
    fn locate(&self, lines: &[&str], guess: usize, floor: usize) -> Option<usize> {
        if self.old.is_empty() {
            // Without old lines every place matches: searching would only drift.
            let fits = floor <= guess && guess <= lines.len() && self.fits_ends(lines, guess);
            return fits.then_some(guess);
        }
        let last = lines.len().checked_sub(self.old.len())?;
        if last < floor {
            return None;
        }
        let guess = guess.clamp(floor, last);
        let reach = (last - guess).max(guess - floor);
        (0..=reach).find_map(|distance| {
            let after = guess + distance;
            let before = guess
                .checked_sub(distance)
                .filter(|&b| distance > 0 && b >= floor);
            [Some(after).filter(|&a| a <= last), before]
                .into_iter()
                .flatten()
                .find(|&at| self.fits(lines, at))
        })
    }

    fn fits(&self, lines: &[&str], at: usize) -> bool {
        let end = at + self.old.len();
        end <= lines.len()
            && lines[at..end]
                .iter()
                .zip(&self.old)
                .all(|(have, (want, _))| have == want)
            && self.fits_ends(lines, at)
    }

    /// The newline rules: a line without one can only be the file's last.
    fn fits_ends(&self, lines: &[&str], at: usize) -> bool {
        let end = at + self.old.len();
        let reaches_end = end == lines.len();
        let after_unterminated =
            self.old.is_empty() && at > 0 && !lines[at - 1].ends_with('\n') && self.adds;
        (reaches_end || !self.ends_file) && !after_unterminated
    }

    fn explain(&self, lines: &[&str], at: usize) -> Mismatch {
        if at > lines.len() {
            // An empty old side goes after line `at`; old lines start on the next.
            let line = if self.old.is_empty() {
                at
            } else {
                at.saturating_add(1)
            };
            return Mismatch::PastEnd {
                line,
                file_lines: lines.len(),
            };
        }
        for (k, (want, removed)) in self.old.iter().enumerate() {
            match lines.get(at + k) {
                None => {
                    return Mismatch::PastEnd {
                        line: at + k + 1,
                        file_lines: lines.len(),
                    }
                }
                Some(have) if have != want => {
                    return Mismatch::Differs {
                        line: at + k + 1,
                        removed: *removed,
                    }
                }
                Some(_) => {}
            }
        }
        if self.ends_file && at + self.old.len() != lines.len() {
            Mismatch::NotAtEnd
        } else {
            Mismatch::AfterUnterminated
        }
    }
}
