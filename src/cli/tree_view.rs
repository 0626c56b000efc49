//! Drawing the supervision tree from its flat, pre-order nodes, with no
//! recursion however deep the tree. The daemon lists a private child
//! beside the task handle that holds it (both hang under the same
//! supervisor); it is drawn under that handle, one level deeper, with its
//! whole subtree, since the handle is how its supervisor holds it.
//! Branches are box-drawing characters on a terminal and plain
//! indentation elsewhere, so a file or a pipe gets nothing to strip.
//! Indentation stops at [`MAX_INDENT`] levels; deeper nodes show their
//! level as a number. Names come first, ids cut to the tail that tells
//! the drawn nodes apart (the tail any command takes, as in the tables).

use std::collections::HashMap;

use super::output::table;
use crate::api::pb;

/// Levels of indentation drawn; a deeper node is drawn at this level with
/// `[depth N]` before it, so a deep chain stays readable and its lines
/// short.
pub const MAX_INDENT: usize = 24;

/// How the branches between a node and its children are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Branches {
    /// `├──`, `│` and `└──`, for a terminal.
    Boxes,
    /// Two spaces a level and nothing else, for a file or a pipe.
    Indent,
}

impl Branches {
    /// Boxes when stdout is a terminal, indentation otherwise.
    pub fn for_stdout() -> Self {
        use std::io::IsTerminal;
        if std::io::stdout().is_terminal() {
            Self::Boxes
        } else {
            Self::Indent
        }
    }

    /// What is drawn in the column of an ancestor: `done` when it was the
    /// last of its siblings, so its branch has ended.
    fn column(self, done: bool) -> &'static str {
        match (self, done) {
            (Self::Boxes, false) => "│   ",
            (Self::Boxes, true) => "    ",
            (Self::Indent, _) => "  ",
        }
    }

    /// What is drawn just before a node; `last` when no sibling follows.
    fn branch(self, last: bool) -> &'static str {
        match (self, last) {
            (Self::Boxes, false) => "├── ",
            (Self::Boxes, true) => "└── ",
            (Self::Indent, _) => "  ",
        }
    }
}

/// Calls `emit` with the first `limit` lines of the tree, in order, and
/// returns how many nodes were left undrawn.
pub fn render(
    nodes: &[pb::TreeNode],
    branches: Branches,
    limit: usize,
    mut emit: impl FnMut(String),
) -> usize {
    let order = nest(nodes);
    let levels: Vec<usize> = order.iter().map(|&(_, level)| level).collect();
    let last = last_of_siblings(&levels);
    let tail = table::tail_len(nodes.iter().map(|n| n.id.as_str()));
    // For each level above the current node: whether the ancestor at that
    // level was the last of its siblings (then its column is blank).
    let mut ancestors_last: Vec<bool> = Vec::new();
    for (&(index, level), is_last) in order.iter().zip(last).take(limit) {
        let node = &nodes[index];
        ancestors_last.truncate(level);
        if level == 0 {
            emit(label(node, tail));
            ancestors_last.push(is_last);
            continue;
        }
        let mut line = String::new();
        for &done in ancestors_last.iter().skip(1).take(MAX_INDENT - 1) {
            line.push_str(branches.column(done));
        }
        line.push_str(branches.branch(is_last));
        if level > MAX_INDENT {
            line.push_str(&format!("[depth {level}] "));
        }
        line.push_str(&label(node, tail));
        emit(line);
        // A gap in levels (a page cut mid-way) leaves open columns.
        ancestors_last.resize(level, false);
        ancestors_last.push(is_last);
    }
    order.len().saturating_sub(limit)
}

