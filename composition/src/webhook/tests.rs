use super::*;
use proptest::prelude::*;

const SECRET: &[u8] = b"It's a Secret to Everybody";
const BODY: &[u8] = b"Hello, World!";
/// The example in GitHub's "Validating webhook deliveries".
const GITHUB_EXAMPLE: &str =
    "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

#[test]
fn github_documented_example() {
    assert_eq!(sign(SECRET, BODY), GITHUB_EXAMPLE);
    assert_eq!(verify(SECRET, BODY, Some(GITHUB_EXAMPLE)), Ok(()));
}

#[test]
fn wrong_secret_is_a_mismatch() {
    assert_eq!(
        verify(b"another secret", BODY, Some(GITHUB_EXAMPLE)),
        Err(SignatureError::Mismatch)
    );
}

#[test]
fn a_flipped_body_byte_is_a_mismatch() {
    let mut body = BODY.to_vec();
    body[0] ^= 1;
    assert_eq!(
        verify(SECRET, &body, Some(GITHUB_EXAMPLE)),
        Err(SignatureError::Mismatch)
    );
}

#[test]
fn a_flipped_signature_digit_is_a_mismatch() {
    let flipped = GITHUB_EXAMPLE.replacen("7571", "7570", 1);
    assert_eq!(
        verify(SECRET, BODY, Some(&flipped)),
        Err(SignatureError::Mismatch)
    );
}

#[test]
fn missing_header() {
    assert_eq!(verify(SECRET, BODY, None), Err(SignatureError::Missing));
}

#[test]
fn malformed_headers() {
    let digits = GITHUB_EXAMPLE.trim_start_matches("sha256=");
    for header in [
        digits.to_string(),
        format!("sha1={digits}"),
        format!("sha256={}", &digits[..63]),
        format!("sha256={digits}0"),
        format!("sha256={}zz", &digits[..62]),
        String::new(),
    ] {
        assert!(
            matches!(
                verify(SECRET, BODY, Some(&header)),
                Err(SignatureError::Malformed(_))
            ),
            "{header:?}"
        );
    }
}

#[test]
fn uppercase_hex_is_accepted() {
    let upper = format!("sha256={}", GITHUB_EXAMPLE[7..].to_uppercase());
    assert_eq!(verify(SECRET, BODY, Some(&upper)), Ok(()));
}

#[test]
fn an_empty_secret_verifies_nothing() {
    let forged = sign(b"", BODY);
    assert_eq!(
        verify(b"", BODY, Some(&forged)),
        Err(SignatureError::EmptySecret)
    );
}

proptest! {
    #[test]
    fn sign_then_verify(secret in proptest::collection::vec(any::<u8>(), 1..100), body in proptest::collection::vec(any::<u8>(), 0..300)) {
        prop_assert_eq!(verify(&secret, &body, Some(&sign(&secret, &body))), Ok(()));
    }

    #[test]
    fn verify_never_panics(header in any::<String>(), body in proptest::collection::vec(any::<u8>(), 0..64)) {
        prop_assert!(verify(SECRET, &body, Some(&header)).is_err());
    }
}
