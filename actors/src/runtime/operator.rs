//! What operators do through the runtime besides creating, messaging and
//! controlling agents: tasks, workspaces, triggers, instances and the tree.
//!
//! A change that reaches an actor, stops a process or runs git goes on in
//! a task of its own, and the caller waits for it under a deadline: a
//! caller that gives up (or times out) leaves the change to finish whole,
//! never cut off half-way, and no gRPC handler waits without bound.

use std::path::Path;
use std::time::Duration;

use holarchy_supervision::workspace::Binding;
use holarchy_supervision::{AgentId, AgentRecord, ApprovalId, TaskId, TaskRecord};
use tokio::sync::broadcast;

use holarchy_composition::event::InboundEvent;

use super::bounded::{bounded, Bounded};
use super::handle::Runtime;
use super::instance::{self, Change, InstanceError, InstanceView};
use crate::approval::{self, ApprovalError};
use crate::inbound::{self, InboundError, Published};
use crate::plane::task::{self, TaskError, TaskOutput};
use crate::plane::wait::{self, WaitError};
use crate::protocol::Delivered;
use crate::protocol::{SchedulerMsg, SchedulerSnapshot};
use crate::replies::ReplyEvent;
use crate::store::{DurableFuture, StoreError};
use crate::tree::Walk;
use crate::workspace::{self, View, WorkspaceError};
use holarchy_composition::approval::ApprovalRecord;

impl Runtime {
    /// How long an operator's change may take: it may wait for an actor,
    /// for a process to stop after its grace, and for git.
    pub(super) fn change_deadline(&self) -> Duration {
        let config = &self.ctx().config;
        config.call_timeout * 3 + config.stop_grace
    }

    /// Resolves once every write made before the call is on disk: an
    /// operator's read answers after it.
    pub fn durable(&self) -> DurableFuture {
        crate::apply::durable(self.ctx())
    }

    /// An agent's record, as operators see it.
    pub fn agent_record(&self, agent_id: AgentId) -> Result<Option<AgentRecord>, StoreError> {
        self.ctx().reads().agent(agent_id)
    }

    /// The tasks `agent_id` owns, in id order.
    pub fn tasks(&self, agent_id: AgentId) -> Result<Vec<TaskRecord>, TaskError> {
        let mut tasks = task::list(self.ctx(), agent_id)?;
        tasks.sort_by_key(|t| t.id);
        Ok(tasks)
    }

    pub fn task(&self, task_id: TaskId) -> Result<TaskRecord, TaskError> {
        task::get(self.ctx(), task_id, None)
    }

    /// A task and its output from `offset` on.
    pub fn task_output(
        &self,
        task_id: TaskId,
        offset: u64,
    ) -> Result<(TaskRecord, TaskOutput), TaskError> {
        task::output(self.ctx(), task_id, None, offset)
    }

    /// `agent_id`'s replies as its brain writes them, from now on (see
    /// [`crate::replies`]). Who may watch is the caller's to check.
    pub fn watch_replies(&self, agent_id: AgentId) -> broadcast::Receiver<ReplyEvent> {
        self.ctx().replies.watch(agent_id)
    }

    /// Ids of tasks whose output grew or ended, from now on.
    pub fn follow_output(&self) -> broadcast::Receiver<TaskId> {
        self.ctx().follow_output()
    }

    /// Operator input to a task: a message to a child agent, or a
    /// command's stdin.
    pub async fn send_task_input(
        &self,
        task_id: TaskId,
        text: String,
    ) -> Result<Option<Delivered>, Bounded<TaskError>> {
        let ctx = self.ctx().clone();
        let limit = self.ctx().config.call_timeout;
        bounded(&self.ctx().lifecycle.tasks, limit, async move {
            task::input(&ctx, task_id, None, text).await
        })
        .await
    }

    /// Stops a task: a child agent with its subtree, or a command.
    pub async fn stop_task(
        &self,
        task_id: TaskId,
        why: &'static str,
    ) -> Result<TaskRecord, Bounded<TaskError>> {
        let ctx = self.ctx().clone();
        bounded(
            &self.ctx().lifecycle.tasks,
            self.change_deadline(),
            async move { task::stop(&ctx, task_id, None, why).await },
        )
        .await
    }

