//! Value encoding: one format-version byte, then the serde value in bincode
//! 2's standard configuration. A reader meets an unknown version with an
//! error naming the tree, never a panic or a misread.

use holarchy_actors::StoreError;
use serde::de::DeserializeOwned;
use serde::Serialize;

use holarchy_supervision::TaskRecord;

/// The version this build writes and reads.
pub const FORMAT_VERSION: u8 = 1;

pub fn encode<T: Serialize>(tree: &'static str, value: &T) -> Result<Vec<u8>, StoreError> {
    encode_as(FORMAT_VERSION, tree, value)
}

fn encode_as<T: Serialize>(
    version: u8,
    tree: &'static str,
    value: &T,
) -> Result<Vec<u8>, StoreError> {
    let mut bytes = vec![version];
    bincode::serde::encode_into_std_write(value, &mut bytes, bincode::config::standard()).map_err(
        |err| StoreError::Corrupt {
            tree,
            detail: format!("encode: {err}"),
        },
    )?;
    Ok(bytes)
}

pub fn decode<T: DeserializeOwned>(tree: &'static str, bytes: &[u8]) -> Result<T, StoreError> {
    let (version, body) = split_version(tree, bytes)?;
    if version != FORMAT_VERSION {
        return Err(StoreError::UnsupportedVersion { tree, version });
    }
    decode_body(tree, body)
}

fn split_version<'a>(tree: &'static str, bytes: &'a [u8]) -> Result<(u8, &'a [u8]), StoreError> {
    let (&version, body) = bytes.split_first().ok_or(StoreError::Corrupt {
        tree,
        detail: "empty value".into(),
    })?;
    Ok((version, body))
}

fn decode_body<T: DeserializeOwned>(tree: &'static str, body: &[u8]) -> Result<T, StoreError> {
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

/// Tasks gained where they ran and the worktree they own in version 2;
/// tasks written before read back with neither.
pub const TASK_VERSION: u8 = 2;

pub fn encode_task(tree: &'static str, task: &TaskRecord) -> Result<Vec<u8>, StoreError> {
    encode_as(TASK_VERSION, tree, task)
}

pub fn decode_task(tree: &'static str, bytes: &[u8]) -> Result<TaskRecord, StoreError> {
    match split_version(tree, bytes)? {
        (TASK_VERSION, body) => decode_body(tree, body),
        (FORMAT_VERSION, body) => decode_body::<TaskRecordV1>(tree, body).map(TaskRecord::from),
        (version, _) => Err(StoreError::UnsupportedVersion { tree, version }),
    }
}

/// A task as version 1 wrote it: the layout must never change.
#[derive(serde::Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct TaskRecordV1 {
    id: holarchy_supervision::TaskId,
    owner_agent_id: holarchy_supervision::AgentId,
    kind: holarchy_supervision::TaskKind,
    label: String,
    status: holarchy_supervision::TaskStatus,
    output: Option<String>,
    command: Option<String>,
    process: Option<holarchy_supervision::ProcessRef>,
    exit: Option<holarchy_supervision::ExitInfo>,
    created_at_ms: u64,
    updated_at_ms: u64,
}

impl From<TaskRecordV1> for TaskRecord {
    fn from(v1: TaskRecordV1) -> Self {
        TaskRecord {
            id: v1.id,
            owner_agent_id: v1.owner_agent_id,
            kind: v1.kind,
            label: v1.label,
            status: v1.status,
            output: v1.output,
            command: v1.command,
            process: v1.process,
            exit: v1.exit,
            created_at_ms: v1.created_at_ms,
            updated_at_ms: v1.updated_at_ms,
            place: None,
            worktree: None,
        }
    }
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

    /// `OutputChunk` as it was stored before its bytes were encoded in bulk.
    #[derive(serde::Serialize, serde::Deserialize)]
    struct ChunkAsSequence {
        offset: u64,
        stream: holarchy_supervision::Stream,
        data: Vec<u8>,
    }

    proptest! {
        #[test]
        fn output_chunks_keep_the_encoding_they_were_stored_with(
            offset in any::<u64>(),
            data in proptest::collection::vec(any::<u8>(), 0..600),
        ) {
            let stream = holarchy_supervision::Stream::Stderr;
            let chunk = holarchy_supervision::OutputChunk { offset, stream, data: data.clone() };
            let old = encode("output", &ChunkAsSequence { offset, stream, data })?;
            prop_assert_eq!(&encode("output", &chunk)?, &old);
            prop_assert_eq!(decode::<holarchy_supervision::OutputChunk>("output", &old)?, chunk);
        }

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
    fn version_1_tasks_read_back_without_place_or_worktree() {
        let v1 = TaskRecordV1 {
            id: holarchy_supervision::TaskId::generate(),
            owner_agent_id: AgentId::generate(),
            kind: holarchy_supervision::TaskKind::Command,
            label: "make".into(),
            status: holarchy_supervision::TaskStatus::Running,
            output: None,
            command: Some("make".into()),
            process: None,
            exit: None,
            created_at_ms: 5,
            updated_at_ms: 6,
        };
        let bytes = encode("tasks", &v1).expect("encodes");
        let task = decode_task("tasks", &bytes).expect("decodes");
        assert_eq!((task.label.as_str(), task.updated_at_ms), ("make", 6));
        assert!(task.place.is_none() && task.worktree.is_none());
        let again = encode_task("tasks", &task).expect("encodes");
        assert_eq!(again[0], TASK_VERSION);
        assert_eq!(decode_task("tasks", &again).expect("decodes"), task);
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
