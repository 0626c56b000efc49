//! Drawing the supervision tree from its flat, pre-order nodes: one pass
//! back to learn which node is the last of its siblings, one forward to
//! draw, no recursion however deep the tree. Indentation stops at
//! [`MAX_INDENT`] levels; deeper nodes show their depth as a number.
//! Names come first, ids cut to the tail that tells the drawn nodes apart
//! (the tail any command takes, as in the tables).

use super::output::table;
use crate::api::pb;

/// Levels of indentation drawn; a deeper node is drawn at this level with
/// `[depth N]` before it, so a deep chain stays readable and its lines
/// short.
pub const MAX_INDENT: usize = 24;

/// Calls `emit` with each line of the tree, in order.
pub fn render(nodes: &[pb::TreeNode], mut emit: impl FnMut(String)) {
    let last = last_of_siblings(nodes);
    let tail = table::tail_len(nodes.iter().map(|n| n.id.as_str()));
    // For each level above the current node: whether the ancestor at that
    // level was the last of its siblings (then its column is blank).
    let mut ancestors_last: Vec<bool> = Vec::new();
    for (node, is_last) in nodes.iter().zip(last) {
        let depth = node.depth as usize;
        ancestors_last.truncate(depth);
        if depth == 0 {
            emit(label(node, tail));
            ancestors_last.push(is_last);
            continue;
        }
        let mut line = String::new();
        for &done in ancestors_last.iter().skip(1).take(MAX_INDENT - 1) {
            line.push_str(if done { "    " } else { "|   " });
        }
        line.push_str(if is_last { "`-- " } else { "|-- " });
        if depth > MAX_INDENT {
            line.push_str(&format!("[depth {depth}] "));
        }
        line.push_str(&label(node, tail));
        emit(line);
        // A gap in depths (a page cut mid-way) leaves open columns.
        ancestors_last.resize(depth, false);
        ancestors_last.push(is_last);
    }
}

/// For each node: whether no later sibling follows it. Walking backwards,
/// `open[d]` says a node at depth `d` was seen since the last shallower
/// one, that is, a later sibling exists.
fn last_of_siblings(nodes: &[pb::TreeNode]) -> Vec<bool> {
    let mut last = vec![true; nodes.len()];
    let mut open: Vec<bool> = Vec::new();
    for (i, node) in nodes.iter().enumerate().rev() {
        let depth = node.depth as usize;
        open.resize(depth + 1, false);
        last[i] = !open[depth];
        open[depth] = true;
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

    fn drawn(nodes: &[pb::TreeNode]) -> Vec<String> {
        let mut lines = Vec::new();
        render(nodes, |l| lines.push(l));
        lines
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
                "|-- agent a (k, active)",
                "|   `-- agent a1 (k, active)",
                "`-- agent b (k, active)",
                "    `-- agent b1 (k, active)",
            ]
        );
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
