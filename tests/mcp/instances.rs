//! An instance manifest that lists MCP servers and a context budget: its
//! agent gets both, applying it again is a no-op (across a `kill -9` too),
//! a server the daemon does not have is refused with nothing changed, and
//! an apply without them takes them away.

use common::{apply_instance, get_agent};
use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::json;

use super::{call, common, list_tools, start, text};

const WITH_MCP: &str = r#"
name = "docs"
context_tokens = 4000
mcp_servers = ["tools"]

[brain.scripted]
"#;

const WITHOUT_MCP: &str = r#"
name = "docs"

[brain.scripted]
"#;

async fn apply(
    c: &mut Clients,
    manifest: &str,
) -> Result<pb::ApplyInstanceResponse, tonic::Status> {
    c.instances
        .apply_instance(pb::ApplyInstanceRequest {
            manifest: manifest.to_owned(),
            files: Default::default(),
        })
        .await
        .map(tonic::Response::into_inner)
}

async fn instance(c: &mut Clients) -> pb::Instance {
    c.instances
        .get_instance(pb::GetInstanceRequest {
            name: "docs".into(),
        })
        .await
        .expect("instance")
        .into_inner()
}

pub async fn an_instance_gives_its_agent_mcp_servers_and_a_context_budget() {
    let root = tempfile::tempdir().expect("tempdir");
    let mut daemon = start(&root, None).await;
    let mut c = daemon.clients().await;
    let agent = apply_instance(&mut c, WITH_MCP).await;

    let summary = get_agent(&mut c, &agent).await;
    assert_eq!(summary.mcp_servers, ["tools"]);
    assert_eq!(summary.context_tokens, 4000);
    let shown = instance(&mut c).await;
    assert_eq!(
        (shown.context_tokens, shown.mcp_servers.clone()),
        (4000, vec!["tools".to_owned()])
    );
    assert!(list_tools(&mut c, &agent)
        .await
        .tools
        .iter()
        .any(|t| t.name == "mcp__tools__echo"));
    let (failed, out) = call(
        &mut c,
        &agent,
        "mcp__tools__echo",
        json!({"text": "from a manifest"}),
    )
    .await;
    assert_eq!(text(failed, &out), "from a manifest");

    // The same manifest again changes nothing, before and after a crash:
    // the stored record reads back whole.
    let again = apply(&mut c, WITH_MCP).await.expect("applied");
    assert_eq!(again.change, "unchanged");
    daemon.kill9();
    drop(c);
    let daemon = start(&root, None).await;
    let mut c = daemon.clients().await;
    let again = apply(&mut c, WITH_MCP).await.expect("applied");
    assert_eq!(again.change, "unchanged");
    assert_eq!(instance(&mut c).await.digest, shown.digest);

    // A server this daemon does not have: refused, and nothing moves.
    let unknown = WITH_MCP.replace("[\"tools\"]", "[\"tools\", \"nowhere\"]");
    let refused = apply(&mut c, &unknown).await.expect_err("refused");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    assert!(
        refused.message().contains("nowhere"),
        "{}",
        refused.message()
    );
    let out_of_range = WITH_MCP.replace("4000", "10");
    let refused = apply(&mut c, &out_of_range).await.expect_err("refused");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    assert_eq!(instance(&mut c).await.digest, shown.digest);
    assert_eq!(get_agent(&mut c, &agent).await.mcp_servers, ["tools"]);

    // Without them, the agent loses both from its next turn.
    let updated = apply(&mut c, WITHOUT_MCP).await.expect("applied");
    assert_eq!(updated.change, "updated");
    let summary = get_agent(&mut c, &agent).await;
    assert!(summary.mcp_servers.is_empty(), "{:?}", summary.mcp_servers);
    assert_eq!(summary.context_tokens, 0);
    assert!(!list_tools(&mut c, &agent)
        .await
        .tools
        .iter()
        .any(|t| t.name.starts_with("mcp__")));
    let (failed, out) = call(&mut c, &agent, "mcp__tools__echo", json!({"text": "x"})).await;
    assert!(
        failed,
        "an MCP call after the servers were taken away: {out}"
    );
    drop(daemon);
}
