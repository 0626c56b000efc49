//! Value encoding: one format-version byte, then the serde value in bincode
//! 2's standard configuration. A reader meets an unknown version with an
//! error naming the tree, never a panic or a misread.

use holarchy_actors::StoreError;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// The version this build writes and reads.
pub const FORMAT_VERSION: u8 = 1;

pub fn encode<T: Serialize>(tree: &'static str, value: &T) -> Result<Vec<u8>, StoreError> {
    let mut bytes = vec![FORMAT_VERSION];
    bincode::serde::encode_into_std_write(value, &mut bytes, bincode::config::standard()).map_err(
        |err| StoreError::Corrupt {
            tree,
            detail: format!("encode: {err}"),
        },
    )?;
    Ok(bytes)
}

pub fn decode<T: DeserializeOwned>(tree: &'static str, bytes: &[u8]) -> Result<T, StoreError> {
    let (&version, body) = bytes.split_first().ok_or(StoreError::Corrupt {
        tree,
        detail: "empty value".into(),
    })?;
    if version != FORMAT_VERSION {
        return Err(StoreError::UnsupportedVersion { tree, version });
    }
    let (value, read) = bincode::serde::decode_from_slice(body, bincode::config::standard())
        .map_err(|err| StoreError::Corrupt {
            tree,
            detail: err.to_string(),
        })?;
    if read != body.len() {
        return Err(StoreError::Corrupt {
            tree,
            detail: format!("{} trailing bytes", body.len() - read),
        });
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use holarchy_supervision::{AgentId, AgentRecord, LifecycleState, Preset};
    use proptest::prelude::*;

    use super::*;

    fn record(name: Option<String>, millis: u64) -> AgentRecord {
        AgentRecord {
            id: AgentId::generate(),
            name,
            profile: Preset::PublicNamed.profile(),
            lineage_parent_agent_id: Some(AgentId::generate()),
            supervisor_agent_id: None,
            state: LifecycleState::Paused,
            brain: Default::default(),
            forked_context: None,
            created_at_ms: millis,
            updated_at_ms: millis,
        }
    }

    proptest! {
        #[test]
        fn records_round_trip(name in proptest::option::of("[a-z0-9_.-]{0,64}"), millis in any::<u64>()) {
            let value = record(name, millis);
            let bytes = encode("agents", &value)?;
            prop_assert_eq!(bytes[0], FORMAT_VERSION);
            prop_assert_eq!(decode::<AgentRecord>("agents", &bytes)?, value);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode::<AgentRecord>("agents", &bytes);
        }
    }

    #[test]
    fn unknown_versions_are_refused() {
        let mut bytes = encode("agents", &record(None, 1)).expect("encodes");
        bytes[0] = 9;
        assert!(matches!(
            decode::<AgentRecord>("agents", &bytes),
            Err(StoreError::UnsupportedVersion {
                tree: "agents",
                version: 9
            })
        ));
        assert!(matches!(
            decode::<AgentRecord>("agents", &[]),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
