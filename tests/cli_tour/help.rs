//! Help that teaches: each command's own flags apart from the global
//! client flags, `serve`'s flags by topic, and completion scripts for
//! bash, zsh and fish generated from the same command line; every command
//! and argument described.

use clap::CommandFactory;
use holarchy::cli::Cli;

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

    for command in [
        "serve",
        "agent",
        "events",
        "bench",
        "tree",
        "task",
        "instance",
        "memory",
        "workspace",
        "token",
        "audit",
        "status",
        "top",
    ] {
        let help = cli.ok(&[command, "--help"]);
        assert!(
            help.contains("Examples") && help.contains(&format!("holarchy {command}")),
            "{command} --help has examples:\n{help}"
        );
    }

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

/// Every argument and command of `command` and below without a
/// description, as `holarchy agent send agent`.
fn undescribed(command: &clap::Command, path: &str, found: &mut Vec<String>) {
    for arg in command.get_arguments() {
        let builtin = matches!(arg.get_id().as_str(), "help" | "version");
        if !arg.is_hide_set() && !builtin && arg.get_help().is_none() {
            found.push(format!("{path} {}", arg.get_id()));
        }
    }
    for sub in command.get_subcommands() {
        let path = format!("{path} {}", sub.get_name());
        if sub.get_about().is_none() && sub.get_name() != "help" {
            found.push(format!("{path} (the command)"));
        }
        undescribed(sub, &path, found);
    }
}

#[tokio::test]
async fn every_command_and_argument_is_described() {
    let mut found = Vec::new();
    undescribed(&Cli::command(), "holarchy", &mut found);
    assert!(found.is_empty(), "no description:\n{}", found.join("\n"));
}
