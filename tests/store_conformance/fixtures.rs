//! Records and batches the checks build on.

use holarchy_actors::{Batch, Write};
use holarchy_supervision::{
    AgentId, AgentRecord, EventKind, LifecycleState, MessageRecord, MessageStatus, Preset,
    Provenance, RunId, TaskId, TaskKind, TaskRecord, WaitId, WaitKind, WaitRecord, WaitStatus,
};

pub fn public(name: &str) -> AgentRecord {
    AgentRecord::public(name, 1)
}

/// An unnamed private child under `supervisor`.
pub fn child_of(supervisor: AgentId) -> AgentRecord {
    AgentRecord {
        name: None,
        profile: Preset::PrivateChild.profile(),
        supervisor_agent_id: Some(supervisor),
        lineage_parent_agent_id: Some(supervisor),
        ..AgentRecord::public("child", 1)
    }
}

pub fn in_state(record: &AgentRecord, state: LifecycleState) -> AgentRecord {
    AgentRecord {
        state,
        ..record.clone()
    }
}

/// The batch that creates `record`, with its event.
pub fn created(record: &AgentRecord) -> Batch {
    Batch::new()
        .write(Write::CreateAgent(record.clone()))
        .event(
            record.id,
            EventKind::AgentCreated {
                name: record.name.clone(),
                preset: None,
                lineage_parent_agent_id: record.lineage_parent_agent_id,
                supervisor_agent_id: record.supervisor_agent_id,
            },
        )
}

pub fn message(agent_id: AgentId, status: MessageStatus, dedupe: Option<&str>) -> MessageRecord {
    MessageRecord {
        status,
        ..MessageRecord::queued(
            agent_id,
            Provenance::Operator,
            "hello".into(),
            dedupe.map(str::to_owned),
            1,
        )
    }
}

/// A run id whose turn started at `ms`.
pub fn run_at(ms: u64) -> RunId {
    RunId::from_u128(u128::from(ms) << 80)
}

pub fn handling(agent_id: AgentId) -> MessageRecord {
    message(
        agent_id,
        MessageStatus::Handling { run_id: run_at(5) },
        None,
    )
}

pub fn command(owner: AgentId) -> TaskRecord {
    TaskRecord::running(
        TaskId::generate(),
        owner,
        TaskKind::Command,
        "build".into(),
        1,
    )
}

pub fn timer(owner: AgentId, deadline_ms: u64) -> WaitRecord {
    wait(owner, WaitKind::Timer { deadline_ms })
}

pub fn trigger(owner: AgentId, token_hash: [u8; 32]) -> WaitRecord {
    wait(owner, WaitKind::Trigger { token_hash })
}

fn wait(owner: AgentId, kind: WaitKind) -> WaitRecord {
    WaitRecord {
        id: WaitId::generate(),
        owner_agent_id: owner,
        kind,
        reason: "later".into(),
        work_item_id: None,
        status: WaitStatus::Armed,
        created_at_ms: 1,
        updated_at_ms: 1,
    }
}

/// A batch of one event and no write: what the event checks count.
pub fn noted(agent_id: AgentId, n: u64) -> Batch {
    Batch::new().event(
        agent_id,
        EventKind::MessageQueued {
            message_id: holarchy_supervision::MessageId::from_u128(u128::from(n) + 1),
            provenance: Provenance::Operator,
        },
    )
}
