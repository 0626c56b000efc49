//! `GET /metrics`: the daemon's metrics in the OpenMetrics text format,
//! through the Prometheus project's client crate. What changes on a hot
//! path is counted where it happens (turns, tool calls, queues, commits,
//! gRPC calls); what is a level (agents, tasks, waits, the event log's
//! cursor, memory) is read when scraped, from counters the runtime keeps
//! anyway, so a scrape costs the same at a million agents as at one.
//!
//! No series is labelled by agent: labels are brain kinds, outcomes, tool
//! families, visibilities and the API's own method names.

use std::collections::HashSet;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use tracing::Instrument;

use holarchy_actors::Runtime;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

use crate::store::Opened;

/// The daemon's registry, encoded at each scrape.
#[derive(Debug)]
pub struct Metrics {
    registry: Option<Registry>,
}

impl Metrics {
    pub fn new(runtime: Arc<Runtime>, store: Opened, grpc: &GrpcMetrics) -> Self {
        let mut registry = Registry::with_prefix("holarchy");
        runtime.register_metrics(&mut registry);
        store.register_metrics(&mut registry);
        grpc.register(&mut registry);
        registry.register_collector(Box::new(Levels { runtime, store }));
        Self {
            registry: Some(registry),
        }
    }

    /// No metrics (`serve --no-metrics`): `GET /metrics` answers 404.
    pub fn off() -> Self {
        Self { registry: None }
    }

    /// The exposition, `# EOF` last; `None` when metrics are off.
    pub fn encode(&self) -> Option<Result<String, std::fmt::Error>> {
        let registry = self.registry.as_ref()?;
        let mut out = String::with_capacity(16 * 1024);
        Some(prometheus_client::encoding::text::encode(&mut out, registry).map(|()| out))
    }
}

/// What is read at each scrape.
struct Levels {
    runtime: Arc<Runtime>,
    store: Opened,
}

impl std::fmt::Debug for Levels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Levels").finish_non_exhaustive()
    }
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: i64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, unit, metric.metric_type())?)
}

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let metric = ConstCounter::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

/// One gauge family, a series per label set given.
fn gauges(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: &[(Vec<(&'static str, &'static str)>, usize)],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(
        name,
        help,
        None,
        prometheus_client::metrics::MetricType::Gauge,
    )?;
    for (labels, n) in series {
        ConstGauge::new(count(*n)).encode(family.encode_family(labels)?)?;
    }
    Ok(())
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Collector for Levels {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let levels = self.runtime.levels();
        let counts = &levels.counts;
        let (public, private) = (counts.public, counts.private);
        let (paused_public, paused_private) = (counts.paused_public, counts.paused_private);
        let state = |visibility, state| vec![("visibility", visibility), ("state", state)];
        gauges(
            &mut encoder,
            "agents",
            "Live agents (their actors running), by visibility and state",
            &[
                (
                    state("public", "active"),
                    public.saturating_sub(paused_public),
                ),
                (state("public", "paused"), paused_public),
                (
                    state("private", "active"),
                    private.saturating_sub(paused_private),
                ),
                (state("private", "paused"), paused_private),
            ],
        )?;
        gauge(
            &mut encoder,
            "actors",
            "Supervised actors alive: agents, tasks, commands and waits",
            None,
            count(counts.actors),
        )?;
        let kind = |kind| vec![("kind", kind)];
        gauges(
            &mut encoder,
            "tasks_running",
            "Tasks running, by kind: commands and child-agent handles",
            &[
                (kind("command"), counts.commands),
                (
                    kind("child_agent"),
                    counts.tasks.saturating_sub(counts.commands),
                ),
            ],
        )?;
        gauges(
            &mut encoder,
            "waits_armed",
            "Waits armed, by kind",
            &[
                (kind("timer"), counts.timers),
                (
                    kind("external_trigger"),
                    counts.waits.saturating_sub(counts.timers),
                ),
            ],
        )?;
        gauge(
            &mut encoder,
            "turns_in_flight",
            "Turns running now, across agents",
            None,
            count(levels.turns_in_flight),
        )?;
        counter(
            &mut encoder,
            "agent_restarts",
            "Agents restarted by their supervisor after a failure",
            levels.restarts,
        )?;
        counter(
            &mut encoder,
            "agent_give_ups",
            "Agents whose supervisor gave up restarting them",
            levels.given_up,
        )?;
        counter(
            &mut encoder,
            "store_flushes",
            "Flushes of the store to disk",
            self.store.work_done().0,
        )?;
        counter(
            &mut encoder,
            "store_commits",
            "Batches committed to the store",
            self.store.work_done().1,
        )?;
        gauge(
            &mut encoder,
            "event_log_cursor",
            "The event log's last durable cursor",
            None,
            i64::try_from(*self.store.event_watermark().borrow()).unwrap_or(i64::MAX),
        )?;
        gauge(
            &mut encoder,
            "memory_index_entries",
            "Entries in agents' memory search index",
            None,
            i64::try_from(self.store.memory_indexed()).unwrap_or(i64::MAX),
        )?;
        let rss = crate::api::runtime_service::rss_bytes();
        gauge(
            &mut encoder,
            "process_resident_memory",
            "The daemon's resident set size",
            Some(&Unit::Bytes),
            i64::try_from(rss).unwrap_or(i64::MAX),
        )?;
        if let Some(heap) = crate::memory::heap_stats() {
            gauge(
                &mut encoder,
                "allocator_allocated",
                "Bytes in live allocations, as jemalloc counts them",
                Some(&Unit::Bytes),
                i64::try_from(heap.allocated).unwrap_or(i64::MAX),
            )?;
        }
        Ok(())
    }
}

