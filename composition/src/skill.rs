//! Skills: folders with a `SKILL.md` (front matter: name, description,
//! optional tool allowlist) found under the daemon's skill roots.
