//! Input bounds, checked once at the edge and again where records are made,
//! so a bad name or an oversized message never reaches the store.

/// Longest agent name, in bytes.
pub const MAX_NAME_LEN: usize = 64;
/// Largest message body, in bytes.
pub const MAX_MESSAGE_LEN: usize = 64 * 1024;
/// Longest dedupe key, in bytes.
pub const MAX_DEDUPE_KEY_LEN: usize = 128;

/// Why an input was refused; the text is shown to the person who sent it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidInput {
    #[error("agent name must not be empty")]
    EmptyName,
    #[error("agent name is {len} bytes; the limit is {MAX_NAME_LEN}")]
    NameTooLong { len: usize },
    #[error("agent name `{0}` may only hold a-z, 0-9, '-', '_' and '.', and must start with a letter or digit")]
    NameCharacters(String),
    #[error("agent names may not look like agent ids (`agt_...`)")]
    NameLooksLikeId,
    #[error("message is {len} bytes; the limit is {MAX_MESSAGE_LEN}")]
    MessageTooLong { len: usize },
    #[error("message must not be empty")]
    EmptyMessage,
    #[error("dedupe key is {len} bytes; the limit is {MAX_DEDUPE_KEY_LEN}")]
    DedupeKeyTooLong { len: usize },
    #[error("a context budget is {MIN_CONTEXT_TOKENS} to {MAX_CONTEXT_TOKENS} tokens, not {0}")]
    ContextTokens(u64),
}

/// The smallest and largest context budget, in tokens: below the smallest,
/// an agent's role and work item alone would not fit; the largest is past
/// every model's window today.
pub const MIN_CONTEXT_TOKENS: u32 = 500;
pub const MAX_CONTEXT_TOKENS: u32 = 2_000_000;

/// Checks an agent's own context budget.
pub fn check_context_tokens(tokens: u64) -> Result<u32, InvalidInput> {
    u32::try_from(tokens)
        .ok()
        .filter(|t| (MIN_CONTEXT_TOKENS..=MAX_CONTEXT_TOKENS).contains(t))
        .ok_or(InvalidInput::ContextTokens(tokens))
}

/// Names are what operators type, so they are short, lowercase and never
/// mistaken for an id.
pub fn check_name(name: &str) -> Result<(), InvalidInput> {
    if name.is_empty() {
        return Err(InvalidInput::EmptyName);
    }
    if name.len() > MAX_NAME_LEN {
        return Err(InvalidInput::NameTooLong { len: name.len() });
    }
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let rest_ok =
        chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'));
    if !first_ok || !rest_ok {
        return Err(InvalidInput::NameCharacters(name.to_owned()));
    }
    if name.starts_with(crate::AgentId::PREFIX) {
        return Err(InvalidInput::NameLooksLikeId);
    }
    Ok(())
}

/// The longest start of `text` of at most `max` bytes that ends on a
/// character boundary: how every bounded text is cut, never mid-character.
pub fn head(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Cuts `text` in place to at most `max` bytes, at a character boundary.
pub fn truncate(text: &mut String, max: usize) {
    let end = head(text, max).len();
    text.truncate(end);
}

pub fn check_message(body: &str) -> Result<(), InvalidInput> {
    if body.is_empty() {
        return Err(InvalidInput::EmptyMessage);
    }
    if body.len() > MAX_MESSAGE_LEN {
        return Err(InvalidInput::MessageTooLong { len: body.len() });
    }
    Ok(())
}

pub fn check_dedupe_key(key: &str) -> Result<(), InvalidInput> {
    if key.len() > MAX_DEDUPE_KEY_LEN {
        return Err(InvalidInput::DedupeKeyTooLong { len: key.len() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn a_head_is_the_longest_whole_character_prefix(text in ".{0,40}", max in 0usize..200) {
            let cut = head(&text, max);
            prop_assert!(text.starts_with(cut) && cut.len() <= max);
            // One more character would not fit (or there is none).
            let next = text[cut.len()..].chars().next();
            prop_assert!(next.is_none_or(|c| cut.len() + c.len_utf8() > max));
            let mut owned = text.clone();
            truncate(&mut owned, max);
            prop_assert_eq!(owned.as_str(), cut);
        }
    }

    #[test]
    fn names_follow_the_rules() {
        assert_eq!(check_name("ops"), Ok(()));
        assert_eq!(check_name("ci-watcher.2"), Ok(()));
        assert_eq!(check_name(""), Err(InvalidInput::EmptyName));
        assert!(matches!(
            check_name("Ops"),
            Err(InvalidInput::NameCharacters(_))
        ));
        assert!(matches!(
            check_name("-ops"),
            Err(InvalidInput::NameCharacters(_))
        ));
        assert!(matches!(
            check_name(&"a".repeat(65)),
            Err(InvalidInput::NameTooLong { len: 65 })
        ));
        assert_eq!(check_name("agt_x"), Err(InvalidInput::NameLooksLikeId));
    }

    #[test]
    fn messages_are_bounded() {
        assert_eq!(check_message(""), Err(InvalidInput::EmptyMessage));
        assert!(check_message(&"x".repeat(MAX_MESSAGE_LEN)).is_ok());
        assert!(check_message(&"x".repeat(MAX_MESSAGE_LEN + 1)).is_err());
    }
}
