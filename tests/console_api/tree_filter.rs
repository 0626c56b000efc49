//! The tree's filter on the console's API (`/api/tree?filter=`): it walks
//! past what a page has loaded, every level for the operator and the
//! roots alone without the token, a bounded stretch per request.

use serde_json::Value;

use crate::common::{create, data_dir, free_addr, Daemon};
use crate::ids;
use crate::support::{http, private_subtree};

/// The tree's filter reaches what a page has not loaded: the operator's
/// walk every level, a caller without the token the roots alone; a stretch
/// with no match answers where the walk stopped, and a bad filter is
/// refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trees_filter_walks_past_what_was_loaded() {
    let root = tempfile::tempdir().expect("tempdir");
    let addr = free_addr();
    let daemon = Daemon::start_with(
        &data_dir(&root),
        &["--http-listen", &addr, "--console-public-read"],
    )
    .await;
    let token = daemon.token();
    let op = Some(token.as_str());
    let mut c = daemon.clients().await;
    let tree = private_subtree(&mut c, "lead").await;
    for i in 0..4 {
        create(&mut c, &format!("filler-{i}"), None).await;
    }
    let straggler = create(&mut c, "straggler", None).await;
    let found = |answer: &Value| ids(&answer["nodes"]);

    // A root after a page of one: walked on to, found, named.
    let path = "/api/tree?filter=STRAGGLER&limit=1";
    for caller in [None, op] {
        let answer = http(&addr, "GET", path, caller).await.json();
        assert_eq!(found(&answer), vec![straggler.clone()], "{answer}");
        assert_eq!(answer["nodes"][0]["name"], "straggler");
        assert_eq!(answer["whole_tree"], caller.is_some());
    }
    // A private agent two levels down: the operator's walk finds it, with
    // the agent it hangs under; without the token, the roots alone are
    // walked, to their end.
    let deep = &tree.private[1];
    let path = format!("/api/tree?filter={deep}");
    let answer = http(&addr, "GET", &path, op).await.json();
    assert_eq!(found(&answer), vec![deep.clone()], "{answer}");
    assert_eq!(answer["nodes"][0]["parent"], tree.private[0].as_str());
    let anonymous = http(&addr, "GET", &path, None).await.json();
    assert!(found(&anonymous).is_empty(), "{anonymous}");
    assert_eq!(anonymous["next"], "", "{anonymous}");
    // Every word must match: a state and a name together.
    let answer = http(&addr, "GET", "/api/tree?filter=active+filler-2", op)
        .await
        .json();
    assert_eq!(found(&answer).len(), 1, "{answer}");
    let answer = http(&addr, "GET", "/api/tree?filter=paused+filler-2", op)
        .await
        .json();
    assert!(found(&answer).is_empty(), "{answer}");
    // A page that holds no match ends the request only at the walk's end
    // or its budget; a match stops it, with where to go on from.
    let answer = http(&addr, "GET", "/api/tree?filter=filler&limit=1", op)
        .await
        .json();
    assert_eq!(found(&answer).len(), 1, "{answer}");
    assert_ne!(answer["next"], "", "the walk goes on: {answer}");
    let next = answer["next"].as_str().expect("a token").to_owned();
    let again = http(
        &addr,
        "GET",
        &format!("/api/tree?filter=filler&limit=1&page={next}"),
        op,
    )
    .await
    .json();
    assert_eq!(found(&again).len(), 1, "{again}");
    assert_ne!(found(&again), found(&answer), "the next match");

    for bad in [
        "/api/tree?filter=+".to_owned(),
        format!("/api/tree?filter={}", "x".repeat(65)),
        "/api/tree?filter=a+b+c+d+e+f+g+h+i".to_owned(),
    ] {
        assert_eq!(http(&addr, "GET", &bad, op).await.status, 400, "{bad}");
    }
}
