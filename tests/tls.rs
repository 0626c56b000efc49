//! TLS on the daemon's TCP listeners, against the real binary with
//! certificates this test makes: the CLI reaches a TLS daemon with its CA
//! and not without it; plain text is not answered on a TLS port; the
//! HTTP listener serves TLS too; a SIGHUP swaps the certificate for new
//! connections while an open one goes on, and a broken file at a reload
//! keeps the one in use; and a client CA shuts out clients without a
//! certificate it issued.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{data_dir, free_addr, Daemon};
use holarchy::api::pb;
use holarchy::client::{self, Target, TlsOptions};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};

const TOKEN: &str = "tls-test-token-0123456789abcdef";

/// A CA that signs certificates for this test.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let key = KeyPair::generate().expect("a key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).expect("a CA certificate");
        Ca {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A certificate for `names` (host names or IP addresses) and its key,
    /// as PEM.
    fn issue(&self, names: &[&str], client: bool) -> (String, String) {
        let key = KeyPair::generate().expect("a key");
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("params");
        if client {
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            params
                .distinguished_name
                .push(DnType::CommonName, "operator-laptop");
        }
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        (cert.pem(), key.serialize_pem())
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("writes");
    path
}

/// A TCP target for `url` that trusts `ca`, showing `identity`.
fn target(url: &str, ca: Option<&Path>, identity: Option<&Path>) -> Target {
    Target::Tcp {
        url: url.to_owned(),
        token: Some(TOKEN.to_owned()),
        tls: TlsOptions {
            ca: ca.map(Path::to_owned),
            identity: identity.map(Path::to_owned),
        },
    }
}

/// The daemon's pid, asked over `target`; the error's text if the call
/// fails.
async fn status_over(target: &Target) -> Result<u32, String> {
    let mut clients = client::connect(target)
        .await
        .map_err(|err| format!("{err:#}"))?;
    call_status(&mut clients).await
}

async fn call_status(clients: &mut client::Clients) -> Result<u32, String> {
    clients
        .runtime
        .get_status(pb::GetStatusRequest {})
        .await
        .map(|status| status.into_inner().pid)
        .map_err(|err| err.to_string())
}

/// Waits for `check` to hold: a reload is seen by the next handshake
/// after the daemon took the signal.
async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn hangup(daemon: &Daemon) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(daemon.pid()).expect("a pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tcp_listeners_speak_tls_and_reload_it_on_sighup() {
    let root = tempfile::tempdir().expect("tempdir");
    let first = Ca::new("first CA");
    let (cert, key) = first.issue(&["localhost", "127.0.0.1"], false);
    let cert_path = write(root.path(), "cert.pem", &cert);
    let key_path = write(root.path(), "key.pem", &key);
    let first_ca = write(root.path(), "first-ca.pem", &first.pem);
    let (grpc, http) = (free_addr(), free_addr());
    let daemon = Daemon::start_with_env(
        &data_dir(&root),
        &[
            "--listen",
            &grpc,
            "--http-listen",
            &http,
            "--tls-cert",
            cert_path.to_str().expect("utf-8"),
            "--tls-key",
            key_path.to_str().expect("utf-8"),
        ],
        &[("HOLARCHY_TOKEN", TOKEN)],
    )
    .await;
    let url = format!("https://{grpc}");

    // The CLI, as a user types it: the CA given, the token in the
    // environment.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .args(["--addr", &url, "--ca", first_ca.to_str().expect("utf-8")])
        .args(["--json", "status"])
        .env("HOLARCHY_TOKEN", TOKEN)
        .env_remove("HOLARCHY_DATA_DIR")
        .output()
        .expect("the CLI runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status as JSON");
    assert_eq!(status["pid"], daemon.pid());

    // The CLI without the CA says what to check.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .args(["--addr", &url, "status"])
        .env("HOLARCHY_TOKEN", TOKEN)
        .env_remove("HOLARCHY_DATA_DIR")
        .env_remove("HOLARCHY_CA")
        .output()
        .expect("the CLI runs");
    assert_eq!(out.status.code(), Some(3), "unavailable");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("--ca names the CA"), "{said}");
    assert!(!said.contains("--listen https://"), "{said}");

    // Without the CA (the system's roots do not know it), and in plain
    // text to the TLS port: no answer.
    let untrusted = status_over(&target(&url, None, None)).await;
    assert!(untrusted.is_err(), "an unknown issuer was trusted");
    let plain = status_over(&target(&format!("http://{grpc}"), None, None)).await;
    assert!(plain.is_err(), "plain text was answered on a TLS port");

    // The HTTP listener serves TLS too.
    let web = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(first.pem.as_bytes()).expect("pem"))
        .build()
        .expect("a client");
    let health = web
        .get(format!("https://{http}/healthz"))
        .send()
        .await
        .expect("the HTTP listener answers over TLS");
    assert!(health.status().is_success(), "{}", health.status());
    assert!(reqwest::get(format!("http://{http}/healthz"))
        .await
        .is_err());

    // A connection opened before the reload.
    let mut open = client::connect(&target(&url, Some(&first_ca), None))
        .await
        .expect("connects");
    assert_eq!(call_status(&mut open).await, Ok(daemon.pid()));

    // A certificate from another CA, then SIGHUP: new connections get it.
    let second = Ca::new("second CA");
    let (cert, key) = second.issue(&["localhost", "127.0.0.1"], false);
    let second_ca = write(root.path(), "second-ca.pem", &second.pem);
    write(root.path(), "cert.pem", &cert);
    write(root.path(), "key.pem", &key);
    hangup(&daemon);
    eventually("a new connection gets the second certificate", async || {
        status_over(&target(&url, Some(&second_ca), None))
            .await
            .is_ok()
    })
    .await;
    assert!(
        status_over(&target(&url, Some(&first_ca), None))
            .await
            .is_err(),
        "the first certificate is still served to new connections"
    );
    // The connection opened before goes on, on the first certificate.
    assert_eq!(call_status(&mut open).await, Ok(daemon.pid()));

    // A broken file at the next reload: the second certificate stays.
    write(
        root.path(),
        "cert.pem",
        "-----BEGIN CERTIFICATE-----\nnot base64\n",
    );
    hangup(&daemon);
    let log = data_dir(&root).with_extension("log");
    eventually("the daemon says the reload failed", async || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("could not be read again")
    })
    .await;
    assert_eq!(
        status_over(&target(&url, Some(&second_ca), None)).await,
        Ok(daemon.pid())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_ca_shuts_out_clients_without_its_certificate() {
    let root = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new("test CA");
    let (cert, key) = ca.issue(&["127.0.0.1"], false);
    let cert_path = write(root.path(), "cert.pem", &cert);
    let key_path = write(root.path(), "key.pem", &key);
    let ca_path = write(root.path(), "ca.pem", &ca.pem);
    let (client_cert, client_key) = ca.issue(&[], true);
    let identity = write(
        root.path(),
        "client.pem",
        &format!("{client_cert}{client_key}"),
    );
    let stranger_ca = Ca::new("someone else's CA");
    let (stranger_cert, stranger_key) = stranger_ca.issue(&[], true);
    let stranger = write(
        root.path(),
        "stranger.pem",
        &format!("{stranger_cert}{stranger_key}"),
    );
    let grpc = free_addr();
    let daemon = Daemon::start_with_env(
        &data_dir(&root),
        &[
            "--listen",
            &grpc,
            "--tls-cert",
            cert_path.to_str().expect("utf-8"),
            "--tls-key",
            key_path.to_str().expect("utf-8"),
            "--tls-client-ca",
            ca_path.to_str().expect("utf-8"),
        ],
        &[("HOLARCHY_TOKEN", TOKEN)],
    )
    .await;
    let url = format!("https://{grpc}");
    assert_eq!(
        status_over(&target(&url, Some(&ca_path), Some(&identity))).await,
        Ok(daemon.pid())
    );
    // The certificate names the caller beside its token, in whoami and in
    // the audit trail.
    let mut clients = client::connect(&target(&url, Some(&ca_path), Some(&identity)))
        .await
        .expect("connects");
    let me = clients
        .access
        .who_am_i(holarchy::api::pb::WhoAmIRequest {})
        .await
        .expect("whoami")
        .into_inner();
    assert_eq!(
        (me.caller.as_str(), me.certificate.as_str()),
        ("token:bootstrap", "CN=operator-laptop")
    );
    assert!(
        status_over(&target(&url, Some(&ca_path), None))
            .await
            .is_err(),
        "a client without a certificate was answered"
    );
    assert!(
        status_over(&target(&url, Some(&ca_path), Some(&stranger)))
            .await
            .is_err(),
        "a certificate from another CA was accepted"
    );
}

#[test]
fn tls_without_a_tcp_listener_is_refused_with_what_to_add() {
    let root = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new("test CA");
    let (cert, key) = ca.issue(&["127.0.0.1"], false);
    let cert_path = write(root.path(), "cert.pem", &cert);
    let key_path = write(root.path(), "key.pem", &key);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .arg("serve")
        .arg("--data-dir")
        .arg(data_dir(&root))
        .arg("--tls-cert")
        .arg(&cert_path)
        .arg("--tls-key")
        .arg(&key_path)
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("--listen HOST:PORT"), "{said}");
}
