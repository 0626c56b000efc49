//! Hostile agents: trees grown deep or wide by agents. No depth or width
//! makes the daemon's walks recurse or a response outgrow a gRPC message:
//! the tree comes flat and paged, and the CLI draws it without recursion.
//! (The spawn-depth bound keeps tools from growing a chain past it, so the
//! deep chain here is written into the store, as an older daemon or a
//! bound raised by an operator leaves it, and recovered by the real binary.)

use std::process::Command;
use std::time::Duration;

use holarchy::api::pb;
use holarchy::client::Clients;
use holarchy::store::sled_store::StoreConfig;
use holarchy::store::SledStore;
use holarchy_actors::{Batch, Store as _, Write};
use holarchy_supervision::profile::Preset;
use holarchy_supervision::{AgentId, AgentRecord, LifecycleState};

use super::common::{data_dir, Daemon};

/// The depth that aborted the daemon in GetTree (issue 12): deep enough
/// that a recursive walk, a nested message (decoders stop at 100 levels)
/// or an uncapped indentation would break.
const DEPTH: usize = 7_000;
/// Agents under the runtime for the wide tree, and per CreateAgents call.
const WIDTH: usize = 10_000;
const BATCH: usize = 1_000;

fn record(id: AgentId, supervisor: Option<AgentId>) -> AgentRecord {
    let preset = match supervisor {
        None => Preset::PublicNamed,
        Some(_) => Preset::PrivateDelegator,
    };
    AgentRecord {
        id,
        name: supervisor.is_none().then(|| "deep".to_owned()),
        profile: preset.profile(),
        lineage_parent_agent_id: supervisor,
        supervisor_agent_id: supervisor,
        state: LifecycleState::Active,
        brain: Default::default(),
        forked_context: None,
        composition: None,
        context_tokens: None,
        mcp_servers: Vec::new(),
        network: Default::default(),
        namespace: "default".to_owned(),
        labels: Default::default(),
        created_at_ms: 0,
        updated_at_ms: 0,
    }
}

/// Writes a chain of `DEPTH` agents, each supervising the next, into a new
/// store at `dir` (its `db`, where the daemon keeps it); returns their ids,
/// the root first.
async fn write_chain(dir: &std::path::Path) -> Vec<AgentId> {
    std::fs::create_dir_all(dir).expect("data dir");
    let store = SledStore::open(&dir.join("db"), &StoreConfig::default()).expect("store opens");
    let ids: Vec<AgentId> = (0..DEPTH).map(|_| AgentId::generate()).collect();
    for (level, chunk) in ids.chunks(500).enumerate() {
        let mut batch = Batch::new();
        for (i, id) in chunk.iter().enumerate() {
            let at = level * 500 + i;
            let supervisor = at.checked_sub(1).map(|up| ids[up]);
            batch = batch.write(Write::CreateAgent(record(*id, supervisor)));
        }
        store.commit(batch).expect("chain written");
    }
    store.close().await;
    ids
}

/// Every page of the tree (of `agent_id`, or the whole runtime), each
/// checked against the page rules as it comes.
async fn pages(c: &mut Clients, agent_id: &str, max_nodes: u32) -> Vec<pb::GetTreeResponse> {
    let mut pages: Vec<pb::GetTreeResponse> = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = c
            .supervision
            .get_tree(pb::GetTreeRequest {
                agent_id: agent_id.into(),
                page_token,
                max_nodes,
                max_depth: None,
            })
            .await
            .expect("a page of the tree")
            .into_inner();
        assert!(
            prost::Message::encoded_len(&page) <= 1024 * 1024 + 4096,
            "a page stays within the budget"
        );
        assert!(page.roots.is_empty(), "the tree is flat");
        assert!(page.nodes.iter().all(|n| n.children.is_empty()));
        page_token = page.next_page_token.clone();
        let last = page.next_page_token.is_empty();
        match (&page.cut, page.nodes.last()) {
            (Some(cut), Some(node)) => {
                assert!(!last, "a cut page says how to go on");
                assert_eq!(
                    (&cut.after_node_id, cut.after_depth),
                    (&node.id, node.depth)
                );
            }
            (None, _) => assert!(last, "only a cut page has a next one"),
            (Some(_), None) => panic!("a cut page holds nodes"),
        }
        pages.push(page);
        if last {
            return pages;
        }
    }
}

