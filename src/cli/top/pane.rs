//! What `holarchy top`'s keys fetch and do for one agent: the lines of
//! its messages-and-events pane, and pause, resume and abort.

use std::collections::VecDeque;

use tokio_stream::StreamExt;

use super::app::Action;
use super::rows::one_line;
use crate::api::pb;
use crate::cli::output::table;
use crate::client::Clients;

/// Messages and events the pane shows: the latest.
const LATEST: usize = 20;
/// Messages read at most to find the latest (they come oldest first).
const MAX_MESSAGES_READ: usize = 10_000;
/// Characters of one text shown.
const TEXT: usize = 160;

fn cut(text: &str) -> String {
    let line = one_line(text);
    match line.char_indices().nth(TEXT) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

fn status(v: i32) -> String {
    pb::MessageStatus::try_from(v)
        .map(|s| {
            s.as_str_name()
                .trim_start_matches("MESSAGE_STATUS_")
                .to_lowercase()
        })
        .unwrap_or_else(|_| v.to_string())
}

/// The agent's latest messages (with replies) and events, newest last.
pub(super) async fn agent_lines(
    clients: &mut Clients,
    agent_id: &str,
) -> anyhow::Result<Vec<String>> {
    let mut messages = VecDeque::with_capacity(LATEST + 1);
    let mut read = 0usize;
    let mut page_token = String::new();
    loop {
        let page = clients
            .agents
            .list_messages(pb::ListMessagesRequest {
                agent_id: agent_id.to_owned(),
                page_size: 1000,
                page_token,
            })
            .await?
            .into_inner();
        read += page.messages.len();
        for message in page.messages {
            messages.push_back(message);
            if messages.len() > LATEST {
                messages.pop_front();
            }
        }
        page_token = page.next_page_token;
        if page_token.is_empty() || read >= MAX_MESSAGES_READ {
            break;
        }
    }
    let mut events = VecDeque::with_capacity(LATEST + 1);
    let mut stream = clients
        .agents
        .watch_events(pb::WatchEventsRequest {
            after_cursor: 0,
            follow: false,
            agent_id: agent_id.to_owned(),
        })
        .await?
        .into_inner();
    while let Some(event) = stream.next().await {
        events.push_back(event?);
        if events.len() > LATEST {
            events.pop_front();
        }
    }
    let now = table::now_ms();
    let mut lines = vec![format!("messages (the latest {LATEST}):")];
    if messages.is_empty() {
        lines.push("  (none)".to_owned());
    }
    for m in &messages {
        lines.push(format!(
            "  {:<9} {:<8} {} {}",
            table::age(m.created_at_ms, now),
            status(m.status),
            m.provenance,
            cut(&m.text)
        ));
        if !m.reply.is_empty() {
            lines.push(format!("  {:<18} -> {}", "", cut(&m.reply)));
        }
    }
    lines.push(String::new());
    lines.push(format!("events (the latest {LATEST}):"));
    for e in &events {
        lines.push(format!(
            "  {:<9} {:<20} {}",
            table::age(e.at_ms, now),
            e.kind,
            cut(&e.text)
        ));
    }
    Ok(lines)
}

/// Carries out p, r or a; what was done, for the footer, naming the agent
/// as its row did.
pub(super) async fn control(clients: &mut Clients, action: &Action) -> anyhow::Result<String> {
    match action {
        Action::Pause(agent) => {
            let request = pb::PauseAgentRequest {
                agent_id: agent.id.clone(),
            };
            clients.agents.pause_agent(request).await?;
            Ok(format!("paused {}", agent.label))
        }
        Action::Resume(agent) => {
            let request = pb::ResumeAgentRequest {
                agent_id: agent.id.clone(),
            };
            clients.agents.resume_agent(request).await?;
            Ok(format!("resumed {}", agent.label))
        }
        Action::Abort(agent) => {
            let request = pb::AbortRunRequest {
                agent_id: agent.id.clone(),
                run_id: String::new(),
            };
            clients.agents.abort_run(request).await?;
            Ok(format!("aborted the turn of {}", agent.label))
        }
        Action::None | Action::Quit | Action::Open(..) => Ok(String::new()),
    }
}
