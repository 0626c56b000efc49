//! The console's control surface in the browser, each action end to end
//! against the real daemon and checked through gRPC: the overview (counts
//! by state, turns/s, recent failures, longest queues), a message sent
//! from an agent's page (and one over the bound, refused before it is
//! sent), input to a child's task from its parent's page, supervisors and
//! creators shown by name, and the tree's filter.

use std::path::Path;

use holarchy::api::pb;
use holarchy::client::Clients;
use serde_json::json;

use crate::common::{create, eventually, messages, script, send};
use crate::support::Subtree;
use crate::webdriver::Browser;

/// Roots the console's tree loads before its "more..." (its `TREE_PAGE`).
const ROOTS_PAGE: usize = 200;

/// The overview without the token: counts and queues, failures locked.
pub async fn overview_read_only(browser: &Browser, home: &str) {
    browser.goto(&format!("{home}#/overview")).await;
    browser
        .wait_text("#ov-public-active", |t| t.parse::<u64>().is_ok())
        .await;
    browser
        .wait_text("#ov-failures", |t| t.contains("Log in"))
        .await;
    browser.goto(home).await;
    browser.wait_for("#tree > li").await;
}

/// From `agent`'s page: a message typed and sent reaches it (its reply
/// shows on the page), a text over the daemon's bound is refused with the
/// reason before anything is sent, and a scripted call of a tool nobody
/// has is sent for the overview to show as a failure.
pub async fn send_from_agent_page(browser: &Browser, home: &str, c: &mut Clients, agent: &str) {
    browser.goto(&format!("{home}#/agent/{agent}")).await;
    let before = messages(c, agent).await.len();
    let text = browser.wait_for("#send-text:not([disabled])").await;
    browser.type_into(&text, "hello from the console").await;
    let key = browser.wait_for("#send-dedupe").await;
    browser.type_into(&key, "console-1").await;
    let button = browser.wait_for("#send").await;
    browser.click(&button).await;
    browser
        .wait_text("#send-result", |t| t.starts_with("sent as msg_"))
        .await;
    let reply = eventually("the console's message handled", || {
        let mut c = c.clone();
        let agent = agent.to_owned();
        async move {
            let all = messages(&mut c, &agent).await;
            let sent = all.iter().find(|m| m.text == "hello from the console")?;
            (sent.status == pb::MessageStatus::Handled as i32).then(|| sent.reply.clone())
        }
    })
    .await;
    assert_eq!(reply, "ack: hello from the console");
    // The same dedupe key again is the same message, as over gRPC.
    browser.type_into(&text, "hello again").await;
    browser.clear(&key).await;
    browser.type_into(&key, "console-1").await;
    browser.click(&button).await;
    browser
        .wait_text("#send-result", |t| t.starts_with("already sent as msg_"))
        .await;
    assert_eq!(messages(c, agent).await.len(), before + 1, "one message");
    // The page shows the reply once reloaded.
    browser.goto(&format!("{home}#/overview")).await;
    browser.goto(&format!("{home}#/agent/{agent}")).await;
    browser
        .wait_text("#messages", |t| t.contains("ack: hello from the console"))
        .await;

    // Over the bound: refused on the page, nothing sent.
    browser
        .run("document.getElementById('send-text').value = 'x'.repeat(70000); return 0;")
        .await;
    let button = browser.wait_for("#send").await;
    browser.click(&button).await;
    browser
        .wait_text("#send-result", |t| t.contains("at most 65536"))
        .await;
    assert_eq!(messages(c, agent).await.len(), before + 1, "nothing sent");

    // A call of a tool it does not have: a tool error, for the overview.
    let text = browser.wait_for("#send-text").await;
    browser.clear(&text).await;
    let call = script(json!([{ "name": "NoSuchTool", "input": {} }]));
    browser.type_into(&text, &call).await;
    browser.click(&button).await;
    browser
        .wait_text("#send-result", |t| t.starts_with("sent as msg_"))
        .await;
}

