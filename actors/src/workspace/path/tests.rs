//! Escapes refused, plain paths accepted, and a proptest over random
//! layouts of directories and symlinks: nothing accepted resolves outside.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::*;

struct Layout {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

fn layout() -> Layout {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("ws");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(root.join("src")).expect("mkdir");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(root.join("src/lib.rs"), "").expect("write");
    std::fs::write(outside.join("secret"), "").expect("write");
    Layout {
        _dir: dir,
        root,
        outside,
    }
}

fn roots(l: &Layout) -> Roots {
    Roots::new([&l.root]).expect("roots")
}

#[test]
fn paths_inside_are_accepted_existing_or_not() {
    let l = layout();
    let r = roots(&l);
    let canonical = std::fs::canonicalize(&l.root).expect("canonical");
    for (request, expected) in [
        ("src/lib.rs", "src/lib.rs"),
        ("./src/../src/lib.rs", "src/lib.rs"),
        ("src/new/file.rs", "src/new/file.rs"),
        (".", ""),
    ] {
        let got = r.resolve(&l.root, Path::new(request)).expect(request);
        assert_eq!(got, canonical.join(expected), "{request}");
    }
    let absolute = l.root.join("src/lib.rs");
    assert!(r.resolve(Path::new("/"), &absolute).is_ok());
}

#[test]
fn climbing_out_absolute_paths_and_symlinks_out_are_refused() {
    let l = layout();
    symlink(&l.outside, l.root.join("out")).expect("symlink");
    symlink("../outside/secret", l.root.join("rel")).expect("symlink");
    symlink(l.outside.join("gone"), l.root.join("dangling")).expect("symlink");
    let r = roots(&l);
    for request in [
        "..",
        "../outside/secret",
        "src/../../outside",
        "out",
        "out/secret",
        "out/new-file",
        "rel",
        "dangling",
        "dangling/below",
        "dangling/.",
        "dangling/./below",
        "missing/../../outside",
    ] {
        assert!(
            r.resolve(&l.root, Path::new(request)).is_err(),
            "{request} was accepted"
        );
    }
    assert!(matches!(
        r.resolve(&l.root, &l.outside.join("secret")),
        Err(PathError::Outside(_))
    ));
    assert!(matches!(
        r.resolve(&l.root, Path::new("")),
        Err(PathError::Empty)
    ));
}

#[test]
fn a_symlink_that_stays_inside_is_followed() {
    let l = layout();
    symlink(l.root.join("src"), l.root.join("code")).expect("symlink");
    let r = roots(&l);
    let got = r
        .resolve(&l.root, Path::new("code/lib.rs"))
        .expect("inside");
    assert_eq!(
        got,
        std::fs::canonicalize(l.root.join("src/lib.rs")).expect("canonical")
    );
}

#[test]
fn a_dangling_link_inside_is_refused_even_with_a_trailing_dot() {
    let l = layout();
    symlink(l.root.join("missing"), l.root.join("b")).expect("symlink");
    let r = roots(&l);
    for request in ["b", "b/.", "./b/./x"] {
        assert!(
            matches!(
                r.resolve(&l.root, Path::new(request)),
                Err(PathError::DanglingLink(_))
            ),
            "{request}"
        );
    }
}

/// One entry of a random layout under the root: a directory, or a symlink
/// to somewhere inside, outside, or nowhere.
#[derive(Debug, Clone)]
enum Entry {
    Dir(usize),
    LinkIn(usize, usize),
    LinkOut(usize),
    LinkRelUp(usize, usize),
    Dangling(usize),
}

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

fn entry() -> impl Strategy<Value = Entry> {
    prop_oneof![
        (0..4usize).prop_map(Entry::Dir),
        (0..4usize, 0..4usize).prop_map(|(a, b)| Entry::LinkIn(a, b)),
        (0..4usize).prop_map(Entry::LinkOut),
        (0..4usize, 1..4usize).prop_map(|(a, ups)| Entry::LinkRelUp(a, ups)),
        (0..4usize).prop_map(Entry::Dangling),
    ]
}

fn component() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (0..4usize).prop_map(|i| NAMES[i].to_owned()),
        2 => Just("..".to_owned()),
        1 => Just(".".to_owned()),
        1 => Just("new".to_owned()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn nothing_accepted_resolves_outside(
        entries in proptest::collection::vec((0..3usize, entry()), 0..8),
        request in proptest::collection::vec(component(), 1..6),
        absolute in any::<bool>(),
    ) {
        let l = layout();
        // Entries go at depth 0-2 under the root, in a/, a/b/ ...
        for (depth, e) in &entries {
            let parent = NAMES[..*depth].iter().fold(l.root.clone(), |p, n| p.join(n));
            let _ = std::fs::create_dir_all(&parent);
            let name = |i: usize| parent.join(NAMES[i]);
            let _ = match e {
                Entry::Dir(i) => std::fs::create_dir_all(name(*i)),
                Entry::LinkIn(i, to) => symlink(l.root.join(NAMES[*to]), name(*i)),
                Entry::LinkOut(i) => symlink(&l.outside, name(*i)),
                Entry::LinkRelUp(i, ups) => symlink("../".repeat(*ups), name(*i)),
                Entry::Dangling(i) => symlink(l.outside.join("nowhere"), name(*i)),
            };
        }
        let r = roots(&l);
        let relative: PathBuf = request.iter().collect();
        let asked = if absolute { l.root.join(&relative) } else { relative };
        let result = r.resolve(&l.root, &asked);
        // Without links and `..`, every request stays inside and must be
        // accepted: the property cannot hold by refusing everything.
        let no_links = entries.iter().all(|(_, e)| matches!(e, Entry::Dir(_)));
        if no_links && !request.iter().any(|c| c == "..") {
            prop_assert!(result.is_ok(), "{:?} refused: {:?}", asked, result);
        }
        if let Ok(resolved) = result {
            // Whatever exists of the answer really is inside: the OS agrees.
            let mut existing = resolved.clone();
            while std::fs::symlink_metadata(&existing).is_err() {
                prop_assert!(existing.pop());
            }
            let real = std::fs::canonicalize(&existing).expect("existing prefix");
            let root = std::fs::canonicalize(&l.root).expect("root");
            prop_assert!(real.starts_with(&root), "{:?} -> {:?}", asked, real);
            prop_assert!(resolved.starts_with(&root));
        }
    }
}
