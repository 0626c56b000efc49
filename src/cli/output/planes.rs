//! How the CLI prints what the planes hold: tasks and their output, the
//! supervision tree, workspaces, work items and tools.

use std::io::Write as _;

use serde_json::{json, Value};

use super::{emit, escape, one_line, table, Output};

/// Characters of a task's output a `task list` row shows; `task output`
/// prints it whole.
const OUTPUT_CELL: usize = 60;

/// `text`, or `-` when it is empty.
fn dash(text: &str) -> String {
    if text.is_empty() {
        "-".to_owned()
    } else {
        text.to_owned()
    }
}

/// At most `max` characters of `text`, `...` saying it was cut.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_owned(),
    }
}
use crate::api::pb;

impl Output {
    pub fn task(&self, t: &pb::TaskHandle) {
        if self.json {
            say!(
                "{}",
                json!({
                    "task_id": t.task_id,
                    "task_kind": t.task_kind,
                    "status": t.status,
                    "owner_agent_id": t.owner_agent_id,
                    "child_agent_id": t.child_agent_id,
                    "label": t.label,
                    "output": t.output,
                    "created_at_ms": t.created_at_ms,
                    "updated_at_ms": t.updated_at_ms,
                    "command": t.command,
                    "exit": t.exit,
                    "workspace_id": t.workspace_id,
                    "workdir": t.workdir,
                    "worktree": t.worktree.as_ref().map(worktree_json),
                })
            );
        } else {
            say!(
                "{}  {:<16}  {:<9}  {}  {}",
                t.task_id,
                t.task_kind,
                t.status,
                t.child_agent_id,
                one_line(&t.label)
            );
            if !t.output.is_empty() {
                say!("{:<30}  -> {}", "", escape::indented(&t.output, 35));
            }
            if !t.workdir.is_empty() {
                say!(
                    "{:<30}  ran in {} ({})",
                    "",
                    one_line(&t.workdir),
                    t.workspace_id
                );
            }
            if let Some(w) = &t.worktree {
                let gone = if w.removed { " (removed)" } else { "" };
                say!(
                    "{:<30}  worktree {} on {}{gone}",
                    "",
                    one_line(&w.path),
                    one_line(&w.branch)
                );
            }
        }
    }

    /// An agent's tasks (`task list`): a table, labels first, ids cut to
    /// the tail that tells them apart (any task command takes it); under
    /// `--json`, one object per task, as `task get` prints it.
    pub fn tasks(&self, tasks: &[pb::TaskHandle]) {
        if self.json {
            tasks.iter().for_each(|t| self.task(t));
            return;
        }
        let tail = table::tail_len(tasks.iter().map(|t| t.task_id.as_str()));
        let child_tail = table::tail_len(
            tasks
                .iter()
                .map(|t| t.child_agent_id.as_str())
                .filter(|id| !id.is_empty()),
        );
        let now = table::now_ms();
        let mut rows = table::Table::new(&[
            "LABEL", "ID", "KIND", "STATUS", "CHILD", "CREATED", "OUTPUT",
        ]);
        for t in tasks {
            let child = match t.child_agent_id.as_str() {
                "" => "-",
                id => table::tail(id, child_tail),
            };
            rows.row(vec![
                dash(&one_line(&t.label)),
                table::tail(&t.task_id, tail).to_owned(),
                t.task_kind.clone(),
                t.status.clone(),
                child.to_owned(),
                table::age(t.created_at_ms, now),
                dash(&cut(&one_line(&t.output), OUTPUT_CELL)),
            ]);
        }
        rows.print();
    }