/// Labels of one gRPC method's answers: its path (one of the API's
/// own, or `other`) and its status code's name.
type CallLabels = [(&'static str, &'static str); 2];
type MethodTimings = Family<[(&'static str, &'static str); 1], Histogram, fn() -> Histogram>;

/// gRPC calls by method and status, counted by [`GrpcLayer`].
#[derive(Debug, Clone)]
pub struct GrpcMetrics {
    calls: Family<CallLabels, Counter>,
    seconds: MethodTimings,
    /// The API's methods, as `/package.Service/Method`: a path not among
    /// them is counted as `other`, so no caller can mint a series.
    methods: Arc<HashSet<&'static str>>,
    /// Off (`serve --no-metrics`): calls are not counted.
    on: bool,
}

fn call_buckets() -> Histogram {
    // 50 us to about 26 s.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 20))
}

impl GrpcMetrics {
    /// Knows the methods in the encoded descriptor sets given.
    pub fn new(descriptor_sets: &[&[u8]]) -> Self {
        use prost::Message as _;
        let mut methods = HashSet::new();
        for bytes in descriptor_sets {
            let Ok(set) = prost_types::FileDescriptorSet::decode(*bytes) else {
                continue;
            };
            for file in set.file {
                let package = file.package.unwrap_or_default();
                for service in file.service {
                    let service_name = service.name.unwrap_or_default();
                    for method in service.method {
                        let path = format!(
                            "/{package}.{service_name}/{}",
                            method.name.unwrap_or_default()
                        );
                        // Leaked once at start: a few dozen short names.
                        methods.insert(&*Box::leak(path.into_boxed_str()));
                    }
                }
            }
        }
        Self {
            calls: Family::default(),
            seconds: Family::new_with_constructor(call_buckets),
            methods: Arc::new(methods),
            on: true,
        }
    }

    /// The same, counting nothing (it still names calls for their spans).
    pub fn off(self) -> Self {
        Self { on: false, ..self }
    }

