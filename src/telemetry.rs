//! Spans to an OpenTelemetry collector: `serve --otlp-endpoint URL` sends
//! the daemon's tracing spans (gRPC calls, turns, brain steps, tool calls,
//! store commits and flushes) over OTLP/HTTP with protobuf bodies, in
//! batches from the SDK's own thread. Off by default; with it off nothing
//! here runs.
//!
//! The batches go out through the daemon's reqwest, on its tokio runtime:
//! the SDK's exporter thread hands each request to the runtime and waits
//! for the answer, so no second HTTP stack is built.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tokio::runtime::Handle;

/// Longest one export may take; a collector that is down costs a batch,
/// never a turn.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest answer read from a collector.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Whether spans leave the process. Spans made only for export (the
/// store's commits and flushes, many a turn) are skipped without it, so a
/// daemon without a collector pays nothing for them.
static EXPORTING: AtomicBool = AtomicBool::new(false);

pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// The span of one gRPC call: the parent of what it causes, and itself
/// the child of the caller's span when the call carries a W3C
/// `traceparent`.
pub fn call_span(method: &'static str, headers: &http::HeaderMap) -> tracing::Span {
    use opentelemetry::propagation::TextMapPropagator as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let span = tracing::info_span!("grpc", rpc = method);
    if headers.contains_key("traceparent") {
        let caller = opentelemetry_sdk::propagation::TraceContextPropagator::new()
            .extract(&opentelemetry_http::HeaderExtractor(headers));
        // Without an exporter there is no span to parent: nothing to do.
        let _ = span.set_parent(caller);
    }
    span
}

/// Why spans cannot be sent where `--otlp-endpoint` says; the daemon does
/// not start.
#[derive(Debug, thiserror::Error)]
pub enum OtlpError {
    /// The URL parser's reason.
    #[error("`{endpoint}`: {reason}")]
    NotUrl { endpoint: String, reason: String },
    #[error("`{0}`: use http:// or https://")]
    Scheme(String),
    #[error("{0}")]
    Client(reqwest::Error),
    #[error("{0}")]
    Exporter(opentelemetry_otlp::ExporterBuildError),
}

/// Where the collector takes traces: the URL as given when it names a
/// path, else its `/v1/traces`.
pub fn traces_url(endpoint: &str) -> Result<String, OtlpError> {
    let url = reqwest::Url::parse(endpoint).map_err(|err| OtlpError::NotUrl {
        endpoint: endpoint.to_owned(),
        reason: err.to_string(),
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(OtlpError::Scheme(endpoint.to_owned()));
    }
    Ok(if url.path() == "/" || url.path().is_empty() {
        format!("{}/v1/traces", endpoint.trim_end_matches('/'))
    } else {
        endpoint.to_owned()
    })
}

/// The exporter's HTTP client: the daemon's reqwest, run on its runtime.
#[derive(Debug)]
struct OnRuntime {
    client: reqwest::Client,
    runtime: Handle,
}

#[tonic::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let sent = self.runtime.spawn(async move {
            let (parts, body) = request.into_parts();
            let url = parts.uri.to_string();
            let answer = client
                .request(parts.method, url)
                .headers(parts.headers)
                .body(body)
                .timeout(EXPORT_TIMEOUT)
                .send()
                .await?;
            let status = answer.status();
            let mut body = answer.bytes().await?;
            body.truncate(MAX_ANSWER_BYTES);
            Ok::<_, reqwest::Error>((status, body))
        });
        let (status, body) = sent.await??;
        let mut response = Response::new(body);
        *response.status_mut() = status;
        Ok(response)
    }
}

/// The tracer provider exporting to `endpoint`, and a tracer of it for
/// the tracing bridge. Shut the provider down at exit to send what is
/// left.
pub fn otlp(endpoint: &str, runtime: Handle) -> Result<(SdkTracerProvider, SdkTracer), OtlpError> {
    let url = traces_url(endpoint)?;
    let client = reqwest::Client::builder()
        .timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(OtlpError::Client)?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(OnRuntime { client, runtime })
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url)
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(OtlpError::Exporter)?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(Resource::builder().with_service_name("holarchy").build())
        .build();
    let tracer = provider.tracer("holarchy");
    EXPORTING.store(true, Ordering::Relaxed);
    Ok((provider, tracer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_gets_the_traces_path() {
        let url = |endpoint: &str| traces_url(endpoint).expect("a valid endpoint");
        assert_eq!(
            url("http://127.0.0.1:4318"),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            url("http://collector:4318/"),
            "http://collector:4318/v1/traces"
        );
        assert_eq!(
            url("https://otel.example/custom/path"),
            "https://otel.example/custom/path"
        );
        assert!(traces_url("ftp://x").is_err());
        assert!(traces_url("not a url").is_err());
    }
}
