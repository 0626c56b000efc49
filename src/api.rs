//! The gRPC API: generated protobuf types and the tonic services.
//!
//! - [`access_service`] serves `holarchy.v1.AccessService`: tokens and
//!   the audit trail.
//! - [`agent_service`] serves `holarchy.v1.AgentService`.
//! - [`runtime_service`] serves `holarchy.v1.RuntimeService`.
//! - [`task_service`] serves `holarchy.v1.TaskService`.
//! - [`supervision_service`] serves `holarchy.v1.SupervisionService`.
//! - [`workspace_service`] serves `holarchy.v1.WorkspaceService`.
//! - [`instance_service`] serves `holarchy.v1.InstanceService`.
//! - [`approval_service`] serves `holarchy.v1.ApprovalService`.
//! - [`memory_service`] serves `holarchy.v1.MemoryService`.
//! - [`plane_service`] serves `holarchy.v1.WorkService` and `holarchy.v1.TriggerService`.
//! - [`replay_service`] serves `holarchy.v1.ReplayService`.
//! - [`read_model`]: what the services read from the store.
//! - [`scope`]: the namespace a call acts in.
//! - [`convert`]: domain to proto, and the one error-to-status mapping.
//! - [`budget`]: the byte budgets of pages, records and gRPC messages.

pub mod access_service;
pub mod agent_service;
pub mod approval_service;
pub mod budget;
pub mod convert;
pub mod instance_service;
pub mod memory_service;
pub mod plane_service;
pub mod read_model;
pub mod replay_service;
pub mod runtime_service;
pub mod scope;
pub mod supervision_service;
pub mod task_service;
pub mod workspace_service;

/// Generated code for `holarchy.v1`.
pub mod pb {
    #![allow(
        missing_docs,
        missing_debug_implementations,
        clippy::all,
        clippy::pedantic
    )]
    tonic::include_proto!("holarchy.v1");

    /// The encoded descriptor set, for server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        tonic::include_file_descriptor_set!("holarchy_descriptor");
}
