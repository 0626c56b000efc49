//! Which namespace a call acts in, as the gate (`daemon::gate`) found its
//! caller, and what it may see of others: [`Scopes`] answers whether an
//! id a request names belongs to another namespace, and gives the id that
//! stands for it then (one that exists nowhere). A call made in process
//! with no caller (the daemon's own, or a test's) acts in `default`; the
//! console hands its caller on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use holarchy_actors::{Runtime, StoreError};
use holarchy_supervision::namespace::DEFAULT;
use holarchy_supervision::{AgentId, ApprovalId, TaskId, WorkItemId};
use tonic::Request;

use super::read_model::ReadModel;
use crate::access::Caller;

/// The caller's namespace.
pub fn namespace_of<T>(request: &Request<T>) -> String {
    request
        .extensions()
        .get::<Caller>()
        .map_or_else(|| DEFAULT.to_owned(), |caller| caller.namespace.clone())
}

/// `request` carrying `caller`, for a call made in process on its behalf
/// (the console's): the services then scope it as the gate would.
pub fn on_behalf<T>(message: T, caller: Option<&Caller>) -> Request<T> {
    let mut request = Request::new(message);
    if let Some(caller) = caller {
        request.extensions_mut().insert(caller.clone());
    }
    request
}

/// What an id names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Agent,
    Task,
    Approval,
    WorkItem,
    Instance,
}

/// The most agents not running whose namespace is remembered; past it
/// the memory is emptied (an agent's namespace never changes, so any
/// entry stays true).
const MAX_REMEMBERED: usize = 100_000;

/// Namespaces of what requests name: a running agent's from the
/// runtime's directory, another's read from the store and remembered.
#[derive(Debug)]
pub struct Scopes {
    store: Arc<dyn ReadModel>,
    runtime: Arc<Runtime>,
    agents: Mutex<HashMap<AgentId, Arc<str>>>,
}

impl Scopes {
    pub fn new(store: Arc<dyn ReadModel>, runtime: Arc<Runtime>) -> Self {
        Self {
            store,
            runtime,
            agents: Mutex::new(HashMap::new()),
        }
    }

    /// The namespace of agent `id`, if there is one.
    pub fn of_agent(&self, id: AgentId) -> Result<Option<Arc<str>>, StoreError> {
        // Most requests name a running agent: its entry knows, with no
        // store read (a round trip on PostgreSQL) and no shared map.
        if let Some(namespace) = self.runtime.namespace_of_running(id) {
            return Ok(Some(namespace));
        }
        {
            let agents = self.agents.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(namespace) = agents.get(&id) {
                return Ok(Some(namespace.clone()));
            }
        }
        let Some(record) = self.store.agent(id)? else {
            return Ok(None);
        };
        let namespace: Arc<str> = Arc::from(record.namespace.as_str());
        let mut agents = self.agents.lock().unwrap_or_else(|p| p.into_inner());
        if agents.len() >= MAX_REMEMBERED {
            agents.clear();
        }
        agents.insert(id, namespace.clone());
        Ok(Some(namespace))
    }

    /// The agent `text` (an id of `kind`) belongs to, if it names one.
    pub fn owner(&self, kind: Kind, text: &str) -> Result<Option<AgentId>, StoreError> {
        Ok(match kind {
            Kind::Agent => text.parse::<AgentId>().ok(),
            Kind::Task => match text.parse::<TaskId>() {
                Ok(id) => self.store.task_record(id)?.map(|t| t.owner_agent_id),
                Err(_) => None,
            },
            Kind::Approval => match text.parse::<ApprovalId>() {
                Ok(id) => self.store.approval_record(id)?.map(|a| a.agent_id),
                Err(_) => None,
            },
            Kind::WorkItem => match text.parse::<WorkItemId>() {
                Ok(id) => self.store.work_item(id)?.map(|w| w.owner_agent_id),
                Err(_) => None,
            },
            Kind::Instance => None,
        })
    }

    /// `None` when `text` names nothing of another namespace than
    /// `namespace` (its own, or nothing at all: the service says so);
    /// otherwise the id to hand the service instead, one that exists
    /// nowhere, so its answer is the one for a missing id.
    pub fn stand_in(
        &self,
        kind: Kind,
        text: &str,
        namespace: &str,
    ) -> Result<Option<String>, StoreError> {
        if kind == Kind::Instance {
            // Instances live in the default namespace.
            return Ok((namespace != DEFAULT)
                .then(|| format!("n{}", ulid::Ulid::new().to_string().to_lowercase())));
        }
        // A record that cannot be read is the service's to report (it
        // answers DATA_LOSS, naming where to look): no stand-in for it.
        let damaged = |err: &StoreError| {
            matches!(
                err,
                StoreError::Corrupt { .. } | StoreError::UnsupportedVersion { .. }
            )
        };
        let owner = match self.owner(kind, text) {
            Ok(Some(owner)) => owner,
            Ok(None) => return Ok(None),
            Err(err) if damaged(&err) => return Ok(None),
            Err(err) => return Err(err),
        };
        let foreign = match self.of_agent(owner) {
            Ok(Some(found)) => &*found != namespace,
            Ok(None) => false,
            Err(err) if damaged(&err) => false,
            Err(err) => return Err(err),
        };
        Ok(foreign.then(|| match kind {
            Kind::Agent => AgentId::generate().to_string(),
            Kind::Task => TaskId::generate().to_string(),
            Kind::Approval => ApprovalId::generate().to_string(),
            Kind::WorkItem => WorkItemId::generate().to_string(),
            Kind::Instance => String::new(),
        }))
    }

    /// Whether agent `id` is `namespace`'s (a missing one is nobody's).
    pub fn visible(&self, id: AgentId, namespace: &str) -> Result<bool, StoreError> {
        Ok(self.of_agent(id)?.is_some_and(|found| &*found == namespace))
    }
}
