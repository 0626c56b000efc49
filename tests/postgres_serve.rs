//! `serve --store` with a database that asks for a password: given by
//! `HOLARCHY_STORE_PASSWORD`, it opens the store and never shows in the
//! daemon's log; wrong, the start fails and says what to check.

mod common;

use std::process::{Command, Stdio};

use common::{create, data_dir, get_agent, pg_server, Daemon};

const PASSWORD: &str = "pw-7c1e0b5a-not-in-any-log";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_from_the_environment_opens_the_store_and_stays_out_of_the_log() {
    if !pg_server::available().await {
        return;
    }
    let store = pg_server::password_database(PASSWORD)
        .await
        .expect("a database");
    let root = tempfile::tempdir().expect("tempdir");
    let data = data_dir(&root);
    let mut daemon = Daemon::start_with_env(
        &data,
        &["--store", &store],
        &[("HOLARCHY_STORE_PASSWORD", PASSWORD)],
    )
    .await;
    let mut c = daemon.clients().await;
    let agent = create(&mut c, "behind-a-password", None).await;
    assert_eq!(get_agent(&mut c, &agent).await.name, "behind-a-password");
    let store = common::status(&mut c).await.store;
    assert!(
        store.starts_with("PostgreSQL ") && store.ends_with(" as holarchy_pw"),
        "{store}"
    );
    assert!(!store.contains(PASSWORD), "{store}");
    daemon.terminate(std::time::Duration::from_secs(20)).await;
    let log = daemon.log();
    assert!(log.contains("the store is PostgreSQL"), "{log}");
    assert!(
        !log.contains(PASSWORD),
        "the password reached the log:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_fails_the_start_and_says_what_to_check() {
    if !pg_server::available().await {
        return;
    }
    let store = pg_server::password_database(PASSWORD)
        .await
        .expect("a database");
    let root = tempfile::tempdir().expect("tempdir");
    let data = data_dir(&root);
    let wrong = "pw-wrong-0d2f";
    let out = Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .args(["serve", "--data-dir"])
        .arg(&data)
        .args(["--store", &store])
        .env("HOLARCHY_STORE_PASSWORD", wrong)
        .env_remove("HOLARCHY_STORE")
        .stdin(Stdio::null())
        .output()
        .expect("holarchy runs");
    assert!(!out.status.success(), "the start fails");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot open the PostgreSQL store") && stderr.contains("the password"),
        "the failure names the store and what to check:\n{stderr}"
    );
    assert!(
        !stderr.contains(wrong),
        "the password reached stderr:\n{stderr}"
    );
}
