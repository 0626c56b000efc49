//! Agent records as each release wrote them: the layout this build
//! writes, and every earlier one, read back with what it lacked filled in.

use holarchy_actors::StoreError;
#[cfg(test)]
use serde::Serialize;

use holarchy_supervision::namespace::DEFAULT;
use holarchy_supervision::AgentRecord;

use super::{decode_body, encode_as, split_version, FORMAT_VERSION};

/// Agents gained their composition (role, skills, limits) in version 2,
/// their own context budget and MCP servers in version 3, their network
/// policy in version 4, and their namespace and labels in version 5; agents written
/// before read back with none, the full network they had, and the
/// default namespace.
pub const AGENT_VERSION: u8 = 5;
pub(super) const AGENT_VERSION_4: u8 = 4;
pub(super) const AGENT_VERSION_3: u8 = 3;
pub(super) const AGENT_VERSION_2: u8 = 2;

pub fn encode_agent(tree: &'static str, agent: &AgentRecord) -> Result<Vec<u8>, StoreError> {
    encode_as(AGENT_VERSION, tree, agent)
}

pub fn decode_agent(tree: &'static str, bytes: &[u8]) -> Result<AgentRecord, StoreError> {
    match split_version(tree, bytes)? {
        (AGENT_VERSION, body) => decode_body(tree, body),
        (AGENT_VERSION_4, body) => decode_body::<AgentRecordV4>(tree, body).map(AgentRecord::from),
        (AGENT_VERSION_3, body) => decode_body::<AgentRecordV3>(tree, body).map(AgentRecord::from),
        (AGENT_VERSION_2, body) => decode_body::<AgentRecordV2>(tree, body).map(AgentRecord::from),
        (FORMAT_VERSION, body) => decode_body::<AgentRecordV1>(tree, body).map(AgentRecord::from),
        (version, _) => Err(StoreError::UnsupportedVersion { tree, version }),
    }
}

/// An agent as version 4 wrote it: the layout must never change.
#[derive(serde::Deserialize)]
#[cfg_attr(test, derive(Serialize))]
pub(super) struct AgentRecordV4 {
    pub(super) id: holarchy_supervision::AgentId,
    pub(super) name: Option<String>,
    pub(super) profile: holarchy_supervision::Profile,
    pub(super) lineage_parent_agent_id: Option<holarchy_supervision::AgentId>,
    pub(super) supervisor_agent_id: Option<holarchy_supervision::AgentId>,
    pub(super) state: holarchy_supervision::LifecycleState,
    pub(super) brain: holarchy_supervision::BrainConfig,
    pub(super) forked_context: Option<String>,
    pub(super) created_at_ms: u64,
    pub(super) updated_at_ms: u64,
    pub(super) composition: Option<Box<holarchy_supervision::Composition>>,
    pub(super) context_tokens: Option<u32>,
    pub(super) mcp_servers: Vec<String>,
    pub(super) network: holarchy_supervision::NetworkPolicy,
}

impl From<AgentRecordV4> for AgentRecord {
    fn from(v4: AgentRecordV4) -> Self {
        AgentRecord {
            id: v4.id,
            name: v4.name,
            profile: v4.profile,
            lineage_parent_agent_id: v4.lineage_parent_agent_id,
            supervisor_agent_id: v4.supervisor_agent_id,
            state: v4.state,
            brain: v4.brain,
            forked_context: v4.forked_context,
            created_at_ms: v4.created_at_ms,
            updated_at_ms: v4.updated_at_ms,
            composition: v4.composition,
            context_tokens: v4.context_tokens,
            mcp_servers: v4.mcp_servers,
            network: v4.network,
            namespace: DEFAULT.to_owned(),
            labels: Default::default(),
        }
    }
}

/// An agent as version 1 wrote it: the layout must never change.
#[derive(serde::Deserialize)]
#[cfg_attr(test, derive(Serialize))]
pub(super) struct AgentRecordV1 {
    pub(super) id: holarchy_supervision::AgentId,
    pub(super) name: Option<String>,
    pub(super) profile: holarchy_supervision::Profile,
    pub(super) lineage_parent_agent_id: Option<holarchy_supervision::AgentId>,
    pub(super) supervisor_agent_id: Option<holarchy_supervision::AgentId>,
    pub(super) state: holarchy_supervision::LifecycleState,
    pub(super) brain: holarchy_supervision::BrainConfig,
    pub(super) forked_context: Option<String>,
    pub(super) created_at_ms: u64,
    pub(super) updated_at_ms: u64,
}

