//! Symlinks inside the workspace that point out of it, planted before the
//! patch or swapped in while it runs: no operation follows one.

use std::os::unix::fs::symlink;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::*;

const HOWS: [How; 2] = [How::Openat2, How::Walk];

/// A tool-level refusal: the path check, or the fd walk meeting a link.
fn refused(result: &Result<Vec<Changed>, ApplyError>) -> bool {
    matches!(result, Err(ApplyError::Path { .. } | ApplyError::Link(_)))
}

#[test]
fn links_pointing_outside_refuse_add_update_delete_and_move() {
    let t = tree();
    symlink(&t.outside, t.root.join("outdir")).expect("symlink");
    symlink(t.outside.join("secret"), t.root.join("outfile")).expect("symlink");
    let before = snapshot(&t);
    let update = |p: &str| format!("--- a/{p}\n+++ b/{p}\n@@ -1 +1 @@\n-keep\n+stolen\n");
    let delete = |p: &str| format!("--- a/{p}\n+++ /dev/null\n@@ -1 +0,0 @@\n-keep\n");
    let take = |p: &str| {
        format!("diff --git a/{p} b/taken\n--- a/{p}\n+++ b/taken\n@@ -1 +1 @@\n-keep\n+keep\n")
    };
    let patches = [
        "--- /dev/null\n+++ b/outdir/new\n@@ -0,0 +1 @@\n+planted\n".to_owned(),
        update("outdir/secret"),
        update("outfile"),
        delete("outdir/secret"),
        delete("outfile"),
        take("outdir/secret"),
        take("outfile"),
        "diff --git a/b.txt b/outdir/b.txt\n--- a/b.txt\n+++ b/outdir/b.txt\n@@ -1,2 +1,2 @@\n alpha\n-beta\n+BETA\n".to_owned(),
    ];
    for how in HOWS {
        for patch in &patches {
            let result = apply_with(&t.root, &t.root, patch, how);
            assert!(refused(&result), "{how:?} {patch}: {result:?}");
            assert_eq!(snapshot(&t), before, "{how:?} {patch}");
        }
    }
}

#[test]
fn a_link_that_stays_inside_still_names_its_target() {
    // The check resolves it to the real path, which is then used link-free.
    let t = tree();
    symlink(t.root.join("src"), t.root.join("alias")).expect("symlink");
    let patch = "--- a/alias/a.txt\n+++ b/alias/a.txt\n@@ -1 +1 @@\n-one\n+uno\n";
    for how in HOWS {
        let changed = apply_with(&t.root, &t.root, patch, how).expect("applies");
        assert_eq!(changed[0].path, Path::new("src/a.txt"));
        assert_eq!(read(&t.root.join("src/a.txt")), "uno\ntwo\nthree\n");
        std::fs::write(t.root.join("src/a.txt"), "one\ntwo\nthree\n").expect("write");
    }
    // `..` from `src/` names the root, a directory.
    let root_itself = "--- a/..\n+++ b/..\n@@ -1 +1 @@\n-one\n+uno\n";
    let refused = apply_in(&t.root, &t.root.join("src"), root_itself);
    assert!(
        matches!(refused, Err(ApplyError::NotAFile(_))),
        "{refused:?}"
    );
}

#[test]
fn a_link_met_after_the_check_is_refused_by_every_file_operation() {
    // What the check accepted (`d/secret`, `d/new`) is, by the time it is
    // used, under a link out: each step fails and nothing outside changes.
    let t = tree();
    symlink(&t.outside, t.root.join("d")).expect("symlink");
    let before = snapshot(&t);
    for how in HOWS {
        let root = Root::open(&std::fs::canonicalize(&t.root).expect("root"), how).expect("root");
        let secret = Path::new("d/secret");
        let read = super::super::read(&root, secret, "d/secret");
        assert!(
            matches!(read, Err(ApplyError::Link(_))),
            "{how:?}: {read:?}"
        );
        for (path, content) in [(secret, Some("stolen\n")), (secret, None)] {
            let put = put(&root, path, content, "d/secret");
            assert!(matches!(put, Err(ApplyError::Link(_))), "{how:?}: {put:?}");
        }
        let put = put(
            &root,
            Path::new("d/new/deeper"),
            Some("x\n"),
            "d/new/deeper",
        );
        assert!(matches!(put, Err(ApplyError::Link(_))), "{how:?}: {put:?}");
        assert_eq!(snapshot(&t), before, "{how:?}");
    }
}

