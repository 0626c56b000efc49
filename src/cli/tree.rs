//! `holarchy tree`: the pages of `SupervisionService.GetTree` read in
//! turn, each node handed on once and counted as it comes, then printed:
//! drawn by [`super::tree_view`] for people, flat for `--json`.
//!
//! People get at most `--limit` lines, so the drawing keeps only what it
//! has yet to draw and counts the rest: a million agents under many roots
//! cost the lines drawn, not a million nodes. The lines are printed once
//! the last page is in: a page that fails leaves nothing on stdout, as
//! every command promises, rather than half a tree over an error.

use std::collections::HashSet;

use super::output::Output;
use super::resolve::resolve;
use super::tree_view::{Branches, Drawing};
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
    let mut pages = Pages::new(agent_id, args.depth);
    if out.json {
        // Scripts asked for every node: they are all kept.
        let mut nodes = Vec::new();
        while let Some(page) = pages.next(&mut clients).await? {
            nodes.extend(page);
        }
        let mut tree = pages.summary();
        tree.nodes = nodes;
        out.tree_json(&tree);
        return Ok(());
    }
    let limit = match args.limit {
        0 => usize::MAX,
        n => n,
    };
    let mut drawing = Drawing::new(Branches::for_stdout(), limit);
    while let Some(page) = pages.next(&mut clients).await? {
        page.into_iter().for_each(|node| drawing.push(node));
    }
    out.tree_drawn(&drawing.finish(), &pages.summary());
    Ok(())
}

/// The walk of one `tree` command, read a page at a time.
#[derive(Debug)]
struct Pages {
    agent_id: String,
    depth: Option<u32>,
    /// The ids of the last page read. Pages go by position in the walk:
    /// an agent made between two calls shifts it, and the next page lists
    /// again as many nodes as were made before its start, the last ones
    /// of this page. Only more than a page of nodes (up to 5,000) made
    /// between two calls would reach further back, so this page's ids are
    /// all that is kept, not every id of the walk.
    previous: HashSet<String>,
    /// Where the next page starts; empty before the first and after the
    /// last.
    token: String,
    done: bool,
    counts: Counts,
    mismatches: Vec<String>,
    partitions: u32,
    cut: Option<pb::TreeCut>,
}

/// The nodes handed on so far, counted as the daemon counts them. Not a
/// page's own counts: a page of roots alone (`--depth 0`) counts only its
/// own roots (the last of 40,005 roots said "5 agents"), and counting
/// what was handed on makes the counts agree with the lines drawn and
/// the "N more" however the walk shifted between pages. Tasks count
/// running ones only: an ended handle is shown while it holds a
/// worktree, but runs nothing.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counts {
    agents: usize,
    tasks: usize,
    waits: usize,
}

impl Counts {
    fn add(&mut self, node: &pb::TreeNode) {
        match node.node_type.as_str() {
            "agent" => self.agents += 1,
            "task" if node.state == "running" => self.tasks += 1,
            "wait" => self.waits += 1,
            _ => {}
        }
    }
}

impl Pages {
    fn new(agent_id: String, depth: Option<u32>) -> Self {
        Self {
            agent_id,
            depth,
            previous: HashSet::new(),
            token: String::new(),
            done: false,
            counts: Counts::default(),
            mismatches: Vec::new(),
            partitions: 0,
            cut: None,
        }
    }

    /// The nodes of the next page not already handed on; `None` after the
    /// last page.
    async fn next(&mut self, clients: &mut Clients) -> anyhow::Result<Option<Vec<pb::TreeNode>>> {
        if self.done {
            return Ok(None);
        }
        let page = clients
            .supervision
            .get_tree(pb::GetTreeRequest {
                agent_id: self.agent_id.clone(),
                page_token: std::mem::take(&mut self.token),
                max_nodes: 0,
                max_depth: self.depth,
            })
            .await?
            .into_inner();
        Ok(Some(self.join(page)))
    }

    /// Takes in `page`: its nodes but those the last page listed, counted;
    /// its mismatches; and where to go on from.
    fn join(&mut self, page: pb::GetTreeResponse) -> Vec<pb::TreeNode> {
        let ids: HashSet<String> = page.nodes.iter().map(|n| n.id.clone()).collect();
        let previous = std::mem::replace(&mut self.previous, ids);
        let nodes: Vec<pb::TreeNode> = page
            .nodes
            .into_iter()
            .filter(|n| !previous.contains(&n.id))
            .collect();
        nodes.iter().for_each(|n| self.counts.add(n));
        self.mismatches.extend(page.mismatches);
        self.partitions = page.partitions;
        self.cut = page.cut;
        self.done = page.next_page_token.is_empty();
        self.token = page.next_page_token;
        nodes
    }

    /// Everything read but the nodes: the counts of every node handed on,
    /// the mismatches of every page, the last page's partitions and cut.
    fn summary(&self) -> pb::GetTreeResponse {
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        pb::GetTreeResponse {
            mismatches: self.mismatches.clone(),
            agents: count(self.counts.agents),
            tasks: count(self.counts.tasks),
            waits: count(self.counts.waits),
            partitions: self.partitions,
            next_page_token: self.token.clone(),
            cut: self.cut.clone(),
            ..Default::default()
        }
    }
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

    fn ids(nodes: &[pb::TreeNode]) -> Vec<&str> {
        nodes.iter().map(|n| n.id.as_str()).collect()
    }

    #[test]
    fn a_node_two_pages_both_list_is_handed_on_and_counted_once() {
        let mut pages = Pages::new(String::new(), None);
        let first = pb::GetTreeResponse {
            nodes: vec![
                node("agent", "agt_a", "active"),
                node("task", "tsk_1", "running"),
            ],
            next_page_token: "2".into(),
            agents: 1,
            ..Default::default()
        };
        assert_eq!(ids(&pages.join(first)), ["agt_a", "tsk_1"]);
        assert!(!pages.done);
        assert_eq!(pages.token, "2");
        // An agent made meanwhile shifted the walk: tsk_1 comes again.
        let second = pb::GetTreeResponse {
            nodes: vec![
                node("task", "tsk_1", "running"),
                node("task", "tsk_2", "completed"),
                node("agent", "agt_b", "active"),
                node("wait", "wai_1", "armed"),
            ],
            mismatches: vec!["agent agt_b's actor is not running".into()],
            agents: 7,
            partitions: 4,
            ..Default::default()
        };
        assert_eq!(ids(&pages.join(second)), ["tsk_2", "agt_b", "wai_1"]);
        assert!(pages.done);
        let summary = pages.summary();
        assert!(summary.nodes.is_empty() && summary.next_page_token.is_empty());
        assert_eq!(
            (summary.agents, summary.tasks, summary.waits),
            (2, 1, 1),
            "counted from the nodes, not from a page's own counts"
        );
        assert_eq!((summary.partitions, summary.mismatches.len()), (4, 1));
    }

    #[test]
    fn only_the_last_page_is_remembered() {
        let mut pages = Pages::new(String::new(), None);
        for (i, token) in ["1", "2", ""].into_iter().enumerate() {
            let page = pb::GetTreeResponse {
                nodes: vec![node("agent", &format!("agt_{i}"), "active")],
                next_page_token: token.into(),
                ..Default::default()
            };
            pages.join(page);
            assert_eq!(pages.previous.len(), 1, "page {i}");
        }
        assert_eq!(pages.summary().agents, 3);
    }
}
