//! How each method is scoped to its caller's namespace: which field names
//! the agent, task, approval, work item or instance it acts on (the gate
//! checks that one is the caller's), or that the service itself lists
//! only the caller's namespace.
//!
//! A call that names something of another namespace is answered exactly
//! as one naming nothing would be: the gate hands the service an id that
//! does not exist in its place, and puts the caller's text back in the
//! answer, so no message, code or timing path tells the two apart.

/// A method's scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// A string field naming an agent by id.
    Agent(u32),
    /// An agent field that may be empty; then the service lists only the
    /// caller's namespace.
    AgentOrListing(u32),
    /// A repeated message field, each naming an agent in its own field.
    EachAgent(u32, u32),
    Task(u32),
    Approval(u32),
    WorkItem(u32),
    /// An instance by name: instances live in the default namespace.
    Instance(u32),
    /// Applying a manifest: only callers in the default namespace.
    InstanceApply,
    /// The service lists only the caller's namespace.
    Listing,
    /// Makes agents in the caller's namespace.
    Creates,
    /// About no agent: status, who am I, a trigger delivered by its
    /// token (the token is the capability).
    Open,
    /// Tokens and the audit trail: the service keeps an admin of a
    /// namespace to its own.
    Access,
}

const SCOPES: &[(&str, Scope)] = &[
    ("AgentService/CreateAgent", Scope::Creates),
    ("AgentService/CreateAgents", Scope::Creates),
    ("AgentService/GetAgent", Scope::Agent(1)),
    ("AgentService/ListAgents", Scope::Listing),
    ("AgentService/SendMessage", Scope::Agent(1)),
    ("AgentService/SendMessages", Scope::EachAgent(1, 1)),
    ("AgentService/ListMessages", Scope::Agent(1)),
    ("AgentService/WatchEvents", Scope::AgentOrListing(3)),
    ("AgentService/WatchReplies", Scope::Agent(1)),
    ("AgentService/ArchiveAgent", Scope::Agent(1)),
    ("AgentService/DeleteAgent", Scope::Agent(1)),
    ("AgentService/AbortRun", Scope::Agent(1)),
    ("AgentService/PauseAgent", Scope::Agent(1)),
    ("AgentService/ResumeAgent", Scope::Agent(1)),
    ("AgentService/UpdateAgentBrain", Scope::Agent(1)),
    ("AgentService/ListTools", Scope::Agent(1)),
    ("AgentService/GetAgentContext", Scope::Agent(1)),
    ("ApprovalService/ListApprovals", Scope::AgentOrListing(1)),
    ("ApprovalService/GetApproval", Scope::Approval(1)),
    ("ApprovalService/Approve", Scope::Approval(1)),
    ("ApprovalService/Deny", Scope::Approval(1)),
    ("InstanceService/ApplyInstance", Scope::InstanceApply),
    ("InstanceService/GetInstance", Scope::Instance(1)),
    ("InstanceService/ListInstances", Scope::Listing),
    ("InstanceService/DeleteInstance", Scope::Instance(1)),
    ("InstanceService/PublishEvent", Scope::Instance(1)),
    ("InstanceService/GetInboundEvent", Scope::Instance(1)),
    ("MemoryService/SearchMemory", Scope::Agent(1)),
    ("MemoryService/ListMemory", Scope::Agent(1)),
    ("MemoryService/WriteMemory", Scope::Agent(1)),
    ("ReplayService/StartReplay", Scope::Agent(1)),
    // A replay is its agent's namespace's: the service shows a caller only
    // its own.
    ("ReplayService/GetReplay", Scope::Listing),
    ("ReplayService/ListReplays", Scope::Listing),
    ("ReplayService/CancelReplay", Scope::Listing),
    ("ReplayService/ResumeReplay", Scope::Listing),
    ("ReplayService/DeleteReplay", Scope::Listing),
    ("RuntimeService/GetStatus", Scope::Open),
    ("RuntimeService/GetActivity", Scope::Listing),
    ("SupervisionService/GetTree", Scope::AgentOrListing(1)),
    ("TaskService/ListTasks", Scope::Agent(1)),
    ("TaskService/GetTask", Scope::Task(1)),
    ("TaskService/ReadTaskOutput", Scope::Task(1)),
    ("TaskService/FollowTaskOutput", Scope::Task(1)),
    ("TaskService/SendTaskInput", Scope::Task(1)),
    ("TaskService/StopTask", Scope::Task(1)),
    ("TriggerService/DeliverTrigger", Scope::Open),
    ("WorkService/ListWorkItems", Scope::Agent(1)),
    ("WorkService/GetWorkItem", Scope::WorkItem(1)),
    ("WorkspaceService/AttachWorkspace", Scope::Agent(1)),
    ("WorkspaceService/DetachWorkspace", Scope::Agent(1)),
    ("WorkspaceService/ListWorkspaces", Scope::Agent(1)),
    ("AccessService/WhoAmI", Scope::Open),
    ("AccessService/CreateToken", Scope::Access),
    ("AccessService/ListTokens", Scope::Access),
    ("AccessService/RevokeToken", Scope::Access),
    ("AccessService/ListAudit", Scope::Access),
    ("AccessService/SetQuota", Scope::Access),
    ("AccessService/ListNamespaces", Scope::Access),
];

/// The scope of `method` (`Service/Method`); a method the table does not
/// know is [`Scope::Open`] only if it is none of the API's (the health
/// and reflection services).
pub fn of(method: &str) -> Scope {
    SCOPES
        .iter()
        .find(|(name, _)| *name == method)
        .map_or(Scope::Open, |(_, scope)| *scope)
}

impl Scope {
    /// Whether the gate reads the request to scope it.
    pub fn reads_request(self) -> bool {
        matches!(
            self,
            Scope::Agent(_)
                | Scope::AgentOrListing(_)
                | Scope::EachAgent(..)
                | Scope::Task(_)
                | Scope::Approval(_)
                | Scope::WorkItem(_)
                | Scope::Instance(_)
        )
    }
}

#[cfg(test)]
mod tests {
    use prost_types::field_descriptor_proto::Type;

    use super::*;

    #[test]
    fn every_method_has_a_scope_and_each_field_is_a_string() {
        let api = super::super::descriptors::compiled();
        let (inputs, field) = (&api.inputs, |m: &str, n: u32| api.field(m, n));
        assert_eq!(
            inputs.len(),
            SCOPES.len(),
            "a method without a scope, or one listed twice"
        );
        for (method, input) in inputs {
            let (_, scope) = SCOPES
                .iter()
                .find(|(name, _)| name == method)
                .unwrap_or_else(|| panic!("{method} has no scope"));
            match *scope {
                Scope::Agent(n)
                | Scope::AgentOrListing(n)
                | Scope::Task(n)
                | Scope::Approval(n)
                | Scope::WorkItem(n)
                | Scope::Instance(n) => {
                    assert_eq!(field(input, n).0, Type::String, "{method}")
                }
                Scope::EachAgent(list, n) => {
                    let (kind, item) = field(input, list);
                    assert_eq!(kind, Type::Message, "{method}");
                    assert_eq!(field(&item, n).0, Type::String, "{method}");
                }
                _ => {}
            }
        }
    }
}