/// An agent as version 2 wrote it: the layout must never change.
#[derive(serde::Deserialize)]
#[cfg_attr(test, derive(Serialize))]
pub(super) struct AgentRecordV2 {
    pub(super) id: holarchy_supervision::AgentId,
    pub(super) name: Option<String>,
    pub(super) profile: holarchy_supervision::Profile,
    pub(super) lineage_parent_agent_id: Option<holarchy_supervision::AgentId>,
    pub(super) supervisor_agent_id: Option<holarchy_supervision::AgentId>,
    pub(super) state: holarchy_supervision::LifecycleState,
    pub(super) brain: holarchy_supervision::BrainConfig,
    pub(super) forked_context: Option<String>,
    pub(super) created_at_ms: u64,
    pub(super) updated_at_ms: u64,
    pub(super) composition: Option<Box<holarchy_supervision::Composition>>,
}

/// An agent as version 3 wrote it: the layout must never change.
#[derive(serde::Deserialize)]
#[cfg_attr(test, derive(Serialize))]
pub(super) struct AgentRecordV3 {
    pub(super) id: holarchy_supervision::AgentId,
    pub(super) name: Option<String>,
    pub(super) profile: holarchy_supervision::Profile,
    pub(super) lineage_parent_agent_id: Option<holarchy_supervision::AgentId>,
    pub(super) supervisor_agent_id: Option<holarchy_supervision::AgentId>,
    pub(super) state: holarchy_supervision::LifecycleState,
    pub(super) brain: holarchy_supervision::BrainConfig,
    pub(super) forked_context: Option<String>,
    pub(super) created_at_ms: u64,
    pub(super) updated_at_ms: u64,
    pub(super) composition: Option<Box<holarchy_supervision::Composition>>,
    pub(super) context_tokens: Option<u32>,
    pub(super) mcp_servers: Vec<String>,
}

impl From<AgentRecordV3> for AgentRecord {
    fn from(v3: AgentRecordV3) -> Self {
        AgentRecord {
            id: v3.id,
            name: v3.name,
            profile: v3.profile,
            lineage_parent_agent_id: v3.lineage_parent_agent_id,
            supervisor_agent_id: v3.supervisor_agent_id,
            state: v3.state,
            brain: v3.brain,
            forked_context: v3.forked_context,
            created_at_ms: v3.created_at_ms,
            updated_at_ms: v3.updated_at_ms,
            composition: v3.composition,
            context_tokens: v3.context_tokens,
            mcp_servers: v3.mcp_servers,
            network: holarchy_supervision::NetworkPolicy::Full,
            namespace: DEFAULT.to_owned(),
            labels: Default::default(),
        }
    }
}

impl From<AgentRecordV2> for AgentRecord {
    fn from(v2: AgentRecordV2) -> Self {
        AgentRecord {
            id: v2.id,
            name: v2.name,
            profile: v2.profile,
            lineage_parent_agent_id: v2.lineage_parent_agent_id,
            supervisor_agent_id: v2.supervisor_agent_id,
            state: v2.state,
            brain: v2.brain,
            forked_context: v2.forked_context,
            created_at_ms: v2.created_at_ms,
            updated_at_ms: v2.updated_at_ms,
            composition: v2.composition,
            context_tokens: None,
            mcp_servers: Vec::new(),
            network: holarchy_supervision::NetworkPolicy::Full,
            namespace: DEFAULT.to_owned(),
            labels: Default::default(),
        }
    }
}

impl From<AgentRecordV1> for AgentRecord {
    fn from(v1: AgentRecordV1) -> Self {
        AgentRecord {
            id: v1.id,
            name: v1.name,
            profile: v1.profile,
            lineage_parent_agent_id: v1.lineage_parent_agent_id,
            supervisor_agent_id: v1.supervisor_agent_id,
            state: v1.state,
            brain: v1.brain,
            forked_context: v1.forked_context,
            created_at_ms: v1.created_at_ms,
            updated_at_ms: v1.updated_at_ms,
            composition: None,
            context_tokens: None,
            mcp_servers: Vec::new(),
            network: holarchy_supervision::NetworkPolicy::Full,
            namespace: DEFAULT.to_owned(),
            labels: Default::default(),
        }
    }
}
