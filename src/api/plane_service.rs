//! `holarchy.v1.WorkService` and `holarchy.v1.TriggerService`: operators
//! read work items; machines wake agents with trigger tokens.

use std::sync::Arc;

use holarchy_actors::plane::wait as wait_plane;
use holarchy_actors::Runtime;
use holarchy_supervision::{bounds, WorkItemId};
use tonic::{Request, Response, Status};

use super::agent_service::{page, page_token, parse_agent_id};
use super::budget;
use super::convert::{self, ApiError};
use super::pb;
use super::pb::trigger_service_server::TriggerService;
use super::pb::work_service_server::WorkService;
use super::read_model::ReadModel;

#[derive(Debug, Clone)]
pub struct PlaneApi {
    runtime: Arc<Runtime>,
    store: Arc<dyn ReadModel>,
}

impl PlaneApi {
    pub fn new(runtime: Arc<Runtime>, store: Arc<dyn ReadModel>) -> Self {
        Self { runtime, store }
    }
}

#[tonic::async_trait]
impl WorkService for PlaneApi {
    async fn list_work_items(
        &self,
        request: Request<pb::ListWorkItemsRequest>,
    ) -> Result<Response<pb::ListWorkItemsResponse>, Status> {
        let req = request.into_inner();
        let agent_id = parse_agent_id(&req.agent_id)?;
        let after: Option<WorkItemId> = page_token(&req.page_token)?;
        let store = &self.store;
        if store.agent(agent_id).map_err(ApiError::from)?.is_none() {
            return Err(ApiError::NotFound(format!("agent {agent_id} not found")).into());
        }
        let mut items = store.work_items_of(agent_id).map_err(ApiError::from)?;
        items.sort_by_key(|i| i.id);
        items.retain(|i| after.is_none_or(|after| i.id > after));
        let waits = store.waits_of(agent_id).map_err(ApiError::from)?;
        let (work_items, next_page_token) = page(
            items,
            req.page_size,
            |i| convert::work_item(i, &waits),
            |w| w.work_item_id.clone(),
        );
        store.durable().await.map_err(ApiError::from)?;
        Ok(Response::new(pb::ListWorkItemsResponse {
            work_items,
            next_page_token,
        }))
    }

    async fn get_work_item(
        &self,
        request: Request<pb::GetWorkItemRequest>,
    ) -> Result<Response<pb::WorkItem>, Status> {
        let text = request.into_inner().work_item_id;
        if text.is_empty() {
            return Err(ApiError::InvalidArgument("work_item_id is required".into()).into());
        }
        let id: WorkItemId = text.parse().map_err(ApiError::from)?;
        let store = &self.store;
        let item = store
            .work_item(id)
            .map_err(ApiError::from)?
            .ok_or_else(|| ApiError::NotFound(format!("work item {id} not found")))?;
        let waits = store
            .waits_of(item.owner_agent_id)
            .map_err(ApiError::from)?;
        store.durable().await.map_err(ApiError::from)?;
        let mut item = convert::work_item(&item, &waits);
        budget::bound(&mut item);
        Ok(Response::new(item))
    }
}

#[tonic::async_trait]
impl TriggerService for PlaneApi {
    async fn deliver_trigger(
        &self,
        request: Request<pb::DeliverTriggerRequest>,
    ) -> Result<Response<pb::DeliverTriggerResponse>, Status> {
        let req = request.into_inner();
        if !req.token.starts_with(wait_plane::TOKEN_PREFIX) {
            return Err(ApiError::PermissionDenied("unknown trigger token".into()).into());
        }
        bounds::check_message(&req.payload).map_err(ApiError::from)?;
        bounds::check_dedupe_key(&req.dedupe_key).map_err(ApiError::from)?;
        let dedupe_key = (!req.dedupe_key.is_empty()).then_some(req.dedupe_key);
        let delivered = self
            .runtime
            .deliver_trigger(req.token, req.payload, dedupe_key)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::DeliverTriggerResponse {
            message_id: delivered.message_id.to_string(),
            duplicate: delivered.duplicate,
        }))
    }
}
