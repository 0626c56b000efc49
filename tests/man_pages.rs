//! `holarchy man --out DIR` writes a manual page per subcommand, each
//! with the command's own description.

use std::process::Command;

#[tokio::test]
async fn man_writes_a_page_per_subcommand_with_its_about_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("man1");
    let ran = Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .args(["man", "--out"])
        .arg(&out)
        .output()
        .expect("holarchy runs");
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let listed = String::from_utf8_lossy(&ran.stdout);
    for (page, about) in [
        ("holarchy.1", "A durable runtime for long\\-lived agents"),
        ("holarchy-serve.1", "Run the daemon in the foreground"),
        (
            "holarchy-agent.1",
            "Create, list, inspect and message agents",
        ),
        ("holarchy-agent-create.1", "Create a public named agent"),
        ("holarchy-completions.1", "Print a shell completion script"),
    ] {
        let path = out.join(page);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("{page} not written: {err}; listed:\n{listed}"));
        assert!(
            text.starts_with(".ie") || text.contains(".TH"),
            "{page} is roff"
        );
        assert!(text.contains(about), "{page} says {about:?}:\n{text}");
        assert!(listed.contains(page), "{page} is listed on stdout");
    }
    // serve's page lists its flags, the config file among them.
    let serve = std::fs::read_to_string(out.join("holarchy-serve.1")).expect("serve page");
    assert!(
        serve.contains("\\-\\-config"),
        "serve's flags are on its page"
    );
}
