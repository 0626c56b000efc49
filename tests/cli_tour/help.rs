//! Help that teaches: each command's own flags apart from the global
//! client flags, `serve`'s flags by topic, and completion scripts for
//! bash, zsh and fish generated from the same command line.

use crate::cli::Holarchy;

/// The lines of a help text's section, from its heading to the next.
fn section<'a>(help: &'a str, heading: &str) -> Vec<&'a str> {
    help.lines()
        .skip_while(|l| *l != heading)
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect()
}

#[tokio::test]
async fn global_flags_have_their_own_heading_and_serve_groups_its_flags() {
    let cli = Holarchy::default();
    let send = cli.ok(&["agent", "send", "--help"]);
    let own = section(&send, "Options:");
    assert!(own.iter().any(|l| l.contains("--dedupe-key")), "{send}");
    assert!(!own.iter().any(|l| l.contains("--addr")), "{send}");
    let global = section(&send, "Global options:");
    assert!(global.iter().any(|l| l.contains("--addr")), "{send}");

    let serve = cli.ok(&["serve", "--help"]);
    for (heading, flag) in [
        ("Network:", "--listen"),
        ("Network:", "--max-connections"),
        ("Brains:", "--brain-command"),
        ("Brains:", "--mcp-config"),
        ("Limits:", "--max-agents"),
        ("Sandbox:", "--task-wall-time"),
        ("Storage:", "--store-cache-mib"),
        ("Observability:", "--otlp-endpoint"),
    ] {
        assert!(
            section(&serve, heading).iter().any(|l| l.contains(flag)),
            "{flag} under {heading}:\n{serve}"
        );
    }
}

#[tokio::test]
async fn completions_are_printed_for_bash_zsh_and_fish() {
    let cli = Holarchy::default();
    for (shell, marker) in [
        ("bash", "_holarchy()"),
        ("zsh", "#compdef holarchy"),
        ("fish", "complete -c holarchy"),
    ] {
        let script = cli.ok(&["completions", shell]);
        assert!(script.contains(marker), "{shell}:\n{script}");
        assert!(script.contains("agent"), "{shell} completes subcommands");
    }
    let help = cli.ok(&["completions", "--help"]);
    assert!(help.contains(".config/fish/completions"), "{help}");
    let refused = cli.fails(&["completions", "tcsh"]);
    assert!(refused.contains("invalid value"), "{refused}");
}
