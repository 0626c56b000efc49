//! Roles: the prompt every brain of an instance gets, versioned by the hash
//! of its text.

use holarchy_supervision::Role;
use sha2::{Digest, Sha256};

/// Largest role prompt, in bytes. A role is sent with every brain step, so
/// it stays well under a message's size.
pub const MAX_ROLE_BYTES: usize = 32 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoleError {
    #[error("the role prompt is empty")]
    Empty,
    #[error("the role prompt is {len} bytes; the limit is {MAX_ROLE_BYTES}")]
    TooLong { len: usize },
}

/// A role from its prompt text, hashed as given: a change of one byte is a
/// new version, so what a turn ran under is never ambiguous.
pub fn from_text(text: &str) -> Result<Role, RoleError> {
    if text.trim().is_empty() {
        return Err(RoleError::Empty);
    }
    if text.len() > MAX_ROLE_BYTES {
        return Err(RoleError::TooLong { len: text.len() });
    }
    Ok(Role {
        text: text.to_owned(),
        hash: hex::encode(Sha256::digest(text.as_bytes())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_follows_the_text() {
        let a = from_text("You triage issues.").expect("a role");
        let b = from_text("You triage issues!").expect("a role");
        assert_eq!(a.hash.len(), 64);
        assert_ne!(a.version(), b.version());
        assert_eq!(a, from_text("You triage issues.").expect("a role"));
        assert!(a.version().starts_with("sha256:") && a.version().len() == 19);
    }

    #[test]
    fn empty_and_oversized_prompts_are_refused() {
        assert_eq!(from_text(" \n"), Err(RoleError::Empty));
        let long = "x".repeat(MAX_ROLE_BYTES + 1);
        assert!(matches!(from_text(&long), Err(RoleError::TooLong { .. })));
    }
}
