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
//!
//! [`Drawing`] takes the nodes as the pages bring them and keeps only
//! what it has yet to draw: a root's subtree is drawn once the next root
//! (or the end) shows it whole, and past the limit nodes are counted, not
//! kept.

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

/// Nodes drawn together, at least, but for the last of a tree: their ids
/// are cut to the tail that tells them all apart, so the thousand lines
/// drawn by default are told apart as one.
const BATCH: usize = 1000;

/// The tree drawn from its nodes as they arrive, in the walk's order.
///
/// A node's line can wait on nodes after it: a private child moves under
/// the handle listed before it, with other nodes in between, and a branch
/// (`├──` or `└──`) says whether a sibling follows. Neither reaches past
/// the node's root, so each root's subtree is drawn whole when the next
/// root comes; once `limit` lines are drawn, nodes are only counted. What
/// is kept is the lines and, until the limit, the current root's subtree
/// and at most a batch of whole ones: a runtime of many roots costs its
/// drawn lines, not its nodes; one huge subtree is still kept whole until
/// it ends.
#[derive(Debug)]
pub struct Drawing {
    branches: Branches,
    /// Lines still to draw.
    room: usize,
    /// The last root and the nodes after it: not whole until the next
    /// root.
    open: Vec<pb::TreeNode>,
    /// Whole subtrees not drawn yet, drawn together (see [`BATCH`]).
    whole: Vec<pb::TreeNode>,
    /// The tail ids are cut to: the longest any batch needed, so it never
    /// shortens down the page.
    tail: usize,
    lines: Vec<String>,
    /// Nodes not drawn: past the limit.
    left: usize,
}

/// What a [`Drawing`] drew: its lines, and how many nodes it left out.
#[derive(Debug)]
pub struct Drawn {
    pub lines: Vec<String>,
    pub left: usize,
}

impl Drawing {
    /// A drawing of at most `limit` lines.
    pub fn new(branches: Branches, limit: usize) -> Self {
        Self {
            branches,
            room: limit,
            open: Vec::new(),
            whole: Vec::new(),
            tail: 0,
            lines: Vec::new(),
            left: 0,
        }
    }

    /// Takes the walk's next node.
    pub fn push(&mut self, node: pb::TreeNode) {
        if node.depth == 0 {
            self.whole.append(&mut self.open);
            if self.whole.len() >= self.room.min(BATCH) {
                self.draw_whole();
            }
        }
        // Past the limit, `open` is empty and stays so.
        if self.room == 0 {
            self.left += 1;
        } else {
            self.open.push(node);
        }
    }

    /// Draws what is left: the walk has ended, so the last subtree is
    /// whole.
    pub fn finish(mut self) -> Drawn {
        self.whole.append(&mut self.open);
        self.draw_whole();
        Drawn {
            lines: self.lines,
            left: self.left,
        }
    }

    fn draw_whole(&mut self) {
        let nodes = std::mem::take(&mut self.whole);
        let tail = table::tail_len(nodes.iter().map(|n| n.id.as_str()));
        self.tail = self.tail.max(tail);
        let before = self.lines.len();
        let lines = &mut self.lines;
        self.left += draw(&nodes, self.branches, self.room, self.tail, |l| {
            lines.push(l);
        });
        self.room -= self.lines.len() - before;
    }
}

/// Calls `emit` with the first `limit` lines of the tree, in order, and
/// returns how many nodes were left undrawn.
pub fn render(
    nodes: &[pb::TreeNode],
    branches: Branches,
    limit: usize,
    emit: impl FnMut(String),
) -> usize {
    let tail = table::tail_len(nodes.iter().map(|n| n.id.as_str()));
    draw(nodes, branches, limit, tail, emit)
}

