//! The [`Reads`] and [`Store`] traits on sled: records read by key or
//! through their indexes, and commits handed to the writer (see `writer`,
//! `grouped`).

use std::sync::atomic::Ordering;

use holarchy_actors::{
    Batch, CommitFuture, DurableFuture, Reads, RecoveryInput, Store, StoreError,
};
use holarchy_supervision::workspace::Projection;
use holarchy_supervision::{
    AgentId, AgentRecord, MessageId, MessageRecord, OutputChunk, TaskId, TaskRecord, WaitId,
    WaitRecord, WorkItemId, WorkItemRecord,
};

use super::writer::Prepared;
use super::{
    backend, grouped, id_from_key, output_key, pair_key, recovery, SledStore, CHILDREN, DEDUPE,
    MESSAGES, NAMES, OUTPUT, OWNED, OWNED_WAITS, OWNED_WORK, PUBLIC_AGENTS, TASKS, TRIGGERS, WAITS,
    WORK, WORKSPACES, WORKTREES,
};
use crate::store::codec::{decode, decode_task};

impl Reads for SledStore {
    fn agent(&self, id: AgentId) -> Result<Option<AgentRecord>, StoreError> {
        self.get_agent(&id.to_bytes())
    }

    fn agent_id_by_name(&self, name: &str) -> Result<Option<AgentId>, StoreError> {
        match self.names.get(name.as_bytes()).map_err(backend)? {
            Some(bytes) => Ok(Some(AgentId::from_bytes(id_from_key(NAMES, &bytes)?))),
            None => Ok(None),
        }
    }

    fn message(
        &self,
        agent_id: AgentId,
        id: MessageId,
    ) -> Result<Option<MessageRecord>, StoreError> {
        self.get(
            &self.messages,
            MESSAGES,
            &pair_key(agent_id, &id.to_bytes()),
        )
    }

    fn message_id_by_dedupe_key(
        &self,
        agent_id: AgentId,
        key: &str,
    ) -> Result<Option<MessageId>, StoreError> {
        match self
            .dedupe
            .get(pair_key(agent_id, key.as_bytes()))
            .map_err(backend)?
        {
            Some(bytes) => Ok(Some(MessageId::from_bytes(id_from_key(DEDUPE, &bytes)?))),
            None => Ok(None),
        }
    }

    fn list_messages(
        &self,
        agent_id: AgentId,
        after: Option<MessageId>,
        limit: usize,
    ) -> Result<Vec<MessageRecord>, StoreError> {
        let start = match after {
            Some(id) if id.as_u128() == u128::MAX => return Ok(Vec::new()),
            Some(id) => pair_key(agent_id, &(id.as_u128() + 1).to_be_bytes()),
            None => agent_id.to_bytes().to_vec(),
        };
        let end = pair_key(agent_id, &[0xff; 17]);
        self.messages
            .range(start..end)
            .take(limit)
            .map(|entry| {
                let (_, value) = entry.map_err(backend)?;
                decode(MESSAGES, &value)
            })
            .collect()
    }

    fn last_settled_messages(
        &self,
        agent_id: AgentId,
        limit: usize,
    ) -> Result<Vec<MessageRecord>, StoreError> {
        // A pending message's key is in `pending` too. The agent's pending
        // keys are read once, in one range (the queue's bound bounds them),
        // rather than looked up one by one for every newer message.
        let pending: std::collections::HashSet<sled::IVec> = self
            .pending
            .scan_prefix(agent_id.to_bytes())
            .keys()
            .collect::<Result<_, _>>()
            .map_err(backend)?;
        let mut newest = Vec::with_capacity(limit.min(1024));
        for entry in self.messages.scan_prefix(agent_id.to_bytes()).rev() {
            if newest.len() == limit {
                break;
            }
            let (key, value) = entry.map_err(backend)?;
            if pending.contains(&key) {
                continue;
            }
            newest.push(decode(MESSAGES, &value)?);
        }
        newest.reverse();
        Ok(newest)
    }

    fn last_run_starts(&self, agent_id: AgentId, scan: usize) -> Result<Vec<u64>, StoreError> {
        let mut starts = Vec::new();
        for entry in self
            .messages
            .scan_prefix(agent_id.to_bytes())
            .rev()
            .take(scan)
        {
            let (_, value) = entry.map_err(backend)?;
            let message: MessageRecord = decode(MESSAGES, &value)?;
            if let Some(run) = message.status.run_id() {
                starts.push(run.timestamp_ms());
            }
        }
        Ok(starts)
    }

    fn pending_messages(&self, agent_id: AgentId) -> Result<Vec<MessageRecord>, StoreError> {
        let mut out = Vec::new();
        for key in self.scan_keys(&self.pending, agent_id) {
            if let Some(bytes) = self.messages.get(key?).map_err(backend)? {
                out.push(decode(MESSAGES, &bytes)?);
            }
        }
        Ok(out)
    }

    fn recovery_input(&self) -> Result<RecoveryInput, StoreError> {
        recovery::input(self)
    }

    fn task(&self, id: TaskId) -> Result<Option<TaskRecord>, StoreError> {
        match self.tasks.get(id.to_bytes()).map_err(backend)? {
            Some(bytes) => decode_task(TASKS, &bytes).map(Some),
            None => Ok(None),
        }
    }

    fn workspaces(&self, agent_id: AgentId) -> Result<Option<Projection>, StoreError> {
        self.get(&self.workspaces, WORKSPACES, &agent_id.to_bytes())
    }

