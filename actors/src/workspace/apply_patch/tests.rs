//! ApplyPatch against real files: what lands, and that a refused or
//! failing patch changes nothing.

use std::os::unix::fs::symlink;
use std::path::Path;

use super::*;

struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("ws");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(root.join("src")).expect("mkdir");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(root.join("src/a.txt"), "one\ntwo\nthree\n").expect("write");
    std::fs::write(root.join("b.txt"), "alpha\nbeta\n").expect("write");
    std::fs::write(outside.join("secret"), "keep\n").expect("write");
    Tree {
        _dir: dir,
        root,
        outside,
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).expect("read")
}

/// Every file under `root` and `outside`, with its content.
fn snapshot(t: &Tree) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut todo = vec![t.root.clone(), t.outside.clone()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                todo.push(path);
            } else {
                out.push((
                    path.clone(),
                    std::fs::read_to_string(&path).unwrap_or_default(),
                ));
            }
        }
    }
    out.sort();
    out
}

const EDIT_BOTH: &str = "\
diff --git a/src/a.txt b/src/a.txt
--- a/src/a.txt
+++ b/src/a.txt
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
--- a/b.txt
+++ b/b.txt
@@ -1,2 +1,3 @@
 alpha
 beta
+gamma
";

#[test]
fn a_patch_that_applies_changes_every_file_it_names() {
    let t = tree();
    let changed = apply_in(&t.root, &t.root, EDIT_BOTH).expect("applies");
    assert_eq!(read(&t.root.join("src/a.txt")), "one\nTWO\nthree\n");
    assert_eq!(read(&t.root.join("b.txt")), "alpha\nbeta\ngamma\n");
    let names: Vec<_> = changed
        .iter()
        .map(|c| (c.path.display().to_string(), c.change))
        .collect();
    assert_eq!(
        names,
        [
            ("b.txt".to_owned(), Change::Modified),
            ("src/a.txt".to_owned(), Change::Modified)
        ]
    );
}

#[test]
fn paths_are_relative_to_the_active_directory_and_files_can_be_made_and_removed() {
    let t = tree();
    let patch = "\
--- /dev/null
+++ b/new/c.txt
@@ -0,0 +1 @@
+fresh
--- a/a.txt
+++ /dev/null
@@ -1,3 +0,0 @@
-one
-two
-three
";
    let changed = apply_in(&t.root, &t.root.join("src"), patch).expect("applies");
    assert_eq!(read(&t.root.join("src/new/c.txt")), "fresh\n");
    assert!(!t.root.join("src/a.txt").exists());
    let kinds: Vec<_> = changed.iter().map(|c| c.change).collect();
    assert_eq!(kinds, [Change::Deleted, Change::Created]);
}

#[test]
fn a_patch_with_one_failing_hunk_leaves_every_file_as_it_was() {
    let t = tree();
    let before = snapshot(&t);
    let bad = EDIT_BOTH.replace(" alpha\n beta\n+gamma", " alpha\n BETA\n+gamma");
    assert!(matches!(
        apply_in(&t.root, &t.root, &bad),
        Err(ApplyError::Patch(_))
    ));
    assert_eq!(snapshot(&t), before);
}

#[test]
fn climbing_out_absolute_paths_outside_and_symlinks_out_are_refused() {
    let t = tree();
    symlink(&t.outside, t.root.join("out")).expect("symlink");
    let before = snapshot(&t);
    let secret = t.outside.join("secret");
    for target in [
        "../outside/secret".to_owned(),
        secret.display().to_string(),
        "out/secret".to_owned(),
    ] {
        let patch = format!(
            "--- a/src/a.txt\n+++ b/src/a.txt\n@@ -1 +1 @@\n-one\n+uno\n--- {target}\n+++ {target}\n@@ -1 +1 @@\n-keep\n+stolen\n"
        );
        let refused = apply_in(&t.root, &t.root, &patch);
        assert!(
            matches!(refused, Err(ApplyError::Path { .. })),
            "{target}: {refused:?}"
        );
        assert_eq!(snapshot(&t), before, "{target}");
    }
}

#[test]
fn a_rename_moves_the_patched_content_and_refuses_to_overwrite() {
    let t = tree();
    let patch = "\
diff --git a/b.txt b/c.txt
--- a/b.txt
+++ b/c.txt
@@ -1,2 +1,2 @@
 alpha
-beta
+BETA
";
    apply_in(&t.root, &t.root, patch).expect("applies");
    assert_eq!(read(&t.root.join("c.txt")), "alpha\nBETA\n");
    assert!(!t.root.join("b.txt").exists());
    std::fs::write(t.root.join("b.txt"), "alpha\nbeta\n").expect("write");
    let before = snapshot(&t);
    assert!(matches!(
        apply_in(&t.root, &t.root, patch),
        Err(ApplyError::Exists(_))
    ));
    assert_eq!(snapshot(&t), before);
}

#[test]
fn permissions_are_kept_and_no_temporary_file_is_left() {
    use std::os::unix::fs::PermissionsExt;
    let t = tree();
    let script = t.root.join("b.txt");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    apply_in(&t.root, &t.root, EDIT_BOTH).expect("applies");
    let mode = std::fs::metadata(&script)
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    let names: Vec<_> = std::fs::read_dir(&t.root)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains("holarchy-patch")),
        "{names:?}"
    );
}

#[test]
fn a_link_planted_where_a_temporary_file_might_go_is_never_written_through() {
    let t = tree();
    // Links out at the names a predictable scheme would pick.
    let pid = std::process::id();
    let names = (0..64)
        .map(|n| format!(".b.txt.holarchy-patch-{pid}-{n}"))
        .chain([format!(".b.txt.holarchy-patch-{pid}")]);
    for name in names {
        symlink(t.outside.join("secret"), t.root.join(name)).expect("symlink");
    }
    apply_in(&t.root, &t.root, EDIT_BOTH).expect("applies");
    assert_eq!(read(&t.outside.join("secret")), "keep\n");
    assert_eq!(read(&t.root.join("b.txt")), "alpha\nbeta\ngamma\n");
}

mod links;
