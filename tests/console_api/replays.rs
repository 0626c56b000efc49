//! The replays on the console's API (`/api/replays`, `/api/replays/ID`):
//! the token's only, a page of turns at a time, each turn's recorded
//! side beside the candidate's, and a replay of another namespace answered
//! as one that does not exist.

use std::time::Duration;

use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::{json, Value};

use crate::common::{self, create, data_dir, free_addr, send, Daemon};
use crate::support::http;

/// A replay id nobody has.
const NOBODY: &str = "rpl_01KQ8Z3V5W0000000000000000";

/// Waits for the replay to stop running.
async fn ended(c: &Clients, id: &str) -> pb::Replay {
    common::eventually_within("the replay ended", Duration::from_secs(120), || {
        let mut c = c.clone();
        let id = id.to_owned();
        async move {
            let replay = c
                .replays
                .get_replay(pb::GetReplayRequest {
                    replay_id: id,
                    ..Default::default()
                })
                .await
                .expect("replay read")
                .into_inner()
                .replay?;
            (replay.status != "running").then_some(replay)
        }
    })
    .await
}

fn turns(answer: &Value) -> &Vec<Value> {
    answer["turns"].as_array().expect("turns")
}

/// Three scripted turns replayed against the agent itself: listed and
/// shown with the token only, no turn differing, every turn with
/// `all=1`, both sides line by line, a page at a time; bad input and an
/// unknown id refused, and another namespace shown nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_lists_replays_and_shows_each_turns_two_sides() {
    let root = tempfile::tempdir().expect("tempdir");
    let addr = free_addr();
    let daemon = Daemon::start_with(&data_dir(&root), &["--http-listen", &addr]).await;
    let token = daemon.token();
    let op = Some(token.as_str());
    let mut c = daemon.clients().await;
    let agent = create(&mut c, "recorded", None).await;
    let turn = json!({
        "reply": "hi",
        "tool_calls": [{ "name": "MemoryWrite", "input": { "key": "k", "text": "x" } }],
    })
    .to_string();
    for _ in 0..3 {
        send(&mut c, &agent, &turn).await;
    }
    common::handled(&c, &agent, 3).await;
    let started = c
        .replays
        .start_replay(pb::StartReplayRequest {
            agent_id: agent.clone(),
            ..Default::default()
        })
        .await
        .expect("replay started")
        .into_inner();
    let id = started.replay_id;
    let replay = ended(&c, &id).await;
    assert_eq!(replay.status, "completed", "{replay:?}");
    assert_eq!((replay.selected, replay.same), (3, 3), "{replay:?}");

    // The page has its script, and a way to the replays.
    let page = http(&addr, "GET", "/", None).await;
    assert!(page.body.contains("/console/replays.js"), "{}", page.body);
    assert!(page.body.contains("href=\"#/replays\""), "{}", page.body);
    let script = http(&addr, "GET", "/console/replays.js", None).await;
    assert_eq!(script.status, 200);
    assert!(script.header("content-type").starts_with("text/javascript"));

    // Without the token, neither the list nor the replay.
    let one = format!("/api/replays/{id}");
    for path in ["/api/replays", one.as_str()] {
        let refused = http(&addr, "GET", path, None).await;
        assert_eq!(refused.status, 401, "{path}: {}", refused.body);
        assert!(!refused.body.contains(&agent), "{}", refused.body);
    }

    // The list: counts, candidate, the agent by name.
    let listed = http(&addr, "GET", "/api/replays", op).await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let listed = listed.json();
    let replays = listed["replays"].as_array().expect("replays");
    assert_eq!(replays.len(), 1, "{listed}");
    let shown = &replays[0];
    assert_eq!(shown["replay_id"], id.as_str());
    assert_eq!(shown["agent_id"], agent.as_str());
    assert_eq!(shown["agent_name"], "recorded");
    assert_eq!(shown["status"], "completed");
    assert_eq!(
        (&shown["replayed"], &shown["selected"]),
        (&json!(3), &json!(3))
    );
    assert_eq!(shown["same"], 3);
    assert_eq!(shown["different_tools"], 0);
    assert_eq!(shown["reason"], "");
    assert!(
        shown["candidate"].as_str().is_some_and(|c| !c.is_empty()),
        "{shown}"
    );

    // The turns that differ: none.
    let differing = http(&addr, "GET", &one, op).await;
    assert_eq!(differing.status, 200, "{}", differing.body);
    let differing = differing.json();
    assert_eq!(differing["replay"]["same"], 3, "{differing}");
    assert!(turns(&differing).is_empty(), "{differing}");
    assert_eq!(differing["next"], "");

    // Every turn: both sides, row by row, the same.
    let all = http(&addr, "GET", &format!("{one}?all=1"), op).await.json();
    assert_eq!(turns(&all).len(), 3, "{all}");
    for turn in turns(&all) {
        assert_eq!(turn["class"], "same", "{turn}");
        let rows = turn["rows"].as_array().expect("rows");
        assert!(rows.iter().all(|r| r["same"] == true), "{turn}");
        // The steps line by line; how a side ended (`done`, unknown on a
        // recorded side that did not keep it) is not a step.
        let steps: Vec<_> = rows
            .iter()
            .filter(|r| r["recorded"]["step"].is_u64())
            .collect();
        assert_eq!(steps.len(), 2, "{turn}");
        assert!(
            steps.iter().all(|r| r["recorded"] == r["candidate"]),
            "{turn}"
        );
        let said = rows.iter().find(|r| r["recorded"]["kind"] == "reply");
        assert_eq!(said.expect("a reply")["recorded"]["text"], "hi", "{turn}");
        let called = rows
            .iter()
            .find(|r| r["recorded"]["kind"] == "call")
            .expect("a call");
        assert_eq!(called["candidate"]["tool"], "MemoryWrite", "{turn}");
        let input = called["candidate"]["text"].as_str().expect("its input");
        assert!(input.contains("\"key\""), "{input}");
    }

    // A page at a time.
    let first = http(&addr, "GET", &format!("{one}?all=1&limit=2"), op)
        .await
        .json();
    assert_eq!(turns(&first).len(), 2, "{first}");
    let next = first["next"].as_str().expect("a next page").to_owned();
    assert!(!next.is_empty(), "{first}");
    let second = http(
        &addr,
        "GET",
        &format!("{one}?all=1&limit=2&page={next}"),
        op,
    )
    .await
    .json();
    assert_eq!(turns(&second).len(), 1, "{second}");
    assert_eq!(second["next"], "", "{second}");
    let mut indices: Vec<_> = turns(&first)
        .iter()
        .chain(turns(&second))
        .map(|t| t["index"].as_u64().expect("an index"))
        .collect();
    indices.sort_unstable();
    indices.dedup();
    assert_eq!(indices.len(), 3, "pages do not overlap: {indices:?}");

    // Bad input is a 400 that says why; an id nobody has a 404.
    for bad in [
        format!("{one}?all=yes"),
        format!("{one}?limit=0"),
        format!("{one}?limit=51"),
        format!("{one}?page=..%2Fx"),
        format!("{one}?page={}", "1".repeat(65)),
        "/api/replays/not-a-replay".to_owned(),
        format!("/api/replays/{agent}"),
    ] {
        let answer = http(&addr, "GET", &bad, op).await;
        assert_eq!(answer.status, 400, "{bad}: {}", answer.body);
        assert!(answer.json()["error"].is_string(), "{bad}");
    }
    assert_eq!(http(&addr, "POST", "/api/replays", op).await.status, 405);
    let unknown = http(&addr, "GET", &format!("/api/replays/{NOBODY}"), op).await;
    assert_eq!(unknown.status, 404, "{}", unknown.body);

    // Another namespace's token: no replay listed, and this one answered
    // exactly as an id nobody has.
    let other = c
        .access
        .create_token(pb::CreateTokenRequest {
            role: "viewer".into(),
            namespace: "team-b".into(),
            name: "viewer of team-b".into(),
            expires_in_ms: 0,
        })
        .await
        .expect("token made")
        .into_inner()
        .secret;
    let theirs = http(&addr, "GET", "/api/replays", Some(&other)).await;
    assert_eq!(theirs.status, 200, "{}", theirs.body);
    assert_eq!(theirs.json()["replays"], json!([]));
    let hidden = http(&addr, "GET", &one, Some(&other)).await;
    assert_eq!(hidden.status, 404, "{}", hidden.body);
    assert_eq!(
        hidden.json()["error"].as_str().expect("why"),
        unknown.json()["error"]
            .as_str()
            .expect("why")
            .replace(NOBODY, &id),
    );
    assert!(!hidden.body.contains(&agent), "{}", hidden.body);
}