    fn worktree_tasks(&self) -> Result<Vec<TaskRecord>, StoreError> {
        let mut out = Vec::new();
        for entry in self.worktrees.iter() {
            let (key, _) = entry.map_err(backend)?;
            match self.task(TaskId::from_bytes(id_from_key(WORKTREES, &key)?)) {
                Ok(task) => out.extend(task),
                // Read at every start: a damaged task record (named by the
                // start's recovery) must not keep the daemon down; its
                // worktree stays until the record is restored.
                Err(err @ (StoreError::Corrupt { .. } | StoreError::UnsupportedVersion { .. })) => {
                    tracing::error!(error = %err, "a worktree's task record cannot be read; its worktree is left as it is");
                }
                Err(err) => return Err(err),
            }
        }
        Ok(out)
    }

    fn tasks_of(&self, owner: AgentId) -> Result<Vec<TaskRecord>, StoreError> {
        let mut out = Vec::new();
        for key in self.scan_keys(&self.owned, owner) {
            let key = key?;
            let id = TaskId::from_bytes(id_from_key(OWNED, key.get(16..).unwrap_or_default())?);
            if let Some(task) = self.task(id)? {
                out.push(task);
            }
        }
        Ok(out)
    }

    fn wait(&self, id: WaitId) -> Result<Option<WaitRecord>, StoreError> {
        self.get(&self.waits, WAITS, &id.to_bytes())
    }

    fn waits_of(&self, owner: AgentId) -> Result<Vec<WaitRecord>, StoreError> {
        let mut out = Vec::new();
        for key in self.scan_keys(&self.owned_waits, owner) {
            let id = WaitId::from_bytes(id_from_key(
                OWNED_WAITS,
                key?.get(16..).unwrap_or_default(),
            )?);
            out.extend(self.wait(id)?);
        }
        Ok(out)
    }

    fn wait_by_token_hash(&self, token_hash: &[u8; 32]) -> Result<Option<WaitId>, StoreError> {
        match self.triggers.get(token_hash).map_err(backend)? {
            Some(bytes) => Ok(Some(WaitId::from_bytes(id_from_key(TRIGGERS, &bytes)?))),
            None => Ok(None),
        }
    }

    fn output_after(
        &self,
        task_id: TaskId,
        offset: u64,
        max_bytes: usize,
    ) -> Result<Vec<OutputChunk>, StoreError> {
        // The chunk holding `offset` may start before it.
        let start = match self
            .output
            .range(output_key(task_id, 0)..=output_key(task_id, offset))
            .next_back()
        {
            Some(entry) => entry.map_err(backend)?.0.to_vec(),
            None => output_key(task_id, offset),
        };
        let end = output_key(task_id, u64::MAX);
        let mut out = Vec::new();
        let mut size = 0;
        for entry in self.output.range(start..=end) {
            let (_, value) = entry.map_err(backend)?;
            let mut chunk: OutputChunk = decode(OUTPUT, &value)?;
            if chunk.offset + chunk.data.len() as u64 <= offset {
                continue;
            }
            // Start exactly at `offset`, even inside a chunk.
            if chunk.offset < offset {
                chunk.data.drain(..(offset - chunk.offset) as usize);
                chunk.offset = offset;
            }
            size += chunk.data.len();
            out.push(chunk);
            if size >= max_bytes {
                break;
            }
        }
        Ok(out)
    }

    fn work_item(&self, id: WorkItemId) -> Result<Option<WorkItemRecord>, StoreError> {
        self.get(&self.work, WORK, &id.to_bytes())
    }

    fn work_items_of(&self, owner: AgentId) -> Result<Vec<WorkItemRecord>, StoreError> {
        let mut out = Vec::new();
        for key in self.scan_keys(&self.owned_work, owner) {
            let id = WorkItemId::from_bytes(id_from_key(
                OWNED_WORK,
                key?.get(16..).unwrap_or_default(),
            )?);
            out.extend(self.work_item(id)?);
        }
        Ok(out)
    }

    fn children_of(&self, supervisor: AgentId) -> Result<Vec<AgentId>, StoreError> {
        self.scan_keys(&self.children, supervisor)
            .map(|key| {
                Ok(AgentId::from_bytes(id_from_key(
                    CHILDREN,
                    key?.get(16..).unwrap_or_default(),
                )?))
            })
            .collect()
    }

    fn public_agent_ids(&self) -> Result<Vec<AgentId>, StoreError> {
        self.agents
            .public
            .iter()
            .keys()
            .map(|key| {
                Ok(AgentId::from_bytes(id_from_key(
                    PUBLIC_AGENTS,
                    &key.map_err(backend)?,
                )?))
            })
            .collect()
    }
}

impl Store for SledStore {
    fn commit(&self, batch: Batch) -> Result<(), StoreError> {
        self.count_an_end(&batch);
        let batch = Prepared::new(batch)?;
        let _span = batch.span("direct").entered();
        self.writer.apply(&[&batch])
    }

    fn commit_grouped(&self, batch: Batch) -> CommitFuture {
        use tracing::Instrument as _;
        self.count_an_end(&batch);
        match Prepared::new(batch) {
            Ok(batch) => {
                let span = batch.span("grouped");
                Box::pin(grouped::commit(&self.group, batch).instrument(span))
            }
            Err(err) => Box::pin(std::future::ready(Err(err))),
        }
    }

    fn durable(&self) -> DurableFuture {
        self.group.durable()
    }

    fn agent_ends(&self) -> u64 {
        self.agent_ends.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests;
