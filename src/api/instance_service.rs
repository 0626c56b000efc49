//! `holarchy.v1.InstanceService`: operators apply, read and delete
//! instances (agents composed from role, ingress, skills and constraints).

use std::collections::BTreeMap;
use std::sync::Arc;

use holarchy_actors::inbound::InboundError;
use holarchy_actors::runtime::instance::{InstanceError, InstanceView};
use holarchy_actors::{now_ms, Runtime};
use holarchy_composition::event::{self, MAX_FIELD_BYTES};
use holarchy_composition::manifest::{Ingress, MAX_MANIFEST_BYTES};
use holarchy_composition::role::MAX_ROLE_BYTES;
use tonic::{Request, Response, Status};

use super::convert::{self, ApiError};
use super::pb;
use super::pb::instance_service_server::InstanceService;

/// Most files one apply may carry (a manifest names one today).
const MAX_FILES: usize = 8;

#[derive(Debug, Clone)]
pub struct InstanceApi {
    runtime: Arc<Runtime>,
}

impl InstanceApi {
    pub fn new(runtime: Arc<Runtime>) -> Self {
        Self { runtime }
    }

    async fn view(&self, view: &InstanceView) -> pb::Instance {
        let summary = match &view.agent {
            Some(agent) => {
                let live = self.runtime.agent_snapshot(agent.id);
                Some(convert::summary(agent, live.as_ref(), &[], None))
            }
            None => None,
        };
        instance(view, summary)
    }
}

impl From<InstanceError> for ApiError {
    fn from(err: InstanceError) -> Self {
        match err {
            InstanceError::Invalid(_) => ApiError::InvalidArgument(err.to_string()),
            InstanceError::NotFound(_) => ApiError::NotFound(err.to_string()),
            InstanceError::Precondition(_) => ApiError::FailedPrecondition(err.to_string()),
            InstanceError::Create(err) => err.into(),
            InstanceError::Store(err) => err.into(),
        }
    }
}

impl From<InboundError> for ApiError {
    fn from(err: InboundError) -> Self {
        match err {
            InboundError::NotFound(_) => ApiError::NotFound(err.to_string()),
            InboundError::Invalid(_) => ApiError::InvalidArgument(err.to_string()),
            InboundError::NotDeclared { .. }
            | InboundError::Ignored { .. }
            | InboundError::NoAgent(_) => ApiError::FailedPrecondition(err.to_string()),
            InboundError::Unavailable(_) => ApiError::Unavailable(err.to_string()),
            InboundError::Store(err) => err.into(),
        }
    }
}

fn required(name: &str, value: &str) -> Result<(), ApiError> {
    if value.is_empty() {
        return Err(ApiError::InvalidArgument(format!("{name} is required")));
    }
    Ok(())
}

#[tonic::async_trait]
impl InstanceService for InstanceApi {
    async fn apply_instance(
        &self,
        request: Request<pb::ApplyInstanceRequest>,
    ) -> Result<Response<pb::ApplyInstanceResponse>, Status> {
        let req = request.into_inner();
        required("manifest", &req.manifest)?;
        if req.manifest.len() > MAX_MANIFEST_BYTES {
            return Err(ApiError::InvalidArgument(format!(
                "the manifest is {} bytes; the limit is {MAX_MANIFEST_BYTES}",
                req.manifest.len()
            ))
            .into());
        }
        if req.files.len() > MAX_FILES {
            return Err(ApiError::InvalidArgument(format!(
                "{} files sent; at most {MAX_FILES}",
                req.files.len()
            ))
            .into());
        }
        if let Some((path, _)) = req.files.iter().find(|(_, t)| t.len() > MAX_ROLE_BYTES) {
            return Err(ApiError::InvalidArgument(format!(
                "file `{path}` is over {MAX_ROLE_BYTES} bytes"
            ))
            .into());
        }
        let files: BTreeMap<String, String> = req.files.into_iter().collect();
        let (view, change) = self
            .runtime
            .apply_instance(req.manifest, files)
            .await
            .map_err(ApiError::from)?;
        // No agent (an apply half-way): nothing to warn about yet.
        let warnings = view
            .agent
            .as_ref()
            .and_then(|agent| self.runtime.brain_warning(Some(&agent.brain)))
            .into_iter()
            .collect();
        Ok(Response::new(pb::ApplyInstanceResponse {
            instance: Some(self.view(&view).await),
            change: change.name().to_owned(),
            warnings,
        }))
    }

    async fn get_instance(
        &self,
        request: Request<pb::GetInstanceRequest>,
    ) -> Result<Response<pb::Instance>, Status> {
        let name = request.into_inner().name;
        required("name", &name)?;
        let view = self.runtime.instance(&name).map_err(ApiError::from)?;
        Ok(Response::new(self.view(&view).await))
    }

