//! The daemon's skill catalog, shared by every agent: read from the skill
//! roots at start and again at each instance apply, so a skill added on
//! disk is seen without a restart. Readers take a snapshot; a reload swaps
//! it whole.

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use holarchy_composition::skill::SkillCatalog;

#[derive(Debug, Default)]
pub struct Skills {
    roots: Vec<PathBuf>,
    current: RwLock<Arc<SkillCatalog>>,
}

impl Skills {
    /// Reads the roots now. A skill folder that cannot be read is logged
    /// and left out; the rest load.
    pub fn load(roots: Vec<PathBuf>) -> Self {
        let skills = Self::unread(roots);
        skills.reload();
        skills
    }

    /// The skills under `roots`, not read yet: an empty catalog until the
    /// first [`Skills::reload`].
    pub fn unread(roots: Vec<PathBuf>) -> Self {
        Skills {
            roots,
            current: RwLock::default(),
        }
    }

    /// The catalog as last read.
    pub fn current(&self) -> Arc<SkillCatalog> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Reads the roots again and returns the new catalog.
    pub fn reload(&self) -> Arc<SkillCatalog> {
        let (catalog, problems) = SkillCatalog::load(&self.roots);
        for problem in problems {
            tracing::warn!(%problem, "skill left out");
        }
        let catalog = Arc::new(catalog);
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = catalog.clone();
        catalog
    }
}
