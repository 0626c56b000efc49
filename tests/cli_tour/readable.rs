//! Tables people read: names first, columns as wide as their content, ids
//! cut to the tail that tells them apart and taken back by any part only
//! one agent's id has (its start or that tail), as git and docker take
//! them; ages instead of epochs. `--json` keeps every id whole.

use crate::cli::{text, Holarchy};
use crate::common::{data_dir, Daemon};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_put_names_first_and_short_ids_name_one_agent() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let cli = Holarchy::data_dir(&daemon.data_dir);
    let long = "a-name-longer-than-any-column-used-to-be";
    for name in ["ops", long, "builder"] {
        cli.ok(&["agent", "create", name]);
    }

    let table = cli.ok(&["agent", "list"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 4, "{table}");
    assert!(lines[0].starts_with("NAME "), "names first: {table}");
    // Columns sized to content: every row's ID column starts where the
    // header's does, after the longest name.
    let id_at = lines[0].find("ID").expect("an ID column");
    assert!(id_at > long.len(), "{table}");
    for line in &lines[1..] {
        assert_ne!(line.as_bytes()[id_at], b' ', "aligned: {table}");
        assert_eq!(line.as_bytes()[id_at - 1], b' ', "aligned: {table}");
    }
    assert!(table.contains(" ago"), "ages, not epochs: {table}");

    let ops = cli.json_one(&["agent", "get", "ops"]);
    let id = text(&ops, "agent_id").to_owned();
    let row = lines
        .iter()
        .find(|l| l.starts_with("ops "))
        .expect("ops row");
    let short = row.split_whitespace().nth(1).expect("a short id");
    assert!(
        id.ends_with(short) && short.len() < id.len(),
        "{short} of {id}"
    );

    // The short id, a unique start, and the whole id all name ops.
    for part in [
        short.to_owned(),
        short.to_lowercase(),
        id[..id.len() - 2].to_owned(),
        id.clone(),
    ] {
        let got = cli.json_one(&["agent", "get", &part]);
        assert_eq!(text(&got, "agent_id"), id, "`{part}` names ops");
    }
    cli.ok(&["agent", "pause", short]);
    assert_eq!(
        text(&cli.json_one(&["agent", "get", "ops"]), "state"),
        "paused"
    );

    // Agents created together share their ids' start: it names no one.
    let ambiguous = cli.run(&["agent", "get", &id[..12]]);
    assert_eq!(ambiguous.status.code(), Some(6), "{}", ambiguous.stderr);
    assert!(
        ambiguous.stderr.contains("give more of the id"),
        "{}",
        ambiguous.stderr
    );
    for name in ["(ops)", "(builder)"] {
        assert!(
            ambiguous.stderr.contains(name),
            "candidates listed: {}",
            ambiguous.stderr
        );
    }
    let nobody = cli.run(&["agent", "get", "ZZZZZZZZ"]);
    assert_eq!(nobody.status.code(), Some(4), "{}", nobody.stderr);

    // Scripts still get every id whole.
    let listed = cli.json(&["agent", "list"]);
    assert!(listed.iter().any(|a| text(a, "agent_id") == id));
}
