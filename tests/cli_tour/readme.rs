//! Keeps the README's commands and these tests in step: every `holarchy`
//! command of the tour's shell blocks (and every inline `holarchy ...` in
//! the README) must parse with the real command line, and its shape
//! (subcommands and flags) must be in [`COVERED`], which names the test
//! that runs it. A new or changed command in the README fails here until a
//! test covers it; a row the README no longer shows fails too.

use std::collections::BTreeSet;

use clap::{CommandFactory, Parser};
use holarchy::cli::Cli;

/// The README sections whose shell blocks are the tour.
const TOUR_SECTIONS: [&str; 3] = [
    "A five-minute tour",
    "Run an agent on your own program",
    "Compose an instance",
];

/// Each command shape the README shows, and the test (module::function)
/// that runs it through the binary.
const COVERED: &[(&str, &str)] = &[
    (
        "replay start --role-file --wait",
        "replay::an_operator_replays_an_agents_turns_through_a_candidate",
    ),
    (
        "replay show",
        "replay::an_operator_replays_an_agents_turns_through_a_candidate",
    ),
    (
        "memory search",
        "memory::an_operator_searches_and_lists_what_an_agent_wrote",
    ),
    (
        "memory list",
        "memory::an_operator_searches_and_lists_what_an_agent_wrote",
    ),
    (
        "agent create --message",
        "ops::ops_takes_messages_once_and_reports_them",
    ),
    (
        "agent send",
        "ops::ops_takes_messages_once_and_reports_them",
    ),
    (
        "agent send --dedupe-key",
        "ops::ops_takes_messages_once_and_reports_them",
    ),
    (
        "agent messages",
        "ops::ops_takes_messages_once_and_reports_them",
    ),
    ("agent get", "ops::ops_takes_messages_once_and_reports_them"),
    (
        "agent list",
        "ops::ops_takes_messages_once_and_reports_them",
    ),
    (
        "agent list --json",
        "ops::ops_takes_messages_once_and_reports_them",
    ),
    ("events", "ops::ops_takes_messages_once_and_reports_them"),
    ("status", "ops::ops_takes_messages_once_and_reports_them"),
    (
        "bench idle --agents --data-dir",
        "connect::bench_idle_loads_a_running_daemon_and_reports_its_figures",
    ),
    (
        "bench idle --agents --data-dir --restart --tree",
        "connect::bench_idle_loads_a_running_daemon_and_reports_its_figures",
    ),
    (
        "bench turns --agents --concurrency --data-dir --messages",
        "turns_under_load::bench_turns_sees_every_turn_handled_and_reports_its_cost",
    ),
    (
        "completions",
        "help::completions_are_printed_for_bash_zsh_and_fish",
    ),
    (
        "serve --data-dir",
        "tour::the_readme_tour_runs_top_to_bottom_on_one_daemon",
    ),
    (
        "agent delete",
        "lifecycle::delete_purges_an_archived_agent_and_its_private_children_and_frees_its_name",
    ),
    (
        "agent list --all",
        "lifecycle::agent_list_hides_archived_agents_unless_asked_and_filters_by_state_and_name",
    ),
    (
        "tree",
        "ops::ops_supervises_private_children_through_task_handles",
    ),
    (
        "task list",
        "ops::ops_supervises_private_children_through_task_handles",
    ),
    (
        "task input",
        "ops::ops_supervises_private_children_through_task_handles",
    ),
    (
        "task stop",
        "ops::ops_supervises_private_children_through_task_handles",
    ),
    (
        "agent archive",
        "ops::ops_supervises_private_children_through_task_handles",
    ),
    (
        "agent create",
        "builder::builder_streams_a_command_while_it_runs",
    ),
    (
        "task output --follow",
        "builder::builder_streams_a_command_while_it_runs",
    ),
    (
        "work list",
        "builder::builder_shows_its_work_item_and_timer_and_obeys_pause_resume_abort",
    ),
    (
        "agent pause",
        "builder::builder_shows_its_work_item_and_timer_and_obeys_pause_resume_abort",
    ),
    (
        "agent resume",
        "builder::builder_shows_its_work_item_and_timer_and_obeys_pause_resume_abort",
    ),
    (
        "trigger --dedupe-key",
        "builder::a_trigger_from_the_cli_wakes_its_agent_once_per_key",
    ),
    (
        "workspace attach --id",
        "workspaces::builder_works_in_an_attached_project_and_a_worktree_child",
    ),
    (
        "workspace list",
        "workspaces::builder_works_in_an_attached_project_and_a_worktree_child",
    ),
    (
        "agent create --brain-arg --brain-command",
        "brains::agents_run_on_the_default_program_their_own_or_the_scripted_brain",
    ),
    (
        "agent brain --brain-scripted",
        "brains::agents_run_on_the_default_program_their_own_or_the_scripted_brain",
    ),
    (
        "tools",
        "brains::agents_run_on_the_default_program_their_own_or_the_scripted_brain",
    ),
    (
        "instance apply",
        "instances::an_operator_applies_lists_reads_and_deletes_an_instance",
    ),
    (
        "instance list",
        "instances::an_operator_applies_lists_reads_and_deletes_an_instance",
    ),
    (
        "instance get",
        "instances::an_operator_applies_lists_reads_and_deletes_an_instance",
    ),
    (
        "instance delete",
        "instances::an_operator_applies_lists_reads_and_deletes_an_instance",
    ),
    (
        "approvals",
        "approvals::an_operator_lists_approves_and_denies_parked_calls",
    ),
    (
        "approvals show",
        "approvals::a_padded_call_is_shown_whole_and_runs_where_it_was_parked",
    ),
    (
        "approve",
        "approvals::an_operator_lists_approves_and_denies_parked_calls",
    ),
    (
        "deny --reason",
        "approvals::an_operator_lists_approves_and_denies_parked_calls",
    ),
    (
        "serve --skills-dir",
        "instances::an_operator_applies_lists_reads_and_deletes_an_instance",
    ),
    (
        "serve --brain-command",
        "brains::agents_run_on_the_default_program_their_own_or_the_scripted_brain",
    ),
    (
        "instance publish --dedupe-key --payload --type",
        "events::instance_publish_delivers_an_event_once_and_only_where_it_is_taken",
    ),
    (
        "export --since",
        "export::export_writes_every_event_decision_and_action_once_and_resumes_from_its_cursor",
    ),
    (
        "serve --config",
        "config_file::config_file_sets_the_listeners_and_a_flag_overrides_its_key",
    ),
    (
        "serve --print-config",
        "config_file::print_config_shows_the_merged_settings_and_reads_back_unchanged",
    ),
    (
        "man --out",
        "man_pages::man_writes_a_page_per_subcommand_with_its_about_text",
    ),
    (
        "store copy --from --to",
        "store_copy::a_copied_store_serves_the_same_agents_messages_events_and_notes_from_postgres",
    ),
    (
        "top",
        "top::top_shows_busy_agents_long_queues_tasks_and_waits_over_the_socket_and_tcp",
    ),
];

