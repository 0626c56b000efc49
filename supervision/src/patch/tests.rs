//! Tests of the unified diff parser and applier: hand cases, literal output of
//! GNU `diff -u` and `git diff`, and properties over diffs made by `similar`.

use super::*;

fn only(patch: &str) -> FilePatch {
    let mut files = parse(patch).expect("the patch parses");
    assert_eq!(files.len(), 1, "one file section in {patch:?}");
    files.remove(0)
}

fn patched(original: &str, patch: &str) -> String {
    apply(Some(original), &only(patch))
        .expect("the patch applies")
        .expect("the file is kept")
}

#[test]
fn multi_file_git_diff_gives_one_patch_per_file_without_prefixes() {
    let patch = "\
diff --git a/src/lib.rs b/src/lib.rs
index 1b7c1e7..7527576 100644
--- a/src/lib.rs
+++ b/src/lib.rs
@@ -1,3 +1,3 @@
 fn main() {
-    println!(\"hi\");
+    println!(\"hello\");
 }
diff --git a/README.md b/README.md
index 587be6b..975fbec 100644
--- a/README.md
+++ b/README.md
@@ -1 +1,2 @@
 # title
+more
";
    let files = parse(patch).expect("parses");
    assert_eq!(files.len(), 2);
    assert_eq!(files[0].old_path.as_deref(), Some("src/lib.rs"));
    assert_eq!(files[0].new_path.as_deref(), Some("src/lib.rs"));
    assert_eq!(files[1].path(), "README.md");
    assert!(!files[0].is_rename());
    let lib = apply(Some("fn main() {\n    println!(\"hi\");\n}\n"), &files[0]);
    assert_eq!(
        lib,
        Ok(Some(
            "fn main() {\n    println!(\"hello\");\n}\n".to_owned()
        ))
    );
    assert_eq!(
        apply(Some("# title\n"), &files[1]),
        Ok(Some("# title\nmore\n".to_owned()))
    );
}

#[test]
fn commit_message_and_git_extended_headers_are_tolerated() {
    let patch = "\
From 3f2a Mon Sep 17 00:00:00 2001
Subject: [PATCH] rename and edit

A message that mentions --- and @@ in prose.
---
 old.txt => new.txt | 2 +-
 1 file changed

diff --git a/old.txt b/new.txt
similarity index 83%
rename from old.txt
rename to new.txt
index 0970e47..a514be7 100644
--- a/old.txt
+++ b/new.txt
@@ -2,2 +2,2 @@ section heading
 l2
-l3
+L3
-- 
2.39.0

";
    let file = only(patch);
    assert_eq!(file.old_path.as_deref(), Some("old.txt"));
    assert_eq!(file.new_path.as_deref(), Some("new.txt"));
    assert!(file.is_rename());
    assert_eq!(
        apply(Some("l1\nl2\nl3\n"), &file),
        Ok(Some("l1\nl2\nL3\n".to_owned()))
    );
}

#[test]
fn creation_from_dev_null_makes_the_file() {
    let file = only("--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n");
    assert_eq!(file.old_path, None);
    assert_eq!(file.path(), "new.txt");
    assert_eq!(apply(None, &file), Ok(Some("one\ntwo\n".to_owned())));
}

#[test]
fn creating_a_file_that_exists_is_refused() {
    let file = only("--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+one\n");
    assert_eq!(
        apply(Some(""), &file),
        Err(PatchError::AlreadyExists {
            path: "new.txt".to_owned()
        })
    );
}

#[test]
fn deletion_to_dev_null_removes_the_whole_file() {
    let file = only("--- a/gone.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-old\n-stuff\n");
    assert_eq!(file.new_path, None);
    assert_eq!(file.path(), "gone.txt");
    assert_eq!(apply(Some("old\nstuff\n"), &file), Ok(None));
}

#[test]
fn deletion_of_a_file_that_has_more_lines_is_refused() {
    let file = only("--- a/gone.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-old\n-stuff\n");
    assert_eq!(
        apply(Some("old\nstuff\nmore\n"), &file),
        Err(PatchError::DeleteIncomplete {
            path: "gone.txt".to_owned(),
            remaining: 1
        })
    );
}

#[test]
fn patching_a_missing_file_is_refused() {
    let file = only("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+y\n");
    assert_eq!(
        apply(None, &file),
        Err(PatchError::Missing {
            path: "f".to_owned()
        })
    );
}

#[test]
fn git_sections_without_hunks_create_delete_and_rename_empty_files() {
    let patch = "\
diff --git a/e1.txt b/e1.txt
new file mode 100644
index 0000000..e69de29
diff --git a/old empty.txt b/old empty.txt
deleted file mode 100644
index e69de29..0000000
diff --git a/newempty.txt b/e2.txt
similarity index 100%
rename from newempty.txt
rename to e2.txt
diff --git a/main.rs b/main.rs
old mode 100644
new mode 100755
";
    let files = parse(patch).expect("parses");
    let shapes: Vec<_> = files
        .iter()
        .map(|f| (f.old_path.as_deref(), f.new_path.as_deref(), f.hunks.len()))
        .collect();
    assert_eq!(
        shapes,
        [
            (None, Some("e1.txt"), 0),
            (Some("old empty.txt"), None, 0),
            (Some("newempty.txt"), Some("e2.txt"), 0),
        ]
    );
    assert_eq!(apply(None, &files[0]), Ok(Some(String::new())));
    assert_eq!(apply(Some(""), &files[1]), Ok(None));
    assert_eq!(apply(Some(""), &files[2]), Ok(Some(String::new())));
}

#[test]
fn missing_final_newline_is_added() {
    let patch =
        "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n one\n-two\n\\ No newline at end of file\n+two\n";
    assert_eq!(patched("one\ntwo", patch), "one\ntwo\n");
}

#[test]
fn final_newline_is_removed() {
    let patch =
        "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n one\n-two\n+two\n\\ No newline at end of file\n";
    assert_eq!(patched("one\ntwo\n", patch), "one\ntwo");
}

#[test]
fn context_without_final_newline_stays_without() {
    let patch =
        "--- a/f\n+++ b/f\n@@ -1,2 +1,3 @@\n+zero\n one\n two\n\\ No newline at end of file\n";
    assert_eq!(patched("one\ntwo", patch), "zero\none\ntwo");
    // The unterminated line only matches the end of the file.
    let err = apply(Some("one\ntwo\n"), &only(patch)).expect_err("the newline differs");
    assert!(
        matches!(err, PatchError::DoesNotApply { hunk: 1, .. }),
        "{err}"
    );
}

#[test]
fn a_line_after_the_no_newline_marker_is_refused() {
    let patch =
        "--- a/f\n+++ b/f\n@@ -1,2 +1,3 @@\n one\n\\ No newline at end of file\n two\n+three\n";
    assert!(matches!(
        parse(patch),
        Err(PatchError::Malformed { line: 6, .. })
    ));
}

#[test]
fn adding_after_an_unterminated_last_line_is_refused() {
    // Made by hand with -U0: diff itself would replace the last line instead.
    let file = only("--- a/f\n+++ b/f\n@@ -1,0 +2 @@\n+two\n");
    assert_eq!(
        apply(Some("one"), &file),
        Err(PatchError::DoesNotApply {
            path: "f".to_owned(),
            hunk: 1,
            mismatch: Mismatch::AfterUnterminated
        })
    );
    assert_eq!(
        apply(Some("one\n"), &file),
        Ok(Some("one\ntwo\n".to_owned()))
    );
}

#[test]
fn hunk_applies_at_an_offset_when_lines_were_inserted_above() {
    let patch = "--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n@@ -6,2 +6,2 @@\n f\n-g\n+G\n";
    let file = only(patch);
    let applied =
        apply_detailed(Some("new1\nnew2\na\nb\nc\nd\ne\nf\ng\n"), &file).expect("applies");
    assert_eq!(
        applied.content.as_deref(),
        Some("new1\nnew2\na\nb\nC\nd\ne\nf\nG\n")
    );
    assert_eq!(
        applied.placements,
        [
            Placement {
                start: 3,
                offset: 2
            },
            Placement {
                start: 7,
                offset: 2
            }
        ]
    );
}

#[test]
fn hunk_applies_at_an_offset_when_lines_were_removed_above() {
    let patch = "--- a/f\n+++ b/f\n@@ -5,3 +5,3 @@\n e\n-f\n+F\n g\n";
    assert_eq!(patched("a\ne\nf\ng\nh\n", patch), "a\ne\nF\ng\nh\n");
}

#[test]
fn the_nearest_match_wins_and_hunks_never_go_back_before_the_previous_one() {
    let file = only("--- a/f\n+++ b/f\n@@ -4 +4 @@\n-x\n+X\n");
    // x at lines 1, 3 and 6: line 3 is one away from line 4, line 6 two.
    assert_eq!(
        apply(Some("x\n.\nx\n.\n.\nx\n"), &file),
        Ok(Some("x\n.\nX\n.\n.\nx\n".to_owned()))
    );
    // The second hunk's nearest look-alike is inside the first: it goes further.
    let two = only("--- a/f\n+++ b/f\n@@ -3 +3 @@\n-x\n+X\n@@ -5 +5 @@\n-x\n+Y\n");
    assert_eq!(
        apply(Some("x\n.\nx\n.\n.\n.\n.\nx\n"), &two),
        Ok(Some("x\n.\nX\n.\n.\n.\n.\nY\n".to_owned()))
    );
    assert!(apply(Some("x\n.\nx\n.\n.\n"), &two).is_err());
}

#[test]
fn hunks_out_of_file_order_are_refused() {
    let patch = "--- a/f\n+++ b/f\n@@ -3 +3 @@\n-x\n+X\n@@ -1 +1 @@\n-x\n+Y\n";
    assert!(matches!(
        parse(patch),
        Err(PatchError::Malformed { line: 6, .. })
    ));
}

#[test]
fn a_hunk_without_old_lines_goes_exactly_where_its_header_says() {
    let file = only("--- a/f\n+++ b/f\n@@ -2,0 +3 @@\n+new\n");
    assert_eq!(
        apply(Some("a\nb\nc\n"), &file),
        Ok(Some("a\nb\nnew\nc\n".to_owned()))
    );
    assert_eq!(
        apply(Some("a\n"), &file),
        Err(PatchError::DoesNotApply {
            path: "f".to_owned(),
            hunk: 1,
            mismatch: Mismatch::PastEnd {
                line: 2,
                file_lines: 1
            }
        })
    );
}

#[test]
fn a_hunk_whose_context_differs_is_refused_naming_file_and_hunk() {
    let patch = "\
--- a/src/lib.rs
+++ b/src/lib.rs
@@ -1,2 +1,2 @@
-a
+A
 b
@@ -4,3 +4,3 @@
 d
-e
+E
 f
";
    let err = apply(Some("a\nb\nc\nd\ne\nF\n"), &only(patch)).expect_err("f differs");
    assert_eq!(
        err,
        PatchError::DoesNotApply {
            path: "src/lib.rs".to_owned(),
            hunk: 2,
            mismatch: Mismatch::Differs {
                line: 6,
                removed: false
            }
        }
    );
    assert_eq!(
        err.to_string(),
        "hunk 2 of `src/lib.rs` does not apply: context at line 6 differs, and no other place matches"
    );
    let removed = apply(Some("a\nb\nc\nd\nX\nf\n"), &only(patch)).expect_err("e differs");
    assert!(
        removed
            .to_string()
            .contains("the line it removes at line 5 differs"),
        "{removed}"
    );
    let short = apply(Some("a\nb\nc\nd\n"), &only(patch)).expect_err("too short");
    assert!(matches!(
        short,
        PatchError::DoesNotApply {
            mismatch: Mismatch::PastEnd {
                line: 5,
                file_lines: 4
            },
            ..
        }
    ));
}

#[test]
fn header_counts_larger_than_the_body_are_refused() {
    let patch = "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n@@ -9 +9 @@\n-x\n+y\n";
    assert_eq!(
        parse(patch),
        Err(PatchError::CountMismatch {
            path: "f".to_owned(),
            hunk: 1,
            line: 3,
            old_len: 3,
            new_len: 3,
            old_found: 2,
            new_found: 2
        })
    );
    let at_end = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n";
    assert!(matches!(
        parse(at_end),
        Err(PatchError::CountMismatch { new_found: 1, .. })
    ));
}

#[test]
fn header_counts_smaller_than_the_body_are_refused() {
    let patch = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n c\n";
    let err = parse(patch).expect_err("one line too many");
    assert_eq!(
        err.to_string(),
        "hunk 1 of `f` (line 3 of the patch): its header counts 2 old and 2 new lines, but its body has 3 old and 3 new"
    );
    let added = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-b\n+B\n+C\n";
    assert!(matches!(
        parse(added),
        Err(PatchError::CountMismatch { .. })
    ));
}

#[test]
fn a_range_without_count_means_one_line() {
    let file = only("--- a/f\n+++ b/f\n@@ -2 +2,2 @@\n-b\n+B\n+C\n");
    assert_eq!(
        (
            file.hunks[0].old_start,
            file.hunks[0].old_len,
            file.hunks[0].new_len
        ),
        (2, 1, 2)
    );
    assert_eq!(
        apply(Some("a\nb\nc\n"), &file),
        Ok(Some("a\nB\nC\nc\n".to_owned()))
    );
}

#[test]
fn malformed_hunk_headers_are_refused() {
    for header in [
        "@@ -1,x +1 @@",
        "@@ -0,2 +1,2 @@",
        "@@ -0,0 +0,0 @@",
        "@@ @@",
    ] {
        let patch = format!("--- a/f\n+++ b/f\n{header}\n a\n");
        assert!(
            matches!(parse(&patch), Err(PatchError::Malformed { line: 3, .. })),
            "{header}"
        );
    }
    assert!(matches!(
        parse("@@ -1 +1 @@\n-a\n+b\n"),
        Err(PatchError::Malformed { line: 1, .. })
    ));
    assert!(matches!(
        parse("--- a/f\n+++ b/f\n"),
        Err(PatchError::Malformed { line: 1, .. })
    ));
}

#[test]
fn huge_line_numbers_are_refused_without_overflow() {
    let max = usize::MAX;
    let far = format!("--- a/f\n+++ b/f\n@@ -{max} +1 @@\n-x\n+y\n");
    // The search for an offset has no bound, as in GNU patch.
    assert_eq!(apply(Some("x\n"), &only(&far)), Ok(Some("y\n".to_owned())));
    let err = apply(Some("z\n"), &only(&far)).expect_err("no x anywhere");
    assert!(matches!(err, PatchError::DoesNotApply { .. }), "{err}");
    let insert = format!("--- a/f\n+++ b/f\n@@ -{max},0 +1 @@\n+y\n");
    assert!(apply(Some("x\n"), &only(&insert)).is_err());
    let two = format!("--- a/f\n+++ b/f\n@@ -{max},2 +1,2 @@\n a\n-x\n+y\n@@ -1 +1 @@\n-b\n+c\n");
    assert!(matches!(
        parse(&two),
        Err(PatchError::Malformed { line: 7, .. })
    ));
    let too_big = "--- a/f\n+++ b/f\n@@ -99999999999999999999999 +1 @@\n-x\n+y\n";
    assert!(matches!(
        parse(too_big),
        Err(PatchError::Malformed { line: 3, .. })
    ));
}

#[test]
fn a_patch_without_file_sections_is_empty() {
    assert_eq!(parse(""), Err(PatchError::Empty));
    assert_eq!(parse("just a message\n---\n"), Err(PatchError::Empty));
    assert_eq!(
        parse("diff --git a/x b/x\nold mode 100644\nnew mode 100755\n"),
        Err(PatchError::Empty)
    );
}

#[test]
fn binary_patches_are_refused() {
    let git = "\
diff --git a/bin.dat b/bin.dat
new file mode 100644
index 0000000000000000000000000000000000000000..8352675d67aed6625ece79af41c27fdb4ee2e867
GIT binary patch
literal 3
KcmZQzWC8#H2LJ>B

literal 0

";
    let err = parse(git).expect_err("binary");
    assert_eq!(
        err,
        PatchError::Binary {
            path: "bin.dat".to_owned()
        }
    );
    assert!(err.to_string().contains("binary patches are not supported"));
    let plain = "diff --git a/bin.dat b/bin.dat\nindex 1..2 100644\nBinary files a/bin.dat and b/bin.dat differ\n";
    assert!(matches!(parse(plain), Err(PatchError::Binary { .. })));
    let diff_r = "Binary files old/x.png and new/x.png differ\n";
    assert!(matches!(parse(diff_r), Err(PatchError::Binary { .. })));
}

#[test]
fn copies_are_refused() {
    let patch = "\
diff --git a/a.txt b/b.txt
similarity index 90%
copy from a.txt
copy to b.txt
--- a/a.txt
+++ b/b.txt
@@ -1 +1 @@
-x
+y
";
    assert!(matches!(
        parse(patch),
        Err(PatchError::Unsupported { ref path, .. }) if path == "b.txt"
    ));
}

#[test]
fn crlf_line_endings_are_preserved() {
    let patch = "--- a/crlf.txt\n+++ b/crlf.txt\n@@ -1,3 +1,3 @@\n a\r\n-b\r\n+B\r\n c\r\n";
    assert_eq!(patched("a\r\nb\r\nc\r\n", patch), "a\r\nB\r\nc\r\n");
    // The `\r` is content: an LF file is not the CRLF file the hunk expects.
    assert!(apply(Some("a\nb\nc\n"), &only(patch)).is_err());
    // A patch saved whole with CRLF still has readable headers.
    let saved = patch.replace('\n', "\r\n");
    assert_eq!(
        patched("a\r\r\nb\r\r\nc\r\r\n", &saved),
        "a\r\r\nB\r\r\nc\r\r\n"
    );
}

#[test]
fn an_empty_line_without_its_space_is_empty_context() {
    let patch = "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n\n-b\n+B\n";
    assert_eq!(patched("a\n\nb\n", patch), "a\n\nB\n");
    // And blank lines between hunks or after the last one are not part of it.
    let spaced = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+A\n\n@@ -3 +3 @@\n-c\n+C\n\n\n";
    assert_eq!(patched("a\nb\nc\n", spaced), "A\nb\nC\n");
}

#[test]
fn a_patch_cut_after_its_last_line_still_ends_that_line() {
    assert_eq!(
        patched("a\nb\n", "--- a/f\n+++ b/f\n@@ -2 +2 @@\n-b\n+B"),
        "a\nB\n"
    );
}

mod literal;
mod paths;
mod properties;
