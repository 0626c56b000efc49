//! A throwaway PostgreSQL server for tests: one per test binary, in a
//! temporary directory, on a Unix socket only, with fsync on as in
//! production; each test gets a database of its own.
//!
//! `HOLARCHY_TEST_POSTGRES` (a key=value connection string to a server where the
//! tests may create databases) replaces it. Without either, a test says it
//! skipped; `.ci/run` installs PostgreSQL and sets
//! `HOLARCHY_REQUIRE_POSTGRES`, under which a missing server fails instead.
//!
//! `HOLARCHY_TEST_STORE=postgres` runs the end-to-end tests' daemons on
//! it ([`store_for`]): a data directory gets a database of its own, the
//! same each time its daemon starts again.
//!
//! The server outlives nothing: a watchdog shell started beside it stops it
//! and removes its directory once this test process is gone, however the
//! process ends.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use std::hash::{Hash as _, Hasher as _};

/// Where a test's database is.
#[derive(Debug, Clone)]
pub struct Database {
    pub config: tokio_postgres::Config,
}

#[derive(Debug)]
enum Server {
    Local {
        socket_dir: PathBuf,
        data: PathBuf,
        bin: PathBuf,
        /// The watchdog shell: it ends with the server, after this process.
        _watchdog: std::process::Child,
    },
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
    let (client, connection) = admin(server).await;
    let driver = tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("a test database");
    drop(client);
    let _ = driver.await;
    let mut config = settings(server);
    config.dbname(&name);
    Some(Database { config })
}

/// The server's settings, without a database.
fn settings(server: &Server) -> tokio_postgres::Config {
    match server {
        Server::Local { socket_dir, .. } => local(socket_dir),
        Server::External(config) => (**config).clone(),
    }
}

/// A connection to the server's `postgres` database, waiting for a server
/// that just started and still refuses.
async fn admin(
    server: &Server,
) -> (
    tokio_postgres::Client,
    tokio_postgres::Connection<tokio_postgres::Socket, tokio_postgres::tls::NoTlsStream>,
) {
    let mut config = settings(server);
    config.dbname("postgres");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match config.connect(tokio_postgres::NoTls).await {
            Ok(connected) => return connected,
            Err(err) if Instant::now() < deadline => {
                let _ = err;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(err) => panic!("the test server answers: {err}"),
        }
    }
}

/// The role of [`password_database`], which logs in by password only.
pub const PASSWORD_ROLE: &str = "holarchy_pw";

/// A new database owned by [`PASSWORD_ROLE`], whose password is now
/// `password`; the `--store` for it, without the password. Local servers
/// only (the role's rule is in their pg_hba.conf).
pub async fn password_database(password: &str) -> Option<String> {
    let server = SERVER.get_or_init(start).as_ref()?;
    let Server::Local { socket_dir, .. } = server else {
        panic!("a password role needs the local test server");
    };
    let name = format!(
        "p{}_{}",
        std::process::id(),
        DATABASES.fetch_add(1, Ordering::Relaxed)
    );
    let (client, connection) = admin(server).await;
    let driver = tokio::spawn(connection);
    // A literal: utility statements take no parameters; the tests' own
    // passwords hold no quote. Tests of one binary make the role in turn:
    // two creating it at once would collide in the catalog.
    static ROLE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _turn = ROLE.lock().await;
    assert!(!password.contains('\''), "a test password without quotes");
    client
        .batch_execute(&format!(
            "DO $$ BEGIN \
               CREATE ROLE {PASSWORD_ROLE} LOGIN PASSWORD '{password}'; \
             EXCEPTION WHEN duplicate_object THEN \
               ALTER ROLE {PASSWORD_ROLE} LOGIN PASSWORD '{password}'; \
             END $$"
        ))
        .await
        .expect("a password role");
    client
        .batch_execute(&format!("CREATE DATABASE {name} OWNER {PASSWORD_ROLE}"))
        .await
        .expect("a database of the password role");
    drop(client);
    let _ = driver.await;
    Some(format!(
        "host={} user={PASSWORD_ROLE} dbname={name}",
        socket_dir.display()
    ))
}

/// The `--store` a daemon on `data_dir` runs with when
/// `HOLARCHY_TEST_STORE=postgres`: a database named after the directory,
/// created at its first start. `None` (sled) otherwise.
pub async fn store_for(data_dir: &Path) -> Option<String> {
    if std::env::var("HOLARCHY_TEST_STORE").ok().as_deref() != Some("postgres") {
        return None;
    }
    database_for(data_dir).await
}

