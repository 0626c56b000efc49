//! `holarchy.v1.ApprovalService`: operators list, approve and deny the
//! tool calls instances' constraints hold for them.

use std::sync::Arc;

use holarchy_actors::approval::ApprovalError;
use holarchy_actors::Runtime;
use holarchy_composition::approval::{ApprovalRecord, ApprovalStatus};
use holarchy_supervision::ApprovalId;
use prost::Message as _;
use tonic::{Request, Response, Status};

use super::agent_service::parse_agent_id;
use super::convert::ApiError;
use super::pb;
use super::pb::approval_service_server::ApprovalService;

/// Most bytes of approvals one listing answers with: under the 4 MiB
/// gRPC message bound, whatever the inputs and outputs hold.
const LIST_BYTES: usize = 3 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct ApprovalApi {
    runtime: Arc<Runtime>,
    /// Whose each approval's agent is, for a listing of every agent's.
    store: Arc<dyn super::read_model::ReadModel>,
}

impl ApprovalApi {
    pub fn new(runtime: Arc<Runtime>, store: Arc<dyn super::read_model::ReadModel>) -> Self {
        Self { runtime, store }
    }
}

impl From<ApprovalError> for ApiError {
    fn from(err: ApprovalError) -> Self {
        match err {
            ApprovalError::NotFound(_) => ApiError::NotFound(err.to_string()),
            ApprovalError::Invalid(_) => ApiError::InvalidArgument(err.to_string()),
            ApprovalError::Precondition(_) => ApiError::FailedPrecondition(err.to_string()),
            ApprovalError::Store(err) => err.into(),
        }
    }
}

fn parse_id(text: &str) -> Result<ApprovalId, ApiError> {
    if text.is_empty() {
        return Err(ApiError::InvalidArgument("approval_id is required".into()));
    }
    text.parse()
        .map_err(|_| ApiError::InvalidArgument(format!("`{text}` is not an approval id")))
}

#[tonic::async_trait]
impl ApprovalService for ApprovalApi {
    async fn list_approvals(
        &self,
        request: Request<pb::ListApprovalsRequest>,
    ) -> Result<Response<pb::ListApprovalsResponse>, Status> {
        let namespace = super::scope::namespace_of(&request);
        let req = request.into_inner();
        let agent = if req.agent_id.is_empty() {
            None
        } else {
            Some(parse_agent_id(&req.agent_id)?)
        };
        let mut approvals = Vec::new();
        let mut bytes = 0;
        let mut more = false;
        let listed = self
            .runtime
            .approvals(agent, req.include_decided)
            .map_err(ApiError::from)?;
        let mut mine = std::collections::HashMap::new();
        for record in listed
            .iter()
            .filter(|a| req.include_decided || !a.status.is_decided())
        {
            // Every agent's (no agent named): only the caller's namespace's.
            let visible = *mine.entry(record.agent_id).or_insert_with(|| {
                self.store
                    .agent(record.agent_id)
                    .ok()
                    .flatten()
                    .is_some_and(|a| a.namespace == namespace)
            });
            if !visible {
                continue;
            }
            let one = approval(record);
            bytes += one.encoded_len();
            if bytes > LIST_BYTES {
                more = true;
                break;
            }
            approvals.push(one);
        }
        Ok(Response::new(pb::ListApprovalsResponse { approvals, more }))
    }

    async fn get_approval(
        &self,
        request: Request<pb::GetApprovalRequest>,
    ) -> Result<Response<pb::Approval>, Status> {
        let id = parse_id(&request.into_inner().approval_id)?;
        let record = self.runtime.approval(id).map_err(ApiError::from)?;
        Ok(Response::new(approval(&record)))
    }

    async fn approve(
        &self,
        request: Request<pb::ApproveRequest>,
    ) -> Result<Response<pb::Approval>, Status> {
        let id = parse_id(&request.into_inner().approval_id)?;
        let done = self.runtime.approve(id).await.map_err(ApiError::from)?;
        Ok(Response::new(approval(&done)))
    }

    async fn deny(
        &self,
        request: Request<pb::DenyRequest>,
    ) -> Result<Response<pb::Approval>, Status> {
        let req = request.into_inner();
        let id = parse_id(&req.approval_id)?;
        let done = self
            .runtime
            .deny(id, req.reason)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(approval(&done)))
    }
}

pub fn approval(record: &ApprovalRecord) -> pb::Approval {
    let (output_json, is_error, reason) = match &record.status {
        ApprovalStatus::Approved { output, is_error } => (output.clone(), *is_error, String::new()),
        ApprovalStatus::Denied { reason } => (String::new(), true, reason.clone()),
        ApprovalStatus::Pending | ApprovalStatus::Running => (String::new(), false, String::new()),
    };
    pb::Approval {
        approval_id: record.id.to_string(),
        agent_id: record.agent_id.to_string(),
        instance: record.instance.clone().unwrap_or_default(),
        run_id: record.run_id.to_string(),
        tool: record.tool.clone(),
        input_json: record.input.clone(),
        layer: record.layer.clone(),
        status: record.status.name().to_owned(),
        output_json,
        is_error,
        reason,
        delivered: record.delivered,
        created_at_ms: record.created_at_ms as i64,
        decided_at_ms: record.decided_at_ms.unwrap_or(0) as i64,
        workspace_id: record
            .place
            .as_ref()
            .map(|p| p.workspace_id.clone())
            .unwrap_or_default(),
        dir: record
            .place
            .as_ref()
            .map(|p| p.dir.display().to_string())
            .unwrap_or_default(),
    }
}
