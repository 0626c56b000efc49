//! MCP tools: the dynamic part of an agent's catalog. Beside the typed
//! tools (listed at build time), an agent has the tools of each MCP server
//! it is allowed (its record's `mcp_servers`), named
//! `mcp__<server>__<tool>`, in the `mcp` family, with the server's own
//! JSON Schemas. They go through the same turn as typed tools: the
//! catalog check, an instance's constraints, approvals, the input and
//! result bounds, the `tool_called` event.

use std::sync::Arc;

use futures::future::join_all;
use holarchy_supervision::{Profile, ToolFamily};
use serde_json::{json, Value};

use super::error::{classified, Classify, ErrorKind};
use super::{cap_output, tool_surface, Caller, NotInCatalog, ToolError};
use crate::mcp::{McpError, PREFIX};
use crate::Ctx;

/// Most bytes (descriptions and schemas) all of one agent's MCP tools may
/// add to its catalog; a server whose tools would pass it is left out
/// whole, with a note.
pub const MAX_MCP_CATALOG_BYTES: usize = 1024 * 1024;

/// JSON-RPC's "invalid params" and "method not found".
const INVALID_PARAMS: i32 = -32602;
const METHOD_NOT_FOUND: i32 = -32601;

classified!(McpError);

impl Classify for McpError {
    fn kind(&self) -> ErrorKind {
        match self {
            McpError::UnknownServer(_) => ErrorKind::Refused,
            McpError::NoTool { .. } => ErrorKind::NotFound,
            McpError::Rejected { code, .. } => match *code {
                INVALID_PARAMS => ErrorKind::InvalidInput,
                METHOD_NOT_FOUND => ErrorKind::NotFound,
                _ => ErrorKind::Failed,
            },
            McpError::Start { .. }
            | McpError::Down { .. }
            | McpError::Closed { .. }
            | McpError::Timeout { .. }
            | McpError::Unexpected { .. }
            | McpError::ToolFailed { .. }
            | McpError::ShuttingDown => ErrorKind::Failed,
        }
    }
}

/// One tool of an agent's catalog, typed or MCP.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogEntry {
    pub name: String,
    pub family: ToolFamily,
    /// agent, task, waiting, work, workspace, memory; `mcp` for MCP tools.
    pub plane: &'static str,
    pub description: String,
    pub input_schema: Value,
}

impl CatalogEntry {
    /// What a brain is shown of the tool.
    pub fn view(&self) -> Value {
        json!({
            "name": self.name,
            "family": self.family.name(),
            "plane": self.plane,
            "description": self.description,
            "input_schema": self.input_schema,
        })
    }
}

/// An agent's whole catalog: its typed tools, then its MCP servers' tools
/// (servers in the order the agent lists them), and the servers whose
/// tools are missing now, each as `<server>: <why>`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    pub tools: Vec<CatalogEntry>,
    pub unavailable: Vec<String>,
}

/// The catalog of an agent with `profile` allowed `mcp_servers`. Lists
/// (and so starts) those servers, concurrently; one that fails leaves its
/// tools out and a note in `unavailable`.
pub async fn catalog(ctx: &Arc<Ctx>, profile: Profile, mcp_servers: &[String]) -> Catalog {
    let mut catalog = Catalog {
        tools: tool_surface(profile)
            .map(|spec| CatalogEntry {
                name: spec.name.to_owned(),
                family: spec.family,
                plane: spec.plane,
                description: spec.description.to_owned(),
                input_schema: spec.schema(),
            })
            .collect(),
        unavailable: Vec::new(),
    };
    if !profile.tool_families.contains(ToolFamily::Mcp) || mcp_servers.is_empty() {
        return catalog;
    }
    let listed = join_all(mcp_servers.iter().map(|server| ctx.mcp.connection(server))).await;
    let mut spent = 0usize;
    for (server, listed) in mcp_servers.iter().zip(listed) {
        let live = match listed {
            Ok(live) => live,
            Err(err) => {
                catalog.unavailable.push(format!("{server}: {err}"));
                continue;
            }
        };
        let size: usize = live
            .tools
            .tools
            .iter()
            .map(|t| t.description.len() + t.input_schema.to_string().len())
            .sum();
        if spent + size > MAX_MCP_CATALOG_BYTES {
            catalog.unavailable.push(format!(
                "{server}: left out, as the agent's MCP tools would be over {MAX_MCP_CATALOG_BYTES} bytes"
            ));
            continue;
        }
        spent += size;
        catalog
            .tools
            .extend(live.tools.tools.iter().map(|tool| CatalogEntry {
                name: tool.name.clone(),
                family: ToolFamily::Mcp,
                plane: "mcp",
                description: tool.description.clone(),
                input_schema: tool.input_schema.clone(),
            }));
    }
    catalog
}

/// Runs MCP tool `name` (`mcp__<server>__<tool>`) for `caller`. The
/// server must be one the caller is allowed, and its profile must have the
/// `mcp` family; otherwise the tool is not in its catalog.
pub(super) async fn call(
    ctx: &Arc<Ctx>,
    caller: Caller,
    name: &str,
    input: &Value,
) -> Result<Value, ToolError> {
    let not_in_catalog = || ToolError::from(NotInCatalog(name.to_owned()));
    if !caller.profile.tool_families.contains(ToolFamily::Mcp) {
        return Err(not_in_catalog());
    }
    let rest = name.strip_prefix(PREFIX).ok_or_else(not_in_catalog)?;
    let record = ctx
        .reads()
        .agent(caller.agent_id)?
        .ok_or_else(not_in_catalog)?;
    let Some((server, tool)) = record.mcp_servers.iter().find_map(|server| {
        let tool = rest.strip_prefix(server.as_str())?.strip_prefix("__")?;
        Some((server.as_str(), tool))
    }) else {
        return Err(not_in_catalog());
    };
    let arguments = match input {
        Value::Object(map) => map.clone(),
        Value::Null => serde_json::Map::new(),
        _ => {
            return Err(ToolError::new(
                ErrorKind::InvalidInput,
                "the input of an MCP tool is a JSON object",
            ))
        }
    };
    let output = ctx.mcp.call(server, tool, arguments).await?;
    // Bounded here too, not only by the turn: an approved call's result is
    // stored as it comes.
    let limit = ctx.config.limits.max_tool_result_bytes;
    Ok(cap_output(output, limit))
}
