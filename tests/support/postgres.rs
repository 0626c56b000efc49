//! A throwaway PostgreSQL server for tests: one per test binary, in a
//! temporary directory, on a Unix socket only, with fsync on as in
//! production; each test gets a database of its own.
//!
//! `HOLARCHY_TEST_POSTGRES` (a connection string to a server where the
//! tests may create databases) replaces it. Without either, a test says it
//! skipped; `.ci/run` installs PostgreSQL and sets
//! `HOLARCHY_REQUIRE_POSTGRES`, under which a missing server fails instead.
//!
//! The server outlives nothing: a watchdog shell started beside it stops it
//! and removes its directory once this test process is gone, however the
//! process ends.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where a test's database is.
#[derive(Debug, Clone)]
pub struct Database {
    pub config: tokio_postgres::Config,
}

#[derive(Debug)]
enum Server {
    Local {
        socket_dir: PathBuf,
    },
    /// Boxed: a config is large, and the local server is the usual case.
    External(Box<tokio_postgres::Config>),
}

static SERVER: OnceLock<Option<Server>> = OnceLock::new();
static DATABASES: AtomicU32 = AtomicU32::new(0);

/// Whether a server is there (starting it at the first call); says why
/// not when it is not.
pub async fn available() -> bool {
    SERVER.get_or_init(start).is_some()
}

/// A new, empty database, or `None` (having said why) when no server can
/// be had and none is required.
pub async fn database() -> Option<Database> {
    let server = SERVER.get_or_init(start).as_ref()?;
    let name = format!(
        "t{}_{}",
        std::process::id(),
        DATABASES.fetch_add(1, Ordering::Relaxed)
    );
    let mut admin = match server {
        Server::Local { socket_dir } => local(socket_dir),
        Server::External(config) => (**config).clone(),
    };
    admin.dbname("postgres");
    // A server just started may still refuse while it starts up.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (client, connection) = loop {
        match admin.connect(tokio_postgres::NoTls).await {
            Ok(connected) => break connected,
            Err(err) if Instant::now() < deadline => {
                let _ = err;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(err) => panic!("the test server answers: {err}"),
        }
    };
    let driver = tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("a test database");
    drop(client);
    let _ = driver.await;
    let mut config = admin;
    config.dbname(&name);
    Some(Database { config })
}

fn local(socket_dir: &Path) -> tokio_postgres::Config {
    let mut config = tokio_postgres::Config::new();
    config.host_path(socket_dir).user("postgres");
    config
}

fn start() -> Option<Server> {
    if let Ok(url) = std::env::var("HOLARCHY_TEST_POSTGRES") {
        let config = url
            .parse()
            .expect("HOLARCHY_TEST_POSTGRES is a connection string");
        return Some(Server::External(Box::new(config)));
    }
    let Some(bin) = bin_dir() else {
        let why =
            "PostgreSQL not found (install the postgresql package, or set HOLARCHY_TEST_POSTGRES)";
        assert!(
            std::env::var_os("HOLARCHY_REQUIRE_POSTGRES").is_none(),
            "{why}"
        );
        println!("skipped: {why}");
        return None;
    };
    let dir = std::env::temp_dir().join(format!("holarchy-pg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the server's directory");
    // PostgreSQL refuses to run as root: as root, the server runs as the
    // `postgres` user the package creates.
    let as_root = nix::unistd::Uid::effective().is_root();
    if as_root {
        let user = nix::unistd::User::from_name("postgres")
            .expect("the user database")
            .expect("a `postgres` user (the postgresql package creates it)");
        nix::unistd::chown(&dir, Some(user.uid), Some(user.gid)).expect("chown");
    }
    let data = dir.join("data");
    let run = |program: &Path, args: &[&str]| {
        let mut command = if as_root {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        };
        command.args(args);
        command
    };
    let initdb = run(
        &bin.join("initdb"),
        &[
            "-D",
            data.to_str().expect("a UTF-8 path"),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-instructions",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .output()
    .expect("initdb runs");
    assert!(
        initdb.status.success(),
        "initdb failed: {}",
        String::from_utf8_lossy(&initdb.stderr)
    );
    // The watchdog: starts the server, and stops it (and removes its
    // directory) once this process is gone.
    let script = format!(
        "{postgres} -D {data} -k {dir} -c listen_addresses='' -c max_connections=300 \
         -c shared_buffers=64MB >{dir}/log 2>&1 & server=$!; \
         while [ -d /proc/{pid} ]; do sleep 0.5; done; \
         kill -QUIT $server; wait $server; rm -rf {dir}",
        postgres = bin.join("postgres").display(),
        data = data.display(),
        dir = dir.display(),
        pid = std::process::id(),
    );
    // Never waited for: the watchdog outlives this process by design, and
    // is reaped by init once it has stopped the server.
    #[allow(clippy::zombie_processes)]
    run(Path::new("/bin/sh"), &["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the server starts");
    let socket = dir.join(".s.PGSQL.5432");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !socket.exists() {
        assert!(
            Instant::now() < deadline,
            "PostgreSQL did not start: {}",
            std::fs::read_to_string(dir.join("log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(Server::Local { socket_dir: dir })
}

/// The newest installed server's programs.
fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("bin"))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop().or_else(|| {
        std::env::var_os("PATH")
            .and_then(|paths| std::env::split_paths(&paths).find(|dir| dir.join("initdb").exists()))
    })
}
