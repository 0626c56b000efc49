//! The subject of a client certificate (`serve --tls-client-ca`), as the
//! audit trail and `token whoami` name the caller beside its token:
//! `CN=alice,OU=ops,O=acme`.
//!
//! Only the few DER structures on the way to the subject are read, from a
//! certificate the TLS handshake has already verified against the CA; any
//! shape not expected gives `None`, never a panic.

/// The most bytes of a subject kept.
const MAX_SUBJECT: usize = 200;

/// The attributes named, by their OID's bytes: the ones an operator sets.
const NAMES: &[(&[u8], &str)] = &[
    (&[0x55, 0x04, 0x03], "CN"),
    (&[0x55, 0x04, 0x0b], "OU"),
    (&[0x55, 0x04, 0x0a], "O"),
];

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const VERSION: u8 = 0xa0;

/// One DER element: its tag, its content and what follows it.
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let len = rest[..count]
            .iter()
            .fold(0usize, |n, b| (n << 8) | usize::from(*b));
        (len, &rest[count..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// The element `input` starts with, if it has `tag`: its content and the
/// rest.
fn expect(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (found, content, rest) = element(input)?;
    (found == tag).then_some((content, rest))
}

/// `CN=...,OU=...,O=...` of a DER certificate, in the order the subject
/// holds them; `None` if it names none of them or does not parse.
pub fn subject(der: &[u8]) -> Option<String> {
    let (certificate, _) = expect(der, SEQUENCE)?;
    let (mut tbs, _) = expect(certificate, SEQUENCE)?;
    if tbs.first() == Some(&VERSION) {
        tbs = element(tbs)?.2;
    }
    // Serial, signature algorithm, issuer, validity: passed over.
    for _ in 0..4 {
        tbs = element(tbs)?.2;
    }
    let (mut names, _) = expect(tbs, SEQUENCE)?;
    let mut parts = Vec::new();
    while !names.is_empty() {
        let (set, rest) = expect(names, SET)?;
        names = rest;
        let (pair, _) = expect(set, SEQUENCE)?;
        let (oid, value) = expect(pair, OID)?;
        let Some((_, label)) = NAMES.iter().find(|(known, _)| *known == oid) else {
            continue;
        };
        let (_, text, _) = element(value)?;
        let text: String = String::from_utf8_lossy(text)
            .chars()
            .map(|c| if c.is_control() || c == ',' { '?' } else { c })
            .collect();
        parts.push(format!("{label}={text}"));
    }
    if parts.is_empty() {
        return None;
    }
    let mut joined = parts.join(",");
    if joined.len() > MAX_SUBJECT {
        let mut end = MAX_SUBJECT;
        while !joined.is_char_boundary(end) {
            end -= 1;
        }
        joined.truncate(end);
    }
    Some(joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subject_of_a_made_certificate_is_read() {
        let mut params = rcgen::CertificateParams::new(vec!["client.test".into()]).expect("params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "acme");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "alice");
        let key = rcgen::KeyPair::generate().expect("a key");
        let cert = params.self_signed(&key).expect("a certificate");
        assert_eq!(subject(cert.der()).as_deref(), Some("O=acme,CN=alice"));
    }

    #[test]
    fn junk_is_no_subject() {
        assert_eq!(subject(&[]), None);
        assert_eq!(subject(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(subject(&[0x30, 0x03, 0x30, 0x01, 0x02]), None);
        let cut = [0x30, 0x82, 0x01];
        assert_eq!(subject(&cut), None);
    }
}
