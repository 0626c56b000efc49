//! The work plane's tools: `Enqueue` (a message to the agent itself) and
//! the work items and plans that hold the agent's focus.

use std::sync::Arc;

use holarchy_supervision::work::{WorkError, WorkUpdate};
use holarchy_supervision::{bounds, PlanStep, StepStatus, ToolFamily, WorkItemId, WorkStatus};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{classified, Classify, ErrorKind, ToolError};
use super::input::{from_optional_text, from_text};
use super::tool::{Caller, Plane, Spec, Tool};
use crate::plane::work::{self as work_plane, WorkPlaneError};
use crate::protocol::DeliverError;
use crate::views::work_json;
use crate::Ctx;

/// `Enqueue`: a message to this agent, for a later turn.
#[derive(Debug)]
pub struct Enqueue;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnqueueInput {
    text: String,
}

impl Tool for Enqueue {
    const SPEC: Spec = Spec {
        name: "Enqueue",
        family: ToolFamily::Core,
        plane: Plane::Work,
        description: "Queues a message to this agent itself, for a later turn.",
    };
    type Input = EnqueueInput;
    type Error = WorkPlaneError;

    async fn run(
        ctx: &Arc<Ctx>,
        caller: Caller,
        input: EnqueueInput,
    ) -> Result<Value, WorkPlaneError> {
        // The message limit every other way onto a queue has.
        bounds::check_message(&input.text).map_err(DeliverError::from)?;
        let delivered = work_plane::enqueue(ctx, caller.agent_id, input.text).await?;
        Ok(json!({ "message_id": delivered.message_id.to_string() }))
    }
}

/// `update_work_item`: creates or updates a work item.
#[derive(Debug)]
pub struct UpdateWorkItem;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ItemInput {
    /// Absent: a new item.
    #[serde(default, deserialize_with = "from_optional_text")]
    #[schemars(with = "Option<String>")]
    work_item_id: Option<WorkItemId>,
    objective: Option<String>,
    status: Option<ItemStatus>,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum ItemStatus {
    Active,
    Blocked,
    Done,
}

impl From<ItemStatus> for WorkStatus {
    fn from(status: ItemStatus) -> Self {
        match status {
            ItemStatus::Active => WorkStatus::Active,
            ItemStatus::Blocked => WorkStatus::Blocked,
            ItemStatus::Done => WorkStatus::Done,
        }
    }
}

impl Tool for UpdateWorkItem {
    const SPEC: Spec = Spec {
        name: "update_work_item",
        family: ToolFamily::Core,
        plane: Plane::Work,
        description: "Creates (no `work_item_id`) or updates a work item: objective and status (active, blocked, done). At most one item is active: the agent's current work focus.",
    };
    type Input = ItemInput;
    type Error = WorkPlaneError;

    async fn run(
        ctx: &Arc<Ctx>,
        caller: Caller,
        input: ItemInput,
    ) -> Result<Value, WorkPlaneError> {
        let change = WorkUpdate {
            id: input.work_item_id,
            objective: input.objective,
            status: input.status.map(Into::into),
            plan: None,
        };
        let item = work_plane::update(ctx, caller.agent_id, change).await?;
        Ok(work_json(&item))
    }
}

/// `update_work_plan`: replaces a work item's plan.
#[derive(Debug)]
pub struct UpdateWorkPlan;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanInput {
    #[serde(deserialize_with = "from_text")]
    #[schemars(with = "String")]
    work_item_id: WorkItemId,
    steps: Vec<StepInput>,
}

/// One step of a plan. Unknown fields are ignored, as the schema allows.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct StepInput {
    title: String,
    /// Default: pending.
    status: Option<StepState>,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum StepState {
    Pending,
    InProgress,
    Done,
    Skipped,
}

impl From<StepState> for StepStatus {
    fn from(state: StepState) -> Self {
        match state {
            StepState::Pending => StepStatus::Pending,
            StepState::InProgress => StepStatus::InProgress,
            StepState::Done => StepStatus::Done,
            StepState::Skipped => StepStatus::Skipped,
        }
    }
}

impl Tool for UpdateWorkPlan {
    const SPEC: Spec = Spec {
        name: "update_work_plan",
        family: ToolFamily::Core,
        plane: Plane::Work,
        description: "Replaces a work item's plan with the given steps.",
    };
    type Input = PlanInput;
    type Error = WorkPlaneError;

    async fn run(
        ctx: &Arc<Ctx>,
        caller: Caller,
        input: PlanInput,
    ) -> Result<Value, WorkPlaneError> {
        let plan = input
            .steps
            .into_iter()
            .map(|step| PlanStep {
                title: step.title,
                status: step.status.map_or(StepStatus::Pending, Into::into),
            })
            .collect();
        let change = WorkUpdate {
            id: Some(input.work_item_id),
            plan: Some(plan),
            ..WorkUpdate::default()
        };
        let item = work_plane::update(ctx, caller.agent_id, change).await?;
        Ok(work_json(&item))
    }
}

classified!(WorkPlaneError);

impl Classify for WorkPlaneError {
    fn kind(&self) -> ErrorKind {
        match self {
            WorkPlaneError::Refused(refusal) => match refusal {
                WorkError::NotFound(_) => ErrorKind::NotFound,
                WorkError::AnotherActive(_) => ErrorKind::Refused,
                WorkError::ObjectiveRequired
                | WorkError::ObjectiveTooLong
                | WorkError::PlanTooLarge => ErrorKind::InvalidInput,
            },
            WorkPlaneError::Deliver(e) => e.kind(),
            WorkPlaneError::Store(e) => e.kind(),
        }
    }
}
