//! `ListMessages` past one page: following page tokens to the end yields
//! every message once, oldest first.

use holarchy::api::pb;

use crate::common::{create, data_dir, handled, send, Daemon};

const PAGE: u32 = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_messages_pages_through_every_message_once_in_order() {
    let root = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(&data_dir(&root)).await;
    let mut c = daemon.clients().await;
    let id = create(&mut c, "chatty", None).await;
    let mut sent = Vec::new();
    for i in 0..11 {
        sent.push(send(&mut c, &id, &format!("note {i:02}")).await);
    }
    handled(&c, &id, sent.len()).await;

    let mut seen = Vec::new();
    let mut pages = 0;
    let mut page_token = String::new();
    loop {
        let page = c
            .agents
            .list_messages(pb::ListMessagesRequest {
                agent_id: id.clone(),
                page_size: PAGE,
                page_token,
            })
            .await
            .expect("page")
            .into_inner();
        pages += 1;
        assert!(page.messages.len() <= PAGE as usize, "page over its size");
        assert!(pages <= sent.len(), "page tokens never end");
        seen.extend(page.messages);
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    assert!(pages >= sent.len().div_ceil(PAGE as usize), "{pages} pages");
    let ids: Vec<&str> = seen.iter().map(|m| m.message_id.as_str()).collect();
    assert_eq!(ids, sent, "every message once, oldest first");
    let texts: Vec<&str> = seen.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts.first().copied(), Some("note 00"));
    assert_eq!(texts.last().copied(), Some("note 10"));
}
