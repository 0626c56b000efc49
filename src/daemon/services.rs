//! The daemon's gRPC services, built once per incarnation: each one bounded
//! to `MAX_GRPC_MESSAGE_BYTES` both ways (tonic's defaults do not bound
//! what a server sends) and registered with the health service, so every
//! listener serves the same set with the same bounds and a probe sees each
//! one serving, then not serving at shutdown.

use std::path::PathBuf;
use std::sync::Arc;

use holarchy_actors::sandbox::SandboxReport;
use holarchy_actors::Runtime;
use tokio::sync::watch;
use tonic::server::NamedService;
use tonic::service::Routes;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

use crate::access::audit::Audit;
use crate::access::tokens::Tokens;
use crate::api::access_service::AccessApi;
use crate::api::agent_service::AgentApi;
use crate::api::approval_service::ApprovalApi;
use crate::api::budget::MAX_GRPC_MESSAGE_BYTES;
use crate::api::instance_service::InstanceApi;
use crate::api::memory_service::MemoryApi;
use crate::api::pb;
use crate::api::pb::access_service_server::AccessServiceServer;
use crate::api::pb::agent_service_server::AgentServiceServer;
use crate::api::pb::approval_service_server::ApprovalServiceServer;
use crate::api::pb::instance_service_server::InstanceServiceServer;
use crate::api::pb::memory_service_server::MemoryServiceServer;
use crate::api::pb::replay_service_server::ReplayServiceServer;
use crate::api::pb::runtime_service_server::RuntimeServiceServer;
use crate::api::pb::supervision_service_server::SupervisionServiceServer;
use crate::api::pb::task_service_server::TaskServiceServer;
use crate::api::pb::trigger_service_server::TriggerServiceServer;
use crate::api::pb::work_service_server::WorkServiceServer;
use crate::api::pb::workspace_service_server::WorkspaceServiceServer;
use crate::api::plane_service::PlaneApi;
use crate::api::read_model::ReadModel;
use crate::api::replay_service::ReplayApi;
use crate::api::runtime_service::RuntimeApi;
use crate::api::supervision_service::SupervisionApi;
use crate::api::task_service::TaskApi;
use crate::api::workspace_service::WorkspaceApi;

/// Adds a generated service to `services`, its messages bounded both ways
/// and reported serving.
macro_rules! add {
    ($services:ident, $server:expr) => {{
        let service = $server
            .max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_GRPC_MESSAGE_BYTES);
        $services.serving(&service).await;
        $services.routes = std::mem::take(&mut $services.routes).add_service(service);
    }};
}

/// What the services are built over.
pub(super) struct Over {
    pub runtime: Arc<Runtime>,
    pub store: Arc<dyn ReadModel>,
    pub data_dir: PathBuf,
    pub sandbox: SandboxReport,
    /// Set once the daemon stops: streams end.
    pub stop: watch::Receiver<bool>,
    pub tokens: Arc<Tokens>,
    pub audit: Arc<Audit>,
    pub quotas: crate::access::quotas::Quotas,
    /// Where the daemon answers, for `GetStatus`.
    pub listeners: Vec<String>,
    pub replays: Arc<crate::replay::Replays>,
}

/// Every gRPC service of the daemon, bounded and reported serving.
pub(super) struct Services {
    routes: Routes,
    health: HealthReporter,
    names: Vec<&'static str>,
}

impl Services {
    /// Builds every service over `over`, each bounded, each reported
    /// serving to the health service it also holds.
    pub async fn new(over: Over) -> anyhow::Result<Self> {
        let Over {
            runtime,
            store,
            data_dir,
            sandbox,
            stop,
            tokens,
            audit,
            quotas,
            listeners,
            replays,
        } = over;
        let (health, health_service) = tonic_health::server::health_reporter();
        let mut services = Services {
            routes: Routes::new(health_service),
            health,
            names: Vec::new(),
        };
        let agents = AgentApi::new(runtime.clone(), store.clone(), stop.clone());
        add!(services, AgentServiceServer::new(agents));
        let status =
            RuntimeApi::new(runtime.clone(), store.clone(), data_dir, sandbox).listeners(listeners);
        add!(services, RuntimeServiceServer::new(status));
        let tasks = TaskApi::new(runtime.clone(), stop);
        add!(services, TaskServiceServer::new(tasks));
        let tree = SupervisionApi::new(runtime.clone(), store.clone());
        add!(services, SupervisionServiceServer::new(tree));
        let work = PlaneApi::new(runtime.clone(), store.clone());
        add!(services, WorkServiceServer::new(work));
        let triggers = PlaneApi::new(runtime.clone(), store.clone());
        add!(services, TriggerServiceServer::new(triggers));
        let workspaces = WorkspaceApi::new(runtime.clone());
        add!(services, WorkspaceServiceServer::new(workspaces));
        let instances = InstanceApi::new(runtime.clone());
        add!(services, InstanceServiceServer::new(instances));
        let replay = ReplayApi::new(runtime.clone(), replays);
        add!(services, ReplayServiceServer::new(replay));
        let approvals = ApprovalApi::new(runtime.clone(), store);
        add!(services, ApprovalServiceServer::new(approvals));
        let memory = MemoryApi::new(runtime);
        add!(services, MemoryServiceServer::new(memory));
        let access = AccessApi::new(tokens, audit, quotas);
        add!(services, AccessServiceServer::new(access));
        // Reflection, for grpcurl and friends: the schema, nothing served.
        let v1 = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1()?;
        let v1alpha = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1alpha()?;
        services.routes = services.routes.add_service(v1).add_service(v1alpha);
        Ok(services)
    }

    /// Reports `S` serving, and remembers it for the shutdown.
    async fn serving<S: NamedService>(&mut self, _: &S) {
        self.health.set_serving::<S>().await;
        self.names.push(S::NAME);
    }

    /// Every service, for a listener's server to serve.
    pub fn routes(&self) -> Routes {
        self.routes.clone()
    }

    /// Reports every service not serving: the daemon is shutting down.
    pub async fn not_serving(&self) {
        for name in &self.names {
            self.health
                .set_service_status(*name, ServingStatus::NotServing)
                .await;
        }
    }
}