/// The sources of this test's modules, to check that each named test is
/// there.
const MODULES: &[(&str, &str)] = &[
    ("ops", include_str!("ops.rs")),
    ("builder", include_str!("builder.rs")),
    ("workspaces", include_str!("workspaces.rs")),
    ("approvals", include_str!("approvals.rs")),
    ("memory", include_str!("memory.rs")),
    ("brains", include_str!("brains.rs")),
    ("events", include_str!("events.rs")),
    ("export", include_str!("export.rs")),
    ("instances", include_str!("instances.rs")),
    ("connect", include_str!("connect.rs")),
    ("instances", include_str!("instances.rs")),
    ("turns_under_load", include_str!("../turns_under_load.rs")),
    ("top", include_str!("../top.rs")),
    ("config_file", include_str!("../config_file.rs")),
    ("man_pages", include_str!("../man_pages.rs")),
    ("store_copy", include_str!("../store_copy.rs")),
    ("tour", include_str!("tour.rs")),
    ("help", include_str!("help.rs")),
    ("lifecycle", include_str!("lifecycle.rs")),
    ("replay", include_str!("replay.rs")),
];

#[test]
fn every_command_in_the_readme_parses_and_has_a_test() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let commands = readme_commands(&readme);
    assert!(commands.len() >= 30, "the tour was found: {commands:?}");

    let mut shown = BTreeSet::new();
    let mut uncovered = Vec::new();
    for words in &commands {
        if let Err(err) = Cli::try_parse_from(words) {
            panic!("the README's `{}` does not parse:\n{err}", words.join(" "));
        }
        let shape = shape(words);
        if !COVERED.iter().any(|(covered, _)| *covered == shape) {
            uncovered.push(format!("{shape:?} (from `{}`)", words.join(" ")));
        }
        shown.insert(shape);
    }
    assert!(
        uncovered.is_empty(),
        "README commands no test here runs; add them to COVERED with their test:\n{}",
        uncovered.join("\n")
    );
    let stale: Vec<&str> = COVERED
        .iter()
        .map(|(covered, _)| *covered)
        .filter(|covered| !shown.contains(*covered))
        .collect();
    assert!(
        stale.is_empty(),
        "COVERED rows the README no longer shows: {stale:?}"
    );

    for (_, test) in COVERED {
        let (module, function) = test.split_once("::").expect("module::function");
        let source = MODULES
            .iter()
            .find(|(name, _)| *name == module)
            .unwrap_or_else(|| panic!("no module {module}"))
            .1;
        assert!(
            source.contains(&format!("async fn {function}(")),
            "no test {test}"
        );
    }
}

