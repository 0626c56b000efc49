//! The PostgreSQL store when its database goes away under load: a call
//! that answered OK was committed, and the daemon serves again by itself
//! once the database is back. A binary of its own: it restarts the test
//! server, which every other test of a binary would share.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use holarchy::api::pb;
use holarchy::client::{self, Target};

use common::{create, data_dir, eventually_within, messages, pg_server, Daemon};

/// Messages acknowledged, each with its agent.
type Acked = Arc<Mutex<Vec<(String, String)>>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restarted_under_load_loses_nothing_acknowledged_and_serving_resumes() {
    if !pg_server::available().await {
        return;
    }
    let root = tempfile::tempdir().expect("tempdir");
    let data = data_dir(&root);
    let store = pg_server::database_for(&data).await.expect("a database");
    let mut daemon = Daemon::start_with(&data, &["--store", &store]).await;
    let mut c = daemon.clients().await;
    let mut agents = Vec::new();
    for i in 0..8 {
        agents.push(create(&mut c, &format!("steady-{i}"), None).await);
    }

    let acked: Acked = Arc::default();
    let refused = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let last_ok = Arc::new(Mutex::new(Instant::now()));
    let mut senders = tokio::task::JoinSet::new();
    for sender in 0..4 {
        let (socket, agents) = (daemon.socket(), agents.clone());
        let (acked, refused, stop, last_ok) = (
            acked.clone(),
            refused.clone(),
            stop.clone(),
            last_ok.clone(),
        );
        senders.spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                let agent = &agents[(n as usize + sender) % agents.len()];
                // A fresh connection each time: the daemon stops serving
                // while it opens the store again, and a call it could not
                // take for that is refused as much as one it answered
                // with an error.
                let Ok(mut c) = client::connect(&Target::Unix(socket.clone())).await else {
                    refused.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let sent = c
                    .agents
                    .send_message(pb::SendMessageRequest {
                        agent_id: agent.clone(),
                        text: format!("load {sender}-{n}"),
                        dedupe_key: String::new(),
                    })
                    .await;
                match sent {
                    Ok(answer) => {
                        let id = answer.into_inner().message_id;
                        acked.lock().expect("acked").push((agent.clone(), id));
                        *last_ok.lock().expect("clock") = Instant::now();
                    }
                    Err(_) => {
                        refused.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
        });
    }

    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = acked.lock().expect("acked").len();
    tokio::task::spawn_blocking(|| pg_server::restart_server(Duration::from_secs(2)))
        .await
        .expect("the server restarts");
    let back = Instant::now();
    let resumed = eventually_within("sends acknowledged again", Duration::from_secs(60), || {
        let last_ok = last_ok.clone();
        async move {
            let at = *last_ok.lock().expect("clock");
            (at > back).then(|| at.duration_since(back))
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);
    while let Some(done) = senders.join_next().await {
        done.expect("a sender");
    }
    let acked = acked.lock().expect("acked").clone();
    println!(
        "acknowledged {} ({before} before the restart), refused {}, serving again {} ms after the database returned",
        acked.len(),
        refused.load(Ordering::SeqCst),
        resumed.as_millis()
    );
    assert!(
        acked.len() > before,
        "sends were acknowledged after the restart"
    );
    // The outage reached the daemon: calls were refused (or not taken)
    // while it reopened the store, rather than the restart passing between
    // two commits.
    assert!(
        refused.load(Ordering::SeqCst) > 0,
        "no call was refused while the database was down"
    );
    let log = daemon.log();
    assert!(
        log.contains("the store failed: opening it again"),
        "the daemon reopened its store after the database went away:\n{log}"
    );

    // Every acknowledged message is there and handled once, before and
    // after a kill -9 of the daemon.
    for round in ["after the database's restart", "after kill -9"] {
        let c = daemon.clients().await;
        for agent in &agents {
            let mine: Vec<&String> = acked
                .iter()
                .filter(|(a, _)| a == agent)
                .map(|(_, id)| id)
                .collect();
            let listed = eventually_within(round, Duration::from_secs(60), || {
                let mut c = c.clone();
                let agent = agent.clone();
                async move {
                    let all = messages(&mut c, &agent).await;
                    all.iter()
                        .all(|m| m.status == pb::MessageStatus::Handled as i32)
                        .then_some(all)
                }
            })
            .await;
            for id in &mine {
                let found: Vec<_> = listed.iter().filter(|m| &&m.message_id == id).collect();
                assert_eq!(
                    found.len(),
                    1,
                    "{round}: acknowledged message {id} is kept once"
                );
                assert!(!found[0].reply.is_empty(), "{round}: {id} was handled");
            }
        }
        if round == "after the database's restart" {
            daemon.kill9();
            daemon = Daemon::start_with(&data, &["--store", &store]).await;
        }
    }
}
