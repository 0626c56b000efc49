//! The web console in a real browser: headless Chromium, driven through
//! chromedriver, against the real daemon. It expands a three-level private
//! subtree in the tree view, reads the overview without the token, logs
//! in with the daemon's token, sends a message from an agent's page and
//! input to a child's task from its parent's page, reads supervisors and
//! creators by name, pauses a public agent from its page (each checked
//! through gRPC), finds a private agent's controls disabled, reads the
//! overview as the operator (counts, turns/s, failures, queues), filters
//! the tree (rows loaded, and through the daemon's walk rows not loaded:
//! a root past the first page, a private agent under a closed level), and
//! writes screenshots to `target/console-*.png`.
//!
//! Its own main (no test harness), so a machine without the browser says
//! plainly that it skipped, and why, instead of passing in silence.

#[path = "console/actions.rs"]
mod actions;
mod common;
#[path = "console/support.rs"]
mod support;
#[path = "console/webdriver.rs"]
mod webdriver;

use std::path::PathBuf;

use holarchy::api::pb;

use common::{create, data_dir, free_addr, Daemon};
use support::{private_subtree, state};
use webdriver::{find_browser, Browser};

fn main() {
    let Some((binary, chromedriver)) = find_browser() else {
        println!(
            "skipped: chromium and chromedriver not found (install the chromium and chromium-driver packages)"
        );
        // In the harness's words, so CI's tally counts it.
        println!("test result: ok. 0 passed; 0 failed; 1 ignored");
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    runtime.block_on(the_console_in_a_browser(binary, chromedriver));
    println!("console in a browser: ok");
    println!("test result: ok. 1 passed; 0 failed; 0 ignored");
}

/// Where screenshots go: the build's `target/` directory.
fn target_dir() -> PathBuf {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().map(PathBuf::from).unwrap_or(tmp)
}

fn row(id: &str) -> String {
    format!("li[data-id=\"{id}\"]")
}

fn toggle(id: &str) -> String {
    format!("li[data-id=\"{id}\"] > .row > .toggle")
}

async fn the_console_in_a_browser(binary: PathBuf, chromedriver: PathBuf) {
    let root = tempfile::tempdir().expect("tempdir");
    let addr = free_addr();
    let daemon = Daemon::start_with(
        &data_dir(&root),
        &["--http-listen", &addr, "--console-public-read"],
    )
    .await;
    let token = daemon.token();
    let mut c = daemon.clients().await;
    let tree = private_subtree(&mut c, "lead").await;
    let lead = tree.lead.clone();
    let bystander = create(&mut c, "bystander", None).await;

    let port = free_addr()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port");
    let browser = Browser::start(&binary, &chromedriver, port).await;
    let home = format!("http://{addr}/");
    browser.goto(&home).await;

    // The tree, read-only: expand lead, then each private level under it.
    browser.wait_for(&format!("#tree > {}", row(&lead))).await;
    let who = browser.wait_for("#who").await;
    assert_eq!(browser.text(&who).await, "read-only");
    let mut parent = lead.clone();
    for child in &tree.private {
        let button = browser.wait_for(&toggle(&parent)).await;
        browser.click(&button).await;
        let shown = browser
            .wait_for(&format!("{} > ul > {}", row(&parent), row(child)))
            .await;
        let class = browser.property(&shown, "className").await;
        assert!(
            class.as_str().is_some_and(|c| c.contains("private")),
            "{child} is marked private: {class}"
        );
        let badge = browser
            .wait_for(&format!("{} > .row > .badge.private", row(child)))
            .await;
        assert_eq!(browser.text(&badge).await, "private");
        parent = child.clone();
    }
    // Each level's task handle is shown and marked.
    let handle = browser
        .wait_for(&format!("{} > ul > li.task .badge.task", row(&lead)))
        .await;
    assert_eq!(browser.text(&handle).await, "task");
    let depth = browser
        .run(&format!(
            "let n = document.querySelector('{}'); let d = 0; \
             while ((n = n.parentElement.closest('li'))) d++; return d;",
            row(&tree.private[2]).replace('\'', "\\'")
        ))
        .await;
    assert_eq!(depth, 3, "the leaf sits three agents below the top");
    let check = browser.wait_for("#check").await;
    let check = browser.text(&check).await;
    assert!(check.contains("match"), "the live-vs-stored check: {check}");
    let tree_shot = target_dir().join("console-tree.png");
    browser.screenshot(&tree_shot).await;

    actions::overview_read_only(&browser, &home).await;

    // Log in with the daemon's token, then act from agents' pages.
    let field = browser.wait_for("#token").await;
    browser.type_into(&field, &token).await;
    let login = browser.wait_for("#login").await;
    browser.click(&login).await;
    // The bootstrap token is an admin's: the page names the role.
    browser.wait_text("#who", |t| t == "admin").await;
    // The whole runtime's check walks every agent: the operator's only.
    let whole = browser.wait_for("#check-all").await;
    browser.click(&whole).await;
    browser
        .wait_text("#check-all-result", |t| t.contains("every actor matches"))
        .await;
    actions::send_from_agent_page(&browser, &home, &mut c, &bystander).await;
    actions::task_input_from_parent_page(&browser, &home, &mut c, &tree).await;
    actions::names_on_private_pages(&browser, &home, &mut c, &tree).await;
    let shots = target_dir();
    let send_shot = shots.join("console-send.png");
    browser.goto(&format!("{home}#/agent/{bystander}")).await;
    browser
        .wait_for(&format!("#agent[data-id=\"{bystander}\"] #send-text"))
        .await;
    browser.screenshot(&send_shot).await;

    // Pause lead from its page.
    browser.goto(&format!("{home}#/agent/{lead}")).await;
    // The page before was another agent's, with a pause button too.
    browser
        .wait_for(&format!("#agent[data-id=\"{lead}\"]"))
        .await;
    let pause = browser.wait_for("#action-pause:not([disabled])").await;
    browser.wait_for("#events .event").await;
    browser.click(&pause).await;
    browser.wait_text("#agent-state", |t| t == "paused").await;
    assert_eq!(state(&mut c, &lead).await, pb::LifecycleState::Paused);
    browser.wait_for("#action-resume:not([disabled])").await;
    browser
        .wait_text("#events", |t| t.contains("agent_state_changed"))
        .await;
    let agent_shot = shots.join("console-agent.png");
    browser.screenshot(&agent_shot).await;

    // A private agent's page: contents shown, controls refused.
    browser
        .goto(&format!("{home}#/agent/{}", tree.private[0]))
        .await;
    browser
        .wait_text("#agent h1", |t| t.contains("private"))
        .await;
    let private_pause = browser.wait_for("#action-pause").await;
    assert_eq!(
        browser.property(&private_pause, "disabled").await,
        true,
        "a private agent takes no operator ingress"
    );

    // Back on the tree, lead is shown paused.
    browser.goto(&home).await;
    browser
        .wait_for(&format!("#tree > li.paused[data-id=\"{lead}\"]"))
        .await;
    let paused_shot = shots.join("console-tree-paused.png");
    browser.screenshot(&paused_shot).await;

    let overview_shot = shots.join("console-overview.png");
    actions::overview_as_operator(&browser, &home, &mut c, &lead, "bystander", &overview_shot)
        .await;
    let filter_shot = shots.join("console-tree-filter.png");
    actions::tree_filter(&browser, &home, &mut c, &tree, &filter_shot).await;

    for shot in [
        &tree_shot,
        &agent_shot,
        &paused_shot,
        &send_shot,
        &overview_shot,
        &filter_shot,
    ] {
        let png = std::fs::read(shot).expect("screenshot");
        assert!(png.starts_with(b"\x89PNG"), "{} is a PNG", shot.display());
        println!("screenshot: {}", shot.display());
    }
}
