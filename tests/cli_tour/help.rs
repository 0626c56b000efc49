//! Help that teaches: each command's own flags apart from the global
//! client flags (and `serve`'s without the client flags it ignores),
//! `serve`'s flags by topic, and completion scripts for
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

/// Whether a help text lists option `flag` (a line that starts with it,
/// not a mention in another option's description).
fn lists(help: &str, flag: &str) -> bool {
    help.lines()
        .any(|l| l.trim_start().split([' ', '=', ',']).next() == Some(flag))
}

/// The global flags only a client reads.
const CLIENT_ONLY: [&str; 5] = ["--socket", "--addr", "--ca", "--client-cert", "--json"];

#[tokio::test]
async fn serve_help_leaves_out_the_client_flags_that_mean_nothing_to_it() {
    let cli = Holarchy::default();
    let serve = cli.ok(&["serve", "--help"]);
    for flag in CLIENT_ONLY {
        assert!(!lists(&serve, flag), "serve --help lists {flag}:\n{serve}");
    }
    // The daemon reads these two: they stay, under their heading.
    let global = section(&serve, "Global options:").join("\n");
    for flag in ["--data-dir", "--token"] {
        assert!(
            lists(&global, flag),
            "{flag} under Global options:\n{serve}"
        );
    }
    // Hidden, not gone: serve still takes them (a shell's HOLARCHY_ADDR or
    // a `--json` in a wrapper script does not break the daemon's start).
    let taken = cli.ok(&["serve", "--addr", "127.0.0.1:1", "--json", "--help"]);
    assert!(lists(&taken, "--data-dir"), "{taken}");

    // Every client command still shows and takes them all.
    for command in [&["status"][..], &["agent", "list"], &["top"]] {
        let mut args = command.to_vec();
        args.push("--help");
        let help = cli.ok(&args);
        let global = section(&help, "Global options:").join("\n");
        for flag in CLIENT_ONLY.iter().chain(&["--data-dir", "--token"]) {
            assert!(
                lists(&global, flag),
                "{command:?} --help lists {flag}:\n{help}"
            );
        }
    }
    // Read, too: the address is tried, and the error is JSON.
    let unreachable = cli.run(&["--json", "status", "--addr", "127.0.0.1:1"]);
    assert_eq!(unreachable.status.code(), Some(3), "{}", unreachable.stderr);
    let error: serde_json::Value =
        serde_json::from_str(unreachable.stderr.trim()).expect("a JSON error");
    assert!(error.to_string().contains("127.0.0.1:1"), "{error}");
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
