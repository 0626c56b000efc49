//! Hostile agents: commands that try to reach the network their agent's
//! policy forbids (docs/security.md, "Network"). The listeners are the
//! test's own, on the host's loopback, so a connection that got through
//! is counted where the command cannot lie about it.

use std::net::{TcpListener, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use holarchy::api::pb;
use holarchy::client::Clients;

use crate::common::{apply_instance, data_dir, exec, get_agent, status, Daemon};

/// A listener on the host's loopback that counts the connections it took.
struct Counted {
    port: u16,
    taken: Arc<AtomicUsize>,
}

impl Counted {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("listener");
        let port = listener.local_addr().expect("address").port();
        let taken = Arc::new(AtomicUsize::new(0));
        let counter = taken.clone();
        // Ends with the test process; it only counts.
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stream.is_ok() {
                    counter.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        Self { port, taken }
    }

    fn taken(&self) -> usize {
        self.taken.load(Ordering::SeqCst)
    }
}

fn request(name: &str, network: &str) -> pb::CreateAgentRequest {
    pb::CreateAgentRequest {
        name: name.into(),
        network: network.into(),
        ..Default::default()
    }
}

async fn create_with_network(c: &mut Clients, name: &str, network: &str) -> String {
    c.agents
        .create_agent(request(name, network))
        .await
        .expect("agent created")
        .into_inner()
        .agent_id
}

/// What a command that tries `port` over TCP prints: `reached` or
/// `refused` (with the shell's reason before it).
async fn try_tcp(c: &mut Clients, agent: &str, port: u16) -> String {
    let line = format!(
        "exec 2>&1; bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' && echo reached || echo refused"
    );
    let out = exec(c, agent, &line, 10_000).await;
    out["task_handle"]["initial_output"]
        .as_str()
        .unwrap_or_else(|| panic!("no output: {out}"))
        .to_owned()
}

/// Waits for the listener to count `n` connections, or gives up.
async fn taken_within(listener: &Counted, n: usize) -> usize {
    for _ in 0..50 {
        if listener.taken() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    listener.taken()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_under_network_none_cannot_reach_a_loopback_listener() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let listener = Counted::start();

    let open = create_with_network(&mut c, "open", "").await;
    let text = try_tcp(&mut c, &open, listener.port).await;
    assert!(text.contains("reached"), "full network was cut: {text}");
    assert_eq!(taken_within(&listener, 1).await, 1);

    let sealed = create_with_network(&mut c, "sealed", "none").await;
    assert_eq!(get_agent(&mut c, &sealed).await.network, "none");
    let text = try_tcp(&mut c, &sealed, listener.port).await;
    assert!(
        text.contains("refused"),
        "network none let a connection out: {text}"
    );
    assert!(!text.contains("reached"), "{text}");
    // Given time to land, had it been let through.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        listener.taken(),
        1,
        "the listener took a connection from `none`"
    );
}

/// An instance's manifest sets its agent's policy; applying it again with
/// another policy changes the agent's from its next command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_manifest_sets_its_agents_network() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let listener = Counted::start();

    let agent = apply_instance(&mut c, "name = \"sealed\"\nnetwork = \"none\"\n").await;
    assert_eq!(get_agent(&mut c, &agent).await.network, "none");
    let text = try_tcp(&mut c, &agent, listener.port).await;
    assert!(
        text.contains("refused"),
        "the manifest's none let a connection out: {text}"
    );

    let again = apply_instance(&mut c, "name = \"sealed\"\nnetwork = \"full\"\n").await;
    assert_eq!(again, agent, "the same agent, updated");
    assert_eq!(get_agent(&mut c, &agent).await.network, "full");
    let text = try_tcp(&mut c, &agent, listener.port).await;
    assert!(text.contains("reached"), "{text}");
    assert_eq!(taken_within(&listener, 1).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_list_lets_through_its_ports_and_nothing_else() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let allowed = Counted::start();
    let other = Counted::start();

    let agent = create_with_network(&mut c, "narrow", &allowed.port.to_string()).await;
    assert_eq!(
        get_agent(&mut c, &agent).await.network,
        allowed.port.to_string()
    );
    let text = try_tcp(&mut c, &agent, allowed.port).await;
    assert!(text.contains("reached"), "an allowed port was cut: {text}");
    assert_eq!(taken_within(&allowed, 1).await, 1);
    let text = try_tcp(&mut c, &agent, other.port).await;
    assert!(
        text.contains("refused"),
        "a port not listed got through: {text}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(other.taken(), 0, "the other listener took a connection");
}

/// Where the daemon can give commands a namespace of their own, `none`
/// cuts more than TCP: a datagram to the host's loopback never arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_none_in_a_namespace_cuts_udp_too() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let said = status(&mut c).await.sandbox_network;
    if !said.contains("namespace of its own") {
        // A root daemon can always make one: there, no namespace is a
        // failure, not a reason to skip.
        assert!(
            !nix::unistd::geteuid().is_root(),
            "a root daemon gave commands no network namespace: {said}"
        );
        eprintln!("skipped: no network namespace for commands here ({said})");
        return;
    }
    let socket = UdpSocket::bind("127.0.0.1:0").expect("udp");
    socket
        .set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let port = socket.local_addr().expect("address").port();

    let open = create_with_network(&mut c, "open", "full").await;
    let sealed = create_with_network(&mut c, "sealed", "none").await;
    let line = |word: &str| format!("exec 2>&1; bash -c 'echo {word} > /dev/udp/127.0.0.1/{port}'");
    exec(&mut c, &open, &line("open"), 10_000).await;
    let mut buf = [0u8; 64];
    let n = socket.recv(&mut buf).expect("the full network's datagram");
    assert_eq!(&buf[..n], b"open\n");

    exec(&mut c, &sealed, &line("sealed"), 10_000).await;
    match socket.recv(&mut buf) {
        Ok(n) => panic!("a datagram from `none` arrived: {:?}", &buf[..n]),
        Err(err) => assert!(
            matches!(
                err.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "{err}"
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_is_not_one_is_refused_and_creates_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    for bad in ["all", "0", "443,https", "70000"] {
        let refused = c
            .agents
            .create_agent(request("never", bad))
            .await
            .expect_err("refused");
        assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{bad}");
        assert!(refused.message().contains("network"), "{bad}: {refused:?}");
    }
    let missing = c
        .agents
        .get_agent(pb::GetAgentRequest {
            agent: Some(pb::get_agent_request::Agent::Name("never".into())),
        })
        .await
        .expect_err("nothing was created");
    assert_eq!(missing.code(), tonic::Code::NotFound);
}