/// Swaps `a` and `b` (a directory and a symlink) until told to stop, or
/// until they are gone (a failed test has dropped its tree), and says how
/// many times it did.
fn swapper(a: PathBuf, b: PathBuf, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    use nix::fcntl::{renameat2, RenameFlags, AT_FDCWD};
    std::thread::spawn(move || {
        let mut swaps = 0;
        while !stop.load(Ordering::Relaxed)
            && renameat2(AT_FDCWD, &a, AT_FDCWD, &b, RenameFlags::RENAME_EXCHANGE).is_ok()
        {
            swaps += 1;
            // Short breaths between swaps: without them, a loaded machine
            // can fail every resolution with EAGAIN (openat2 gives up when
            // a rename races it), and no add would ever land to show the
            // patches ran at all.
            std::thread::sleep(std::time::Duration::from_micros(20));
        }
        swaps
    })
}

/// Every regular file under `dir`, symlinks not followed.
fn files_under(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_owned()];
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue; // swapped away mid-walk
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => todo.push(path),
                Ok(kind) if kind.is_file() => {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    out.push((path, text));
                }
                _ => {}
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_directory_swapped_with_a_link_out_while_patches_run_never_reaches_outside() {
    const SECRET: &str = "secret-outside\n";
    const ROUNDS: usize = 300;
    for how in HOWS {
        let t = tree();
        std::fs::write(t.outside.join("token"), SECRET).expect("write");
        std::fs::create_dir(t.root.join("d")).expect("mkdir");
        std::fs::write(t.root.join("d/token"), "inside\n").expect("write");
        symlink(&t.outside, t.root.join("swap")).expect("symlink");
        let outside_before = files_under(&t.outside);

        let stop = Arc::new(AtomicBool::new(false));
        let swaps = swapper(t.root.join("d"), t.root.join("swap"), Arc::clone(&stop));
        // Each patch matches only the outside token (or, for the add, only
        // a directory): it can succeed only by following the link, except
        // the add, which may land in the real `d/`.
        let steal = "diff --git a/d/token b/stolen\n--- a/d/token\n+++ b/stolen\n@@ -1 +1 @@\n-secret-outside\n+taken\n";
        let overwrite = "--- a/d/token\n+++ b/d/token\n@@ -1 +1 @@\n-secret-outside\n+pwned\n";
        let remove = "--- a/d/token\n+++ /dev/null\n@@ -1 +0,0 @@\n-secret-outside\n";
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut added = 0;
        for round in 0..ROUNDS {
            if Instant::now() > deadline {
                break;
            }
            let add = format!("--- /dev/null\n+++ b/d/planted-{round}\n@@ -0,0 +1 @@\n+planted\n");
            for patch in [steal, overwrite, remove, add.as_str()] {
                let applied = apply_with(&t.root, &t.root, patch, how);
                if patch == add && applied.is_ok() {
                    added += 1;
                } else {
                    assert!(applied.is_err(), "{how:?} round {round}: {patch}");
                }
            }
            assert_eq!(
                files_under(&t.outside),
                outside_before,
                "{how:?} round {round}"
            );
        }
        stop.store(true, Ordering::Relaxed);
        let swaps = swaps.join().expect("swapper");

        assert_eq!(files_under(&t.outside), outside_before, "{how:?}");
        let leaked: Vec<_> = files_under(&t.root)
            .into_iter()
            .filter(|(_, text)| text == SECRET || text == "taken\n")
            .collect();
        assert!(leaked.is_empty(), "{how:?}: read from outside: {leaked:?}");
        // Not vacuous: the swapper ran the whole time, and patches landed
        // in the real directory between swaps.
        assert!(t.root.join("d").exists() && t.root.join("swap").exists());
        assert!(
            swaps > 0 && added > 0,
            "{how:?}: {swaps} swaps, {added} adds"
        );
    }
}
