//! The waiting plane's tools: `Sleep` (a durable timer) and the external
//! triggers a machine wakes the agent with.

use std::sync::Arc;

use holarchy_supervision::{ToolFamily, WaitId, WorkItemId};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::error::{classified, Classify, ErrorKind, ToolError};
use super::input::{from_optional_text, from_text};
use super::tool::{Caller, Plane, Spec, Tool};
use crate::plane::wait::{self as wait_plane, WaitError};
use crate::views::wait_json;
use crate::Ctx;

/// `Sleep`: a timer that wakes the agent once.
#[derive(Debug)]
pub struct Sleep;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SleepInput {
    duration_ms: u64,
    reason: Option<String>,
    /// The work item the wait belongs to, shown with it.
    #[serde(default, deserialize_with = "from_optional_text")]
    #[schemars(with = "Option<String>")]
    work_item_id: Option<WorkItemId>,
}

impl Tool for Sleep {
    const SPEC: Spec = Spec {
        name: "Sleep",
        family: ToolFamily::Core,
        plane: Plane::Waiting,
        description: "Sets a timer; when it fires the agent gets a wake message. It survives restarts and fires once.",
    };
    type Input = SleepInput;
    type Error = WaitError;

    async fn run(ctx: &Arc<Ctx>, caller: Caller, input: SleepInput) -> Result<Value, WaitError> {
        let wait = wait_plane::sleep(
            ctx,
            caller.agent_id,
            input.duration_ms,
            input.reason.unwrap_or_default(),
            input.work_item_id,
        )
        .await?;
        Ok(wait_json(&wait))
    }
}

/// `CreateExternalTrigger`: a wake channel and its secret token.
#[derive(Debug)]
pub struct CreateExternalTrigger;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TriggerInput {
    reason: Option<String>,
    #[serde(default, deserialize_with = "from_optional_text")]
    #[schemars(with = "Option<String>")]
    work_item_id: Option<WorkItemId>,
}

impl Tool for CreateExternalTrigger {
    const SPEC: Spec = Spec {
        name: "CreateExternalTrigger",
        family: ToolFamily::ExternalTrigger,
        plane: Plane::Waiting,
        description: "Creates a wake channel for machines and returns its secret token, once. Deliveries with it (TriggerService.DeliverTrigger) wake this agent with their payload.",
    };
    type Input = TriggerInput;
    type Error = WaitError;

    async fn run(ctx: &Arc<Ctx>, caller: Caller, input: TriggerInput) -> Result<Value, WaitError> {
        let (wait, token) = wait_plane::create_trigger(
            ctx,
            caller.agent_id,
            input.reason.unwrap_or_default(),
            input.work_item_id,
        )
        .await?;
        let mut out = wait_json(&wait);
        out["token"] = Value::String(token);
        Ok(out)
    }
}

/// `CancelExternalTrigger`: the token stops working.
#[derive(Debug)]
pub struct CancelExternalTrigger;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelInput {
    #[serde(deserialize_with = "from_text")]
    #[schemars(with = "String")]
    wait_id: WaitId,
}

impl Tool for CancelExternalTrigger {
    const SPEC: Spec = Spec {
        name: "CancelExternalTrigger",
        family: ToolFamily::ExternalTrigger,
        plane: Plane::Waiting,
        description: "Cancels a trigger; its token stops working.",
    };
    type Input = CancelInput;
    type Error = WaitError;

    async fn run(ctx: &Arc<Ctx>, caller: Caller, input: CancelInput) -> Result<Value, WaitError> {
        let wait = wait_plane::cancel(ctx, input.wait_id, Some(caller.agent_id)).await?;
        Ok(wait_json(&wait))
    }
}

classified!(WaitError);

impl Classify for WaitError {
    fn kind(&self) -> ErrorKind {
        match self {
            WaitError::NotFound(_) | WaitError::WorkItemNotFound(_) => ErrorKind::NotFound,
            WaitError::NotArmed { .. } => ErrorKind::Refused,
            WaitError::BadDuration => ErrorKind::InvalidInput,
            WaitError::OwnerGone => ErrorKind::Failed,
            // Deliveries' errors (not a tool's), classified all the same.
            WaitError::UnknownToken => ErrorKind::NotFound,
            WaitError::RevokedToken => ErrorKind::Refused,
            WaitError::Limit(e) => e.kind(),
            WaitError::Deliver(e) => e.kind(),
            WaitError::Store(e) => e.kind(),
        }
    }
}
