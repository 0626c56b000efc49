//! `holarchy agent archive`: the agents named, or in bulk every live
//! public agent a selector picks (`--name` prefix, `--instance`,
//! `--label`), as
//! `docker rm $(docker ps -q -f ...)` would, without the shell pipeline.
//! Each is archived with its whole private subtree, one call each, so one
//! refusal stops the run with the others already done said on stdout.

use clap::Args;

use crate::api::pb;
use crate::cli::output::Output;
use crate::cli::resolve;
use crate::client::Clients;

#[derive(Debug, Args)]
pub struct ArchiveArgs {
    /// The agents to archive (ids or names).
    #[arg(required_unless_present_any = ["name", "instance", "labels"], conflicts_with_all = ["name", "instance", "labels"])]
    pub agents: Vec<String>,
    /// Every live public agent whose name starts with this.
    #[arg(long, value_name = "PREFIX")]
    pub name: Option<String>,
    /// Every live public agent of this instance (use `instance delete` to
    /// remove the instance itself).
    #[arg(long)]
    pub instance: Option<String>,
    /// Every live public agent with this label, `key=value`; repeatable
    /// (all must match).
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = super::label)]
    pub labels: Vec<(String, String)>,
}

impl ArchiveArgs {
    fn picks(&self, agent: &pb::AgentSummary) -> bool {
        agent.state != pb::LifecycleState::Archived as i32
            && super::list::selected(
                agent,
                self.name.as_deref(),
                self.instance.as_deref(),
                &self.labels,
            )
    }
}

pub async fn archive(mut clients: Clients, args: &ArchiveArgs, out: &Output) -> anyhow::Result<()> {
    let mut ids = Vec::new();
    for agent in &args.agents {
        ids.push(resolve(&mut clients, agent).await?);
    }
    if args.agents.is_empty() {
        ids = selected(&mut clients, args).await?;
        if !out.json {
            eprintln!("{} live agent(s) selected", ids.len());
        }
    }
    for agent_id in ids {
        let done = clients
            .agents
            .archive_agent(pb::ArchiveAgentRequest {
                agent_id: agent_id.clone(),
            })
            .await?
            .into_inner();
        out.archived(&agent_id, &done);
    }
    Ok(())
}

/// Every live public agent the selectors pick, read whole before any is
/// archived.
async fn selected(clients: &mut Clients, args: &ArchiveArgs) -> anyhow::Result<Vec<String>> {
    Ok(
        crate::cli::resolve::agents_where(clients, false, |a| args.picks(a))
            .await?
            .into_iter()
            .map(|a| a.agent_id)
            .collect(),
    )
}
