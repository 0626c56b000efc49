//! `agent list` as `docker ps` lists containers: archived agents hidden
//! unless `--all` (or `--state archived`), and `--state`, `--name` and
//! `--instance` narrowing the list; `agent archive` in bulk by name prefix
//! or instance; and a load test that cleans up after itself.

use crate::cli::{last_word, Holarchy};
use crate::common::{data_dir, Daemon};

/// The names `agent list` shows with `args`, in its order.
pub(crate) fn names(cli: &Holarchy, args: &[&str]) -> Vec<String> {
    let mut list = vec!["agent", "list"];
    list.extend_from_slice(args);
    cli.json(&list)
        .iter()
        .map(|a| a["name"].as_str().expect("a name").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_list_hides_archived_agents_unless_asked_and_filters_by_state_and_name() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    for name in ["build-1", "build-2", "ops"] {
        cli.ok(&["agent", "create", name]);
    }
    let old = last_word(&cli.ok(&["agent", "create", "old"]));
    cli.ok(&["agent", "archive", "old"]);
    cli.ok(&["agent", "pause", "build-2"]);

    assert_eq!(names(&cli, &[]), ["build-1", "build-2", "ops"]);
    assert_eq!(
        names(&cli, &["--all"]),
        ["build-1", "build-2", "ops", "old"]
    );
    assert_eq!(names(&cli, &["-a"]).len(), 4);
    assert_eq!(names(&cli, &["--state", "archived"]), ["old"]);
    assert_eq!(names(&cli, &["--state", "paused"]), ["build-2"]);
    assert_eq!(
        names(&cli, &["--state", "active", "--state", "paused"]),
        ["build-1", "build-2", "ops"]
    );
    assert_eq!(names(&cli, &["--name", "build-"]), ["build-1", "build-2"]);
    assert!(names(&cli, &["--instance", "none-such"]).is_empty());

    // People are told what is hidden, on stderr; stdout stays the table.
    let human = cli.run(&["agent", "list"]);
    assert!(human.status.success(), "{}", human.stderr);
    assert!(
        !human.stdout.lines().any(|l| l.starts_with("old ")) && !old.is_empty(),
        "{}",
        human.stdout
    );
    assert!(
        human.stderr.contains("1 archived agent(s) not shown"),
        "{}",
        human.stderr
    );
    // Fewer rows per call than agents: pages are read until a page's
    // worth is shown, archived ones skipped.
    let paged = names(&cli, &["--page-size", "1", "--all"]);
    assert_eq!(paged.len(), 4, "{paged:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bench_says_what_it_left_and_cleanup_archives_it() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    cli.ok(&["agent", "create", "mine"]);

    let left = cli.run(&["bench", "idle", "--agents", "5", "--samples", "5"]);
    assert!(left.status.success(), "{}", left.stderr);
    assert!(
        left.stderr.contains("this run left 5 agent(s)") && left.stderr.contains("--cleanup"),
        "{}",
        left.stderr
    );
    assert_eq!(names(&cli, &[]).len(), 6);

    let cleaned = cli.run(&[
        "bench",
        "idle",
        "--agents",
        "5",
        "--samples",
        "5",
        "--tree",
        "1",
        "--cleanup",
    ]);
    assert!(cleaned.status.success(), "{}", cleaned.stderr);
    assert!(
        cleaned.stderr.contains("archived the 5 agent(s)"),
        "{}",
        cleaned.stderr
    );
    // The first run's five stay; the second's are archived, children too.
    assert_eq!(names(&cli, &[]).len(), 6);
    let private = cli.json(&["agent", "list", "--include-private", "--state", "active"]);
    assert_eq!(private.len(), 6, "no live child left: {private:?}");

    let turns = cli.run(&[
        "bench",
        "turns",
        "--agents",
        "3",
        "--messages",
        "9",
        "--concurrency",
        "3",
        "--cleanup",
    ]);
    assert!(turns.status.success(), "{}", turns.stderr);
    assert_eq!(names(&cli, &[]).len(), 6, "bench turns cleaned up too");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_are_archived_in_bulk_by_name_prefix() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    for name in ["build-1", "build-2", "build-3", "ops"] {
        cli.ok(&["agent", "create", name]);
    }
    cli.ok(&["agent", "archive", "build-3"]);

    let archived = cli.json(&["agent", "archive", "--name", "build-"]);
    assert_eq!(archived.len(), 2, "the live ones only: {archived:?}");
    assert_eq!(names(&cli, &[]), ["ops"]);
    assert_eq!(
        names(&cli, &["--state", "archived"]),
        ["build-1", "build-2", "build-3"]
    );

    // Naming nothing, or both names and a selector, is a usage error.
    assert_eq!(cli.run(&["agent", "archive"]).status.code(), Some(2));
    let both = cli.run(&["agent", "archive", "ops", "--name", "b"]);
    assert_eq!(both.status.code(), Some(2), "{}", both.stderr);
    assert_eq!(names(&cli, &[]), ["ops"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_are_archived_in_bulk_by_instance_with_their_private_children() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    for name in ["triage", "docs"] {
        let manifest = root.path().join(format!("{name}.toml"));
        std::fs::write(
            &manifest,
            format!("name = \"{name}\"\n\n[brain.scripted]\n"),
        )
        .expect("manifest");
        cli.ok(&["instance", "apply", manifest.to_str().expect("UTF-8")]);
    }
    cli.ok(&["agent", "create", "bystander"]);
    // triage's agent leads a private child: of the instance too.
    let spawn = r#"{"tool_calls":[{"name":"SpawnAgent","input":{"preset":"private_delegator","initial_message":"sort the backlog"}}]}"#;
    cli.ok(&["agent", "send", "triage", spawn]);
    let of_triage = |args: &[&str]| {
        let mut list = vec!["agent", "list", "--include-private", "--instance", "triage"];
        list.extend_from_slice(args);
        cli.json(&list)
    };
    crate::cli::until("triage's child", || {
        (of_triage(&[]).len() == 2).then_some(())
    });

    let run = cli.run(&["agent", "archive", "--instance", "triage"]);
    assert!(run.status.success(), "{}", run.stderr);
    assert!(
        run.stderr.contains("1 live agent(s) selected"),
        "the instance's one public agent: {}",
        run.stderr
    );
    assert!(
        run.stdout.contains(": 2 agents"),
        "with its private child: {}",
        run.stdout
    );
    let mut live = names(&cli, &[]);
    live.sort();
    assert_eq!(live, ["bystander", "docs"]);
    assert!(
        of_triage(&["--state", "active"]).is_empty(),
        "no live child left"
    );
    assert_eq!(
        names(&cli, &["--state", "archived", "--instance", "triage"]),
        ["triage"]
    );
    // The instance itself stays (`instance delete` removes it), as does
    // the other one.
    assert_eq!(cli.json(&["instance", "list"]).len(), 2);

    // Nothing of the instance is live now: a second run archives nothing.
    let again = cli.json(&["agent", "archive", "--instance", "triage"]);
    assert!(again.is_empty(), "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tree_counts_every_page_it_joins() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    // More roots than one page of the tree holds (5,000 nodes).
    let agents = "5003";
    cli.ok(&["bench", "idle", "--agents", agents, "--samples", "2"]);
    let tree = cli.ok(&["tree", "--depth", "0"]);
    let summary = tree
        .lines()
        .find(|l| l.contains(" agents, "))
        .unwrap_or_else(|| panic!("no counts in the tree's last lines"));
    assert!(
        summary.starts_with(&format!("{agents} agents, 0 tasks")),
        "{summary}"
    );
    // Drawn, a thousand of them by default; the rest are counted.
    let drawn = tree.lines().filter(|l| l.starts_with("agent ")).count();
    assert_eq!(drawn, 1000);
    assert!(
        tree.contains("\n... 4003 more (--limit 0 draws them all)\n"),
        "{summary}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_purges_an_archived_agent_and_its_private_children_and_frees_its_name() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    let ops = last_word(&cli.ok(&["agent", "create", "ops"]));
    let spawn = r#"{"tool_calls":[{"name":"SpawnAgent","input":{"preset":"private_delegator","initial_message":"lead the audit"}}]}"#;
    cli.ok(&["agent", "send", "ops", spawn]);
    let child = crate::cli::until("ops's child", || {
        cli.json(&["agent", "list", "--include-private"])
            .iter()
            .find(|a| a["supervisor_agent_id"] == ops.as_str())
            .map(|a| a["agent_id"].as_str().expect("an id").to_owned())
    });
    cli.ok(&["agent", "create", "bystander"]);

    // Only an archived agent can be deleted.
    let live = cli.run(&["agent", "delete", "ops"]);
    assert_eq!(live.status.code(), Some(7), "{}", live.stderr);
    assert!(live.stderr.contains("archive it first"), "{}", live.stderr);

    cli.ok(&["agent", "archive", "ops"]);
    let deleted = cli.json_one(&["agent", "delete", "ops"]);
    assert_eq!(deleted["agent_id"], ops.as_str());
    assert_eq!(deleted["agents"], 2, "ops and its private child");
    for gone in [&ops, &child] {
        assert_eq!(cli.run(&["agent", "get", gone]).status.code(), Some(4));
    }
    let everyone = cli.json(&["agent", "list", "--all", "--include-private"]);
    assert_eq!(everyone.len(), 1, "only the bystander: {everyone:?}");

    // The name is free again, and a restart recovers what is left.
    let again = last_word(&cli.ok(&["agent", "create", "ops"]));
    assert_ne!(again, ops);
    daemon.terminate(std::time::Duration::from_secs(20)).await;
    let daemon = Daemon::start(&daemon.data_dir.clone()).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    assert_eq!(names(&cli, &["--all"]), ["bystander", "ops"]);
    assert_eq!(
        cli.json_one(&["agent", "get", "ops"])["agent_id"],
        again.as_str()
    );
    assert_eq!(cli.run(&["agent", "get", &ops]).status.code(), Some(4));
    let events = cli.ok(&["events", "--agent", &ops]);
    assert!(events.contains("deleted"), "its history stays: {events}");
}
