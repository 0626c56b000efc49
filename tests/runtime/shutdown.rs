//! A graceful stop of the runtime in the middle of load.

use std::sync::Arc;
use std::time::{Duration, Instant};

use holarchy::store::sled_store::StoreConfig;
use holarchy::store::SledStore;
use holarchy_supervision::restart::RestartPolicy;

use super::start;

/// Every task the runtime starts beside its actors is tracked: stopped in
/// the middle of load (turns, spawns, acknowledgements after flushes in
/// flight), the runtime returns from its shutdown with none left running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_mid_load_leaves_no_background_task_running() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(SledStore::open(dir.path(), &StoreConfig::default()).expect("store"));
    let runtime = Arc::new(start(store.clone(), RestartPolicy::default()).await);
    let mut agents = Vec::new();
    for n in 0..20 {
        let id = runtime
            .create_agent(format!("busy-{n}"), None)
            .await
            .expect("created");
        agents.push(id);
    }
    let spawn = r#"{"tool_calls":[{"name":"SpawnAgent","input":{"preset":"private_delegator","initial_message":"work"}}]}"#;
    let senders: Vec<_> = agents
        .iter()
        .map(|&id| {
            let runtime = runtime.clone();
            tokio::spawn(async move {
                for n in 0..20 {
                    let text = if n % 4 == 0 {
                        spawn.to_owned()
                    } else {
                        format!("tick {n}")
                    };
                    if runtime.send_message(id, text, None).await.is_err() {
                        return;
                    }
                }
            })
        })
        .collect();
    let mut busiest = 0;
    let started = Instant::now();
    while busiest == 0 && started.elapsed() < Duration::from_secs(10) {
        busiest = busiest.max(runtime.background_tasks());
        tokio::task::yield_now().await;
    }
    assert!(busiest > 0, "no task ever ran beside the actors");
    runtime.shutdown(Duration::from_secs(10)).await;
    assert_eq!(runtime.background_tasks(), 0, "tasks outlived the shutdown");
    for sender in senders {
        let _ = sender.await;
    }
    store.close().await;
}
