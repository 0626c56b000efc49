//! The console's writes that carry text: a message to a public agent
//! (`SendMessage`) and input to a task (`SendTaskInput`, the operator's
//! way to a private child, as `holarchy task input`). Each body is one
//! small JSON object, read only after the caller proved to be the
//! operator, and never past [`MAX_BODY`]; the text in it is then held to
//! the same bounds as over gRPC, by the same calls.

use http_body_util::{BodyExt as _, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderMap, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};

use holarchy_supervision::bounds::{MAX_DEDUPE_KEY_LEN, MAX_MESSAGE_LEN};

use crate::api::pb;
use crate::api::pb::agent_service_server::AgentService as _;
use crate::api::pb::task_service_server::TaskService as _;

use super::routes::called;
use super::{Console, Refusal};

/// Largest body taken. JSON may spell a character of text in up to six
/// bytes (`\u0001`), so a message at its limit fits whatever it holds;
/// anything larger is refused before it is read whole.
pub const MAX_BODY: usize = 6 * MAX_MESSAGE_LEN + 1024;

/// A message for an agent, as the page posts it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MessageBody {
    text: String,
    #[serde(default)]
    dedupe_key: String,
}

/// Input for a task.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InputBody {
    text: String,
}

/// `POST /api/agents/ID/messages`: refused for a private agent (403) as
/// over gRPC; answered once the message is on disk.
pub async fn send_message(
    console: &Console,
    agent_id: &str,
    headers: &HeaderMap,
    body: Incoming,
) -> Result<Value, Refusal> {
    let given: MessageBody = read(headers, body).await?;
    check_text(&given.text)?;
    if given.dedupe_key.len() > MAX_DEDUPE_KEY_LEN {
        return Err(Refusal::bad(format!(
            "the dedupe key is {} bytes; at most {MAX_DEDUPE_KEY_LEN}",
            given.dedupe_key.len()
        )));
    }
    let sent = called(
        console
            .agents
            .send_message(super::req(pb::SendMessageRequest {
                agent_id: agent_id.to_owned(),
                text: given.text,
                dedupe_key: given.dedupe_key,
            }))
            .await,
    )?;
    Ok(json!({ "message_id": sent.message_id, "duplicate": sent.duplicate }))
}

/// `POST /api/tasks/ID/input`: a child's next message, or a line on a
/// command's stdin.
pub async fn task_input(
    console: &Console,
    task_id: &str,
    headers: &HeaderMap,
    body: Incoming,
) -> Result<Value, Refusal> {
    let given: InputBody = read(headers, body).await?;
    check_text(&given.text)?;
    let sent = called(
        console
            .tasks
            .send_task_input(super::req(pb::SendTaskInputRequest {
                task_id: task_id.to_owned(),
                text: given.text,
            }))
            .await,
    )?;
    Ok(json!({ "message_id": sent.message_id }))
}

/// The same bounds the gRPC call holds it to, said in the console's
/// words before the call is made.
fn check_text(text: &str) -> Result<(), Refusal> {
    if text.trim().is_empty() {
        return Err(Refusal::bad("the text is empty"));
    }
    if text.len() > MAX_MESSAGE_LEN {
        return Err(Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the text is {} bytes; at most {MAX_MESSAGE_LEN}",
                text.len()
            ),
        ));
    }
    Ok(())
}

/// The body as `T`: JSON, at most [`MAX_BODY`] bytes (a declared length
/// over it is refused before anything is read).
async fn read<T: for<'de> Deserialize<'de>>(
    headers: &HeaderMap,
    body: Incoming,
) -> Result<T, Refusal> {
    let json = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    if !json {
        return Err(Refusal::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the body as application/json",
        ));
    }
    let too_large = || {
        Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is over {MAX_BODY} bytes; a text is at most {MAX_MESSAGE_LEN}"),
        )
    };
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_BODY as u64) {
        return Err(too_large());
    }
    let bytes = match Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(err) if err.is::<http_body_util::LengthLimitError>() => return Err(too_large()),
        Err(_) => return Err(Refusal::bad("the body could not be read")),
    };
    serde_json::from_slice(&bytes).map_err(|err| Refusal::bad(format!("a malformed body: {err}")))
}
