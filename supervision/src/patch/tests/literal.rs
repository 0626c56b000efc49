//! Real output of GNU `diff -u` and `git diff`, pasted as made, applied to the
//! files it was made from.

use super::*;

/// Literal output of GNU diffutils 3.8 `diff -u` for four pairs of files.
#[test]
fn gnu_diff_output_applies_byte_for_byte() {
    let cases = [
        (
            "alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\neta\ntheta\niota\nkappa\n",
            "alpha\nbeta\nGAMMA\ndelta\nepsilon\nzeta\neta\ntheta\niota\nkappa\nlambda\n",
            "--- a1\t2026-11-23 03:58:35.736978748 +0000
+++ b1\t2026-11-23 03:58:35.736978748 +0000
@@ -1,6 +1,6 @@
 alpha
 beta
-gamma
+GAMMA
 delta
 epsilon
 zeta
@@ -8,3 +8,4 @@
 theta
 iota
 kappa
+lambda
",
        ),
        (
            "one\ntwo\nthree",
            "one\ntwo\nthree\n",
            "--- a2
+++ b2
@@ -1,3 +1,3 @@
 one
 two
-three
\\ No newline at end of file
+three
",
        ),
        (
            "one\ntwo\nthree\n",
            "one\n2\nthree",
            "--- a3
+++ b3
@@ -1,3 +1,3 @@
 one
-two
-three
+2
+three
\\ No newline at end of file
",
        ),
        (
            "x\ny",
            "w\nx\ny",
            "--- a4
+++ b4
@@ -1,2 +1,3 @@
+w
 x
 y
\\ No newline at end of file
",
        ),
    ];
    for (old, new, patch) in cases {
        assert_eq!(patched(old, patch), new, "{patch}");
    }
}

/// Literal output of `git diff --cached -M` over a small repository.
#[test]
fn git_diff_output_applies_file_by_file() {
    let patch = "\
diff --git a/added.txt b/added.txt
new file mode 100644
index 0000000..3e75765
--- /dev/null
+++ b/added.txt
@@ -0,0 +1 @@
+new
diff --git a/before.txt b/after.txt
similarity index 83%
rename from before.txt
rename to after.txt
index 0970e47..a514be7 100644
--- a/before.txt
+++ b/after.txt
@@ -3,4 +3,4 @@ l2
 l3
 l4
 l5
-l6
+L6
diff --git a/crlf.txt b/crlf.txt
index b5eff57..d5a6cc6 100644
--- a/crlf.txt
+++ b/crlf.txt
@@ -1,3 +1,3 @@
 a\r
-b\r
+B\r
 c\r
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
index b2bbfcb..0000000
--- a/gone.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-old
-stuff
diff --git a/empty.txt b/newempty.txt
similarity index 100%
rename from empty.txt
rename to newempty.txt
";
    let files = parse(patch).expect("parses");
    let before: [(Option<&str>, Option<&str>); 5] = [
        (None, Some("new\n")),
        (
            Some("l1\nl2\nl3\nl4\nl5\nl6\n"),
            Some("l1\nl2\nl3\nl4\nl5\nL6\n"),
        ),
        (Some("a\r\nb\r\nc\r\n"), Some("a\r\nB\r\nc\r\n")),
        (Some("old\nstuff\n"), None),
        (Some(""), Some("")),
    ];
    assert_eq!(files.len(), before.len());
    for (file, (old, new)) in files.iter().zip(before) {
        assert_eq!(
            apply(old, file),
            Ok(new.map(str::to_owned)),
            "{}",
            file.path()
        );
    }
    assert_eq!(files[1].old_path.as_deref(), Some("before.txt"));
    assert_eq!(files[4].new_path.as_deref(), Some("newempty.txt"));
}
