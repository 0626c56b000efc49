//! Assertions on the contract rather than the implementation: a refusal's
//! code and a key word of its reason, the relative order of the events
//! that matter, a dense log of cursors.

/// Asserts `result` was refused with `code`, and that the reason mentions
/// `word` (case-insensitive): the code tells a program what happened, the
/// word that the daemon said why.
#[track_caller]
pub fn assert_refused<T: std::fmt::Debug>(
    result: Result<T, tonic::Status>,
    code: tonic::Code,
    word: &str,
) -> tonic::Status {
    let status = result.expect_err("the call is refused");
    assert_eq!(status.code(), code, "{status:?}");
    assert!(
        status
            .message()
            .to_lowercase()
            .contains(&word.to_lowercase()),
        "the refusal `{}` should mention `{word}`",
        status.message()
    );
    status
}

/// Asserts that `wanted` appear in `seen` in this order, other items
/// allowed before, between and after (a new kind of event breaks nothing).
#[track_caller]
pub fn assert_in_order(seen: &[&str], wanted: &[&str]) {
    let mut rest = seen.iter();
    for want in wanted {
        assert!(
            rest.any(|s| s == want),
            "`{want}` missing, or out of order, in {seen:?} (wanted in order: {wanted:?})"
        );
    }
}

/// Asserts that cursors rise by one with no gap or repeat.
#[track_caller]
pub fn assert_dense(cursors: &[u64]) {
    assert!(
        cursors.windows(2).all(|w| w[1] == w[0] + 1),
        "cursors have a gap or repeat: {cursors:?}"
    );
}
