//! Skills: folders with a `SKILL.md` (front matter: `name`, `description`,
//! optional `tools` allowlist) found under the daemon's skill roots. The
//! catalog is read from disk when the daemon starts and again at each
//! instance apply; a skill's full text is read when an agent loads it.
//!
//! Skill roots are the operator's, but a skill's files may come from
//! anywhere: every read is bounded, and links are never followed.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use holarchy_supervision::bounds::truncate as cut;

/// Largest `SKILL.md`, in bytes.
pub const MAX_SKILL_BYTES: u64 = 256 * 1024;
/// Most entries listed of a skill's folder.
pub const MAX_SKILL_FILES: usize = 200;
/// Deepest folder level listed.
const MAX_DEPTH: usize = 4;
/// Most skills read from one root.
pub const MAX_SKILLS_PER_ROOT: usize = 1024;
/// Longest description kept for the context, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 1024;

/// One skill as the catalog knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Tools the skill says it needs; shown to the brain, not enforced
    /// (the instance's constraints are).
    pub tools: Vec<String>,
    pub dir: PathBuf,
}

/// A skill's whole text and the files beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedSkill {
    pub skill: Skill,
    /// `SKILL.md` after its front matter.
    pub body: String,
    /// Paths relative to the skill's folder, sorted; at most
    /// [`MAX_SKILL_FILES`].
    pub files: Vec<String>,
    pub files_truncated: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: SKILL.md is {len} bytes; the limit is {MAX_SKILL_BYTES}")]
    TooLarge { path: PathBuf, len: u64 },
    #[error("{path}: {detail}")]
    Invalid { path: PathBuf, detail: String },
    #[error("{path}: {source}")]
    FrontMatter {
        path: PathBuf,
        source: front_matter::FrontMatterError,
    },
}

/// The skills under the daemon's roots, by name. Where two roots hold a
/// skill of the same name, the first root wins.
#[derive(Debug, Clone, Default)]
pub struct SkillCatalog {
    skills: BTreeMap<String, Skill>,
}

impl SkillCatalog {
    /// Reads every root. A folder that is not a valid skill is skipped and
    /// reported, so one bad skill does not hide the rest.
    pub fn load(roots: &[PathBuf]) -> (SkillCatalog, Vec<SkillError>) {
        let mut catalog = SkillCatalog::default();
        let mut problems = Vec::new();
        for root in roots {
            let entries = match fs::read_dir(root) {
                Ok(entries) => entries,
                Err(source) => {
                    problems.push(SkillError::Io {
                        path: root.clone(),
                        source,
                    });
                    continue;
                }
            };
            let mut dirs: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .filter(|dir| dir.join("SKILL.md").is_file())
                .collect();
            dirs.sort();
            dirs.truncate(MAX_SKILLS_PER_ROOT);
            for dir in dirs {
                match read_head(&dir) {
                    Ok((skill, _)) => {
                        catalog.skills.entry(skill.name.clone()).or_insert(skill);
                    }
                    Err(err) => problems.push(err),
                }
            }
        }
        (catalog, problems)
    }

    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.get(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.skills.contains_key(name)
    }

    pub fn len(&self) -> usize {
        self.skills.len()
    }

    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// The named skills the catalog has, in the order given.
    pub fn some<'a>(&'a self, names: &'a [String]) -> impl Iterator<Item = &'a Skill> + 'a {
        names.iter().filter_map(|name| self.skills.get(name))
    }
}

impl Skill {
    /// Reads the skill's text and lists its folder, now: an edit on disk is
    /// seen at the next load.
    pub fn load(&self) -> Result<LoadedSkill, SkillError> {
        let (skill, body) = read_head(&self.dir)?;
        let mut files = Vec::new();
        let truncated = list(&self.dir, Path::new(""), 0, &mut files);
        files.sort();
        Ok(LoadedSkill {
            skill,
            body,
            files,
            files_truncated: truncated,
        })
    }
}

/// The skill in `dir` and the body of its `SKILL.md`.
fn read_head(dir: &Path) -> Result<(Skill, String), SkillError> {
    let path = dir.join("SKILL.md");
    let io = |source| SkillError::Io {
        path: path.clone(),
        source,
    };
    // Not followed: a link could point anywhere on the daemon's disk.
    let meta = fs::symlink_metadata(&path).map_err(io)?;
    if !meta.is_file() {
        return Err(SkillError::Invalid {
            path,
            detail: "SKILL.md is not a regular file".into(),
        });
    }
    if meta.len() > MAX_SKILL_BYTES {
        return Err(SkillError::TooLarge {
            path,
            len: meta.len(),
        });
    }
    let text = read_bounded(&path, &meta).map_err(io)?;
    let (front, body) = front_matter::split(&text).map_err(|source| SkillError::FrontMatter {
        path: path.clone(),
        source,
    })?;
    let folder = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = front.name.unwrap_or(folder);
    if !crate::manifest::word_ok(&name) {
        return Err(SkillError::Invalid {
            path,
            detail: format!("`{name}` is not a valid skill name"),
        });
    }
    let mut description = front.description.unwrap_or_default();
    cut(&mut description, MAX_DESCRIPTION_BYTES);
    Ok((
        Skill {
            name,
            description,
            tools: front.tools,
            dir: dir.to_path_buf(),
        },
        body.to_owned(),
    ))
}

/// Reads the file checked as `checked`, and only that file: one swapped
/// for a link (or another file) since the check is refused, and no more
/// than [`MAX_SKILL_BYTES`] is read whatever it has grown to.
fn read_bounded(path: &Path, checked: &fs::Metadata) -> std::io::Result<String> {
    use std::io::Read as _;
    use std::os::unix::fs::MetadataExt as _;
    let file = fs::File::open(path)?;
    let opened = file.metadata()?;
    if (opened.dev(), opened.ino()) != (checked.dev(), checked.ino()) {
        return Err(std::io::Error::other("SKILL.md changed while it was read"));
    }
    let mut text = String::new();
    file.take(MAX_SKILL_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > MAX_SKILL_BYTES {
        return Err(std::io::Error::other("SKILL.md grew past its bound"));
    }
    Ok(text)
}

/// Lists `dir` below `rel` into `out`; true when the listing was cut.
fn list(root: &Path, rel: &Path, depth: usize, out: &mut Vec<String>) -> bool {
    let Ok(entries) = fs::read_dir(root.join(rel)) else {
        return false;
    };
    let mut names: Vec<_> = entries.filter_map(Result::ok).collect();
    names.sort_by_key(|e| e.file_name());
    for entry in names {
        if out.len() >= MAX_SKILL_FILES {
            return true;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = rel.join(entry.file_name());
        if kind.is_dir() {
            if depth + 1 < MAX_DEPTH && list(root, &path, depth + 1, out) {
                return true;
            }
        } else if kind.is_file() {
            out.push(path.to_string_lossy().into_owned());
        }
    }
    false
}

mod front_matter;

pub use front_matter::FrontMatterError;

#[cfg(test)]
mod tests;
