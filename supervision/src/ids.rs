//! Identifiers: 128-bit ULIDs behind a type per kind, printed with a short
//! prefix (`agt_`, `msg_`, `run_`, `tsk_`, `cln_`) so an id pasted in the wrong place is
//! refused instead of silently matching nothing. Ids sort by creation time,
//! which the store relies on for key order (queues, listings).

use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use ulid::{Generator, Ulid};

/// Why a printed id could not be read back. No variant carries the text it
/// was given: a client may send megabytes where an id belongs, and the
/// error goes back to it (and into logs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdParseError {
    #[error("expected an id starting with `{expected}`")]
    WrongPrefix { expected: &'static str },
    #[error("not a valid id: after the prefix come {ID_BODY_LEN} Crockford base32 characters, not {len} bytes")]
    BadLength { len: usize },
    #[error(
        "not a valid id: it holds only Crockford base32 characters (0-9, A-Z without I, L, O, U)"
    )]
    BadCharacter,
    /// 26 base32 characters hold 130 bits; an id has 128, so the first
    /// character is at most `7`. Decoding more would drop the top bits and
    /// name another id.
    #[error("not a valid id: ids have 128 bits, so the first character after the prefix is 0-7")]
    Overflow,
}

/// Characters after the prefix.
pub const ID_BODY_LEN: usize = 26;

/// Decodes an id body, refusing any text whose value does not fit in 128
/// bits (the `ulid` crate silently drops those bits).
fn decode_body(body: &str) -> Result<u128, IdParseError> {
    if body.len() != ID_BODY_LEN {
        return Err(IdParseError::BadLength { len: body.len() });
    }
    let raw = Ulid::from_string(body).map_err(|_| IdParseError::BadCharacter)?;
    // The body is 26 valid base32 characters, so ASCII: the first byte is
    // the top 5 bits' digit, of which only the low 3 may be set.
    match body.as_bytes().first() {
        Some(b'0'..=b'7') => Ok(raw.0),
        _ => Err(IdParseError::Overflow),
    }
}

/// One monotonic generator for the whole process: two ids made in the same
/// millisecond still sort in the order they were made, so a queue keyed by
/// message id keeps arrival order.
static GENERATOR: Mutex<Option<Generator>> = Mutex::new(None);

