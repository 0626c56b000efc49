//! The chaos clients' operator and instance work: events published and
//! delivered by signed webhooks (each sent twice under one key), calls
//! parked for approval and decided by two operators at once, MCP tool
//! calls, input to and stops of running commands, aborted runs, and
//! instance applies. What was acknowledged goes to the ledger.

use holarchy::api::pb;
use holarchy_composition::webhook::sign;
use serde_json::{json, Value};
use tonic::Code;

use crate::common::http;
use crate::fixtures::{self, DESK, SECRET};
use crate::ledger::Decided;
use crate::load::{answered, read_marker, Driver, CALL};

/// What became of a call: answered, refused with a status the daemon
/// chose (no effect, and known), or lost with its daemon.
enum Called<T> {
    Done(T),
    Refused(Code),
    Lost,
}

async fn called<T>(
    call: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
) -> Called<T> {
    match tokio::time::timeout(CALL, call).await {
        Ok(Ok(answer)) => Called::Done(answer.into_inner()),
        Ok(Err(status))
            if matches!(
                status.code(),
                Code::FailedPrecondition | Code::NotFound | Code::InvalidArgument
            ) =>
        {
            Called::Refused(status.code())
        }
        Ok(Err(_)) | Err(_) => Called::Lost,
    }
}

impl Driver {
    pub(crate) async fn operate(&mut self) {
        match self.rng.below(100) {
            0..=14 => self.publish().await,
            15..=26 => self.webhook().await,
            27..=44 => self.ask_approval().await,
            45..=59 => self.decide().await,
            60..=71 => self.mcp_call().await,
            72..=83 => self.task_control().await,
            84..=85 => self.abort().await,
            86..=88 => self.attach().await,
            89..=92 => self.worktree_work().await,
            93..=97 => self.wake().await,
            98.. if self.index == 0 => self.apply_tools().await,
            _ => self.publish().await,
        }
    }

    /// A published event, then the same again: one event under its key.
    async fn publish(&mut self) {
        let n = self.n();
        let key = format!("ev-{n}");
        for _ in 0..2 {
            let request = pb::PublishEventRequest {
                instance: DESK.into(),
                r#type: "chaos.event".into(),
                dedupe_key: key.clone(),
                payload_json: json!({ "n": n }).to_string(),
                ..Default::default()
            };
            match answered(self.c.instances.publish_event(request)).await {
                Some(done) => {
                    let mut ledger = self.ledger();
                    ledger.ack("publish");
                    ledger.event(key.clone(), done.into_inner().event_id);
                }
                None => self.ledger().unknown("publish"),
            }
        }
    }

    /// A signed generic webhook delivery, then the same body again (a
    /// replay, answered with the first event).
    async fn webhook(&mut self) {
        let n = self.n();
        let key = format!("wh-{n}");
        let body = json!({ "type": "chaos.hook", "dedupe_key": key, "n": n }).to_string();
        let headers = [(
            "X-Holarchy-Signature-256",
            sign(SECRET.as_bytes(), body.as_bytes()),
        )];
        let path = format!("/ingress/generic/{DESK}");
        for _ in 0..2 {
            let answer = tokio::time::timeout(
                CALL,
                http::post(&self.fixtures.http, &path, &headers, body.as_bytes()),
            )
            .await;
            let mut ledger = self.ledger();
            match answer {
                Ok(Ok((200 | 202, answer))) => match answer["event_id"].as_str() {
                    Some(id) => {
                        ledger.ack("webhook");
                        ledger.event(key.clone(), id.to_owned());
                    }
                    None => ledger
                        .violations
                        .push(format!("webhook {key} taken without an event id: {answer}")),
                },
                // Refused while the daemon stops or holds writes.
                Ok(Ok((503, _))) | Ok(Err(_)) | Err(_) => ledger.unknown("webhook"),
                Ok(Ok((status, answer))) => ledger
                    .violations
                    .push(format!("webhook {key} answered {status}: {answer}")),
            }
        }
    }

    /// A command the guard may run only once an operator approves: it
    /// appends a line to a file of its own, so each run is counted.
    async fn ask_approval(&mut self) {
        let file = format!("approved-{}", self.n());
        let guard = self.fixtures.guard.clone();
        let call = json!({ "name": "ExecCommand", "input": {
            "command": format!("echo ran >> {file}"), "yield_ms": 2000 } });
        // Asked or not, the file is watched: a lost answer may have parked.
        self.ledger().asked.insert(file);
        self.send_calls(&guard, json!([call]), "ask_approval").await;
    }