/// The nodes in the order they are drawn, each as its index in `nodes`
/// and the level it is drawn at: the walk's order and depths, but for a
/// private child, which moves (with its subtree) under the task handle
/// that holds it when that handle is its sibling in the walk. Two passes
/// and a heap stack: no recursion.
fn nest(nodes: &[pb::TreeNode]) -> Vec<(usize, usize)> {
    // Each node's parent in the walk: the nearest earlier node shallower
    // than it (tasks and waits are leaves there).
    let mut parent: Vec<Option<usize>> = Vec::with_capacity(nodes.len());
    let mut open: Vec<usize> = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        while open.last().is_some_and(|&o| nodes[o].depth >= node.depth) {
            open.pop();
        }
        parent.push(open.last().copied());
        open.push(i);
    }
    let agents: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.node_type == "agent")
        .map(|(i, n)| (n.id.as_str(), i))
        .collect();
    // Only a handle beside its child takes it: a child drawn elsewhere (a
    // corrupt store, a subtree rooted at the child) stays where it is,
    // and no child is taken twice.
    let mut held = vec![false; nodes.len()];
    for (task, node) in nodes.iter().enumerate() {
        if node.node_type != "task" || node.child_agent_id.is_empty() {
            continue;
        }
        if let Some(&child) = agents.get(node.child_agent_id.as_str()) {
            if !held[child] && parent[child] == parent[task] {
                held[child] = true;
                parent[child] = Some(task);
            }
        }
    }
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut roots = Vec::new();
    for (i, p) in parent.iter().enumerate() {
        match p {
            Some(p) => children[*p].push(i),
            None => roots.push(i),
        }
    }
    let mut order = Vec::with_capacity(nodes.len());
    let mut stack: Vec<(usize, usize)> = roots.into_iter().rev().map(|r| (r, 0)).collect();
    while let Some((i, level)) = stack.pop() {
        order.push((i, level));
        stack.extend(children[i].iter().rev().map(|&c| (c, level + 1)));
    }
    order
}

/// For each node, given the levels in drawing order: whether no later
/// sibling follows it. Walking backwards, `open[d]` says a node at level
/// `d` was seen since the last shallower one, that is, a later sibling
/// exists.
fn last_of_siblings(levels: &[usize]) -> Vec<bool> {
    let mut last = vec![true; levels.len()];
    let mut open: Vec<bool> = Vec::new();
    for (i, &level) in levels.iter().enumerate().rev() {
        open.resize(level + 1, false);
        last[i] = !open[level];
        open[level] = true;
    }
    last
}

/// One node's text, without indentation, on one line whatever the names
/// and labels an agent chose hold; its id cut to its last `tail`
/// characters.
fn label(n: &pb::TreeNode, tail: usize) -> String {
    super::output::escape::one_line(&text(n, tail)).into_owned()
}