    pub fn task_output(&self, o: &pb::ReadTaskOutputResponse, raw: bool) {
        if self.json {
            say!(
                "{}",
                json!({
                    "task_id": o.task_id,
                    "status": o.status,
                    "output": o.output,
                    "next_offset": o.next_offset,
                    "dropped_bytes": o.dropped_bytes,
                })
            );
        } else {
            if o.dropped_bytes > 0 {
                eprintln!("({} bytes dropped by the output buffer)", o.dropped_bytes);
            }
            if raw {
                write_raw(o.output.as_bytes());
                write_raw(b"\n");
            } else {
                say!("{}", o.output);
            }
        }
    }

    /// A piece of a followed command's output: to stdout as it comes
    /// (escaped unless `--raw`), or a JSON line with its stream.
    pub fn chunk(&self, c: &pb::OutputChunk, stream: &mut OutputStream) {
        if self.json {
            say!(
                "{}",
                json!({ "offset": c.offset, "stream": c.stream, "data": String::from_utf8_lossy(&c.data) })
            );
        } else if stream.raw {
            write_raw(&c.data);
        } else {
            let text = stream.decode(&c.data);
            write_raw(escape::block(&text).as_bytes());
        }
    }

    /// The end of a followed output: what an unfinished character left.
    pub fn chunk_end(&self, stream: &mut OutputStream) {
        if !self.json && !stream.pending.is_empty() {
            let rest = String::from_utf8_lossy(&std::mem::take(&mut stream.pending)).into_owned();
            write_raw(escape::block(&rest).as_bytes());
        }
    }

    /// The whole tree for scripts, its pages joined: flat (each node with
    /// its parent and depth, every node), with its counts.
    pub fn tree_json(&self, tree: &pb::GetTreeResponse) {
        let node_json = |n: &pb::TreeNode| {
            json!({
                "node_type": n.node_type,
                "id": n.id,
                "parent_id": n.parent_id,
                "depth": n.depth,
                "name": n.name,
                "kind": n.kind,
                "state": n.state,
                "visibility": n.visibility,
                "ownership": n.ownership,
                "actor_alive": n.actor_alive,
                "active_workspace_id": n.active_workspace_id,
                "active_dir": n.active_dir,
                "worktree": n.worktree.as_ref().map(worktree_json),
                "truncated_from_bytes": n.truncated_from_bytes,
                "partition": n.partition,
                "child_agent_id": n.child_agent_id,
            })
        };
        say!(
            "{}",
            json!({
                "nodes": tree.nodes.iter().map(node_json).collect::<Vec<_>>(),
                "mismatches": tree.mismatches,
                "agents": tree.agents,
                "tasks": tree.tasks,
                "waits": tree.waits,
                "partitions": tree.partitions,
                "next_page_token": tree.next_page_token,
            })
        );
    }

    /// The tree for people: the lines `drawn` holds, how many nodes it left
    /// out, then what `tree` says besides its nodes (its counts,
    /// partitions and mismatches).
    pub fn tree_drawn(&self, drawn: &crate::cli::tree_view::Drawn, tree: &pb::GetTreeResponse) {
        for line in &drawn.lines {
            say!("{line}");
        }
        if drawn.left > 0 {
            say!("... {} more (--limit 0 draws them all)", drawn.left);
        }
        say!(
            "{} agents, {} tasks, under {} root partitions",
            tree.agents,
            tree.tasks,
            tree.partitions
        );
        if let Some(cut) = &tree.cut {
            say!(
                "more: the tree goes on after node {} (depth {}); page token {}",
                cut.after_node_id,
                cut.after_depth,
                tree.next_page_token
            );
        }
        for mismatch in &tree.mismatches {
            say!("MISMATCH: {mismatch}");
        }
    }

    pub fn workspaces(&self, w: &pb::Workspaces) {
        if self.json {
            say!(
                "{}",
                json!({
                    "agent_id": w.agent_id,
                    "active_workspace_id": w.active_workspace_id,
                    "active_dir": w.active_dir,
                    "workspaces": w.workspaces.iter().map(|b| json!({
                        "workspace_id": b.workspace_id,
                        "root": b.root,
                        "active": b.active,
                    })).collect::<Vec<_>>(),
                })
            );
            return;
        }
        for b in &w.workspaces {
            let mark = if b.active { "*" } else { " " };
            say!("{mark} {:<24}  {}", b.workspace_id, one_line(&b.root));
        }
        say!(
            "active: {} ({})",
            one_line(&w.active_dir),
            w.active_workspace_id
        );
    }

