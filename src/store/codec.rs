//! Value encoding: one format-version byte, then the serde value in bincode
//! 2's standard configuration. A reader meets an unknown version with an
//! error naming the tree, never a panic or a misread.

use holarchy_actors::StoreError;
use serde::de::DeserializeOwned;
use serde::Serialize;

use holarchy_composition::approval::ApprovalRecord;
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

/// Approvals gained the place their call runs in with version 2;
/// approvals written before read back without one (they run where their
/// agent works when approved, as before).
pub const APPROVAL_VERSION: u8 = 2;

pub fn encode_approval(
    tree: &'static str,
    approval: &ApprovalRecord,
) -> Result<Vec<u8>, StoreError> {
    encode_as(APPROVAL_VERSION, tree, approval)
}

pub fn decode_approval(tree: &'static str, bytes: &[u8]) -> Result<ApprovalRecord, StoreError> {
    match split_version(tree, bytes)? {
        (APPROVAL_VERSION, body) => decode_body(tree, body),
        (FORMAT_VERSION, body) => {
            decode_body::<ApprovalRecordV1>(tree, body).map(ApprovalRecord::from)
        }
        (version, _) => Err(StoreError::UnsupportedVersion { tree, version }),
    }
}

/// An approval as version 1 wrote it: the layout must never change.
#[derive(serde::Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct ApprovalRecordV1 {
    id: holarchy_supervision::ApprovalId,
    agent_id: holarchy_supervision::AgentId,
    instance: Option<String>,
    run_id: holarchy_supervision::RunId,
    tool: String,
    input: String,
    layer: String,
    status: holarchy_composition::approval::ApprovalStatus,
    delivered: bool,
    created_at_ms: u64,
    decided_at_ms: Option<u64>,
}

impl From<ApprovalRecordV1> for ApprovalRecord {
    fn from(v1: ApprovalRecordV1) -> Self {
        ApprovalRecord {
            id: v1.id,
            agent_id: v1.agent_id,
            instance: v1.instance,
            run_id: v1.run_id,
            tool: v1.tool,
            input: v1.input,
            layer: v1.layer,
            status: v1.status,
            delivered: v1.delivered,
            created_at_ms: v1.created_at_ms,
            decided_at_ms: v1.decided_at_ms,
            place: None,
        }
    }
}

mod agent;
pub use agent::{decode_agent, encode_agent, AGENT_VERSION};
#[cfg(test)]
use agent::{
    AgentRecordV1, AgentRecordV2, AgentRecordV3, AgentRecordV4, AGENT_VERSION_2, AGENT_VERSION_3,
    AGENT_VERSION_4,
};

mod instance;
pub use instance::{decode_instance, encode_instance};

/// The event log keeps a commit's events in runs (see `event_log`):
/// version 3 holds consecutive events back to back, each in bincode with
/// its number in its slot; version 2 the same without that number (read
/// back as 0); version 1, the first release's, holds one event.
pub const EVENT_RUN_VERSION: u8 = 3;
const EVENT_RUN_VERSION_2: u8 = 2;

/// Borrows an event's parts; serialises exactly as the [`Event`] it
/// describes (same fields, same order), so no kind is cloned to write it.
#[derive(serde::Serialize)]
struct EventParts<'a> {
    cursor: holarchy_supervision::EventCursor,
    seq: u64,
    at_ms: u64,
    agent_id: &'a Option<holarchy_supervision::AgentId>,
    kind: &'a holarchy_supervision::EventKind,
}

/// An event as versions 1 and 2 wrote it: before slots.
#[derive(serde::Deserialize)]
struct EventV2 {
    cursor: holarchy_supervision::EventCursor,
    at_ms: u64,
    agent_id: Option<holarchy_supervision::AgentId>,
    kind: holarchy_supervision::EventKind,
}

impl From<EventV2> for holarchy_supervision::Event {
    fn from(v2: EventV2) -> Self {
        Self {
            cursor: v2.cursor,
            seq: 0,
            at_ms: v2.at_ms,
            agent_id: v2.agent_id,
            kind: v2.kind,
        }
    }
}

/// An empty run, ready for [`append_event`].
pub fn start_event_run() -> Vec<u8> {
    vec![EVENT_RUN_VERSION]
}

/// One event's place: its cursor in the log and its number in its slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventPlace {
    pub cursor: holarchy_supervision::EventCursor,
    pub seq: u64,
}