/// From the parent's page, input to the task that holds its first private
/// child reaches the child as its next message.
pub async fn task_input_from_parent_page(
    browser: &Browser,
    home: &str,
    c: &mut Clients,
    tree: &Subtree,
) {
    let child = &tree.private[0];
    let tasks = c
        .tasks
        .list_tasks(pb::ListTasksRequest {
            agent_id: tree.lead.clone(),
            page_size: 100,
            page_token: String::new(),
        })
        .await
        .expect("tasks")
        .into_inner()
        .tasks;
    let task = tasks
        .iter()
        .find(|t| &t.child_agent_id == child)
        .expect("the child's task")
        .task_id
        .clone();
    browser.goto(&format!("{home}#/agent/{}", tree.lead)).await;
    let row = format!("tr[data-task=\"{task}\"]");
    let field = browser.wait_for(&format!("{row} .task-input-text")).await;
    browser.type_into(&field, "status report, please").await;
    let button = browser.wait_for(&format!("{row} .task-input-send")).await;
    browser.click(&button).await;
    browser
        .wait_text(&format!("{row} .task-input-result"), |t| {
            t.starts_with("sent as msg_")
        })
        .await;
    eventually("the child's input handled", || {
        let mut c = c.clone();
        let child = child.clone();
        async move {
            let all = messages(&mut c, &child).await;
            all.iter()
                .find(|m| m.text == "status report, please")
                .filter(|m| m.status == pb::MessageStatus::Handled as i32)
                .map(|_| ())
        }
    })
    .await;
}

/// A private agent's page names its supervisor and creator: the public
/// `lead` by its name; an unnamed private one by its kind and id's tail.
pub async fn names_on_private_pages(
    browser: &Browser,
    home: &str,
    c: &mut Clients,
    tree: &Subtree,
) {
    browser
        .goto(&format!("{home}#/agent/{}", tree.private[0]))
        .await;
    browser.wait_text("#supervisor", |t| t == "lead").await;
    browser.wait_text("#creator", |t| t == "lead").await;
    let middle = &tree.private[0];
    let name = crate::common::get_agent(c, middle).await.name;
    browser
        .goto(&format!("{home}#/agent/{}", tree.private[1]))
        .await;
    let tail = &middle[middle.len() - 8..];
    let shown = browser
        .wait_text("#supervisor", |t| {
            if name.is_empty() {
                t.starts_with("unnamed agt_") && t.ends_with(tail)
            } else {
                t == name
            }
        })
        .await;
    let link = browser.wait_for("#supervisor a").await;
    assert_eq!(
        browser.property(&link, "title").await,
        json!(middle),
        "{shown} links to the whole id"
    );
}

/// The overview as the operator: counts by state as gRPC tells them,
/// turns/s measured, the failed tool call named with its agent, and the
/// paused `lead`'s queue among the longest.
pub async fn overview_as_operator(
    browser: &Browser,
    home: &str,
    c: &mut Clients,
    lead: &str,
    failing: &str,
    shot: &Path,
) {
    // A paused agent keeps what it is sent queued.
    for n in 0..3 {
        send(c, lead, &format!("queued {n}")).await;
    }
    browser.goto(&format!("{home}#/overview")).await;
    browser.wait_text("#ov-public-paused", |t| t == "1").await;
    browser.wait_text("#ov-public-active", |t| t == "1").await;
    browser.wait_text("#ov-private-active", |t| t == "3").await;
    browser
        .wait_text("#ov-turns-rate", |t| t.parse::<f64>().is_ok())
        .await;
    let failure = browser
        .wait_text("#ov-failures-list", |t| t.contains("NoSuchTool"))
        .await;
    assert!(
        failure.contains(failing),
        "the failure names its agent: {failure}"
    );
    let queued = browser
        .wait_text(&format!("#ov-queues tr[data-id=\"{lead}\"]"), |t| {
            t.contains("lead") && t.contains('3')
        })
        .await;
    assert!(queued.contains("paused"), "{queued}");
    browser.screenshot(shot).await;
}

