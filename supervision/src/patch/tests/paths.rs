//! How file paths are read from headers: timestamps and git's tabs
//! dropped, quoted names unquoted, `a/` and `b/` prefixes stripped only in
//! pairs.

use super::*;

#[test]
fn diff_timestamps_and_git_tabs_after_paths_are_dropped() {
    let patch = "\
--- a1\t2026-11-23 03:58:35.736978748 +0000
+++ b1\t2026-11-23 03:58:35.736978748 +0000
@@ -1 +1 @@
-x
+y
diff --git a/with space.txt b/with space.txt
index 587be6b..975fbec 100644
--- a/with space.txt\t
+++ b/with space.txt\t
@@ -1 +1 @@
-x
+y
";
    let files = parse(patch).expect("parses");
    assert_eq!(files[0].old_path.as_deref(), Some("a1"));
    assert_eq!(files[0].new_path.as_deref(), Some("b1"));
    assert_eq!(files[1].path(), "with space.txt");
}

#[test]
fn quoted_git_paths_are_unquoted() {
    let patch = "\
diff --git \"a/caf\\303\\251.txt\" \"b/caf\\303\\251.txt\"
index bca70f3..4286f42 100644
--- \"a/caf\\303\\251.txt\"
+++ \"b/caf\\303\\251.txt\"
@@ -1 +1 @@
-q
+r
diff --git \"a/tab\\there\" \"b/tab\\there\"
new file mode 100644
index 0000000..e69de29
";
    let files = parse(patch).expect("parses");
    assert_eq!(files[0].path(), "café.txt");
    assert_eq!(files[1].new_path.as_deref(), Some("tab\there"));
    let bad = "--- \"a/x\\777\"\n+++ \"b/x\"\n@@ -1 +1 @@\n-q\n+r\n";
    assert!(matches!(
        parse(bad),
        Err(PatchError::Malformed { line: 1, .. })
    ));
}

#[test]
fn prefixes_are_kept_unless_both_sides_have_them() {
    let file = only("--- src/a/x\n+++ src/b/x\n@@ -1 +1 @@\n-q\n+r\n");
    assert_eq!(file.old_path.as_deref(), Some("src/a/x"));
    let created = only("--- /dev/null\n+++ b/new\n@@ -0,0 +1 @@\n+n\n");
    assert_eq!(created.path(), "new");
    let plain = only("--- a/x\n+++ x\n@@ -1 +1 @@\n-q\n+r\n");
    assert_eq!(plain.old_path.as_deref(), Some("a/x"));
}