    async fn list_instances(
        &self,
        request: Request<pb::ListInstancesRequest>,
    ) -> Result<Response<pb::ListInstancesResponse>, Status> {
        // Instances live in the default namespace.
        if super::scope::namespace_of(&request) != holarchy_supervision::namespace::DEFAULT {
            return Ok(Response::new(pb::ListInstancesResponse::default()));
        }
        let views = self.runtime.instances().map_err(ApiError::from)?;
        let mut instances = Vec::with_capacity(views.len());
        for view in &views {
            instances.push(self.view(view).await);
        }
        Ok(Response::new(pb::ListInstancesResponse { instances }))
    }

    async fn delete_instance(
        &self,
        request: Request<pb::DeleteInstanceRequest>,
    ) -> Result<Response<pb::Instance>, Status> {
        let name = request.into_inner().name;
        required("name", &name)?;
        let view = self
            .runtime
            .delete_instance(name)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(self.view(&view).await))
    }

    async fn publish_event(
        &self,
        request: Request<pb::PublishEventRequest>,
    ) -> Result<Response<pb::PublishEventResponse>, Status> {
        let req = request.into_inner();
        required("instance", &req.instance)?;
        required("type", &req.r#type)?;
        required("dedupe_key", &req.dedupe_key)?;
        // Cheap to check before anything is looked up; the normaliser
        // checks the rest (bounds, control characters, JSON).
        if req.instance.len() > MAX_FIELD_BYTES {
            return Err(ApiError::InvalidArgument(format!(
                "instance is {} bytes, over the limit of {MAX_FIELD_BYTES}",
                req.instance.len()
            ))
            .into());
        }
        let payload = if req.payload_json.is_empty() {
            "{}"
        } else {
            req.payload_json.as_str()
        };
        let event = event::from_publish(
            &req.instance,
            &req.r#type,
            &req.subject,
            &req.scope,
            &req.dedupe_key,
            payload,
            now_ms(),
        )
        .map_err(|err| ApiError::InvalidArgument(err.to_string()))?;
        let published = self
            .runtime
            .publish_event(req.instance, event)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::PublishEventResponse {
            event_id: published.event_id,
            duplicate: published.duplicate,
        }))
    }

    async fn get_inbound_event(
        &self,
        request: Request<pb::GetInboundEventRequest>,
    ) -> Result<Response<pb::InboundEvent>, Status> {
        let req = request.into_inner();
        required("instance", &req.instance)?;
        required("dedupe_key", &req.dedupe_key)?;
        let event = self
            .runtime
            .inbound_event(&req.instance, &req.dedupe_key)
            .map_err(ApiError::from)?
            .ok_or_else(|| {
                ApiError::NotFound(format!(
                    "no event of instance `{}` under `{}`",
                    req.instance, req.dedupe_key
                ))
            })?;
        Ok(Response::new(pb::InboundEvent {
            id: event.id,
            source: event.source,
            r#type: event.kind,
            scope: event.scope,
            at_ms: event.at_ms as i64,
            subject: event.subject,
            dedupe_key: event.dedupe_key,
            payload_json: event.payload,
        }))
    }
}

fn instance(view: &InstanceView, agent: Option<pb::AgentSummary>) -> pb::Instance {
    let spec = &view.record.spec;
    let limits = &spec.limits;
    pb::Instance {
        name: spec.name.clone(),
        digest: view.record.digest.clone(),
        role_version: spec.role.as_ref().map(|r| r.version()).unwrap_or_default(),
        role_prompt: spec
            .role
            .as_ref()
            .map(|r| r.text.clone())
            .unwrap_or_default(),
        brain: spec.brain.as_ref().map(convert::brain),
        skills: spec.skills.clone(),
        ingress: spec.ingress.iter().map(ingress).collect(),
        constraints: Some(pb::Constraints {
            allow_tools: limits.allow.clone().unwrap_or_default(),
            allow_list: limits.allow.is_some(),
            deny_tools: limits.deny.clone(),
            require_approval: limits.require_approval.clone(),
            max_turns_per_hour: limits.max_turns_per_hour.unwrap_or(0),
        }),
        agent,
        created_at_ms: view.record.created_at_ms as i64,
        updated_at_ms: view.record.updated_at_ms as i64,
        context_tokens: spec.context_tokens.unwrap_or(0),
        mcp_servers: spec.mcp_servers.clone(),
        network: spec.network.to_string(),
    }
}

fn ingress(ingress: &Ingress) -> pb::IngressSource {
    let mut out = pb::IngressSource {
        source: ingress.source().to_owned(),
        ..Default::default()
    };
    match ingress {
        Ingress::Webhook {
            provider,
            secret_env,
            events,
            ..
        } => {
            out.provider = provider.name().to_owned();
            out.secret_env = secret_env.clone();
            out.events = events.clone();
        }
        Ingress::Schedule {
            cron,
            timezone,
            payload,
        } => {
            out.cron = cron.clone();
            out.timezone = timezone.clone().unwrap_or_default();
            out.payload_json = payload.clone();
        }
        Ingress::Trigger | Ingress::Publish => {}
    }
    out
}
