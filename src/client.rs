//! Connecting to a daemon: over its Unix socket (the default) or over TCP
//! with the daemon's bearer token. The CLI and the end-to-end tests both use
//! this; it is a plain tonic client of the public API.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity, Uri};
use tonic_health::pb::health_client::HealthClient as GrpcHealthClient;
use tower::service_fn;

use crate::api::budget::MAX_GRPC_MESSAGE_BYTES;
use crate::api::pb::access_service_client::AccessServiceClient;
use crate::api::pb::agent_service_client::AgentServiceClient;
use crate::api::pb::approval_service_client::ApprovalServiceClient;
use crate::api::pb::instance_service_client::InstanceServiceClient;
use crate::api::pb::memory_service_client::MemoryServiceClient;
use crate::api::pb::replay_service_client::ReplayServiceClient;
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
    Tcp {
        url: String,
        token: Option<String>,
        tls: TlsOptions,
    },
}

/// How an `https://` target is checked, and how this client shows itself.
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// Trust only this CA (PEM); the system's roots without it.
    pub ca: Option<PathBuf>,
    /// A client certificate and its key, in one PEM file.
    pub identity: Option<PathBuf>,
}

/// A PEM file a client reads holds at most this much.
const MAX_PEM_BYTES: u64 = 1 << 20;

impl TlsOptions {
    fn config(&self) -> anyhow::Result<ClientTlsConfig> {
        let read = |path: &PathBuf| -> anyhow::Result<Vec<u8>> {
            use std::io::Read as _;
            let mut bytes = Vec::new();
            std::fs::File::open(path)
                .and_then(|file| file.take(MAX_PEM_BYTES).read_to_end(&mut bytes))
                .with_context(|| format!("cannot read {}", path.display()))?;
            Ok(bytes)
        };
        let mut config = ClientTlsConfig::new();
        config = match &self.ca {
            Some(ca) => config.ca_certificate(Certificate::from_pem(read(ca)?)),
            None => config.with_native_roots(),
        };
        if let Some(identity) = &self.identity {
            let pem = read(identity)?;
            config = config.identity(Identity::from_pem(&pem, &pem));
        }
        Ok(config)
    }
}

/// Adds the bearer token to every call, when there is one, and the
/// namespace the client acts in, when it names one.
#[derive(Debug, Clone, Default)]
pub struct Auth {
    token: Option<MetadataValue<Ascii>>,
    namespace: Option<MetadataValue<Ascii>>,
}

impl Interceptor for Auth {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(token) = &self.token {
            request
                .metadata_mut()
                .insert("authorization", token.clone());
        }
        if let Some(namespace) = &self.namespace {
            request
                .metadata_mut()
                .insert(crate::daemon::gate::NAMESPACE_HEADER, namespace.clone());
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
pub type InstanceClient = InstanceServiceClient<InterceptedService<Channel, Auth>>;
pub type ApprovalClient = ApprovalServiceClient<InterceptedService<Channel, Auth>>;
pub type MemoryClient = MemoryServiceClient<InterceptedService<Channel, Auth>>;
pub type ReplayClient = ReplayServiceClient<InterceptedService<Channel, Auth>>;
pub type AccessClient = AccessServiceClient<InterceptedService<Channel, Auth>>;
pub type HealthClient = GrpcHealthClient<InterceptedService<Channel, Auth>>;

/// Clients of every holarchy service, sharing one connection. Every one
/// carries the token; the bare channel is kept private so no caller can
/// build a client that goes without it (the daemon answers such calls over
/// TCP with `unauthenticated`).
#[derive(Debug, Clone)]
pub struct Clients {
    pub agents: AgentClient,
    pub runtime: RuntimeClient,
    pub tasks: TaskClient,
    pub supervision: SupervisionClient,
    pub work: WorkClient,
    pub triggers: TriggerClient,
    pub workspaces: WorkspaceClient,
    pub instances: InstanceClient,
    pub approvals: ApprovalClient,
    pub memory: MemoryClient,
    pub replays: ReplayClient,
    pub access: AccessClient,
    /// The standard gRPC health check: a call that does no work.
    pub health: HealthClient,
}

/// TCP keepalive on the CLI's connection: a `--follow` watch can sit
/// silent for hours, and a peer that vanished (a host gone, not a closed
/// socket) is otherwise noticed only by the HTTP/2 pings below.
const TCP_KEEPALIVE: Duration = Duration::from_secs(60);

/// HTTP/2 pings from the client: one every 30 s while a call is open, and
/// the connection fails when one goes unanswered for 10 s. Only while calls
/// are open, so an idle CLI sends nothing (and the daemon's idle timeout can
/// close it). Pings cost nothing measurable (docs/benchmarks.md).
const PING_INTERVAL: Duration = Duration::from_secs(30);
const PING_TIMEOUT: Duration = Duration::from_secs(10);

/// The endpoint both transports share: HTTP/2 settings that are not about
/// the socket.
fn endpoint(uri: String) -> anyhow::Result<Endpoint> {
    Ok(Endpoint::try_from(uri)?
        .http2_keep_alive_interval(PING_INTERVAL)
        .keep_alive_timeout(PING_TIMEOUT)
        .keep_alive_while_idle(false))
}

/// The daemon could not be reached at all: no call was made. Kept apart
/// from a refusal so the CLI can say what to do (start the daemon, check
/// the address) rather than quote the transport's layers.
#[derive(Debug, thiserror::Error)]
#[error("cannot reach the daemon at {at}")]
pub struct Unreachable {
    /// The socket path or URL, as the user would type it.
    pub at: String,
    #[source]
    pub source: tonic::transport::Error,
}

/// Why an `--addr` is refused before any connection.
#[derive(Debug, thiserror::Error)]
pub enum AddrError {
    #[error("--addr {0}: only https://HOST:PORT, http://HOST:PORT or HOST:PORT is understood")]
    Scheme(String),
    #[error("--addr is empty: give HOST:PORT, e.g. 127.0.0.1:7420")]
    Empty,
}

/// The URL to dial for `--addr`: `HOST:PORT` means plain HTTP/2, as the
/// daemon's `--listen` serves it without `--tls-cert`; `http://` and
/// `https://` pass through; anything else is refused.
pub fn tcp_url(addr: &str) -> Result<String, AddrError> {
    let addr = addr.trim();
    if addr.is_empty() {
        return Err(AddrError::Empty);
    }
    let lower = addr.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Ok(addr.to_owned());
    }
    if addr.contains("://") {
        return Err(AddrError::Scheme(addr.to_owned()));
    }
    Ok(format!("http://{addr}"))
}

/// Opens a channel to the daemon.
pub async fn channel(target: &Target) -> anyhow::Result<Channel> {
    let unreachable = |source| Unreachable {
        at: target_display(target),
        source,
    };
    match target {
        Target::Unix(path) => {
            let path = path.clone();
            // The URI is required by tonic but unused: the connector dials
            // the socket.
            endpoint("http://holarchy.local".into())?
                .connect_with_connector(service_fn(move |_: Uri| {
                    let path = path.clone();
                    async move {
                        Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?))
                    }
                }))
                .await
                .map_err(|err| unreachable(err).into())
        }
        // tonic sets TCP_NODELAY by default; said here because a response
        // held back by Nagle's algorithm waits for the peer's delayed
        // acknowledgement (up to 40 ms on Linux), and small gRPC frames are
        // all this channel sends.
        Target::Tcp { url, tls, .. } => {
            let mut endpoint = endpoint(url.clone())?
                .tcp_nodelay(true)
                .tcp_keepalive(Some(TCP_KEEPALIVE));
            if url.to_ascii_lowercase().starts_with("https://") {
                endpoint = endpoint
                    .tls_config(tls.config()?)
                    .context("the TLS settings of --addr")?;
            }
            endpoint
                .connect()
                .await
                .map_err(|err| unreachable(err).into())
        }
    }
}