/// The `--store` of a database named after `data_dir` on the test server,
/// created at its first call; `None` (having said why) without a server.
pub async fn database_for(data_dir: &Path) -> Option<String> {
    let server = SERVER.get_or_init(start).as_ref()?;
    // Postgres names are at most 63 bytes; a hash keeps them short.
    let mut hasher = std::hash::DefaultHasher::new();
    data_dir.hash(&mut hasher);
    let name = format!("d{:016x}", hasher.finish());
    let (client, connection) = admin(server).await;
    let driver = tokio::spawn(connection);
    let exists = client
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
        .await
        .expect("the catalog answers")
        .is_some();
    if !exists {
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("a test database");
    }
    drop(client);
    let _ = driver.await;
    Some(match server {
        Server::Local { socket_dir, .. } => {
            format!("host={} user=postgres dbname={name}", socket_dir.display())
        }
        Server::External(_) => {
            let url = std::env::var("HOLARCHY_TEST_POSTGRES").unwrap_or_default();
            format!("{url} dbname={name}")
        }
    })
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
    if nix::unistd::Uid::effective().is_root() {
        let user = nix::unistd::User::from_name("postgres")
            .expect("the user database")
            .expect("a `postgres` user (the postgresql package creates it)");
        nix::unistd::chown(&dir, Some(user.uid), Some(user.gid)).expect("chown");
    }
    let data = dir.join("data");
    let initdb = as_postgres(
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
    // One role must give its password, so a test can see the daemon's
    // password handling work: pg_hba's first matching line wins.
    let hba = data.join("pg_hba.conf");
    let trusting = std::fs::read_to_string(&hba).expect("pg_hba.conf");
    std::fs::write(
        &hba,
        format!("local all {PASSWORD_ROLE} scram-sha-256\n{trusting}"),
    )
    .expect("pg_hba.conf written");
    // The watchdog: starts the server, and stops it (and removes its
    // directory) once this process is gone.
    let script = format!(
        "{start}; \
         while [ -d /proc/{pid} ]; do sleep 0.5; done; \
         {pg_ctl} -D {data} -m immediate stop >/dev/null 2>&1; rm -rf {dir}",
        start = start_command(&bin, &data, &dir),
        pg_ctl = bin.join("pg_ctl").display(),
        data = data.display(),
        dir = dir.display(),
        pid = std::process::id(),
    );
    let watchdog = as_postgres(Path::new("/bin/sh"), &["-c", &script])
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
    Some(Server::Local {
        socket_dir: dir,
        data,
        bin,
        _watchdog: watchdog,
    })
}

/// The shell command that starts the server and waits until it answers.
fn start_command(bin: &Path, data: &Path, dir: &Path) -> String {
    format!(
        "{pg_ctl} -D {data} -l {dir}/log -w -t 60 \
         -o \"-k {dir} -c listen_addresses='' -c max_connections=300 -c shared_buffers=64MB\" \
         start >/dev/null 2>&1",
        pg_ctl = bin.join("pg_ctl").display(),
        data = data.display(),
        dir = dir.display(),
    )
}

/// A command run as the `postgres` user when this process is root (the
/// server refuses to run as root).
fn as_postgres(program: &Path, args: &[&str]) -> Command {
    let mut command = if nix::unistd::Uid::effective().is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    };
    command.args(args);
    command
}

/// Stops the test server (`fast`: sessions cut, as a database restarted
/// by its operator), waits `down`, and starts it again; returns once it
/// answers. Only for a server this process started.
pub fn restart_server(down: Duration) {
    let Some(Some(Server::Local {
        socket_dir,
        data,
        bin,
        ..
    })) = SERVER.get()
    else {
        panic!("no local test server to restart");
    };
    let data_arg = data.to_str().expect("a UTF-8 path");
    let stopped = as_postgres(
        &bin.join("pg_ctl"),
        &["-D", data_arg, "-m", "fast", "-w", "stop"],
    )
    .stdout(Stdio::null())
    .status()
    .expect("pg_ctl runs");
    assert!(stopped.success(), "the test server stops");
    std::thread::sleep(down);
    let started = as_postgres(
        Path::new("/bin/sh"),
        &["-c", &start_command(bin, data, socket_dir)],
    )
    .status()
    .expect("pg_ctl runs");
    assert!(started.success(), "the test server starts again");
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
