//! Labels on agents: set at creation, shown by `agent get`, and picked by
//! `agent list --label` and `agent archive --label`; bad ones refused
//! with what to write.

use crate::cli::Holarchy;
use crate::common::{data_dir, Daemon};
use crate::lifecycle::names;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_pick_agents_to_list_and_to_archive() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    cli.ok(&[
        "agent", "create", "web-1", "--label", "team=web", "--label", "env=prod",
    ]);
    cli.ok(&[
        "agent", "create", "web-2", "--label", "team=web", "--label", "env=dev",
    ]);
    cli.ok(&[
        "agent",
        "create",
        "db-1",
        "--label",
        "team=data",
        "--label",
        "env=prod",
    ]);
    cli.ok(&["agent", "create", "plain"]);

    let shown = cli.ok(&["agent", "get", "web-1"]);
    assert!(shown.contains("labels       env=prod, team=web"), "{shown}");
    assert_eq!(names(&cli, &["--label", "team=web"]), ["web-1", "web-2"]);
    assert_eq!(
        names(&cli, &["--label", "env=prod", "--label", "team=web"]),
        ["web-1"]
    );
    assert_eq!(names(&cli, &["--label", "env=prod"]), ["web-1", "db-1"]);

    let archived = cli.json(&["agent", "archive", "--label", "env=prod"]);
    assert_eq!(archived.len(), 2, "{archived:?}");
    assert_eq!(names(&cli, &[]), ["web-2", "plain"]);

    // A bad label is refused before anything is made, saying what to write.
    let refused = cli.run(&["agent", "create", "x", "--label", "Team=web"]);
    assert_eq!(refused.status.code(), Some(2), "{}", refused.stderr);
    assert!(refused.stderr.contains("label key"), "{}", refused.stderr);
    let refused = cli.run(&["agent", "create", "x", "--label", "teamweb"]);
    assert!(refused.stderr.contains("key=value"), "{}", refused.stderr);
    assert_eq!(names(&cli, &[]), ["web-2", "plain"]);
}
