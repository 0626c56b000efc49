//! What network an agent's commands may reach: all of it (the default,
//! as before policies existed), none, or TCP connections to a short list
//! of ports. Set when an agent is created; the children it spawns inherit
//! it, so an agent can never give a child more than it has.

use std::fmt;

use serde::{Deserialize, Serialize};

/// At most this many ports in one policy.
pub const MAX_PORTS: usize = 64;

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NetworkPolicy {
    /// Whatever the daemon's host can reach.
    #[default]
    Full,
    /// Nothing beyond the command's own loopback.
    None,
    /// TCP connections to these ports (sorted, distinct), at any address;
    /// no listening, and no other network where the kernel can tell.
    Ports(Vec<u16>),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NetworkPolicyError {
    #[error("network `{0}` is not a policy: use `full`, `none`, or TCP ports such as `443,8080`")]
    Unknown(String),
    #[error("network port `{0}` is not a port from 1 to 65535")]
    BadPort(String),
    #[error("network names {count} ports; at most {MAX_PORTS}")]
    TooManyPorts { count: usize },
}

impl NetworkPolicy {
    /// Reads `full`, `none`, or ports separated by commas; an empty text
    /// is the default.
    pub fn parse(text: &str) -> Result<Self, NetworkPolicyError> {
        let text = text.trim();
        match text {
            "" | "full" => return Ok(Self::Full),
            "none" => return Ok(Self::None),
            _ => {}
        }
        if !text.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(NetworkPolicyError::Unknown(bounded(text)));
        }
        let parts: Vec<&str> = text.split(',').map(str::trim).collect();
        if parts.len() > MAX_PORTS {
            return Err(NetworkPolicyError::TooManyPorts { count: parts.len() });
        }
        let mut ports = parts
            .into_iter()
            .map(|part| match part.parse::<u16>() {
                Ok(port) if port > 0 => Ok(port),
                _ => Err(NetworkPolicyError::BadPort(bounded(part))),
            })
            .collect::<Result<Vec<u16>, _>>()?;
        ports.sort_unstable();
        ports.dedup();
        Ok(Self::Ports(ports))
    }

    /// May a command reach anything beyond its own loopback?
    pub fn is_full(&self) -> bool {
        matches!(self, Self::Full)
    }
}

impl fmt::Display for NetworkPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full => f.write_str("full"),
            Self::None => f.write_str("none"),
            Self::Ports(ports) => {
                let list: Vec<String> = ports.iter().map(u16::to_string).collect();
                f.write_str(&list.join(","))
            }
        }
    }
}

/// An error quotes at most this much of what it was given.
fn bounded(text: &str) -> String {
    text.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_three_forms_read_back_as_written() {
        assert_eq!(NetworkPolicy::parse(""), Ok(NetworkPolicy::Full));
        assert_eq!(NetworkPolicy::parse("full"), Ok(NetworkPolicy::Full));
        assert_eq!(NetworkPolicy::parse(" none "), Ok(NetworkPolicy::None));
        assert_eq!(
            NetworkPolicy::parse("8080, 443,443"),
            Ok(NetworkPolicy::Ports(vec![443, 8080]))
        );
    }

    #[test]
    fn what_is_not_a_policy_is_refused_with_what_to_write() {
        for (text, says) in [
            ("all", "use `full`, `none`"),
            ("0", "from 1 to 65535"),
            ("443,70000", "`70000`"),
            ("443,", "``"),
            ("443,https", "`https`"),
        ] {
            let err = NetworkPolicy::parse(text).expect_err("refused").to_string();
            assert!(err.contains(says), "{text}: {err}");
        }
        let many: Vec<String> = (1..=65).map(|p| p.to_string()).collect();
        assert_eq!(
            NetworkPolicy::parse(&many.join(",")),
            Err(NetworkPolicyError::TooManyPorts { count: 65 })
        );
    }

    proptest! {
        #[test]
        fn a_policy_reads_back_from_its_text(ports in prop::collection::btree_set(1u16.., 1..MAX_PORTS)) {
            let policy = NetworkPolicy::Ports(ports.into_iter().collect());
            prop_assert_eq!(NetworkPolicy::parse(&policy.to_string()), Ok(policy));
        }
    }
}
