//! The actors crate's modules form layers: no two top-level modules of
//! `actors/src` import each other, directly or round a loop
//! (docs/architecture.md). This reads the sources (no build of them), the
//! code only (comments and tests left out), and fails on any loop.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source folder").flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file below `src` (`plane/command/actor.rs` is
/// `["plane", "command", "actor"]`; `plane.rs` is `["plane"]`).
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("below src");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.last_mut() {
        *last = last.trim_end_matches(".rs").to_owned();
    }
    if parts.last().is_some_and(|l| l == "mod") {
        parts.pop();
    }
    parts
}

/// The code of a file without its test module and comments.
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        // A test module ends the code (by convention it comes last); any
        // other item marked for tests is read like the rest.
        let test_module = lines
            .peek()
            .is_some_and(|next| next.trim_start().starts_with("mod "));
        if trimmed.starts_with("#[cfg(test)]") && test_module {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        out.push_str(line.split(" //").next().unwrap_or(line));
        out.push('\n');
    }
    out
}

/// The top-level modules a file's code names: through `crate::` paths
/// (grouped imports included) and through `super::` chains that climb to
/// the crate root.
fn named(text: &str, path: &[String], modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let words = |rest: &str| -> Vec<String> {
        // `{a, b::c, d as e}` or `a::...`: the first word of each.
        let rest = rest.trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            group[..end]
                .split(',')
                .map(|item| {
                    item.trim()
                        .split("::")
                        .next()
                        .unwrap_or("")
                        .trim()
                        .to_owned()
                })
                .collect()
        } else {
            vec![rest
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap_or("")
                .to_owned()]
        }
    };
    for (at, _) in text.match_indices("crate::") {
        found.extend(words(&text[at + "crate::".len()..]));
    }
    // A file's `super` is its parent module; a root file (`x.rs` or
    // `x/mod.rs`) of depth one climbs to the crate root with one `super`.
    for (at, _) in text.match_indices("super::") {
        let mut rest = &text[at..];
        let mut climbs = 0;
        while let Some(after) = rest.strip_prefix("super::") {
            climbs += 1;
            rest = after;
        }
        if climbs == path.len() {
            found.extend(words(rest));
        }
    }
    found.retain(|m| modules.contains(m));
    found
}

/// The strongly connected components with more than one module.
fn loops(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_owned()];
        while let Some(node) = stack.pop() {
            for next in graph.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    let mut placed = BTreeSet::new();
    let mut out = Vec::new();
    for module in graph.keys() {
        if placed.contains(module) {
            continue;
        }
        let component: Vec<String> = graph
            .keys()
            .filter(|other| {
                *other == module
                    || (reached[module].contains(*other) && reached[*other].contains(module))
            })
            .cloned()
            .collect();
        if component.len() > 1 {
            placed.extend(component.iter().cloned());
            out.push(component);
        }
    }
    out
}

#[test]
fn no_two_modules_of_the_actors_crate_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("actors/src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|f| module_path(&src, f).first().cloned())
        .filter(|m| m != "lib")
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let path = module_path(&src, file);
        let Some(top) = path.first().filter(|m| *m != "lib").cloned() else {
            continue;
        };
        if path.last().is_some_and(|l| l == "tests") {
            continue;
        }
        let text = code(&std::fs::read_to_string(file).expect("a source file"));
        let mut names = named(&text, &path, &modules);
        names.remove(&top);
        graph.entry(top).or_default().extend(names);
    }
    let found = loops(&graph);
    assert!(
        found.is_empty(),
        "modules of actors/src import each other round a loop: {found:?} (docs/architecture.md: each module imports only from the layers below it)"
    );
    // The check sees imports at all: the agent (layer 6) names the store.
    assert!(graph["agent"].contains("store"), "{graph:?}");
}
