//! `holarchy tree`: the pages of `SupervisionService.GetTree` joined into
//! one tree, counted from the nodes it holds, then printed (drawn by
//! [`super::tree_view`] for people, flat for `--json`).

use std::collections::HashSet;

use super::output::Output;
use super::resolve::resolve;
use crate::api::pb;
use crate::client::Clients;

/// Nodes drawn when `--limit` is not given: a screenful or a few, not a
/// million lines.
pub const DEFAULT_LIMIT: usize = 1000;

#[derive(Debug, clap::Args)]
pub struct TreeArgs {
    /// Only this agent's subtree (id or name).
    pub agent: Option<String>,
    /// Only this many levels below the roots of the walk (0: the roots
    /// alone); the whole tree when not given.
    #[arg(long)]
    pub depth: Option<u32>,
    /// Lines of the tree drawn at most, then one "... N more" line (0:
    /// every line). `--json` lists every node whatever the limit.
    #[arg(long, default_value_t = DEFAULT_LIMIT)]
    pub limit: usize,
}

pub async fn tree(mut clients: Clients, args: &TreeArgs, out: &Output) -> anyhow::Result<()> {
    let agent_id = match &args.agent {
        Some(agent) => resolve(&mut clients, agent).await?,
        None => String::new(),
    };
    let mut tree = pb::GetTreeResponse::default();
    // Pages go by position in the walk: an agent made or ended between two
    // calls shifts the walk, and a node can come again on the next page.
    // It is listed (and counted) once.
    let mut listed = HashSet::new();
    loop {
        let page = clients
            .supervision
            .get_tree(pb::GetTreeRequest {
                agent_id: agent_id.clone(),
                page_token: std::mem::take(&mut tree.next_page_token),
                max_nodes: 0,
                max_depth: args.depth,
            })
            .await?
            .into_inner();
        join(&mut tree, page, &mut listed);
        if tree.next_page_token.is_empty() {
            break;
        }
    }
    count(&mut tree);
    let limit = match args.limit {
        0 => usize::MAX,
        n => n,
    };
    out.tree(&tree, limit);
    Ok(())
}

/// Adds `page` to `tree`: the nodes not already in it, its mismatches,
/// and where to go on from.
fn join(tree: &mut pb::GetTreeResponse, page: pb::GetTreeResponse, listed: &mut HashSet<String>) {
    tree.nodes.extend(
        page.nodes
            .into_iter()
            .filter(|n| listed.insert(n.id.clone())),
    );
    tree.mismatches.extend(page.mismatches);
    tree.partitions = page.partitions;
    tree.next_page_token = page.next_page_token;
    tree.cut = page.cut;
}

/// Counts the joined tree from the nodes it holds: a page's counts cover
/// only its part of the walk (the last of 40,005 roots said "5 agents").
/// Tasks count as the daemon counts them, running ones only: an ended
/// handle is shown while it holds a worktree, but runs nothing.
fn count(tree: &mut pb::GetTreeResponse) {
    let (mut agents, mut tasks, mut waits) = (0usize, 0usize, 0usize);
    for node in &tree.nodes {
        match node.node_type.as_str() {
            "agent" => agents += 1,
            "task" if node.state == "running" => tasks += 1,
            "wait" => waits += 1,
            _ => {}
        }
    }
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    (tree.agents, tree.tasks, tree.waits) = (count(agents), count(tasks), count(waits));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(node_type: &str, id: &str, state: &str) -> pb::TreeNode {
        pb::TreeNode {
            node_type: node_type.into(),
            id: id.into(),
            state: state.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_node_two_pages_both_list_is_joined_and_counted_once() {
        let mut tree = pb::GetTreeResponse::default();
        let mut listed = HashSet::new();
        let first = pb::GetTreeResponse {
            nodes: vec![
                node("agent", "agt_a", "active"),
                node("task", "tsk_1", "running"),
            ],
            next_page_token: "2".into(),
            agents: 1,
            ..Default::default()
        };
        join(&mut tree, first, &mut listed);
        assert_eq!(tree.next_page_token, "2");
        // An agent made meanwhile shifted the walk: tsk_1 comes again.
        let second = pb::GetTreeResponse {
            nodes: vec![
                node("task", "tsk_1", "running"),
                node("task", "tsk_2", "completed"),
                node("agent", "agt_b", "active"),
                node("wait", "wai_1", "armed"),
            ],
            agents: 7,
            ..Default::default()
        };
        join(&mut tree, second, &mut listed);
        count(&mut tree);
        assert!(tree.next_page_token.is_empty());
        assert_eq!(tree.nodes.len(), 5);
        assert_eq!((tree.agents, tree.tasks, tree.waits), (2, 1, 1));
    }
}