/// `holarchy tree` against the daemon: its stdout, after checking it
/// succeeded.
fn cli_tree(daemon: &Daemon, extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_holarchy"))
        .arg("--socket")
        .arg(daemon.socket())
        .arg("tree")
        .args(extra)
        .output()
        .expect("the CLI runs");
    assert!(
        out.status.success(),
        "holarchy tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deep_chain_recovers_and_its_tree_answers_pages_and_draws() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = data_dir(&root);
    let ids = write_chain(&dir).await;
    let mut daemon = Daemon::start(&dir).await;
    let mut c = daemon.clients().await;

    let whole = pages(&mut c, "", 0).await;
    let nodes: Vec<&pb::TreeNode> = whole.iter().flat_map(|p| &p.nodes).collect();
    assert_eq!(nodes.len(), DEPTH, "every level is there");
    for (level, node) in nodes.iter().enumerate() {
        assert_eq!(node.id, ids[level].to_string(), "pre-order down the chain");
        assert_eq!(node.depth as usize, level);
        let parent = level.checked_sub(1).map(|up| ids[up].to_string());
        assert_eq!(node.parent_id, parent.unwrap_or_default());
        assert!(node.actor_alive, "recovery respawned level {level}");
    }
    let last = whole.last().expect("a page");
    assert_eq!(last.agents as usize, DEPTH);
    let mismatches: Vec<&String> = whole.iter().flat_map(|p| &p.mismatches).collect();
    assert!(
        mismatches.is_empty(),
        "{:?}",
        &mismatches[..mismatches.len().min(3)]
    );

    // A subtree, cut by a small node bound: the marker says where.
    let middle = ids[DEPTH / 2].to_string();
    let sub = pages(&mut c, &middle, 300).await;
    assert!(sub.len() >= 3, "{} pages", sub.len());
    let cut = sub[0].cut.as_ref().expect("the first page is cut");
    assert_eq!(
        (cut.reason.as_str(), cut.after_depth, cut.nodes_so_far),
        ("max_nodes", 299, 300)
    );
    let sub_nodes: usize = sub.iter().map(|p| p.nodes.len()).sum();
    assert_eq!(sub_nodes, DEPTH - DEPTH / 2);

    // The CLI draws it all when asked to (its default stops at 1,000
    // lines), its indentation capped and the depth shown.
    let drawn = cli_tree(&daemon, &["--limit", "0"]);
    assert!(
        drawn.contains(&format!("[depth {}]", DEPTH - 1)),
        "{}",
        &drawn[drawn.len().saturating_sub(500)..]
    );
    assert!(
        drawn.lines().all(|l| l.len() < 400),
        "no line grows with depth"
    );
    assert!(drawn.contains(&format!("{DEPTH} agents")));

    let status = daemon.terminate(Duration::from_secs(30)).await;
    assert!(
        status.success(),
        "a deep chain shuts down cleanly: {status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_10000_wide_tree_answers_in_pages_with_a_marker_and_the_cli_draws_it() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    for batch in 0..WIDTH / BATCH {
        let agents = (0..BATCH)
            .map(|i| pb::CreateAgentRequest {
                context_tokens: None,
                mcp_servers: Vec::new(),
                network: String::new(),
                name: format!("wide-{batch}-{i}"),
                initial_message: None,
                brain: None,
                labels: Default::default(),
            })
            .collect();
        c.agents
            .create_agents(pb::CreateAgentsRequest { agents })
            .await
            .expect("a batch of agents");
    }

    let whole = pages(&mut c, "", 0).await;
    assert!(whole.len() >= 2, "10,000 agents do not fit one page");
    let cut = whole[0].cut.as_ref().expect("the first page is cut");
    assert!(["max_bytes", "max_nodes"].contains(&cut.reason.as_str()));
    assert_eq!(cut.nodes_so_far as usize, whole[0].nodes.len());
    let mut seen: Vec<&str> = whole
        .iter()
        .flat_map(|p| &p.nodes)
        .map(|n| n.id.as_str())
        .collect();
    assert_eq!(seen.len(), WIDTH);
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), WIDTH, "no agent twice across pages");
    assert_eq!(whole.last().map(|p| p.agents as usize), Some(WIDTH));

    let drawn = cli_tree(&daemon, &["--limit", "0"]);
    assert_eq!(
        drawn.lines().filter(|l| l.starts_with("agent ")).count(),
        WIDTH
    );
    assert!(drawn.contains(&format!("{WIDTH} agents")));
    let json = cli_tree(&daemon, &["--json"]);
    let json: serde_json::Value = serde_json::from_str(json.trim()).expect("one JSON object");
    assert_eq!(json["nodes"].as_array().map(Vec::len), Some(WIDTH));
}