fn text(n: &pb::TreeNode, tail: usize) -> String {
    let id = table::tail(&n.id, tail);
    // The name (an agent's) or label (a task's, a wait's) first, quoted:
    // it is what people chose and read.
    let name = if n.name.is_empty() {
        String::new()
    } else {
        format!("\"{}\" ", n.name)
    };
    let dead = if n.actor_alive { "" } else { "  [actor down]" };
    let cut = if n.truncated_from_bytes > 0 {
        format!("  [cut from {} bytes]", n.truncated_from_bytes)
    } else {
        String::new()
    };
    match n.node_type.as_str() {
        "task" => {
            let worktree = match &n.worktree {
                Some(w) if !w.removed => format!("  [worktree {} on {}]", w.path, w.branch),
                _ => String::new(),
            };
            // Ended tasks are shown only while they hold a worktree.
            let dead = if n.state == "running" { dead } else { "" };
            format!(
                "task {name}{id} ({}, {}){worktree}{dead}{cut}",
                n.kind, n.state
            )
        }
        "wait" => format!("wait {name}{id} ({}, {}){dead}{cut}", n.kind, n.state),
        _ => {
            let place = match n.partition {
                Some(partition) => format!(" [partition {partition}]"),
                None if n.visibility == "private" => " [private]".to_owned(),
                None => String::new(),
            };
            format!(
                "agent {name}{id} ({}, {}){place}{dead}{cut}",
                n.kind, n.state
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, depth: u32) -> pb::TreeNode {
        pb::TreeNode {
            node_type: "agent".into(),
            id: id.into(),
            kind: "k".into(),
            state: "active".into(),
            actor_alive: true,
            depth,
            ..Default::default()
        }
    }

    fn task(id: &str, depth: u32, child: &str) -> pb::TreeNode {
        pb::TreeNode {
            node_type: "task".into(),
            kind: "child_agent_task".into(),
            state: "running".into(),
            child_agent_id: child.into(),
            ..node(id, depth)
        }
    }

    fn drawn_as(nodes: &[pb::TreeNode], branches: Branches) -> Vec<String> {
        let mut lines = Vec::new();
        let left = render(nodes, branches, usize::MAX, |l| lines.push(l));
        assert_eq!(left, 0);
        lines
    }

    fn drawn(nodes: &[pb::TreeNode]) -> Vec<String> {
        drawn_as(nodes, Branches::Boxes)
    }

    #[test]
    fn siblings_get_branches_and_the_last_closes_its_column() {
        let nodes = [
            node("r", 0),
            node("a", 1),
            node("a1", 2),
            node("b", 1),
            node("b1", 2),
        ];
        assert_eq!(
            drawn(&nodes),
            [
                "agent r (k, active)",
                "├── agent a (k, active)",
                "│   └── agent a1 (k, active)",
                "└── agent b (k, active)",
                "    └── agent b1 (k, active)",
            ]
        );
        assert_eq!(
            drawn_as(&nodes, Branches::Indent),
            [
                "agent r (k, active)",
                "  agent a (k, active)",
                "    agent a1 (k, active)",
                "  agent b (k, active)",
                "    agent b1 (k, active)",
            ]
        );
    }

    #[test]
    fn a_private_child_and_its_subtree_hang_under_the_handle_that_holds_it() {
        // As the walk lists them: r's handles first, then r's children
        // beside them; c's own handle beside c's child.
        let nodes = [
            node("r", 0),
            task("t1", 1, "c"),
            task("t2", 1, "gone"),
            node("c", 1),
            task("t3", 2, "g"),
            node("g", 2),
            node("p", 1),
        ];
        let task_line = |id: &str| format!("task {id} (child_agent_task, running)");
        assert_eq!(
            drawn(&nodes),
            [
                "agent r (k, active)".to_owned(),
                format!("├── {}", task_line("t1")),
                "│   └── agent c (k, active)".to_owned(),
                format!("│       └── {}", task_line("t3")),
                "│           └── agent g (k, active)".to_owned(),
                format!("├── {}", task_line("t2")),
                "└── agent p (k, active)".to_owned(),
            ]
        );
        // The subtree of the child alone: its handle is not there, so it
        // is a root as the walk says.
        assert_eq!(drawn(&nodes[3..6])[0], "agent c (k, active)");
    }

    #[test]
    fn a_limit_draws_the_first_lines_and_counts_the_rest() {
        let nodes: Vec<_> = (0..10u32).map(|i| node("n", u32::from(i > 0))).collect();
        let mut lines = Vec::new();
        let left = render(&nodes, Branches::Indent, 4, |l| lines.push(l));
        assert_eq!((lines.len(), left), (4, 6));
    }

    #[test]
    fn a_100000_deep_chain_draws_on_a_small_stack_with_capped_indentation() {
        let lines = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let nodes: Vec<_> = (0..100_000u32).map(|d| node("n", d)).collect();
                drawn(&nodes)
            })
            .expect("spawn")
            .join()
            .expect("no overflow");
        assert_eq!(lines.len(), 100_000);
        let deepest = lines.last().expect("lines");
        assert!(deepest.contains("[depth 99999]"), "{deepest}");
        let widest = lines.iter().map(String::len).max().expect("lines");
        assert!(
            widest < 4 * MAX_INDENT + 80,
            "indentation is capped: {widest}"
        );
    }
}