/// The tree's filter keeps matching rows and where they hang, hides the
/// rest, and works on state and on ids below the top; it finds what the
/// page has not loaded (a root past the first page, a private agent under
/// a level not expanded) through the daemon's walk.
pub async fn tree_filter(
    browser: &Browser,
    home: &str,
    c: &mut Clients,
    tree: &Subtree,
    shot: &Path,
) {
    // More roots than the page loads at first (200), then one more: its
    // row is not loaded until "more...".
    let fillers = (0..ROOTS_PAGE)
        .map(|i| pb::CreateAgentRequest {
            name: format!("filler-{i:03}"),
            ..Default::default()
        })
        .collect();
    c.agents
        .create_agents(pb::CreateAgentsRequest { agents: fillers })
        .await
        .expect("fillers");
    let straggler = create(c, "straggler", None).await;
    let lead_row = format!("#tree > li[data-id=\"{}\"]", tree.lead);
    browser.goto(home).await;
    browser.wait_for(&lead_row).await;
    let filter = browser.wait_for("#tree-filter").await;
    assert!(
        browser
            .find(&format!("#tree li[data-id=\"{straggler}\"]"))
            .await
            .is_none(),
        "the straggler is past the first page of roots"
    );
    browser.type_into(&filter, "straggler").await;
    browser
        .wait_text("#tree-filter-count", |t| t.starts_with("0 of"))
        .await;
    let found = browser
        .wait_for(&format!("#tree-matches-list > li[data-id=\"{straggler}\"]"))
        .await;
    assert!(
        browser.text(&found).await.contains("straggler"),
        "the match is named"
    );
    // A private agent two levels down, none of them expanded: found with
    // the agent it hangs under.
    let deep = &tree.private[1];
    browser.clear(&filter).await;
    browser.type_into(&filter, deep).await;
    let found = browser
        .wait_for(&format!("#tree-matches-list > li[data-id=\"{deep}\"]"))
        .await;
    let shown = browser.text(&found).await;
    assert!(
        shown.contains(&format!("under {}", tree.private[0])),
        "{shown}"
    );
    browser
        .wait_text("#tree-matches-count", |t| t.starts_with("1 found"))
        .await;
    browser.clear(&filter).await;
    browser.type_into(&filter, "bystander").await;
    browser
        .wait_text("#tree-filter-count", |t| t.starts_with("1 of"))
        .await;
    let hidden = |css: String| async move {
        let row = browser.wait_for(&css).await;
        browser.property(&row, "hidden").await == json!(true)
    };
    assert!(hidden(lead_row.clone()).await, "lead does not match");
    browser.clear(&filter).await;
    browser.type_into(&filter, "paused").await;
    browser
        .wait_text("#tree-filter-count", |t| t.starts_with("1 of"))
        .await;
    assert!(!hidden(lead_row.clone()).await, "lead is paused");
    // A leaf's id keeps its ancestors shown once its level is loaded.
    let mut parent = tree.lead.clone();
    browser.clear(&filter).await;
    // The cleared filter's list of matches goes once its pause in typing
    // is over: until then a toggle found could be a match's, about to go.
    browser.wait_for("#tree-matches[hidden]").await;
    for child in &tree.private {
        let toggle = format!("li[data-id=\"{parent}\"] > .row > .toggle");
        let button = browser.wait_for(&toggle).await;
        browser.click(&button).await;
        browser.wait_for(&format!("li[data-id=\"{child}\"]")).await;
        parent = child.clone();
    }
    let leaf = &tree.private[2];
    browser.type_into(&filter, leaf).await;
    browser
        .wait_text("#tree-filter-count", |t| t.starts_with("1 of"))
        .await;
    assert!(!hidden(lead_row.clone()).await, "lead holds the match");
    assert!(!hidden(format!("li[data-id=\"{leaf}\"]")).await);
    assert!(
        browser
            .find("#tree > li[data-id]:not([hidden]):not(.paused)")
            .await
            .is_none(),
        "no other root is shown"
    );
    browser.screenshot(shot).await;
}
