//! `holarchy serve --config FILE`: the real binary reads serve's flags
//! from a TOML file, the command line and the environment override it,
//! `--print-config` shows the result, and an unknown key is refused by
//! name.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::Daemon;

/// Runs `holarchy` with `args` and `env`, without a daemon's environment
/// of the caller's shell.
fn holarchy(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .args(args)
        .env_remove("HOLARCHY_DATA_DIR")
        .env_remove("HOLARCHY_CONFIG")
        .env_remove("HOLARCHY_TOKEN")
        .envs(env.iter().copied())
        .output()
        .expect("holarchy runs")
}

fn write(path: &Path, text: &str) -> String {
    std::fs::write(path, text).expect("config written");
    path.display().to_string()
}

#[tokio::test]
async fn config_file_sets_the_listeners_and_a_flag_overrides_its_key() {
    let root = tempfile::tempdir().expect("tempdir");
    let data_dir = common::data_dir(&root);
    let (from_file, from_flag, http) = (
        common::free_addr(),
        common::free_addr(),
        common::free_addr(),
    );
    let config = write(
        &root.path().join("holarchy.toml"),
        &format!("listen = \"{from_file}\"\nhttp-listen = \"{http}\"\nmax-queue = 16\n"),
    );
    let daemon =
        Daemon::start_with(&data_dir, &["--config", &config, "--listen", &from_flag]).await;

    // The flag's address serves gRPC; the file's, which it overrode, does not.
    let token = daemon.token();
    let mut clients = common::tcp_clients(&from_flag, Some(&token)).await;
    common::status(&mut clients).await;
    assert!(
        tokio::net::TcpStream::connect(&from_file).await.is_err(),
        "the overridden listen address must not be served"
    );
    // A key no flag overrode is used as written.
    assert_eq!(
        common::readyz(&http).await,
        200,
        "http-listen from the file"
    );
}

#[tokio::test]
async fn print_config_shows_the_merged_settings_and_reads_back_unchanged() {
    let root = tempfile::tempdir().expect("tempdir");
    let config = write(
        &root.path().join("holarchy.toml"),
        "data-dir = \"from-file\"\nmax-queue = 5\nrestart-max = 7\nskills-dir = [\"skills\"]\nno-metrics = true\n",
    );
    let env_dir = root.path().join("from-env").display().to_string();
    let out = holarchy(
        &[
            "serve",
            "--config",
            &config,
            "--max-queue",
            "9",
            "--print-config",
        ],
        &[("HOLARCHY_DATA_DIR", &env_dir)],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).expect("utf-8");
    let settings: toml::Table = toml::from_str(&printed).expect("printed settings are TOML");

    // Command line over file, environment over file, file over default.
    assert_eq!(settings["max-queue"].as_integer(), Some(9), "{printed}");
    assert_eq!(settings["data-dir"].as_str(), Some(env_dir.as_str()));
    assert_eq!(settings["restart-max"].as_integer(), Some(7));
    assert_eq!(settings["no-metrics"].as_bool(), Some(true));
    assert_eq!(
        settings["restart-period"].as_integer(),
        Some(5),
        "a default"
    );
    // A relative path in the file is read beside the file.
    let skills = root.path().join("skills").display().to_string();
    assert_eq!(
        settings["skills-dir"].as_array().map(|a| a[0].as_str()),
        Some(Some(skills.as_str()))
    );
    assert!(
        printed.contains("max-queue = 9  # command line"),
        "{printed}"
    );
    assert!(
        printed.contains("restart-max = 7  # config file"),
        "{printed}"
    );
    assert!(printed.contains("# listen = (not set)"), "{printed}");
    // It only printed: no daemon made the data directory.
    assert!(
        !Path::new(&env_dir).exists(),
        "print-config started nothing"
    );

    // What it printed is a config file that gives the same settings.
    let again = write(&root.path().join("printed.toml"), &printed);
    let out = holarchy(&["serve", "--config", &again, "--print-config"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reread: toml::Table = toml::from_str(&String::from_utf8_lossy(&out.stdout)).expect("TOML");
    assert_eq!(reread, settings);
}

#[test]
fn unknown_key_is_refused_by_name() {
    let root = tempfile::tempdir().expect("tempdir");
    let data_dir = root.path().join("data").display().to_string();
    let config = write(&root.path().join("holarchy.toml"), "max_queue = 3\n");
    let out = holarchy(
        &["serve", "--data-dir", &data_dir, "--config", &config],
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unknown key `max_queue`"), "{stderr}");
    assert!(stderr.contains("did you mean `max-queue`"), "{stderr}");
    assert!(!Path::new(&data_dir).exists(), "nothing started");

    let config = write(&root.path().join("bad.toml"), "max-queue = \"many\"\n");
    let out = holarchy(
        &["serve", "--data-dir", &data_dir, "--config", &config],
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("bad.toml") && stderr.contains("--max-queue"),
        "{stderr}"
    );
}