/// [`render`], ids cut to their last `tail` characters.
fn draw(
    nodes: &[pb::TreeNode],
    branches: Branches,
    limit: usize,
    tail: usize,
    mut emit: impl FnMut(String),
) -> usize {
    let order = nest(nodes);
    let levels: Vec<usize> = order.iter().map(|&(_, level)| level).collect();
    let last = last_of_siblings(&levels);
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

    /// Drawn by a [`Drawing`] fed one node at a time.
    fn drawn_as_it_comes(nodes: &[pb::TreeNode], branches: Branches, limit: usize) -> Drawn {
        let mut drawing = Drawing::new(branches, limit);
        nodes.iter().cloned().for_each(|n| drawing.push(n));
        drawing.finish()
    }

    fn wait(id: &str, depth: u32) -> pb::TreeNode {
        pb::TreeNode {
            node_type: "wait".into(),
            kind: "timer".into(),
            state: "armed".into(),
            ..node(id, depth)
        }
    }

    /// A walk as the daemon lists one: each agent, then its task handles
    /// (some whose child is gone first, then one per child it holds), its
    /// waits, then its children with their subtrees. Agent `i`'s
    /// supervisor is `parents[i]`, an earlier agent (none: a root);
    /// `held[i]` says whether a handle holds it, `extras[i]` how many gone
    /// handles and waits it has. Ids are all as long, so a tail of six
    /// tells them apart, however they are drawn together.
    fn walk(parents: &[Option<usize>], held: &[bool], extras: &[(u8, u8)]) -> Vec<pb::TreeNode> {
        let agent_id = |i: usize| format!("agt_{i:04}");
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); parents.len()];
        let mut stack = Vec::new();
        for (i, parent) in parents.iter().enumerate() {
            match parent {
                Some(p) => children[*p].push(i),
                None => stack.push(i),
            }
        }
        stack.reverse();
        let (mut nodes, mut others) = (Vec::new(), 0usize);
        let mut depth_of = vec![0u32; parents.len()];
        while let Some(i) = stack.pop() {
            let depth = depth_of[i];
            nodes.push(node(&agent_id(i), depth));
            let (gone, waits) = extras[i];
            let mut other = |prefix: &str| {
                others += 1;
                format!("{prefix}_{others:04}")
            };
            for _ in 0..gone {
                nodes.push(task(&other("tsk"), depth + 1, "agt_9999"));
            }
            for &c in children[i].iter().filter(|&&c| held[c]) {
                nodes.push(task(&other("tsk"), depth + 1, &agent_id(c)));
            }
            for _ in 0..waits {
                nodes.push(wait(&other("wai"), depth + 1));
            }
            for &c in children[i].iter().rev() {
                depth_of[c] = depth + 1;
                stack.push(c);
            }
        }
        nodes
    }

    proptest::proptest! {
        /// Drawing the nodes as they come draws what drawing them all at
        /// once draws, line for line, and leaves out as many.
        #[test]
        fn drawing_as_nodes_come_draws_what_the_whole_tree_draws(
            shape in proptest::collection::vec(
                (
                    proptest::bool::weighted(0.3),
                    proptest::sample::select(vec![0usize, 1, 2, 5, 9, 30]),
                    proptest::bool::ANY,
                    (0u8..2, 0u8..3),
                ),
                1..40,
            ),
            limit in proptest::sample::select(vec![1usize, 2, 3, 5, 8, 20, usize::MAX]),
        ) {
            // Agent i hangs under an agent shortly before it, or is a root.
            let parents: Vec<Option<usize>> = shape
                .iter()
                .enumerate()
                .map(|(i, &(root, back, ..))| (!root && i > 0).then(|| i - 1 - back.min(i - 1)))
                .collect();
            let held: Vec<bool> = shape.iter().map(|s| s.2).collect();
            let extras: Vec<(u8, u8)> = shape.iter().map(|s| s.3).collect();
            let nodes = walk(&parents, &held, &extras);
            for branches in [Branches::Boxes, Branches::Indent] {
                let mut whole = Vec::new();
                let left = render(&nodes, branches, limit, |l| whole.push(l));
                let drawn = drawn_as_it_comes(&nodes, branches, limit);
                proptest::prop_assert_eq!(&drawn.lines, &whole);
                proptest::prop_assert_eq!(drawn.left, left);
            }
        }
    }

    #[test]
    fn many_batches_draw_what_the_whole_tree_draws() {
        // Each root holds a child through a handle and has a wait.
        let roots = 2 * BATCH;
        let parents: Vec<Option<usize>> = (0..2 * roots)
            .map(|i| (i % 2 == 1).then(|| i - 1))
            .collect();
        let nodes = walk(&parents, &vec![true; 2 * roots], &vec![(0, 1); 2 * roots]);
        for limit in [BATCH - 1, BATCH, 3 * BATCH + 1, usize::MAX] {
            let mut whole = Vec::new();
            let left = render(&nodes, Branches::Boxes, limit, |l| whole.push(l));
            let drawn = drawn_as_it_comes(&nodes, Branches::Boxes, limit);
            assert!(drawn.lines == whole, "limit {limit}");
            assert_eq!(drawn.left, left, "limit {limit}");
        }
    }

    #[test]
    fn a_drawing_keeps_a_batch_at_most_and_nothing_past_its_limit() {
        let roots = 100_000u32;
        for (limit, most) in [(10, 10), (usize::MAX, BATCH + 1)] {
            let mut drawing = Drawing::new(Branches::Indent, limit);
            let mut kept = 0;
            for i in 0..roots {
                drawing.push(node(&format!("agt_{i:06}"), 0));
                kept = kept.max(drawing.open.len() + drawing.whole.len());
            }
            assert!(kept <= most, "kept {kept} nodes, limit {limit}");
            let drawn = drawing.finish();
            let lines = drawn.lines.len();
            assert_eq!(lines, limit.min(roots as usize));
            assert_eq!(lines + drawn.left, roots as usize);
        }
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