fn next_raw() -> Ulid {
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

/// The next id, its low bits set to `slot` (by default, its own random
/// low bits): the generator's random bits move up past them, so every id
/// this process makes, in a slot or not, sorts after the ones before it.
fn next_ulid_in(slot: Option<u16>) -> Ulid {
    let ulid = next_raw();
    let low = slot.map_or(ulid.random() & Slot::MASK, u128::from);
    Ulid::from_parts(ulid.timestamp_ms(), ulid.random() << Slot::BITS | low)
}

fn next_ulid() -> Ulid {
    next_ulid_in(None)
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
                decode_body(body).map(Self)
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
ulid_id!(
    /// Identifies one inbound event (a webhook delivery, a schedule's
    /// firing, a published event), as the event store first kept it.
    InboundId,
    "evt_"
);
ulid_id!(
    /// Identifies one tool call parked for an operator's approval.
    ApprovalId,
    "apr_"
);
ulid_id!(
    /// Identifies one note in an agent's durable memory.
    NoteId,
    "note_"
);
ulid_id!(
    /// Identifies one replay: recorded turns run through a candidate.
    ReplayId,
    "rpl_"
);

/// One of the [`Slot::COUNT`] parts the agents are divided into, a tree
/// always whole in one: what a cluster of daemons will route and fence
/// by, the way a sharded store routes by shard.
///
/// An agent's slot is written in its id (the low bits), so finding it
/// needs no lookup, and it never changes. A root (an agent an operator or
/// an instance made) gets the slot its random bits fall in; every agent
/// spawned below it is made in its creator's slot
/// ([`AgentId::generate_in`]), so a tree's agents share their root's
/// slot. Trees made before ids carried their slot keep their children in
/// slots of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Slot(u16);

impl Slot {
    /// How many slots there are: a power of two, so a slot is a mask.
    pub const COUNT: u16 = 1024;
    pub const FIRST: Slot = Slot(0);
    const MASK: u128 = Self::COUNT as u128 - 1;
    /// Bits of an id that name its slot.
    const BITS: u32 = Self::COUNT.trailing_zeros();

    /// The slot numbered `n`, if there is one.
    pub const fn new(n: u16) -> Option<Self> {
        if n < Self::COUNT {
            Some(Self(n))
        } else {
            None
        }
    }

    pub const fn get(self) -> u16 {
        self.0
    }

    /// Every slot, in order.
    pub fn all() -> impl Iterator<Item = Slot> {
        (0..Self::COUNT).map(Slot)
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl AgentId {
    /// The slot this agent (and its whole tree) is in.
    pub const fn slot(self) -> Slot {
        Slot((self.0 & Slot::MASK) as u16)
    }

    /// A fresh id in `slot`, for an agent spawned by one in that slot;
    /// greater than every id this process made before, as
    /// [`AgentId::generate`]'s.
    pub fn generate_in(slot: Slot) -> Self {
        Self(next_ulid_in(Some(slot.0)).0)
    }
}

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
    fn an_id_made_in_a_slot_is_in_it_and_distinct_from_its_neighbours() {
        let root = AgentId::generate();
        let made: Vec<AgentId> = (0..2000)
            .map(|_| AgentId::generate_in(root.slot()))
            .collect();
        assert!(made.iter().all(|id| id.slot() == root.slot()));
        let mut distinct = made.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), made.len());
        // Made in order, they sort in order (the random bits' top ten
        // wrap only once in 2^70 ids), in a slot or not.
        assert!(made.windows(2).all(|w| w[0] < w[1]), "out of order");
        let mixed: Vec<AgentId> = (0..2000)
            .map(|n| match n % 3 {
                0 => AgentId::generate(),
                _ => AgentId::generate_in(root.slot()),
            })
            .collect();
        assert!(mixed.windows(2).all(|w| w[0] < w[1]), "mixed out of order");
        let last = Slot::new(Slot::COUNT - 1).map(AgentId::generate_in);
        assert_eq!(last.map(|id| id.slot().get()), Some(Slot::COUNT - 1));
        assert_eq!(Slot::new(Slot::COUNT), None);
    }

    #[test]
    fn ids_of_another_kind_are_refused() {
        let message = MessageId::generate().to_string();
        assert_eq!(
            message.parse::<AgentId>(),
            Err(IdParseError::WrongPrefix { expected: "agt_" })
        );
        assert_eq!(
            "agt_not-a-ulid".parse::<AgentId>(),
            Err(IdParseError::BadLength { len: 10 })
        );
        assert_eq!(
            "agt_01ARZ3NDEKTSV4RRFFQ69G5FA!".parse::<AgentId>(),
            Err(IdParseError::BadCharacter)
        );
    }

    #[test]
    fn ids_with_bits_beyond_128_are_refused_not_wrapped() {
        let max = AgentId::from_u128(u128::MAX);
        assert_eq!(max.to_string(), "agt_7ZZZZZZZZZZZZZZZZZZZZZZZZZ");
        assert_eq!(max.to_string().parse::<AgentId>(), Ok(max));
        // `8` sets bit 128: without the check this decoded to id 0.
        for first in ['8', '9', 'A', 'Z', 'z'] {
            let text = format!("agt_{first}0000000000000000000000000");
            assert_eq!(
                text.parse::<AgentId>(),
                Err(IdParseError::Overflow),
                "{text}"
            );
        }
        let zero = "agt_00000000000000000000000000".parse::<AgentId>();
        assert_eq!(zero, Ok(AgentId::from_u128(0)));
    }

    proptest::proptest! {
        #[test]
        fn every_128_bit_id_round_trips(raw in proptest::prelude::any::<u128>()) {
            let id = TaskId::from_u128(raw);
            proptest::prop_assert_eq!(id.to_string().parse::<TaskId>(), Ok(id));
        }

        #[test]
        fn a_parsed_id_prints_back_as_the_text_it_came_from(
            body in "[0-9A-HJKMNP-TV-Z]{26}"
        ) {
            // Either refused, or the same id: never a different one.
            if let Ok(id) = format!("tsk_{body}").parse::<TaskId>() {
                proptest::prop_assert_eq!(id.to_string(), format!("tsk_{body}"));
            } else {
                proptest::prop_assert!(body.as_bytes()[0] > b'7');
            }
        }
    }

    #[test]
    fn a_huge_bad_id_is_not_echoed() {
        let huge = format!("agt_{}", "x".repeat(100_000));
        let err = huge.parse::<AgentId>().expect_err("refused");
        assert!(err.to_string().len() < 200, "{err}");
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
