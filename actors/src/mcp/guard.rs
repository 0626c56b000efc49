//! A transport between the MCP SDK and a server (stdio or HTTP) that keeps
//! to the daemon what the daemon does not use. The daemon offers servers
//! no capability, so the requests a server sends it are answered here as
//! the SDK would for a client that offers nothing, and its notifications
//! are dropped (the daemon ignores them). Neither reaches the SDK, which
//! would log each request's id as sent (a newline in it forging a log
//! line) and every notification whole: this module logs a request's
//! method and id escaped, cut and limited per server (see
//! [`super::peer_log`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use rmcp::model::{
    ClientJsonRpcMessage, ClientResult, CreateElicitationResult, ElicitationAction, EmptyResult,
    ErrorCode, ErrorData, JsonRpcMessage, JsonRpcRequest, ListRootsResult, ServerRequest,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleClient;

use super::peer_log::{shown, LogLimit, MAX_SHOWN};

type Sending<E> = Pin<Box<dyn Future<Output = Result<(), E>> + Send>>;

/// `inner`, with what the server sends the daemon kept from the SDK.
pub struct Guarded<T: Transport<RoleClient>> {
    inner: T,
    server: String,
    log: Arc<LogLimit>,
    /// The answer to the server's last request, while it is being
    /// written: kept here, so it survives the SDK dropping a `receive`
    /// (it does whenever something else is ready first), and finished
    /// before anything more is read, so a server that floods requests and
    /// reads none of the answers stalls only itself.
    answering: Option<Sending<T::Error>>,
}

impl<T: Transport<RoleClient>> std::fmt::Debug for Guarded<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guarded")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl<T: Transport<RoleClient>> Guarded<T> {
    pub fn new(inner: T, server: &str, log: Arc<LogLimit>) -> Self {
        Self {
            inner,
            server: server.to_owned(),
            log,
            answering: None,
        }
    }

    /// The answer to `request`: what the SDK answered for a client that
    /// offers nothing (`ping`: empty; `roots/list`: no roots; elicitation:
    /// declined), or, for a request to sample or one the protocol does not
    /// know, "method not found", logged within the server's limit.
    fn answer(&self, request: JsonRpcRequest<ServerRequest>) -> ClientJsonRpcMessage {
        let JsonRpcRequest { id, request, .. } = request;
        let result = match &request {
            ServerRequest::PingRequest(_) => Some(ClientResult::EmptyResult(EmptyResult {})),
            ServerRequest::ListRootsRequest(_) => {
                Some(ClientResult::ListRootsResult(ListRootsResult::default()))
            }
            ServerRequest::CreateElicitationRequest(_) => Some(
                ClientResult::CreateElicitationResult(CreateElicitationResult {
                    action: ElicitationAction::Decline,
                    content: None,
                }),
            ),
            ServerRequest::CreateMessageRequest(_) | ServerRequest::CustomRequest(_) => None,
        };
        if let Some(result) = result {
            return ClientJsonRpcMessage::response(result, id);
        }
        if self.log.allow() {
            let method = match &request {
                ServerRequest::CustomRequest(custom) => shown(&custom.method, MAX_SHOWN),
                _ => "sampling/createMessage".to_owned(),
            };
            tracing::warn!(
                server = %self.server,
                method = %method,
                id = %shown(&id.to_string(), MAX_SHOWN),
                "MCP server sent a request the daemon does not serve; answered \"method not found\""
            );
        }
        ClientJsonRpcMessage::error(
            ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "the holarchy daemon offers MCP servers no capability",
                None,
            ),
            id,
        )
    }
}

impl<T> Transport<RoleClient> for Guarded<T>
where
    T: Transport<RoleClient> + 'static,
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            if let Some(sending) = self.answering.as_mut() {
                // A failed write is the connection closing: the next
                // receive says so.
                let _ = sending.await;
                self.answering = None;
            }
            match self.inner.receive().await? {
                JsonRpcMessage::Request(request) => {
                    let answer = self.answer(request);
                    self.answering = Some(Box::pin(self.inner.send(answer)));
                }
                JsonRpcMessage::Notification(_) => {}
                message => return Some(message),
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