/// A command's shape: its subcommands, then its flags (sorted, values
/// left out), e.g. `agent send --dedupe-key`.
fn shape(words: &[String]) -> String {
    let mut command = Cli::command();
    let mut path = Vec::new();
    let mut flags = BTreeSet::new();
    for word in &words[1..] {
        if let Some(flag) = word.strip_prefix("--") {
            flags.insert(format!("--{}", flag.split('=').next().unwrap_or(flag)));
        } else if let Some(sub) = command.find_subcommand(word).cloned() {
            path.push(word.clone());
            command = sub;
        }
    }
    path.extend(flags);
    path.join(" ")
}

/// The commands of the five-minute tour's shell block, in order, as the
/// shell would split them (`tour` runs them).
pub fn tour_commands(readme: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut section = "";
    let mut in_block = false;
    for line in readme.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            section = heading.trim();
        }
        if line.starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block && section == TOUR_SECTIONS[0] {
            commands.extend(shell_words(line));
        }
    }
    commands.retain(|words| words.first().is_some_and(|w| w == "holarchy"));
    commands
}

/// Every `holarchy` command of the tour's shell blocks, and of inline code
/// anywhere in the README, as the shell would split it into words.
fn readme_commands(readme: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut section = "";
    // Inside a fenced block: whether it is a shell block.
    let mut block: Option<bool> = None;
    for line in readme.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            section = heading.trim();
        }
        if let Some(language) = line.strip_prefix("```") {
            block = match block {
                Some(_) => None,
                None => Some(language.trim() == "sh"),
            };
            continue;
        }
        if block == Some(true) && TOUR_SECTIONS.contains(&section) {
            commands.extend(shell_words(line));
        } else if block.is_none() {
            for (i, span) in line.split('`').enumerate() {
                if i % 2 == 1 && span.starts_with("holarchy ") {
                    commands.extend(shell_words(span));
                }
            }
        }
    }
    commands.retain(|words| words.first().is_some_and(|w| w == "holarchy"));
    commands
}

/// Splits a shell line into commands (at `;`) and words, with single and
/// double quotes and `#` comments, as far as the README's lines need.
fn shell_words(line: &str) -> Vec<Vec<String>> {
    let mut commands = vec![Vec::new()];
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                let text = word.get_or_insert_with(String::new);
                for quoted in chars.by_ref() {
                    if quoted == c {
                        break;
                    }
                    text.push(quoted);
                }
            }
            '#' if word.is_none() => break,
            // `cmd &` runs in the background: for the tour, the same
            // command.
            ';' | '&' | ' ' | '\t' => {
                if let Some(done) = word.take() {
                    commands.last_mut().expect("a command").push(done);
                }
                if c == ';' || c == '&' {
                    commands.push(Vec::new());
                }
            }
            _ => word.get_or_insert_with(String::new).push(c),
        }
    }
    if let Some(done) = word {
        commands.last_mut().expect("a command").push(done);
    }
    commands.retain(|words| !words.is_empty());
    commands
}

#[test]
fn the_tour_reader_splits_lines_as_the_shell_does() {
    let words = |line: &str| shell_words(line);
    assert_eq!(
        words(r#"holarchy agent send ops "pay once" --dedupe-key k   # safe to retry"#),
        [[
            "holarchy",
            "agent",
            "send",
            "ops",
            "pay once",
            "--dedupe-key",
            "k"
        ]]
    );
    assert_eq!(
        words(r#"holarchy agent send b '{"a":"x # y"}'; holarchy agent resume b"#),
        [
            vec!["holarchy", "agent", "send", "b", r#"{"a":"x # y"}"#],
            vec!["holarchy", "agent", "resume", "b"]
        ]
    );
    assert_eq!(
        words("holarchy serve --data-dir /tmp/b &"),
        [["holarchy", "serve", "--data-dir", "/tmp/b"]]
    );
    let parsed = |line: &str| {
        shape(
            &shell_words(line)[0]
                .iter()
                .map(|w| w.to_string())
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(parsed("holarchy --json agent list"), "agent list --json");
    assert_eq!(
        parsed("holarchy task output TASK_ID --follow"),
        "task output --follow"
    );
}