fn target_display(target: &Target) -> String {
    match target {
        Target::Unix(path) => path.display().to_string(),
        Target::Tcp { url, .. } => url.clone(),
    }
}

pub async fn connect(target: &Target) -> anyhow::Result<Clients> {
    connect_in(target, None).await
}

/// [`connect`], every call acting in `namespace` when one is named.
pub async fn connect_in(target: &Target, namespace: Option<&str>) -> anyhow::Result<Clients> {
    let channel = channel(target).await?;
    let token = match target {
        Target::Tcp {
            token: Some(token), ..
        } => Some(
            format!("Bearer {token}")
                .parse()
                .context("token is not valid header text")?,
        ),
        Target::Tcp { token: None, .. } | Target::Unix(_) => None,
    };
    let namespace = namespace
        .map(|ns| {
            ns.parse()
                .with_context(|| format!("--namespace `{ns}` is not valid header text"))
        })
        .transpose()?;
    let auth = Auth { token, namespace };
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
        workspaces: WorkspaceServiceClient::with_interceptor(channel.clone(), auth.clone())
            .max_decoding_message_size(max)
            .max_encoding_message_size(max),
        instances: InstanceServiceClient::with_interceptor(channel.clone(), auth.clone())
            .max_decoding_message_size(max)
            .max_encoding_message_size(max),
        approvals: ApprovalServiceClient::with_interceptor(channel.clone(), auth.clone())
            .max_decoding_message_size(max)
            .max_encoding_message_size(max),
        memory: MemoryServiceClient::with_interceptor(channel.clone(), auth.clone())
            .max_decoding_message_size(max)
            .max_encoding_message_size(max),
        replays: ReplayServiceClient::with_interceptor(channel.clone(), auth.clone())
            .max_decoding_message_size(max)
            .max_encoding_message_size(max),
        access: AccessServiceClient::with_interceptor(channel.clone(), auth.clone())
            .max_decoding_message_size(max)
            .max_encoding_message_size(max),
        health: GrpcHealthClient::with_interceptor(channel, auth),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_without_a_scheme_is_plain_http() {
        assert_eq!(
            tcp_url("127.0.0.1:7420").expect("accepted"),
            "http://127.0.0.1:7420"
        );
        assert_eq!(tcp_url("http://host:1").expect("accepted"), "http://host:1");
    }

    #[test]
    fn an_https_address_passes_through_and_other_schemes_are_refused() {
        assert_eq!(
            tcp_url("https://host:443").expect("accepted"),
            "https://host:443"
        );
        assert!(matches!(tcp_url("unix:///x"), Err(AddrError::Scheme(_))));
        assert!(matches!(tcp_url(" "), Err(AddrError::Empty)));
    }
}
