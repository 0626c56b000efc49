//! A PostgreSQL database written before events were numbered by slot:
//! its runs (no slot, no number) read back numbered 0, and the slots'
//! numbers start at 1 after them.

use holarchy::api::read_model::ReadModel;
use holarchy::store::codec;
use holarchy::store::PgStore;
use holarchy_actors::Store;
use holarchy_supervision::{AgentId, EventCursor, EventKind};

use crate::fixtures::*;

/// An event as releases before slots encoded it.
#[derive(serde::Serialize)]
struct Legacy {
    cursor: EventCursor,
    at_ms: u64,
    agent_id: Option<AgentId>,
    kind: EventKind,
}

pub async fn a_log_from_before_slots_is_numbered_on_from_one() {
    let Some(database) = crate::pg_server::database().await else {
        return;
    };
    let agent = public("old");
    // The tables as this build makes them; then runs as an older build
    // wrote them, with neither slot nor number.
    PgStore::open(database.config.clone())
        .expect("opens")
        .close()
        .await;
    let (client, connection) = database
        .config
        .connect(tokio_postgres::NoTls)
        .await
        .expect("connects");
    let driver = tokio::spawn(connection);
    for cursor in 1..=3u64 {
        let value = codec::encode(
            "events",
            &Legacy {
                cursor,
                at_ms: cursor,
                agent_id: Some(agent.id),
                kind: noted(agent.id, cursor).events[0].1.clone(),
            },
        )
        .expect("encodes");
        let first = i64::try_from(cursor).expect("small");
        client
            .execute(
                "INSERT INTO events (first, last, value) VALUES ($1, $1, $2)",
                &[&first, &value],
            )
            .await
            .expect("inserts an old run");
    }
    drop(client);
    driver.abort();

    let store = PgStore::open(database.config.clone()).expect("reopens");
    store.commit(created(&agent)).expect("commits");
    store.commit(noted(agent.id, 9)).expect("commits");
    ReadModel::durable(&store).await.expect("flushes");
    let events = store.events_after(0, 100).expect("events");
    let numbered: Vec<(u64, u64)> = events.iter().map(|e| (e.cursor, e.seq)).collect();
    assert_eq!(numbered, [(1, 0), (2, 0), (3, 0), (4, 1), (5, 2)]);
    store.close().await;
}
