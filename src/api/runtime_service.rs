//! `holarchy.v1.RuntimeService`: the daemon's status.

use std::path::PathBuf;
use std::sync::Arc;

use holarchy_actors::sandbox::SandboxReport;
use holarchy_actors::Runtime;
use tonic::{Request, Response, Status};

use super::convert::ApiError;
use super::pb;
use super::pb::runtime_service_server::RuntimeService;
use super::read_model::ReadModel;

#[derive(Debug, Clone)]
pub struct RuntimeApi {
    runtime: Arc<Runtime>,
    store: Arc<dyn ReadModel>,
    data_dir: PathBuf,
    sandbox: SandboxReport,
}

impl RuntimeApi {
    pub fn new(
        runtime: Arc<Runtime>,
        store: Arc<dyn ReadModel>,
        data_dir: PathBuf,
        sandbox: SandboxReport,
    ) -> Self {
        Self {
            runtime,
            store,
            data_dir,
            sandbox,
        }
    }
}

/// Resident set size of this process, from `/proc` (0 where there is none).
pub fn rss_bytes() -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map(|kib| kib * 1024)
        .unwrap_or(0)
}

#[tonic::async_trait]
impl RuntimeService for RuntimeApi {
    async fn get_status(
        &self,
        _request: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::GetStatusResponse>, Status> {
        let snapshot = self.runtime.snapshot().await.map_err(ApiError::from)?;
        let heap = crate::memory::heap_stats().unwrap_or_default();
        let (flushes, transactions) = self.store.work_done();
        Ok(Response::new(pb::GetStatusResponse {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            uptime_ms: self.runtime.uptime().as_millis() as u64,
            public_agents: snapshot.public_agents as u64,
            private_agents: snapshot.private_agents as u64,
            activity: if snapshot.busy_runs > 0 {
                "busy"
            } else {
                "idle"
            }
            .to_owned(),
            busy_runs: snapshot.busy_runs as u64,
            restarts: snapshot.restarts,
            agents_given_up: snapshot.given_up,
            recovered_agents: snapshot.recovered_agents as u64,
            interrupted_runs: snapshot.interrupted_runs as u64,
            rss_bytes: rss_bytes(),
            store_bytes: self.store.size_on_disk(),
            store_flushes: flushes,
            store_transactions: transactions,
            event_cursor: *self.store.event_watermark().borrow(),
            data_dir: self.data_dir.display().to_string(),
            sandbox_landlock_abi: self.sandbox.landlock_abi.into(),
            sandbox: self.sandbox.describe(),
            running_tasks: snapshot.running_tasks as u64,
            armed_waits: snapshot.armed_waits as u64,
            pid: std::process::id(),
            heap_allocated_bytes: heap.allocated,
            heap_resident_bytes: heap.resident,
        }))
    }
}
