use std::fs;

use super::*;

fn skill(root: &Path, folder: &str, text: &str) -> PathBuf {
    let dir = root.join(folder);
    fs::create_dir_all(&dir).expect("mkdir");
    fs::write(dir.join("SKILL.md"), text).expect("write");
    dir
}

#[test]
fn skills_are_found_under_each_root_and_the_first_root_wins() {
    let a = tempfile::tempdir().expect("tmp");
    let b = tempfile::tempdir().expect("tmp");
    skill(
        a.path(),
        "triage",
        "---\nname: triage\ndescription: Sort issues\n---\nSteps.\n",
    );
    skill(
        b.path(),
        "triage",
        "---\ndescription: Another triage\n---\n",
    );
    skill(b.path(), "notes", "# Release notes\nNo front matter.\n");
    fs::create_dir_all(b.path().join("not-a-skill")).expect("mkdir");
    let (catalog, problems) = SkillCatalog::load(&[a.path().into(), b.path().into()]);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(catalog.len(), 2);
    assert_eq!(
        catalog.get("triage").expect("triage").description,
        "Sort issues"
    );
    // Named after its folder when the front matter does not say.
    assert_eq!(catalog.get("notes").expect("notes").description, "");
    let names = ["notes".to_owned(), "gone".to_owned()];
    assert_eq!(catalog.some(&names).count(), 1);
}

#[test]
fn a_bad_skill_is_reported_and_the_rest_still_load() {
    let root = tempfile::tempdir().expect("tmp");
    skill(root.path(), "good", "---\nname: good\n---\n");
    skill(root.path(), "open", "---\nname: open\n");
    skill(root.path(), "weird", "---\nname: ../etc\n---\n");
    let big = skill(root.path(), "big", "");
    fs::write(
        big.join("SKILL.md"),
        vec![b'x'; MAX_SKILL_BYTES as usize + 1],
    )
    .expect("write");
    let (catalog, problems) = SkillCatalog::load(&[root.path().into()]);
    assert_eq!(catalog.len(), 1);
    assert!(catalog.contains("good"));
    assert_eq!(problems.len(), 3, "{problems:?}");
    let missing = SkillCatalog::load(&[root.path().join("nowhere")]).1;
    assert!(matches!(missing.as_slice(), [SkillError::Io { .. }]));
}

#[test]
fn loading_reads_the_body_and_lists_files_without_following_links() {
    let root = tempfile::tempdir().expect("tmp");
    let dir = skill(
        root.path(),
        "triage",
        "---\nname: triage\ntools: [AgentGet]\n---\nLabel every issue.\n",
    );
    fs::create_dir_all(dir.join("scripts")).expect("mkdir");
    fs::write(dir.join("scripts/label.sh"), "echo").expect("write");
    let outside = tempfile::tempdir().expect("tmp");
    fs::write(outside.path().join("secret"), "s").expect("write");
    #[cfg(unix)]
    std::os::unix::fs::symlink(outside.path(), dir.join("escape")).expect("link");
    let (catalog, _) = SkillCatalog::load(&[root.path().into()]);
    let loaded = catalog
        .get("triage")
        .expect("triage")
        .load()
        .expect("loads");
    assert_eq!(loaded.body, "Label every issue.\n");
    assert_eq!(loaded.skill.tools, ["AgentGet"]);
    assert_eq!(loaded.files, ["SKILL.md", "scripts/label.sh"]);
    assert!(!loaded.files_truncated);
    // A SKILL.md that became a link is refused at load.
    fs::remove_file(dir.join("SKILL.md")).expect("rm");
    #[cfg(unix)]
    std::os::unix::fs::symlink(outside.path().join("secret"), dir.join("SKILL.md")).expect("link");
    assert!(catalog.get("triage").expect("triage").load().is_err());
}

#[test]
fn a_folder_listing_is_bounded() {
    let root = tempfile::tempdir().expect("tmp");
    let dir = skill(root.path(), "many", "---\nname: many\n---\n");
    for i in 0..MAX_SKILL_FILES + 5 {
        fs::write(dir.join(format!("f{i:04}")), "").expect("write");
    }
    let (catalog, _) = SkillCatalog::load(&[root.path().into()]);
    let loaded = catalog.get("many").expect("many").load().expect("loads");
    assert_eq!(loaded.files.len(), MAX_SKILL_FILES);
    assert!(loaded.files_truncated);
}
