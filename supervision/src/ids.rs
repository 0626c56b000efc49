//! Identifiers: 128-bit ULIDs behind a type per kind, printed with a short
//! prefix (`agt_`, `msg_`, `run_`, `tsk_`, `cln_`) so an id pasted in the wrong place is
//! refused instead of silently matching nothing. Ids sort by creation time,
//! which the store relies on for key order (queues, listings).

use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use ulid::{Generator, Ulid};

/// Why a printed id could not be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdParseError {
    #[error("expected an id starting with `{expected}`")]
    WrongPrefix { expected: &'static str },
    #[error("`{0}` is not a valid id body (26 Crockford base32 characters)")]
    BadBody(String),
}

/// One monotonic generator for the whole process: two ids made in the same
/// millisecond still sort in the order they were made, so a queue keyed by
/// message id keeps arrival order.
static GENERATOR: Mutex<Option<Generator>> = Mutex::new(None);

fn next_ulid() -> Ulid {
    let mut guard = match GENERATOR.lock() {
        Ok(guard) => guard,
        // A panic while holding the lock cannot leave the generator in a
        // state worse than "some ids were skipped", so keep going.
        Err(poisoned) => poisoned.into_inner(),
    };
    let generator = guard.get_or_insert_with(Generator::new);
    // Overflow needs 2^80 ids in one millisecond; fall back to a fresh
    // random id, which still sorts by time at millisecond precision.
    generator.generate().unwrap_or_else(|_| Ulid::new())
}

macro_rules! ulid_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub struct $name(u128);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            /// A fresh id, greater than every id this process made before.
            pub fn generate() -> Self {
                Self(next_ulid().0)
            }

            pub const fn from_u128(raw: u128) -> Self {
                Self(raw)
            }

            pub const fn as_u128(self) -> u128 {
                self.0
            }

            /// Big-endian bytes: byte order equals id order, for store keys.
            pub const fn to_bytes(self) -> [u8; 16] {
                self.0.to_be_bytes()
            }

            pub const fn from_bytes(bytes: [u8; 16]) -> Self {
                Self(u128::from_be_bytes(bytes))
            }

            /// Milliseconds since the Unix epoch at which the id was made.
            pub fn timestamp_ms(self) -> u64 {
                Ulid(self.0).timestamp_ms()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}{}", $prefix, Ulid(self.0))
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }

        impl FromStr for $name {
            type Err = IdParseError;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                let body = text
                    .strip_prefix($prefix)
                    .ok_or(IdParseError::WrongPrefix { expected: $prefix })?;
                Ulid::from_string(body)
                    .map(|ulid| Self(ulid.0))
                    .map_err(|_| IdParseError::BadBody(body.to_owned()))
            }
        }
    };
}

ulid_id!(
    /// Identifies an agent for its whole life, across restarts.
    AgentId,
    "agt_"
);
ulid_id!(
    /// Identifies one message on an agent's queue.
    MessageId,
    "msg_"
);
ulid_id!(
    /// Identifies one turn: a brain call and the tool calls it made.
    RunId,
    "run_"
);
ulid_id!(
    /// Identifies one task: managed execution owned by an agent.
    TaskId,
    "tsk_"
);
ulid_id!(
    /// Identifies one wait: a timer or an external trigger.
    WaitId,
    "wat_"
);
ulid_id!(
    /// Identifies one work item.
    WorkItemId,
    "wrk_"
);
ulid_id!(
    /// Identifies one recorded cleanup of a supervision subtree.
    CleanupId,
    "cln_"
);

/// Position in the event log. Cursor `n` names the `n`-th event (1-based);
/// cursor 0 is "before the first event". Dense and gap-free, so a client
/// that resumes after cursor `n` neither misses nor repeats an event.
pub type EventCursor = u64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_text_and_bytes() {
        let id = AgentId::generate();
        assert_eq!(id.to_string().parse::<AgentId>(), Ok(id));
        assert_eq!(AgentId::from_bytes(id.to_bytes()), id);
        assert!(id.to_string().starts_with("agt_"));
    }

    #[test]
    fn ids_of_another_kind_are_refused() {
        let message = MessageId::generate().to_string();
        assert_eq!(
            message.parse::<AgentId>(),
            Err(IdParseError::WrongPrefix { expected: "agt_" })
        );
        assert!(matches!(
            "agt_not-a-ulid".parse::<AgentId>(),
            Err(IdParseError::BadBody(_))
        ));
    }

    #[test]
    fn ids_sort_in_creation_order_and_bytes_agree() {
        let ids: Vec<MessageId> = (0..1000).map(|_| MessageId::generate()).collect();
        for pair in ids.windows(2) {
            assert!(pair[0] < pair[1]);
            assert!(pair[0].to_bytes() < pair[1].to_bytes());
        }
    }
}
