//! `holarchy agent list`, as `docker ps` lists containers: live agents by
//! default, `--all` adds archived ones (and reads every page), and
//! `--state`, `--name` and `--instance` narrow the list. The daemon lists
//! every state in creation order; the filters apply here, page by page.

use clap::{Args, ValueEnum};

use crate::api::pb;
use crate::cli::output::Output;
use crate::client::Clients;

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Private agents too (children, reached through their parents' task
    /// handles).
    #[arg(long)]
    pub include_private: bool,
    /// Agents asked of the daemon per call, and shown at most without
    /// --all.
    #[arg(long, default_value_t = 100)]
    pub page_size: u32,
    /// Every agent: archived ones too, on every page.
    #[arg(long, short)]
    pub all: bool,
    /// Only agents in this state; repeatable. Naming `archived` shows
    /// archived agents without --all.
    #[arg(long, value_enum)]
    pub state: Vec<State>,
    /// Only agents whose name starts with this.
    #[arg(long, value_name = "PREFIX")]
    pub name: Option<String>,
    /// Only agents of this instance (its agent, and with
    /// --include-private its descendants).
    #[arg(long)]
    pub instance: Option<String>,
    /// Only agents with this label, `key=value`; repeatable (all must
    /// match).
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = super::label)]
    pub labels: Vec<(String, String)>,
}

/// An agent's lifecycle state, as `--state` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum State {
    Active,
    Paused,
    Failed,
    Archived,
}

impl State {
    fn of(agent: &pb::AgentSummary) -> Option<State> {
        match pb::LifecycleState::try_from(agent.state).ok()? {
            pb::LifecycleState::Active => Some(State::Active),
            pb::LifecycleState::Paused => Some(State::Paused),
            pb::LifecycleState::Failed => Some(State::Failed),
            pb::LifecycleState::Archived => Some(State::Archived),
            pb::LifecycleState::Unspecified => None,
        }
    }
}

impl ListArgs {
    /// Whether `agent` is listed.
    fn shows(&self, agent: &pb::AgentSummary) -> bool {
        let state = State::of(agent);
        let by_state = if self.state.is_empty() {
            self.all || state != Some(State::Archived)
        } else {
            state.is_some_and(|s| self.state.contains(&s))
        };
        by_state
            && selected(
                agent,
                self.name.as_deref(),
                self.instance.as_deref(),
                &self.labels,
            )
    }
}

/// Whether `agent` has the name prefix and the instance asked for (either
/// absent: any).
pub(super) fn selected(
    agent: &pb::AgentSummary,
    name: Option<&str>,
    instance: Option<&str>,
    labels: &[(String, String)],
) -> bool {
    name.is_none_or(|prefix| agent.name.starts_with(prefix))
        && instance.is_none_or(|instance| agent.instance == instance)
        && labels
            .iter()
            .all(|(key, value)| agent.labels.get(key) == Some(value))
}

pub async fn list(mut clients: Clients, args: &ListArgs, out: &Output) -> anyhow::Result<()> {
    let mut page_token = String::new();
    // Printed once every page is in, as one table sized to its content: a
    // call that fails leaves nothing on stdout, not a header over an error.
    let mut shown = Vec::new();
    let mut hidden_archived = 0usize;
    loop {
        let page = clients
            .agents
            .list_agents(pb::ListAgentsRequest {
                page_size: args.page_size,
                page_token: page_token.clone(),
                include_private: args.include_private,
            })
            .await?
            .into_inner();
        for agent in page.agents {
            if args.shows(&agent) {
                shown.push(agent);
            } else if State::of(&agent) == Some(State::Archived) && args.state.is_empty() {
                hidden_archived += 1;
            }
        }
        page_token = page.next_page_token;
        // Without --all, pages are read until a page's worth is shown:
        // archived agents filtered out do not leave the list short.
        if page_token.is_empty() || (!args.all && shown.len() >= args.page_size as usize) {
            break;
        }
    }
    out.agents(&shown);
    if !out.json {
        if hidden_archived > 0 {
            eprintln!("({hidden_archived} archived agent(s) not shown: --all lists them)");
        }
        if !page_token.is_empty() {
            eprintln!("more agents: --all lists every one");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        list: ListArgs,
    }

    fn args(flags: &[&str]) -> ListArgs {
        Flags::try_parse_from(std::iter::once("list").chain(flags.iter().copied()))
            .expect("flags parse")
            .list
    }

    fn agent(name: &str, state: pb::LifecycleState, instance: &str) -> pb::AgentSummary {
        pb::AgentSummary {
            name: name.to_owned(),
            state: state.into(),
            instance: instance.to_owned(),
            ..Default::default()
        }
    }

    #[test]
    fn archived_agents_are_hidden_unless_asked_for() {
        let archived = agent("old", pb::LifecycleState::Archived, "");
        let live = agent("ops", pb::LifecycleState::Active, "");
        assert!(!args(&[]).shows(&archived));
        assert!(args(&[]).shows(&live));
        assert!(args(&["--all"]).shows(&archived));
        assert!(args(&["-a"]).shows(&archived));
        assert!(args(&["--state", "archived"]).shows(&archived));
        assert!(!args(&["--state", "archived"]).shows(&live));
    }

    #[test]
    fn name_state_and_instance_narrow_the_list() {
        let paused = agent("build-1", pb::LifecycleState::Paused, "ci");
        assert!(args(&["--name", "build-"]).shows(&paused));
        assert!(!args(&["--name", "ops"]).shows(&paused));
        assert!(args(&["--state", "paused", "--state", "failed"]).shows(&paused));
        assert!(!args(&["--state", "active"]).shows(&paused));
        assert!(args(&["--instance", "ci"]).shows(&paused));
        assert!(!args(&["--instance", "cd"]).shows(&paused));
    }
}