/// Appends one event to a run started by [`start_event_run`].
pub fn append_event(
    tree: &'static str,
    run: &mut Vec<u8>,
    place: EventPlace,
    at_ms: u64,
    agent_id: &Option<holarchy_supervision::AgentId>,
    kind: &holarchy_supervision::EventKind,
) -> Result<(), StoreError> {
    let parts = EventParts {
        cursor: place.cursor,
        seq: place.seq,
        at_ms,
        agent_id,
        kind,
    };
    bincode::serde::encode_into_std_write(&parts, run, bincode::config::standard()).map_err(
        |err| StoreError::Corrupt {
            tree,
            detail: format!("encode: {err}"),
        },
    )?;
    Ok(())
}

/// The events of one value of the event log, in cursor order.
pub fn decode_event_run(
    tree: &'static str,
    bytes: &[u8],
) -> Result<Vec<holarchy_supervision::Event>, StoreError> {
    match split_version(tree, bytes)? {
        (FORMAT_VERSION, body) => Ok(vec![decode_body::<EventV2>(tree, body)?.into()]),
        (EVENT_RUN_VERSION_2, body) => {
            decode_events::<EventV2>(tree, body).map(|v| v.into_iter().map(Into::into).collect())
        }
        (EVENT_RUN_VERSION, body) => decode_events(tree, body),
        (version, _) => Err(StoreError::UnsupportedVersion { tree, version }),
    }
}

