//! Instances as operators and ingress read them: the applied record and
//! the agent that runs it. Reads only; applying is the runtime's.

use holarchy_composition::instance::InstanceRecord;
use holarchy_supervision::{AgentRecord, Visibility};

use crate::store::{InstanceStore, Reads, StoreError};

/// An instance and its agent, as an operator reads them.
#[derive(Debug, Clone)]
pub struct InstanceView {
    pub record: InstanceRecord,
    /// `None` while an apply is half-way or after its agent was removed.
    pub agent: Option<AgentRecord>,
}

#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error("no instance named `{0}`")]
    NotFound(String),
    /// The instance's name is held by an agent that does not run it.
    #[error("{0}")]
    Precondition(String),
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for LookupError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Precondition(why) => LookupError::Precondition(why),
            other => LookupError::Store(other),
        }
    }
}

pub fn get(
    instances: &dyn InstanceStore,
    reads: &dyn Reads,
    name: &str,
) -> Result<InstanceView, LookupError> {
    let record = instances
        .instance(name)?
        .ok_or_else(|| LookupError::NotFound(name.to_owned()))?;
    let agent = agent_of(reads, name)?;
    Ok(InstanceView { record, agent })
}

pub fn list(
    instances: &dyn InstanceStore,
    reads: &dyn Reads,
) -> Result<Vec<InstanceView>, LookupError> {
    instances
        .instances()?
        .into_iter()
        .map(|record| {
            let agent = agent_of(reads, record.name())?;
            Ok(InstanceView { record, agent })
        })
        .collect()
}

/// The agent running instance `name`: the public agent of that name whose
/// composition names the instance. Another agent holding the name is a
/// precondition the operator must clear.
pub fn agent_of(reads: &dyn Reads, name: &str) -> Result<Option<AgentRecord>, LookupError> {
    let Some(id) = reads.agent_id_by_name(name)? else {
        return Ok(None);
    };
    let Some(agent) = reads.agent(id)? else {
        return Ok(None);
    };
    let ours = agent.profile.visibility == Visibility::Public
        && agent
            .composition
            .as_ref()
            .is_some_and(|c| c.instance.as_deref() == Some(name));
    if !ours {
        return Err(LookupError::Precondition(format!(
            "an agent named `{name}` ({id}) exists and does not run instance `{name}`"
        )));
    }
    Ok(Some(agent))
}