    pub fn work_item(&self, w: &pb::WorkItem) {
        if self.json {
            say!(
                "{}",
                json!({
                    "work_item_id": w.work_item_id,
                    "owner_agent_id": w.owner_agent_id,
                    "objective": w.objective,
                    "status": w.status,
                    "plan": w.plan.iter().map(|s| json!({ "title": s.title, "status": s.status })).collect::<Vec<_>>(),
                    "waiting_on": w.waiting_on,
                })
            );
            return;
        }
        say!(
            "{}  [{}] {}",
            w.work_item_id,
            w.status,
            one_line(&w.objective)
        );
        for step in &w.plan {
            say!("    - [{}] {}", step.status, one_line(&step.title));
        }
        for wait in &w.waiting_on {
            say!("    waiting on {}", one_line(wait));
        }
    }

    /// An agent's tool catalog: a table for people, one object per tool
    /// under `--json`.
    pub fn tools(&self, tools: &[pb::ToolDescriptor]) {
        if self.json {
            for t in tools {
                let schema: Value =
                    serde_json::from_str(&t.input_schema_json).unwrap_or(Value::Null);
                say!(
                    "{}",
                    json!({ "name": t.name, "family": t.family, "plane": t.plane, "description": t.description, "input_schema": schema })
                );
            }
            return;
        }
        let mut rows = table::Table::new(&["TOOL", "FAMILY", "PLANE", "DESCRIPTION"]);
        for t in tools {
            rows.row(vec![
                one_line(&t.name).into_owned(),
                t.family.clone(),
                t.plane.clone(),
                one_line(&t.description).into_owned(),
            ]);
        }
        rows.print();
    }

    /// An MCP server of the agent's whose tools could not be listed: on
    /// stderr for people (stdout stays the table), a line of its own in JSON.
    pub fn tools_unavailable(&self, note: &str) {
        if self.json {
            say!("{}", json!({ "unavailable": note }));
        } else {
            eprintln!("unavailable: {}", one_line(note));
        }
    }
}

/// A followed output's bytes turned into text: a character split between
/// two chunks waits for the rest, so it is escaped (or not) whole.
#[derive(Debug, Default)]
pub struct OutputStream {
    raw: bool,
    pending: Vec<u8>,
}

impl OutputStream {
    pub fn new(raw: bool) -> Self {
        Self {
            raw,
            pending: Vec::new(),
        }
    }

    fn decode(&mut self, data: &[u8]) -> String {
        self.pending.extend_from_slice(data);
        let bytes = std::mem::take(&mut self.pending);
        match std::str::from_utf8(&bytes) {
            Ok(text) => text.to_owned(),
            // An incomplete character at the end: kept for the next chunk.
            Err(err) if err.error_len().is_none() => {
                let (done, rest) = bytes.split_at(err.valid_up_to());
                self.pending = rest.to_vec();
                String::from_utf8_lossy(done).into_owned()
            }
            Err(_) => String::from_utf8_lossy(&bytes).into_owned(),
        }
    }
}

/// Writes bytes to stdout as they are; a closed pipe ends the program.
fn write_raw(bytes: &[u8]) {
    let mut stdout = std::io::stdout().lock();
    if stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .is_err()
    {
        std::process::exit(0);
    }
}

fn worktree_json(w: &pb::Worktree) -> Value {
    json!({
        "path": w.path,
        "branch": w.branch,
        "repository": w.repository,
        "owner_task_id": w.owner_task_id,
        "removed": w.removed,
    })
}