/// Events back to back, each in bincode.
fn decode_events<T: DeserializeOwned>(
    tree: &'static str,
    mut body: &[u8],
) -> Result<Vec<T>, StoreError> {
    let mut events = Vec::new();
    while !body.is_empty() {
        let (event, read) = bincode::serde::decode_from_slice(body, bincode::config::standard())
            .map_err(|err| StoreError::Corrupt {
                tree,
                detail: err.to_string(),
            })?;
        events.push(event);
        body = &body[read..];
    }
    Ok(events)
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
            composition: None,
            context_tokens: None,
            mcp_servers: Vec::new(),
            network: Default::default(),
            namespace: holarchy_supervision::namespace::DEFAULT.to_owned(),
            labels: Default::default(),
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
            let bytes = encode_agent("agents", &value)?;
            prop_assert_eq!(bytes[0], AGENT_VERSION);
            prop_assert_eq!(decode_agent("agents", &bytes)?, value);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_agent("agents", &bytes);
        }
    }

    #[test]
    fn version_1_approvals_read_back_with_no_place() {
        let v1 = ApprovalRecordV1 {
            id: holarchy_supervision::ApprovalId::generate(),
            agent_id: holarchy_supervision::AgentId::generate(),
            instance: Some("ops".into()),
            run_id: holarchy_supervision::RunId::generate(),
            tool: "ExecCommand".into(),
            input: r#"{"command":"make"}"#.into(),
            layer: "config".into(),
            status: holarchy_composition::approval::ApprovalStatus::Pending,
            delivered: false,
            created_at_ms: 3,
            decided_at_ms: None,
        };
        let bytes = encode("approvals", &v1).expect("encodes");
        let read = decode_approval("approvals", &bytes).expect("decodes");
        assert_eq!((read.id, read.place), (v1.id, None));
        let placed = ApprovalRecord {
            place: Some(holarchy_supervision::workspace::Place {
                workspace_id: "repo".into(),
                dir: "/srv/repo".into(),
            }),
            ..read
        };
        let bytes = encode_approval("approvals", &placed).expect("encodes");
        assert_eq!(
            decode_approval("approvals", &bytes).expect("decodes"),
            placed
        );
    }

    #[test]
    fn version_1_agents_read_back_with_no_composition() {
        let mut composed = record(Some("lead".into()), 7);
        let v1 = AgentRecordV1 {
            id: composed.id,
            name: composed.name.clone(),
            profile: composed.profile,
            lineage_parent_agent_id: composed.lineage_parent_agent_id,
            supervisor_agent_id: composed.supervisor_agent_id,
            state: composed.state,
            brain: composed.brain.clone(),
            forked_context: None,
            created_at_ms: 7,
            updated_at_ms: 7,
        };
        let bytes = encode("agents", &v1).expect("encodes");
        assert_eq!(decode_agent("agents", &bytes).expect("decodes"), composed);
        composed.composition = Some(Box::new(holarchy_supervision::Composition {
            instance: Some("lead".into()),
            skills: vec!["triage".into()],
            ..Default::default()
        }));
        let again = encode_agent("agents", &composed).expect("encodes");
        assert_eq!(again[0], AGENT_VERSION);
        assert_eq!(decode_agent("agents", &again).expect("decodes"), composed);
    }

    #[test]
    fn version_2_agents_read_back_with_no_budget_and_no_mcp_servers() {
        let mut agent = record(Some("lead".into()), 9);
        agent.composition = Some(Box::new(holarchy_supervision::Composition {
            instance: Some("lead".into()),
            ..Default::default()
        }));
        let v2 = AgentRecordV2 {
            id: agent.id,
            name: agent.name.clone(),
            profile: agent.profile,
            lineage_parent_agent_id: agent.lineage_parent_agent_id,
            supervisor_agent_id: agent.supervisor_agent_id,
            state: agent.state,
            brain: agent.brain.clone(),
            forked_context: None,
            created_at_ms: 9,
            updated_at_ms: 9,
            composition: agent.composition.clone(),
        };
        let bytes = encode_as(AGENT_VERSION_2, "agents", &v2).expect("encodes");
        assert_eq!(decode_agent("agents", &bytes).expect("decodes"), agent);
        agent.context_tokens = Some(4_000);
        agent.mcp_servers = vec!["files".into(), "search".into()];
        let again = encode_agent("agents", &agent).expect("encodes");
        assert_eq!(decode_agent("agents", &again).expect("decodes"), agent);
    }

    #[test]
    fn version_3_agents_read_back_with_the_full_network() {
        let mut agent = record(Some("lead".into()), 9);
        agent.context_tokens = Some(4_000);
        agent.mcp_servers = vec!["files".into()];
        let v3 = AgentRecordV3 {
            id: agent.id,
            name: agent.name.clone(),
            profile: agent.profile,
            lineage_parent_agent_id: agent.lineage_parent_agent_id,
            supervisor_agent_id: agent.supervisor_agent_id,
            state: agent.state,
            brain: agent.brain.clone(),
            forked_context: None,
            created_at_ms: 9,
            updated_at_ms: 9,
            composition: None,
            context_tokens: agent.context_tokens,
            mcp_servers: agent.mcp_servers.clone(),
        };
        let bytes = encode_as(AGENT_VERSION_3, "agents", &v3).expect("encodes");
        assert_eq!(decode_agent("agents", &bytes).expect("decodes"), agent);
        agent.network = holarchy_supervision::NetworkPolicy::Ports(vec![443]);
        let again = encode_agent("agents", &agent).expect("encodes");
        assert_eq!(again[0], AGENT_VERSION);
        assert_eq!(decode_agent("agents", &again).expect("decodes"), agent);
    }
    #[test]
    fn version_4_agents_read_back_in_the_default_namespace() {
        let mut agent = record(Some("lead".into()), 9);
        agent.network = holarchy_supervision::NetworkPolicy::Ports(vec![443]);
        let v4 = AgentRecordV4 {
            id: agent.id,
            name: agent.name.clone(),
            profile: agent.profile,
            lineage_parent_agent_id: agent.lineage_parent_agent_id,
            supervisor_agent_id: agent.supervisor_agent_id,
            state: agent.state,
            brain: agent.brain.clone(),
            forked_context: None,
            created_at_ms: 9,
            updated_at_ms: 9,
            composition: None,
            context_tokens: None,
            mcp_servers: Vec::new(),
            network: agent.network.clone(),
        };
        let bytes = encode_as(AGENT_VERSION_4, "agents", &v4).expect("encodes");
        assert_eq!(decode_agent("agents", &bytes).expect("decodes"), agent);
        agent.namespace = "team-a".into();
        let again = encode_agent("agents", &agent).expect("encodes");
        assert_eq!(again[0], AGENT_VERSION);
        assert_eq!(decode_agent("agents", &again).expect("decodes"), agent);
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
        let mut bytes = encode_agent("agents", &record(None, 1)).expect("encodes");
        bytes[0] = 9;
        assert!(matches!(
            decode_agent("agents", &bytes),
            Err(StoreError::UnsupportedVersion {
                tree: "agents",
                version: 9
            })
        ));
        assert!(matches!(
            decode_agent("agents", &[]),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