    fn register(&self, registry: &mut Registry) {
        registry.register(
            "grpc_requests",
            "gRPC calls answered, by method and status code",
            self.calls.clone(),
        );
        registry.register_with_unit(
            "grpc_request_duration",
            "Time to a gRPC call's answer (its headers, for a stream), by method",
            Unit::Seconds,
            self.seconds.clone(),
        );
    }

    fn method(&self, path: &str) -> &'static str {
        self.methods.get(path).copied().unwrap_or("other")
    }
}

/// The name of a gRPC status code as its number arrives in `grpc-status`.
fn code_name(code: Option<&[u8]>) -> &'static str {
    let Some(code) = code else {
        // No status with the headers: it comes in the trailers, after the
        // answer's data, which only a successful call sends.
        return "OK";
    };
    let number = std::str::from_utf8(code)
        .ok()
        .and_then(|s| s.parse::<i32>().ok())
        .unwrap_or(2);
    code_str(tonic::Code::from_i32(number))
}

/// A status code's name as gRPC spells it (`PERMISSION_DENIED`).
pub fn code_str(code: tonic::Code) -> &'static str {
    match code {
        tonic::Code::Ok => "OK",
        tonic::Code::Cancelled => "CANCELLED",
        tonic::Code::Unknown => "UNKNOWN",
        tonic::Code::InvalidArgument => "INVALID_ARGUMENT",
        tonic::Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        tonic::Code::NotFound => "NOT_FOUND",
        tonic::Code::AlreadyExists => "ALREADY_EXISTS",
        tonic::Code::PermissionDenied => "PERMISSION_DENIED",
        tonic::Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        tonic::Code::FailedPrecondition => "FAILED_PRECONDITION",
        tonic::Code::Aborted => "ABORTED",
        tonic::Code::OutOfRange => "OUT_OF_RANGE",
        tonic::Code::Unimplemented => "UNIMPLEMENTED",
        tonic::Code::Internal => "INTERNAL",
        tonic::Code::Unavailable => "UNAVAILABLE",
        tonic::Code::DataLoss => "DATA_LOSS",
        tonic::Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// Counts every gRPC call the servers answer.
#[derive(Debug, Clone)]
pub struct GrpcLayer(pub GrpcMetrics);

impl<S> tower::Layer<S> for GrpcLayer {
    type Service = GrpcCounted<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcCounted {
            inner,
            metrics: self.0.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct GrpcCounted<S> {
    inner: S,
    metrics: GrpcMetrics,
}

impl<S, B, R> tower::Service<http::Request<B>> for GrpcCounted<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = self.metrics.method(request.uri().path());
        let metrics = self.metrics.clone();
        let started = Instant::now();
        let span = crate::telemetry::call_span(method, request.headers());
        let answer = self.inner.call(request);
        Box::pin(
            async move {
                let answer = answer.await;
                if !metrics.on {
                    return answer;
                }
                let code = match &answer {
                    Ok(response) => code_name(
                        response
                            .headers()
                            .get("grpc-status")
                            .map(|value| value.as_bytes()),
                    ),
                    Err(_) => "UNAVAILABLE",
                };
                metrics
                    .calls
                    .get_or_create(&[("method", method), ("code", code)])
                    .inc();
                metrics
                    .seconds
                    .get_or_create(&[("method", method)])
                    .observe(started.elapsed().as_secs_f64());
                answer
            }
            .instrument(span),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_apis_own_methods_become_labels() {
        let grpc = GrpcMetrics::new(&[crate::api::pb::FILE_DESCRIPTOR_SET]);
        assert_eq!(
            grpc.method("/holarchy.v1.AgentService/GetAgent"),
            "/holarchy.v1.AgentService/GetAgent"
        );
        assert_eq!(grpc.method("/holarchy.v1.AgentService/Nope"), "other");
        assert_eq!(grpc.method(&"/x".repeat(10_000)), "other");
        assert_eq!(code_name(Some(b"5")), "NOT_FOUND");
        assert_eq!(code_name(None), "OK");
        assert_eq!(code_name(Some(b"junk")), "UNKNOWN");
    }
}