    /// The agent's workspaces.
    pub fn workspaces(&self, agent_id: AgentId) -> Result<View, StoreError> {
        workspace::view(self.ctx(), agent_id)
    }

    pub async fn attach_workspace(
        &self,
        agent_id: AgentId,
        path: &Path,
        workspace_id: Option<String>,
    ) -> Result<(View, Binding), Bounded<WorkspaceError>> {
        let ctx = self.ctx().clone();
        let path = path.to_owned();
        bounded(
            &self.ctx().lifecycle.tasks,
            self.change_deadline(),
            async move { workspace::attach(&ctx, agent_id, &path, workspace_id).await },
        )
        .await
    }

    pub async fn detach_workspace(
        &self,
        agent_id: AgentId,
        workspace_id: String,
    ) -> Result<(View, Binding), Bounded<WorkspaceError>> {
        let ctx = self.ctx().clone();
        bounded(
            &self.ctx().lifecycle.tasks,
            self.change_deadline(),
            async move { workspace::detach(&ctx, agent_id, &workspace_id).await },
        )
        .await
    }

    /// Delivers a trigger's payload to the agent that armed it.
    pub async fn deliver_trigger(
        &self,
        token: String,
        payload: String,
        dedupe_key: Option<String>,
    ) -> Result<Delivered, Bounded<WaitError>> {
        let ctx = self.ctx().clone();
        let limit = self.ctx().config.call_timeout;
        bounded(&self.ctx().lifecycle.tasks, limit, async move {
            wait::deliver(&ctx, &token, payload, dedupe_key).await
        })
        .await
    }

    /// Creates or updates an instance from its manifest (see
    /// [`super::instance`]); the same manifest twice changes nothing.
    pub async fn apply_instance(
        &self,
        manifest: String,
        files: std::collections::BTreeMap<String, String>,
    ) -> Result<(InstanceView, Change), Bounded<InstanceError>> {
        let ctx = self.ctx().clone();
        bounded(
            &self.ctx().lifecycle.tasks,
            self.change_deadline(),
            async move { instance::apply(&ctx, &manifest, &files).await },
        )
        .await
    }

    pub fn instance(&self, name: &str) -> Result<InstanceView, InstanceError> {
        instance::get(self.ctx(), name)
    }

    pub fn instances(&self) -> Result<Vec<InstanceView>, InstanceError> {
        instance::list(self.ctx())
    }

    /// Archives the instance's agent and subtree, then forgets the instance.
    pub async fn delete_instance(
        &self,
        name: String,
    ) -> Result<InstanceView, Bounded<InstanceError>> {
        let ctx = self.ctx().clone();
        bounded(
            &self.ctx().lifecycle.tasks,
            self.change_deadline(),
            async move { instance::delete(&ctx, &name).await },
        )
        .await
    }

    /// Stores an inbound event for instance `instance` (once per dedupe
    /// key) and queues it for its agent (see [`crate::inbound`]).
    pub async fn publish_event(
        &self,
        instance: String,
        event: InboundEvent,
    ) -> Result<Published, Bounded<InboundError>> {
        let ctx = self.ctx().clone();
        bounded(
            &self.ctx().lifecycle.tasks,
            self.ctx().config.call_timeout * 2,
            async move { inbound::publish(&ctx, &instance, event).await },
        )
        .await
    }

    /// The inbound event stored for `instance` under `dedupe_key`, its
    /// secrets redacted.
    pub fn inbound_event(
        &self,
        instance: &str,
        dedupe_key: &str,
    ) -> Result<Option<InboundEvent>, StoreError> {
        // Kept as it arrived (its signature was over those bytes); what
        // leaves the daemon is redacted like the agent's copy and the log.
        let secrets = &self.ctx().config.secrets;
        Ok(self
            .ctx()
            .inbound()
            .inbound(instance, dedupe_key)?
            .map(|mut event| {
                for text in [
                    &mut event.payload,
                    &mut event.subject,
                    &mut event.scope,
                    &mut event.dedupe_key,
                ] {
                    secrets.redact(text);
                }
                event
            }))
    }

