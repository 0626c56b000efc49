//! The `Host` a console request may name, against DNS rebinding: a web
//! page whose name an attacker re-points at the listener's address is
//! same-origin with it to the browser, but its requests still carry the
//! attacker's name in `Host`. So the console answers only requests that
//! name an IP address (no DNS record is involved, so nothing can be
//! rebound), `localhost`, or a name the operator listed
//! (`serve --http-allowed-host NAME`). Webhooks are not checked (their
//! signature authenticates them, and they arrive under whatever public name
//! the sender was given), nor are `/healthz`, `/readyz` and `/metrics`
//! (load balancers probe under names of their own; none of them shows what
//! an agent holds).

use std::net::IpAddr;

use hyper::header::HeaderValue;
use hyper::http::uri::Authority;

/// The names a console request's `Host` may carry beside IP addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedHosts {
    names: Vec<String>,
}

/// Why a name given to `--http-allowed-host` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a host name (letters, digits, '-' and '.'; no port, no scheme)")]
pub struct BadHostName(pub String);

impl AllowedHosts {
    /// `names` besides IP addresses and `localhost`; checked, compared
    /// without case or a trailing dot.
    pub fn new<I, S>(names: I) -> Result<Self, BadHostName>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut checked = Vec::new();
        for name in names {
            let name = name.as_ref();
            let plain = normalise(name);
            let ok = !plain.is_empty()
                && plain.len() <= 253
                && plain
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.'));
            if !ok {
                return Err(BadHostName(name.chars().take(64).collect()));
            }
            checked.push(plain);
        }
        Ok(Self { names: checked })
    }

    /// Whether a request with this `Host` header may be answered. One
    /// without a `Host` is refused: every browser sends one, and HTTP/1.1
    /// requires it.
    pub fn admits(&self, host: Option<&HeaderValue>) -> bool {
        let Some(authority) = host
            .and_then(|value| value.to_str().ok())
            .and_then(|text| text.parse::<Authority>().ok())
        else {
            return false;
        };
        // `user@host` is no Host a client sends.
        if authority.as_str().contains('@') {
            return false;
        }
        let host = authority.host();
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        if literal.parse::<IpAddr>().is_ok() {
            return true;
        }
        let name = normalise(host);
        name == "localhost" || self.names.contains(&name)
    }
}

fn normalise(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admits(hosts: &AllowedHosts, host: &str) -> bool {
        hosts.admits(Some(&HeaderValue::from_str(host).expect("a header value")))
    }

    #[test]
    fn addresses_localhost_and_listed_names_only() {
        let hosts = AllowedHosts::new(["Console.Example.com"]).expect("a name");
        for good in [
            "127.0.0.1:8080",
            "127.0.0.1",
            "10.1.2.3:80",
            "[::1]:8080",
            "[::1]",
            "localhost:8080",
            "LOCALHOST",
            "localhost.",
            "console.example.com",
            "console.example.com.:443",
        ] {
            assert!(admits(&hosts, good), "{good}");
        }
        for bad in [
            "evil.example:8080",
            "example.com",
            "console.example.com.evil",
            "localhost.evil",
            "user@127.0.0.1",
            "",
            "127.0.0.1:8080/path",
        ] {
            assert!(!admits(&hosts, bad), "{bad}");
        }
        assert!(!hosts.admits(None));
    }

    #[test]
    fn a_listed_name_must_be_a_bare_host_name() {
        for bad in ["http://a.example", "a.example:80", "", "a b", "a/b"] {
            assert!(AllowedHosts::new([bad]).is_err(), "{bad}");
        }
        assert!(AllowedHosts::new(["a-b.example.", "x"]).is_ok());
    }
}
