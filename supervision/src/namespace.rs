//! Namespaces: the partitions of a daemon's agents that scoped callers
//! see. Every agent belongs to one (`default` unless made otherwise), its
//! children to its own; names are unique within a namespace, and the
//! store keys a name by [`qualified`].

use crate::bounds::MAX_NAME_LEN;

/// The namespace of agents made before namespaces existed, and of every
/// caller that names none.
pub const DEFAULT: &str = "default";

/// Why a namespace's name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidNamespace {
    #[error("a namespace is 1 to {MAX_NAME_LEN} bytes of a-z, 0-9, '-', '_' and '.', starting with a letter or digit")]
    Characters,
}

/// Checks a namespace's name: the characters of an agent's name, which
/// never hold `/`, so [`qualified`] is unambiguous.
pub fn check(namespace: &str) -> Result<(), InvalidNamespace> {
    let mut chars = namespace.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok =
        chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'));
    if first_ok && rest_ok && namespace.len() <= MAX_NAME_LEN {
        Ok(())
    } else {
        Err(InvalidNamespace::Characters)
    }
}

/// The key a name is unique under: the bare name in [`DEFAULT`] (as
/// every name was keyed before namespaces, so stores need no migration),
/// `namespace/name` in any other.
pub fn qualified(namespace: &str, name: &str) -> String {
    if namespace == DEFAULT {
        name.to_owned()
    } else {
        format!("{namespace}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn namespaces_take_the_characters_of_names() {
        for good in ["default", "team-a", "a", "ops.eu_1"] {
            assert_eq!(check(good), Ok(()), "{good}");
        }
        for bad in ["", "Team", "a/b", "-a", "a b", &"a".repeat(65)] {
            assert!(check(bad).is_err(), "{bad}");
        }
    }

    proptest! {
        /// Two different (namespace, name) pairs never share a key.
        #[test]
        fn qualified_keys_are_unique(
            a in "[a-z][a-z0-9_.-]{0,8}", b in "[a-z][a-z0-9_.-]{0,8}",
            x in "[a-z][a-z0-9_.-]{0,8}", y in "[a-z][a-z0-9_.-]{0,8}",
        ) {
            let ns = |s: &str| if s.starts_with('d') { DEFAULT.to_owned() } else { s.to_owned() };
            let (a, x) = (ns(&a), ns(&x));
            prop_assert_eq!(qualified(&a, &b) == qualified(&x, &y), a == x && b == y);
        }
    }
}
