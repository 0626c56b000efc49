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
