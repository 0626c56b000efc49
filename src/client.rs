//! Connecting to a daemon: over its Unix socket (the default) or over TCP
//! with the daemon's bearer token. The CLI and the end-to-end tests both use
//! this; it is a plain tonic client of the public API.

use std::path::PathBuf;

use anyhow::Context;
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::transport::{Channel, Endpoint, Uri};
use tower::service_fn;

use crate::api::budget::MAX_GRPC_MESSAGE_BYTES;
use crate::api::pb::agent_service_client::AgentServiceClient;
use crate::api::pb::runtime_service_client::RuntimeServiceClient;
use crate::api::pb::supervision_service_client::SupervisionServiceClient;
use crate::api::pb::task_service_client::TaskServiceClient;
use crate::api::pb::trigger_service_client::TriggerServiceClient;
use crate::api::pb::work_service_client::WorkServiceClient;
use crate::api::pb::workspace_service_client::WorkspaceServiceClient;

/// Where the daemon listens.
#[derive(Debug, Clone)]
pub enum Target {
    Unix(PathBuf),
    Tcp { url: String, token: Option<String> },
}

/// Adds the bearer token to every call, when there is one.
#[derive(Debug, Clone, Default)]
pub struct Auth(Option<MetadataValue<Ascii>>);

impl Interceptor for Auth {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(token) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", token.clone());
        }
        Ok(request)
    }
}

pub type AgentClient = AgentServiceClient<InterceptedService<Channel, Auth>>;
pub type RuntimeClient = RuntimeServiceClient<InterceptedService<Channel, Auth>>;
pub type TaskClient = TaskServiceClient<InterceptedService<Channel, Auth>>;
pub type SupervisionClient = SupervisionServiceClient<InterceptedService<Channel, Auth>>;
pub type WorkClient = WorkServiceClient<InterceptedService<Channel, Auth>>;
pub type TriggerClient = TriggerServiceClient<InterceptedService<Channel, Auth>>;
pub type WorkspaceClient = WorkspaceServiceClient<InterceptedService<Channel, Auth>>;

/// Clients of every holarchy service, sharing one connection.
#[derive(Debug, Clone)]
pub struct Clients {
    pub agents: AgentClient,
    pub runtime: RuntimeClient,
    pub tasks: TaskClient,
    pub supervision: SupervisionClient,
    pub work: WorkClient,
    pub triggers: TriggerClient,
    pub workspaces: WorkspaceClient,
    pub channel: Channel,
}

/// Opens a channel to the daemon.
pub async fn channel(target: &Target) -> anyhow::Result<Channel> {
    match target {
        Target::Unix(path) => {
            let path = path.clone();
            // The URI is required by tonic but unused: the connector dials
            // the socket.
            Endpoint::try_from("http://holarchy.local")?
                .connect_with_connector(service_fn(move |_: Uri| {
                    let path = path.clone();
                    async move {
                        Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?))
                    }
                }))
                .await
                .with_context(|| format!("cannot reach the daemon at {}", target_display(target)))
        }
        Target::Tcp { url, .. } => Endpoint::try_from(url.clone())?
            .connect()
            .await
            .with_context(|| format!("cannot reach the daemon at {url}")),
    }
}

fn target_display(target: &Target) -> String {
    match target {
        Target::Unix(path) => path.display().to_string(),
        Target::Tcp { url, .. } => url.clone(),
    }
}

pub async fn connect(target: &Target) -> anyhow::Result<Clients> {
    let channel = channel(target).await?;
    let auth = match target {
        Target::Tcp {
            token: Some(token), ..
        } => Auth(Some(
            format!("Bearer {token}")
                .parse()
                .context("token is not valid header text")?,
        )),
        Target::Tcp { token: None, .. } | Target::Unix(_) => Auth(None),
    };
    // Each client decodes and encodes at most MAX_GRPC_MESSAGE_BYTES, the
    // same bound the daemon sets; its pages stay far below it.
    let max = MAX_GRPC_MESSAGE_BYTES;
    Ok(Clients {
        agents: AgentServiceClient::with_interceptor(channel.clone(), auth.clone())
            .max_decoding_message_size(max)
            .max_encoding_message_size(max),
        runtime: RuntimeServiceClient::with_interceptor(channel.clone(), auth.clone())
            .max_decoding_message_size(max)
            .max_encoding_message_size(max),
        tasks: TaskServiceClient::with_interceptor(channel.clone(), auth.clone())
            .max_decoding_message_size(max)
            .max_encoding_message_size(max),
        supervision: SupervisionServiceClient::with_interceptor(channel.clone(), auth.clone())
            .max_decoding_message_size(max)
            .max_encoding_message_size(max),
        work: WorkServiceClient::with_interceptor(channel.clone(), auth.clone())
            .max_decoding_message_size(max)
            .max_encoding_message_size(max),
        triggers: TriggerServiceClient::with_interceptor(channel.clone(), auth.clone())
            .max_decoding_message_size(max)
            .max_encoding_message_size(max),
        workspaces: WorkspaceServiceClient::with_interceptor(channel.clone(), auth)
            .max_decoding_message_size(max)
            .max_encoding_message_size(max),
        channel,
    })
}
