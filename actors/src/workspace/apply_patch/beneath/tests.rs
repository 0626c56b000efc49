//! Resolving beneath a root fd: a symlink anywhere on the way is refused,
//! by `openat2` and by the component walk alike.

use std::os::unix::fs::symlink;

use super::*;

const HOWS: [How; 2] = [How::Openat2, How::Walk];

struct Tree {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    outside: std::path::PathBuf,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = std::fs::canonicalize(dir.path()).expect("canonical");
    let root = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir_all(root.join("real")).expect("mkdir");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(root.join("real/f"), "in\n").expect("write");
    std::fs::write(outside.join("f"), "out\n").expect("write");
    symlink(root.join("real"), root.join("inner")).expect("symlink");
    symlink(&outside, root.join("out")).expect("symlink");
    symlink(outside.join("f"), root.join("file")).expect("symlink");
    Tree {
        _dir: dir,
        root,
        outside,
    }
}

fn errno(err: &io::Error) -> Option<Errno> {
    err.raw_os_error().map(Errno::from_raw)
}

#[test]
fn plain_names_open_and_links_anywhere_on_the_way_are_refused() {
    let t = tree();
    for how in HOWS {
        let root = Root::open(&t.root, how).expect("root");
        let read = |rel: &str| root.open_at(Path::new(rel), OFlag::O_RDONLY, Mode::empty());
        assert!(read("real/f").is_ok(), "{how:?}");
        // Even a link that stays inside is not followed.
        for rel in ["inner/f", "out/f", "file", "out", "inner"] {
            let err = read(rel).expect_err(rel);
            assert_eq!(errno(&err), Some(Errno::ELOOP), "{how:?} {rel}: {err}");
        }
        let err = root.parent(Path::new("out/f")).expect_err("parent");
        assert_eq!(errno(&err), Some(Errno::ELOOP), "{how:?}");
    }
}

#[test]
fn making_parents_stops_at_a_link_and_creates_nothing_outside() {
    let t = tree();
    for how in HOWS {
        let root = Root::open(&t.root, how).expect("root");
        let err = root
            .make_parent(Path::new("out/new/deeper/f"))
            .expect_err("through a link");
        assert_eq!(errno(&err), Some(Errno::ELOOP), "{how:?}");
        assert!(!t.outside.join("new").exists(), "{how:?}");
        let (dir, name) = root
            .make_parent(Path::new("made/deeper/f"))
            .expect("creates");
        assert_eq!(name, "f");
        assert!(status(dir.as_fd(), name).expect("status").is_none());
        assert!(t.root.join("made/deeper").is_dir());
    }
}

#[test]
fn only_plain_names_are_accepted_and_the_root_is_opened_without_links() {
    let t = tree();
    let root = Root::open(&t.root, How::detect()).expect("root");
    for rel in ["../outside/f", "real/../real/f", "/etc/passwd", "./real/f"] {
        let err = root
            .open_at(Path::new(rel), OFlag::O_RDONLY, Mode::empty())
            .expect_err(rel);
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{rel}");
    }
    for how in HOWS {
        let err = Root::open(&t.root.join("inner"), how).expect_err("a link as root");
        assert_eq!(errno(&err), Some(Errno::ELOOP), "{how:?}");
    }
}
