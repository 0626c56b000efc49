//! What each gRPC method needs: the least role that may call it, and
//! whether a call is an operator action the audit trail records.
//!
//! The table names every method of the API; a test checks it against the
//! compiled descriptors, so a method added to a `.proto` without a line
//! here fails the build's tests rather than falling to a default. A path
//! the table does not know (no method at all) needs `admin` and is
//! answered UNIMPLEMENTED by tonic after that.

use super::Role;

/// What a method needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    pub role: Role,
    /// A write: the call is recorded in the audit trail, refused or not.
    pub audited: bool,
}

const fn read() -> Needs {
    Needs {
        role: Role::Viewer,
        audited: false,
    }
}

const fn write() -> Needs {
    Needs {
        role: Role::Operator,
        audited: true,
    }
}

const fn admin_write() -> Needs {
    Needs {
        role: Role::Admin,
        audited: true,
    }
}

const fn admin_read() -> Needs {
    Needs {
        role: Role::Admin,
        audited: false,
    }
}

/// Every method, as `Service/Method` within `holarchy.v1`, with its needs.
const METHODS: &[(&str, Needs)] = &[
    ("AgentService/CreateAgent", write()),
    ("AgentService/CreateAgents", write()),
    ("AgentService/GetAgent", read()),
    ("AgentService/ListAgents", read()),
    ("AgentService/SendMessage", write()),
    ("AgentService/SendMessages", write()),
    ("AgentService/ListMessages", read()),
    ("AgentService/WatchEvents", read()),
    ("AgentService/WatchReplies", read()),
    ("AgentService/ArchiveAgent", write()),
    ("AgentService/DeleteAgent", write()),
    ("AgentService/AbortRun", write()),
    ("AgentService/PauseAgent", write()),
    ("AgentService/ResumeAgent", write()),
    ("AgentService/UpdateAgentBrain", write()),
    ("AgentService/ListTools", read()),
    ("AgentService/GetAgentContext", read()),
    ("ApprovalService/ListApprovals", read()),
    ("ApprovalService/GetApproval", read()),
    ("ApprovalService/Approve", write()),
    ("ApprovalService/Deny", write()),
    ("InstanceService/ApplyInstance", write()),
    ("InstanceService/GetInstance", read()),
    ("InstanceService/ListInstances", read()),
    ("InstanceService/DeleteInstance", write()),
    ("InstanceService/PublishEvent", write()),
    ("InstanceService/GetInboundEvent", read()),
    ("MemoryService/SearchMemory", read()),
    ("MemoryService/ListMemory", read()),
    ("MemoryService/WriteMemory", write()),
    ("ReplayService/StartReplay", write()),
    ("ReplayService/GetReplay", read()),
    ("ReplayService/ListReplays", read()),
    ("ReplayService/CancelReplay", write()),
    ("ReplayService/ResumeReplay", write()),
    ("ReplayService/DeleteReplay", write()),
    ("RuntimeService/GetStatus", read()),
    ("RuntimeService/GetActivity", read()),
    ("SupervisionService/GetTree", read()),
    ("TaskService/ListTasks", read()),
    ("TaskService/GetTask", read()),
    ("TaskService/ReadTaskOutput", read()),
    ("TaskService/FollowTaskOutput", read()),
    ("TaskService/SendTaskInput", write()),
    ("TaskService/StopTask", write()),
    ("TriggerService/DeliverTrigger", write()),
    ("WorkService/ListWorkItems", read()),
    ("WorkService/GetWorkItem", read()),
    ("WorkspaceService/AttachWorkspace", write()),
    ("WorkspaceService/DetachWorkspace", write()),
    ("WorkspaceService/ListWorkspaces", read()),
    ("AccessService/WhoAmI", read()),
    ("AccessService/CreateToken", admin_write()),
    ("AccessService/ListTokens", admin_read()),
    ("AccessService/RevokeToken", admin_write()),
    ("AccessService/ListAudit", admin_read()),
    ("AccessService/SetQuota", admin_write()),
    ("AccessService/ListNamespaces", admin_read()),
];

/// The package of the API's services.
const PACKAGE: &str = "/holarchy.v1.";

/// The health and reflection services: open to every authenticated
/// caller, recorded never.
const OPEN_PREFIXES: &[&str] = &[
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1.ServerReflection/",
    "/grpc.reflection.v1alpha.ServerReflection/",
];

/// The method of a request path, `Service/Method`, if it is one of the
/// API's.
pub fn method(path: &str) -> Option<&'static str> {
    let name = path.strip_prefix(PACKAGE)?;
    METHODS
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(known, _)| *known)
}

/// What the request path `path` needs.
pub fn needs(path: &str) -> Needs {
    if OPEN_PREFIXES.iter().any(|p| path.starts_with(p)) {
        return read();
    }
    let Some(name) = path.strip_prefix(PACKAGE) else {
        return admin_read();
    };
    METHODS
        .iter()
        .find(|(known, _)| *known == name)
        .map_or(admin_read(), |(_, needs)| *needs)
}

/// Every method the table knows, with its needs, for tests and docs.
pub fn all() -> impl Iterator<Item = (&'static str, Needs)> {
    METHODS.iter().copied()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use prost::Message as _;

    use super::*;

    /// Every method of the compiled API, as `Service/Method`, with whether
    /// it is a read by its name.
    fn compiled() -> BTreeSet<String> {
        let set = prost_types::FileDescriptorSet::decode(crate::api::pb::FILE_DESCRIPTOR_SET)
            .expect("the compiled descriptors");
        let mut methods = BTreeSet::new();
        for file in set.file {
            for service in file.service {
                for method in service.method {
                    methods.insert(format!(
                        "{}/{}",
                        service.name.clone().unwrap_or_default(),
                        method.name.unwrap_or_default()
                    ));
                }
            }
        }
        methods
    }

    #[test]
    fn the_table_names_every_method_of_the_api_and_no_other() {
        let table: BTreeSet<String> = all().map(|(name, _)| name.to_owned()).collect();
        assert_eq!(table, compiled());
        assert_eq!(table.len(), METHODS.len(), "a method listed twice");
    }

    #[test]
    fn reads_need_a_viewer_and_writes_more() {
        for (name, needs) in all() {
            let method = name.split('/').nth(1).expect("Service/Method");
            let reads = ["Get", "List", "Watch", "Read", "Follow", "Search", "WhoAmI"]
                .iter()
                .any(|verb| method.starts_with(verb));
            if reads {
                assert!(!needs.audited, "{name} is a read");
            } else {
                assert!(needs.audited, "{name} is a write: it is audited");
                assert!(needs.role >= Role::Operator, "{name} needs an operator");
            }
        }
        assert_eq!(needs("/holarchy.v1.AgentService/Nothing").role, Role::Admin);
        assert_eq!(needs("/other.Service/Method").role, Role::Admin);
        assert_eq!(needs("/grpc.health.v1.Health/Check").role, Role::Viewer);
    }
}
