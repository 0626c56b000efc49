//! The tests' MCP server, built on rmcp: over stdio when the daemon runs
//! this binary with [`super::SERVE_STDIO`], and over streamable HTTP on a
//! loopback port inside a test.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, Content, ErrorData, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerInfo, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};

use super::HEADER_NAME;

/// The test's MCP server. Over HTTP it also notes the header it got.
#[derive(Clone, Default)]
pub struct TestServer {
    header: Arc<Mutex<Option<String>>>,
}

fn tool(name: &str, description: &str, schema: Value) -> Tool {
    let Value::Object(schema) = schema else {
        panic!("a schema is an object");
    };
    Tool::new(name.to_owned(), description.to_owned(), Arc::new(schema))
}

pub fn text_schema() -> Value {
    json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerInfo {
        ServerInfo {
            capabilities: ServerCapabilities::builder().enable_tools().build(),
            ..ServerInfo::default()
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let object = json!({"type": "object"});
        Ok(ListToolsResult::with_all_items(vec![
            tool("echo", "Echoes its text back.", text_schema()),
            tool("pid", "This server's process id.", object.clone()),
            tool(
                "env",
                "Names of this server's environment variables.",
                object.clone(),
            ),
            tool(
                "crash",
                "Exits the server in the middle of the call.",
                object.clone(),
            ),
            tool("fail", "A call that reports an error.", object.clone()),
            tool(
                "sleep",
                "Answers after `ms` milliseconds.",
                json!({"type": "object", "properties": {"ms": {"type": "integer"}}}),
            ),
            tool("whoami", "The header the server was sent.", object.clone()),
            tool(
                "signals",
                "This server's blocked and ignored signals (/proc/self/status).",
                object.clone(),
            ),
            tool(
                "read",
                "The text of the file at `path`, as this server may read it.",
                json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
            ),
            tool(
                "write",
                "Writes `text` to the file at `path`, as this server may write it.",
                json!({
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
                    "required": ["path", "text"],
                }),
            ),
            tool("bad name", "A name no catalog takes.", object),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let text = match request.name.as_ref() {
            "echo" => args
                .get("text")
                .and_then(Value::as_str)
                .ok_or_else(|| ErrorData::invalid_params("`text` is required", None))?
                .to_owned(),
            "pid" => std::process::id().to_string(),
            "env" => {
                let mut names: Vec<String> = std::env::vars().map(|(k, _)| k).collect();
                names.sort();
                names.join(",")
            }
            "crash" => std::process::exit(3),
            "fail" => {
                return Ok(CallToolResult::error(vec![Content::text(
                    "it broke on purpose",
                )]))
            }
            "sleep" => {
                let ms = args.get("ms").and_then(Value::as_u64).unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                "slept".to_owned()
            }
            "signals" => signal_lines(),
            // What the confinement allows is the test: a refusal is the
            // call's error, with the OS's words.
            "read" => match std::fs::read_to_string(string(&args, "path")?) {
                Ok(text) => text,
                Err(err) => return Ok(CallToolResult::error(vec![Content::text(err.to_string())])),
            },
            "write" => match std::fs::write(string(&args, "path")?, string(&args, "text")?) {
                Ok(()) => "written".to_owned(),
                Err(err) => return Ok(CallToolResult::error(vec![Content::text(err.to_string())])),
            },
            "whoami" => self
                .header
                .lock()
                .expect("lock")
                .clone()
                .unwrap_or_default(),
            other => return Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        };
        Ok(CallToolResult::success(vec![Content::text(text)]))
    }
}

/// The string argument `name`, or the call's invalid-input error.
fn string<'a>(args: &'a serde_json::Map<String, Value>, name: &str) -> Result<&'a str, ErrorData> {
    args.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| ErrorData::invalid_params(format!("`{name}` is required"), None))
}

/// The `SigBlk:` and `SigIgn:` lines of this process's status, one a line.
fn signal_lines() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .filter(|l| l.starts_with("SigBlk:") || l.starts_with("SigIgn:"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// This binary as a stdio server, until its client goes away.
pub fn serve_stdio() -> ExitCode {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let running = TestServer::default()
            .serve(rmcp::transport::stdio())
            .await
            .expect("the client's handshake");
        let _ = running.waiting().await;
    });
    ExitCode::SUCCESS
}

/// Serves [`TestServer`] over streamable HTTP at `/mcp` on a loopback
/// port; returns the URL and where the server notes the header it got.
pub async fn serve_http() -> (String, Arc<Mutex<Option<String>>>) {
    use hyper_util::rt::TokioIo;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::StreamableHttpService;

    let seen = Arc::new(Mutex::new(None::<String>));
    let server = TestServer {
        header: seen.clone(),
    };
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        Default::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("loopback port");
    let addr = listener.local_addr().expect("address");
    let noted = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let service = service.clone();
            let noted = noted.clone();
            let handler = hyper::service::service_fn(
                move |request: hyper::Request<hyper::body::Incoming>| {
                    let service = service.clone();
                    if let Some(value) = request.headers().get(HEADER_NAME) {
                        *noted.lock().expect("lock") = value.to_str().ok().map(str::to_owned);
                    }
                    async move { Ok::<_, std::convert::Infallible>(service.handle(request).await) }
                },
            );
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), handler)
                    .await;
            });
        }
    });
    (format!("http://{addr}/mcp"), seen)
}