    /// What the scheduler last saw; `None` while it is not running.
    pub async fn scheduler_snapshot(&self) -> Option<SchedulerSnapshot> {
        let scheduler = self.ctx().topology.scheduler()?;
        let timeout = Some(self.ctx().config.call_timeout);
        match scheduler.call(SchedulerMsg::Snapshot, timeout).await {
            Ok(ractor::rpc::CallResult::Success(snapshot)) => Some(snapshot),
            _ => None,
        }
    }

    /// Calls parked for approval: one agent's, or every agent's; with
    /// `history`, decided ones too.
    pub fn approvals(
        &self,
        agent: Option<AgentId>,
        history: bool,
    ) -> Result<Vec<ApprovalRecord>, ApprovalError> {
        approval::list(self.ctx(), agent, history)
    }

    /// One approval, whole.
    pub fn approval(&self, id: ApprovalId) -> Result<ApprovalRecord, ApprovalError> {
        self.ctx()
            .approvals()
            .approval(id)?
            .ok_or(ApprovalError::NotFound(id))
    }

    /// Runs a parked call once, as its agent, and tells the agent.
    pub async fn approve(&self, id: ApprovalId) -> Result<ApprovalRecord, Bounded<ApprovalError>> {
        let ctx = self.ctx().clone();
        bounded(
            &self.ctx().lifecycle.tasks,
            self.change_deadline(),
            async move { approval::approve(&ctx, id).await },
        )
        .await
    }

    /// Refuses a parked call; the agent is told `reason`.
    pub async fn deny(
        &self,
        id: ApprovalId,
        reason: String,
    ) -> Result<ApprovalRecord, Bounded<ApprovalError>> {
        let ctx = self.ctx().clone();
        bounded(
            &self.ctx().lifecycle.tasks,
            self.change_deadline(),
            async move { approval::deny(&ctx, id, reason).await },
        )
        .await
    }

    /// A walk of the supervision tree from `roots`, comparing the store
    /// with the running actors.
    pub fn walk(&self, roots: Vec<AgentRecord>) -> Walk<'_> {
        Walk::new(self.ctx(), roots)
    }

    /// How many root partitions supervise the public agents.
    pub fn partition_count(&self) -> usize {
        self.ctx().topology.partition_count()
    }

    /// Which root partition supervises the public agent `agent_id`.
    pub fn partition_of(&self, agent_id: AgentId) -> usize {
        crate::topology::partition_of(agent_id, self.partition_count())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use tokio_util::task::TaskTracker;

    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("refused")]
    struct Refused;

    #[tokio::test]
    async fn a_change_past_its_deadline_times_out_and_still_finishes() {
        let finished = Arc::new(AtomicBool::new(false));
        let done = finished.clone();
        let slow = async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            done.store(true, Ordering::SeqCst);
            Ok::<_, Refused>(())
        };
        let tasks = TaskTracker::new();
        let answer = bounded(&tasks, Duration::from_millis(10), slow).await;
        assert!(matches!(answer, Err(Bounded::TimedOut(_))), "{answer:?}");
        assert!(!finished.load(Ordering::SeqCst));
        // Held, not detached: a shutdown's wait sees it to its end.
        assert_eq!(tasks.len(), 1);
        tasks.close();
        tokio::time::timeout(Duration::from_secs(5), tasks.wait())
            .await
            .expect("the change went on after its caller stopped waiting");
        assert!(finished.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn a_change_in_time_keeps_its_answer_and_its_error() {
        let ok = bounded(&TaskTracker::new(), Duration::from_secs(5), async {
            Ok::<_, Refused>(7)
        })
        .await;
        assert_eq!(ok.expect("in time"), 7);
        let refused = bounded(&TaskTracker::new(), Duration::from_secs(5), async {
            Err::<(), _>(Refused)
        })
        .await;
        assert!(matches!(refused, Err(Bounded::Failed(Refused))));
    }

    #[tokio::test]
    async fn a_change_that_panics_says_so_rather_than_timing_out() {
        let broken = bounded(&TaskTracker::new(), Duration::from_secs(5), async {
            if Duration::ZERO.is_zero() {
                panic!("broken change");
            }
            Ok::<(), Refused>(())
        })
        .await;
        assert!(matches!(broken, Err(Bounded::Panicked(_))), "{broken:?}");
    }
}
