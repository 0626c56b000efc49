//! Work items: the unit of work identity (objective, plan, status). At most
//! one item per agent is active: the agent's current work focus.

use serde::{Deserialize, Serialize};

use crate::ids::{AgentId, WorkItemId};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WorkStatus {
    /// The agent's current focus; at most one per agent.
    Active,
    Blocked,
    Done,
}

impl WorkStatus {
    pub const fn name(self) -> &'static str {
        match self {
            WorkStatus::Active => "active",
            WorkStatus::Blocked => "blocked",
            WorkStatus::Done => "done",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        [WorkStatus::Active, WorkStatus::Blocked, WorkStatus::Done]
            .into_iter()
            .find(|s| s.name() == name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StepStatus {
    Pending,
    InProgress,
    Done,
    Skipped,
}

impl StepStatus {
    pub const fn name(self) -> &'static str {
        match self {
            StepStatus::Pending => "pending",
            StepStatus::InProgress => "in_progress",
            StepStatus::Done => "done",
            StepStatus::Skipped => "skipped",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        [
            StepStatus::Pending,
            StepStatus::InProgress,
            StepStatus::Done,
            StepStatus::Skipped,
        ]
        .into_iter()
        .find(|s| s.name() == name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStep {
    pub title: String,
    pub status: StepStatus,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkItemRecord {
    pub id: WorkItemId,
    pub owner_agent_id: AgentId,
    pub objective: String,
    pub status: WorkStatus,
    pub plan: Vec<PlanStep>,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
}

/// A change asked for by `update_work_item` or `update_work_plan`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkUpdate {
    /// `None` creates a new item.
    pub id: Option<WorkItemId>,
    pub objective: Option<String>,
    pub status: Option<WorkStatus>,
    /// Replaces the whole plan.
    pub plan: Option<Vec<PlanStep>>,
}

pub const MAX_OBJECTIVE_LEN: usize = 1000;
pub const MAX_STEPS: usize = 100;
pub const MAX_STEP_LEN: usize = 500;

/// Why an update was refused; the brain reads the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkError {
    #[error("work item {0} not found")]
    NotFound(WorkItemId),
    #[error("a new work item needs an objective")]
    ObjectiveRequired,
    #[error("work item {0} is already active: mark it blocked or done first")]
    AnotherActive(WorkItemId),
    #[error("objective is over {MAX_OBJECTIVE_LEN} bytes")]
    ObjectiveTooLong,
    #[error("a plan holds at most {MAX_STEPS} steps of at most {MAX_STEP_LEN} bytes")]
    PlanTooLarge,
}

/// Applies `update` to the agent's items (`items`: every item it owns) and
/// returns the new or changed item. Keeps at most one active item.
pub fn apply(
    owner: AgentId,
    items: &[WorkItemRecord],
    update: WorkUpdate,
    new_id: WorkItemId,
    now_ms: u64,
) -> Result<WorkItemRecord, WorkError> {
    if update
        .objective
        .as_ref()
        .is_some_and(|o| o.len() > MAX_OBJECTIVE_LEN)
    {
        return Err(WorkError::ObjectiveTooLong);
    }
    if update
        .plan
        .as_ref()
        .is_some_and(|p| p.len() > MAX_STEPS || p.iter().any(|s| s.title.len() > MAX_STEP_LEN))
    {
        return Err(WorkError::PlanTooLarge);
    }
    let active = items
        .iter()
        .find(|i| i.status == WorkStatus::Active)
        .map(|i| i.id);
    let mut item = match update.id {
        Some(id) => items
            .iter()
            .find(|i| i.id == id)
            .cloned()
            .ok_or(WorkError::NotFound(id))?,
        None => {
            let objective = update.objective.clone().filter(|o| !o.trim().is_empty());
            WorkItemRecord {
                id: new_id,
                owner_agent_id: owner,
                objective: objective.ok_or(WorkError::ObjectiveRequired)?,
                // A new item takes the focus only if nothing else has it.
                status: if active.is_some() {
                    WorkStatus::Blocked
                } else {
                    WorkStatus::Active
                },
                plan: Vec::new(),
                created_at_ms: now_ms,
                updated_at_ms: now_ms,
            }
        }
    };
    if let Some(objective) = update.objective.filter(|o| !o.trim().is_empty()) {
        item.objective = objective;
    }
    if let Some(status) = update.status {
        if status == WorkStatus::Active {
            if let Some(other) = active.filter(|a| *a != item.id) {
                return Err(WorkError::AnotherActive(other));
            }
        }
        item.status = status;
    }
    if let Some(plan) = update.plan {
        item.plan = plan;
    }
    item.updated_at_ms = now_ms;
    Ok(item)
}

impl WorkItemRecord {
    /// Calls `f` on the work item's free texts (objective, plan titles), for
    /// redaction.
    pub fn texts_mut(&mut self, f: &mut dyn FnMut(&mut String)) {
        f(&mut self.objective);
        self.plan.iter_mut().for_each(|step| f(&mut step.title));
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn arb_status() -> impl Strategy<Value = Option<WorkStatus>> {
        proptest::option::of(prop_oneof![
            Just(WorkStatus::Active),
            Just(WorkStatus::Blocked),
            Just(WorkStatus::Done)
        ])
    }

    proptest! {
        #[test]
        fn an_agent_never_has_two_active_items(
            steps in proptest::collection::vec((any::<Option<prop::sample::Index>>(), arb_status()), 1..40)
        ) {
            let owner = AgentId::from_u128(1);
            let mut items: Vec<WorkItemRecord> = Vec::new();
            for (n, (pick, status)) in steps.into_iter().enumerate() {
                let id = pick.filter(|_| !items.is_empty()).map(|p| items[p.index(items.len())].id);
                let update = WorkUpdate { id, objective: Some(format!("goal {n}")), status, plan: None };
                if let Ok(item) = apply(owner, &items, update, WorkItemId::from_u128(n as u128 + 10), n as u64) {
                    match items.iter_mut().find(|i| i.id == item.id) {
                        Some(existing) => *existing = item,
                        None => items.push(item),
                    }
                }
                let active = items.iter().filter(|i| i.status == WorkStatus::Active).count();
                prop_assert!(active <= 1, "{active} active items");
            }
        }
    }

    #[test]
    fn the_first_item_takes_the_focus_and_the_second_waits() {
        let owner = AgentId::from_u128(1);
        let new = |objective: &str| WorkUpdate {
            objective: Some(objective.into()),
            ..WorkUpdate::default()
        };
        let first =
            apply(owner, &[], new("ship it"), WorkItemId::from_u128(1), 1).expect("created");
        assert_eq!(first.status, WorkStatus::Active);
        let second = apply(
            owner,
            std::slice::from_ref(&first),
            new("then this"),
            WorkItemId::from_u128(2),
            2,
        )
        .expect("created");
        assert_eq!(second.status, WorkStatus::Blocked);
        let steal = WorkUpdate {
            id: Some(second.id),
            status: Some(WorkStatus::Active),
            ..WorkUpdate::default()
        };
        assert_eq!(
            apply(
                owner,
                &[first.clone(), second],
                steal,
                WorkItemId::from_u128(3),
                3
            ),
            Err(WorkError::AnotherActive(first.id))
        );
        assert_eq!(
            apply(
                owner,
                &[],
                WorkUpdate::default(),
                WorkItemId::from_u128(4),
                4
            ),
            Err(WorkError::ObjectiveRequired)
        );
    }
}