    /// Two operators decide one pending call at once (approve and
    /// approve, or approve and deny), or one alone: at most one decision
    /// is acknowledged.
    async fn decide(&mut self) {
        let listed = answered(self.c.approvals.list_approvals(pb::ListApprovalsRequest {
            agent_id: self.fixtures.guard.clone(),
            include_decided: false,
        }))
        .await;
        let pending: Vec<pb::Approval> = listed
            .map(|l| l.into_inner().approvals)
            .unwrap_or_default()
            .into_iter()
            .filter(|a| a.status == "pending")
            .collect();
        if pending.is_empty() {
            return;
        }
        let chosen = pending[self.rng.below(pending.len())].clone();
        let Some(file) = parked_file(&chosen) else {
            self.ledger().violations.push(format!(
                "approval {} holds another call",
                chosen.approval_id
            ));
            return;
        };
        let id = chosen.approval_id;
        let approve = |mut c: holarchy::client::Clients, id: String| async move {
            called(c.approvals.approve(pb::ApproveRequest { approval_id: id })).await
        };
        let deny = |mut c: holarchy::client::Clients, id: String| async move {
            called(c.approvals.deny(pb::DenyRequest {
                approval_id: id,
                reason: "chaos says no".into(),
            }))
            .await
        };
        let (approvals, denials) = match self.rng.below(3) {
            0 => {
                let (a, b) = tokio::join!(
                    approve(self.c.clone(), id.clone()),
                    approve(self.c.clone(), id.clone())
                );
                (vec![a, b], vec![])
            }
            1 => {
                let (a, d) = tokio::join!(
                    approve(self.c.clone(), id.clone()),
                    deny(self.c.clone(), id.clone())
                );
                (vec![a], vec![d])
            }
            _ if self.rng.below(2) == 0 => {
                (vec![approve(self.c.clone(), id.clone()).await], vec![])
            }
            _ => (vec![], vec![deny(self.c.clone(), id.clone()).await]),
        };
        let mut ledger = self.ledger();
        let mut tally = |kind: &'static str, outcome: &Called<pb::Approval>| -> u32 {
            match outcome {
                Called::Done(_) => {
                    ledger.ack(kind);
                    1
                }
                Called::Refused(_) => 0,
                Called::Lost => {
                    ledger.unknown(kind);
                    0
                }
            }
        };
        let approved: u32 = approvals.iter().map(|o| tally("approve", o)).sum();
        let denied: u32 = denials.iter().map(|o| tally("deny", o)).sum();
        let entry = ledger.decided.entry(id.clone()).or_insert_with(|| Decided {
            file,
            ..Decided::default()
        });
        entry.approved += approved;
        entry.denied += denied;
        if entry.approved + entry.denied > 1 {
            let (a, d) = (entry.approved, entry.denied);
            ledger.violations.push(format!(
                "approval {id} decided more than once: {a} approvals and {d} denials acknowledged"
            ));
        }
    }

    /// A call of the harness's MCP server's `echo` tool.
    async fn mcp_call(&mut self) {
        let tools = self.fixtures.tools.clone();
        let call = json!({ "name": "mcp__tools__echo", "input": { "text": format!("chaos-{}", self.n()) } });
        self.send_calls(&tools, json!([call]), "mcp_call").await;
    }

    /// A running command of some agent given a line of input or stopped;
    /// when it has none, a command that waits for input is started.
    async fn task_control(&mut self) {
        // Mostly an agent known to have started a command that waits.
        let readers = self.ledger().readers.clone();
        let agent = match readers.len() {
            0 => self.some_agent(),
            n if self.rng.below(4) > 0 => Some(readers[self.rng.below(n)].clone()),
            _ => self.some_agent(),
        };
        let Some(agent) = agent else {
            return;
        };
        let listed = answered(self.c.tasks.list_tasks(pb::ListTasksRequest {
            agent_id: agent.clone(),
            page_size: 100,
            page_token: String::new(),
        }))
        .await;
        let running: Vec<pb::TaskHandle> = listed
            .map(|l| l.into_inner().tasks)
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t.task_kind == "command" && t.status == "running")
            .collect();
        if running.is_empty() {
            let call = json!({ "name": "ExecCommand", "input": {
                "command": format!("read line; echo {} $line", read_marker()), "yield_ms": 50 } });
            if self.send_calls(&agent, json!([call]), "send").await {
                let mut ledger = self.ledger();
                if !ledger.readers.contains(&agent) {
                    ledger.readers.push(agent);
                }
            }
            return;
        }
        let task = running[self.rng.below(running.len())].task_id.clone();
        if self.rng.below(2) == 0 {
            let request = pb::SendTaskInputRequest {
                task_id: task,
                text: "chaos line\n".into(),
            };
            match called(self.c.tasks.send_task_input(request)).await {
                Called::Done(_) => self.ledger().ack("task_input"),
                Called::Refused(_) => {}
                Called::Lost => self.ledger().unknown("task_input"),
            }
        } else {
            let request = pb::StopTaskRequest {
                task_id: task.clone(),
            };
            let stopped = called(self.c.tasks.stop_task(request)).await;
            let mut ledger = self.ledger();
            ledger.touched.insert(agent);
            match stopped {
                Called::Done(_) => {
                    ledger.ack("task_stop");
                    ledger.stopped.insert(task);
                }
                Called::Refused(_) => {}
                Called::Lost => ledger.unknown("task_stop"),
            }
        }
    }

    /// The current run of an agent this client owns, aborted (which
    /// pauses the agent).
    async fn abort(&mut self) {
        let Some(agent) = self.some_agent().filter(|a| self.owns(a)) else {
            return;
        };
        let request = pb::AbortRunRequest {
            agent_id: agent.clone(),
            run_id: String::new(),
        };
        let aborted = called(self.c.agents.abort_run(request)).await;
        let mut ledger = self.ledger();
        ledger.touched.insert(agent.clone());
        let paused = match aborted {
            Called::Done(_) => {
                ledger.ack("abort");
                Some(true)
            }
            // No run to abort: nothing changed.
            Called::Refused(_) => return ledger.ack("abort_idle"),
            Called::Lost => {
                ledger.unknown("abort");
                None
            }
        };
        if let Some(tracked) = ledger.agents.get_mut(&agent) {
            tracked.paused = paused;
        }
    }

    /// A delivery to the waker's trigger, then the same again under its
    /// key: one message.
    async fn wake(&mut self) {
        let key = format!("wake-{}", self.n());
        let waker = self.fixtures.waker.clone();
        for _ in 0..2 {
            let request = pb::DeliverTriggerRequest {
                token: self.fixtures.token.clone(),
                payload: format!("chaos {key}"),
                dedupe_key: key.clone(),
            };
            let delivered = answered(self.c.triggers.deliver_trigger(request)).await;
            let mut ledger = self.ledger();
            ledger.touched.insert(waker.clone());
            match delivered {
                Some(done) => {
                    ledger.ack("trigger");
                    ledger.sent_once(&waker, &key, done.into_inner().message_id);
                }
                None => ledger.unknown("trigger"),
            }
        }
    }

    /// A new directory attached to an agent this client owns.
    async fn attach(&mut self) {
        let Some(agent) = self.some_agent().filter(|a| self.owns(a)) else {
            return;
        };
        let id = format!("w{}", self.n());
        let dir = self.fixtures.attachable.join(&id);
        if std::fs::create_dir_all(&dir).is_err() {
            return;
        }
        let request = pb::AttachWorkspaceRequest {
            agent_id: agent.clone(),
            path: dir.display().to_string(),
            workspace_id: id.clone(),
        };
        let attached = called(self.c.workspaces.attach_workspace(request)).await;
        let mut ledger = self.ledger();
        ledger.touched.insert(agent.clone());
        match attached {
            Called::Done(_) => {
                ledger.ack("attach");
                ledger.attached.push((agent, id));
            }
            // Archived by now, or at its bound of workspaces.
            Called::Refused(_) => {}
            Called::Lost => ledger.unknown("attach"),
        }
    }

    /// The tools instance applied in its other version (the first client
    /// alone, so the ledger knows which apply was last).
    async fn apply_tools(&mut self) {
        let version = self.n() as u32;
        let request = pb::ApplyInstanceRequest {
            manifest: fixtures::tools_manifest(version),
            files: Default::default(),
        };
        let applied = called(self.c.instances.apply_instance(request)).await;
        let mut ledger = self.ledger();
        match applied {
            Called::Done(done) => {
                ledger.ack("instance_apply");
                ledger.tools_digest = done.instance.map(|i| i.digest);
            }
            Called::Refused(code) => ledger
                .violations
                .push(format!("the tools instance's apply was refused: {code:?}")),
            Called::Lost => {
                ledger.unknown("instance_apply");
                ledger.tools_digest = None;
            }
        }
    }
}

/// The file a parked `echo ran >> FILE` call appends to.
pub fn parked_file(approval: &pb::Approval) -> Option<String> {
    let input: Value = serde_json::from_str(&approval.input_json).ok()?;
    let command = input["command"].as_str()?;
    command.strip_prefix("echo ran >> ").map(str::to_owned)
}
