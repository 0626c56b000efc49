//! `holarchy memory ...`: operators search an agent's memory (its notes
//! and the messages it handled), list its notes, and write one into a
//! public agent's memory.

use clap::Subcommand;
use serde_json::{json, Value};

use super::output::table::Table;
use super::output::{emit, Output};
use super::resolve;
use crate::api::pb;
use crate::client::Clients;

/// Characters of a note's text a listing line shows.
const PREVIEW: usize = 60;

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// The agent's notes and handled messages best matching QUERY, best
    /// first.
    Search {
        /// The agent: its name or id.
        agent: String,
        /// Words to search for, ranked by full-text relevance.
        query: String,
        /// Hits, 1 to 50.
        #[arg(long, default_value_t = 10)]
        limit: u32,
        /// Only this kind (note, message, child_result, event, tool_call);
        /// repeat for several.
        #[arg(long = "kind")]
        kinds: Vec<String>,
    },
    /// Every note the agent keeps, oldest first.
    List {
        /// The agent: its name or id.
        agent: String,
    },
    /// Keep a note in a public agent's memory (same key: replaced).
    Write {
        /// The agent: its name or id.
        agent: String,
        /// The note's text.
        text: String,
        /// The note's key; a note with the same key is replaced.
        #[arg(long)]
        key: Option<String>,
        /// A tag; repeat for more.
        #[arg(long = "tag")]
        tags: Vec<String>,
    },
}

pub(super) async fn memory_command(
    mut clients: Clients,
    command: &MemoryCommand,
    out: &Output,
) -> anyhow::Result<()> {
    match command {
        MemoryCommand::Search {
            agent,
            query,
            limit,
            kinds,
        } => {
            let agent_id = resolve(&mut clients, agent).await?;
            let request = pb::SearchMemoryRequest {
                agent_id,
                query: query.clone(),
                limit: *limit,
                kinds: kinds.clone(),
            };
            let found = clients.memory.search_memory(request).await?.into_inner();
            let mut rows = Table::new(&["ID", "KIND", "SCORE", "SNIPPET"]).numeric(&[2]);
            for hit in &found.hits {
                let mut line = match (&hit.note, &hit.message, &hit.tool_call) {
                    (Some(note), _, _) => note_json(note),
                    (None, Some(message), _) => json!({
                        "message_id": message.message_id,
                        "provenance": message.provenance,
                        "text": message.text,
                        "reply": message.reply,
                        "created_at_ms": message.created_at_ms,
                    }),
                    (None, None, Some(call)) => json!({
                        "tool_call_id": call.id,
                        "run_id": call.run_id,
                        "tool": call.tool,
                        "input": call.input,
                        "output": call.output,
                        "is_error": call.is_error,
                        "at_ms": call.at_ms,
                    }),
                    (None, None, None) => continue,
                };
                if out.json {
                    line["kind"] = json!(hit.kind);
                    line["score"] = json!(hit.score);
                    line["snippet"] = json!(hit.snippet);
                    emit(line);
                } else {
                    let id = line["note_id"]
                        .as_str()
                        .or(line["message_id"].as_str())
                        .or(line["tool_call_id"].as_str())
                        .unwrap_or_default();
                    // The daemon marks matches as markdown bold (`**`),
                    // for pages and JSON; a terminal would show the stars.
                    let snippet = hit.snippet.replace("**", "");
                    rows.row(vec![
                        id.to_owned(),
                        hit.kind.clone(),
                        format!("{:.3}", hit.score),
                        one_line(&snippet),
                    ]);
                }
            }
            if !out.json {
                rows.print();
            }
        }
        MemoryCommand::List { agent } => {
            let agent_id = resolve(&mut clients, agent).await?;
            let mut page_token = String::new();
            // Printed once every page is in: a failed call prints nothing.
            let mut rows = Table::new(&["NOTE", "KEY", "TEXT"]);
            // Pages are joined into one listing.
            loop {
                let request = pb::ListMemoryRequest {
                    agent_id: agent_id.clone(),
                    page_size: 0,
                    page_token,
                };
                let page = clients.memory.list_memory(request).await?.into_inner();
                for note in &page.notes {
                    if out.json {
                        emit(note_json(note));
                    } else {
                        let preview: String = one_line(&note.text).chars().take(PREVIEW).collect();
                        rows.row(vec![note.note_id.clone(), note.key.clone(), preview]);
                    }
                }
                if page.next_page_token.is_empty() {
                    break;
                }
                page_token = page.next_page_token;
            }
            if !out.json {
                rows.print();
            }
        }
        MemoryCommand::Write {
            agent,
            text,
            key,
            tags,
        } => {
            let agent_id = resolve(&mut clients, agent).await?;
            let request = pb::WriteMemoryRequest {
                agent_id,
                key: key.clone().unwrap_or_default(),
                text: text.clone(),
                tags: tags.clone(),
            };
            let note = clients.memory.write_memory(request).await?.into_inner();
            if out.json {
                emit(note_json(&note));
            } else {
                emit(&note.note_id);
            }
        }
    }
    Ok(())
}

fn note_json(note: &pb::MemoryNote) -> Value {
    json!({
        "note_id": note.note_id,
        "agent_id": note.agent_id,
        "key": note.key,
        "text": note.text,
        "tags": note.tags,
        "created_at_ms": note.created_at_ms,
        "updated_at_ms": note.updated_at_ms,
    })
}

/// Text on one line, for a table.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
