//! The tour's instance part: an operator applies a manifest (with a role
//! file beside it) from the command line, applies it again to no effect,
//! reads it back and deletes it.

use crate::cli::Holarchy;
use crate::common::{data_dir, Daemon};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_applies_lists_reads_and_deletes_an_instance() {
    let root = tempfile::tempdir().expect("tempdir");
    let skills = root.path().join("skills");
    std::fs::create_dir_all(skills.join("labels")).expect("mkdir");
    std::fs::write(
        skills.join("labels/SKILL.md"),
        "---\nname: labels\ndescription: Label issues\n---\nUse area labels.\n",
    )
    .expect("skill");
    let skills = skills.to_str().expect("utf-8 path");
    let daemon = Daemon::start_with(&data_dir(&root), &["--skills-dir", skills]).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    let dir = root.path().join("roles");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("triage.md"), "You sort new issues.").expect("role");
    let manifest = root.path().join("triage.toml");
    std::fs::write(
        &manifest,
        "name = \"triage\"\nskills = [\"labels\"]\n\n[role]\nprompt_file = \"roles/triage.md\"\n\n[brain.scripted]\n\n[constraints]\ndeny_tools = [\"DetachWorkspace\"]\n",
    )
    .expect("manifest");
    let file = manifest.to_str().expect("utf-8 path");

    let created = cli.ok(&["instance", "apply", file]);
    assert!(
        created.starts_with("created triage (agent agt_"),
        "{created}"
    );
    let again = cli.ok(&["instance", "apply", file]);
    assert!(again.starts_with("unchanged triage"), "{again}");

    let listed = cli.json(&["instance", "list"]);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["name"], "triage");
    assert_eq!(listed[0]["constraints"]["deny_tools"][0], "DetachWorkspace");
    let shown = cli.ok(&["instance", "get", "triage"]);
    assert!(shown.contains("role         sha256:"), "{shown}");
    assert!(shown.contains("deny         DetachWorkspace"), "{shown}");
    assert!(shown.contains("skills       labels"), "{shown}");
    // The role file is read from beside the manifest, wherever the
    // operator stands; a missing one fails before the daemon is asked.
    std::fs::remove_file(dir.join("triage.md")).expect("rm");
    let missing = cli.fails(&["instance", "apply", file]);
    assert!(missing.contains("prompt_file"), "{missing}");

    let deleted = cli.ok(&["instance", "delete", "triage"]);
    assert_eq!(deleted.trim(), "deleted triage");
    let gone = cli.fails(&["instance", "get", "triage"]);
    assert!(gone.contains("no instance named"), "{gone}");
}

/// A manifest may come from anyone, and its role goes to the model
/// provider: the CLI reads only a regular file inside the manifest's
/// folder, never past the role's limit, and says what to do otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_reads_only_a_bounded_regular_file_inside_the_manifests_folder() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    let folder = root.path().join("manifests");
    std::fs::create_dir_all(folder.join("roles")).expect("mkdir");
    std::fs::write(folder.join("roles/triage.md"), "You sort new issues.").expect("role");
    std::fs::write(root.path().join("outside.md"), "not for the model").expect("outside");
    std::os::unix::fs::symlink("../outside.md", folder.join("link.md")).expect("link");
    std::os::unix::fs::symlink("/dev/zero", folder.join("zero.md")).expect("link");
    let fifo = folder.join("pipe.md");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    std::fs::write(folder.join("big.md"), "x".repeat(32 * 1024 + 1)).expect("big");
    let manifest = folder.join("triage.toml");
    let file = manifest.to_str().expect("utf-8 path");
    let with_role = |path: &str| {
        let text =
            format!("name = \"triage\"\n\n[role]\nprompt_file = \"{path}\"\n\n[brain.scripted]\n");
        std::fs::write(&manifest, text).expect("manifest");
    };

    let refusals = [
        (
            "/etc/passwd",
            "must be a relative path inside the manifest's folder",
        ),
        (
            "../outside.md",
            "must be a relative path inside the manifest's folder",
        ),
        ("link.md", "outside the manifest's folder"),
        ("zero.md", "outside the manifest's folder"),
        ("pipe.md", "is not a regular file"),
        ("big.md", "is over 32768 bytes, the limit"),
    ];
    for (path, why) in refusals {
        with_role(path);
        let said = cli.fails(&["instance", "apply", file]);
        assert!(
            said.contains(&format!("role.prompt_file `{path}`")) && said.contains(why),
            "{path}: {said}"
        );
    }
    assert!(
        cli.json(&["instance", "list"]).is_empty(),
        "nothing applied"
    );

    with_role("roles/triage.md");
    let created = cli.ok(&["instance", "apply", file]);
    assert!(created.starts_with("created triage"), "{created}");
}
