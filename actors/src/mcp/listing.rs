//! What a server says of its tools, and what its calls return, made fit
//! for a brain. Both come from outside the daemon: every name,
//! description, schema and result is bounded here, and a tool that does
//! not fit is left out of the catalog (with a note saying why) rather than
//! cut into something the server never meant.

use rmcp::model::{CallToolResult, RawContent, ResourceContents, Tool};
use serde_json::{json, Value};

/// Prefix of every MCP tool's catalog name: `mcp__<server>__<tool>`.
pub const PREFIX: &str = "mcp__";
/// Longest catalog name: what OpenAI-compatible and Anthropic APIs take
/// as a function name, and what instance constraints can name.
pub const MAX_NAME: usize = 64;
/// Most tools of one server in a catalog.
pub const MAX_TOOLS: usize = 128;
/// Longest description kept; a longer one is cut.
pub const MAX_DESCRIPTION: usize = 2048;
/// Largest input schema (as compact JSON) of one tool.
pub const MAX_SCHEMA: usize = 16 * 1024;
/// Most bytes of descriptions and schemas one server adds to a catalog.
pub const MAX_LISTING: usize = 256 * 1024;
/// Most pages of `tools/list` read from one server.
pub const MAX_PAGES: usize = 8;
/// Notes kept on tools left out, per server.
const MAX_NOTES: usize = 8;

/// One tool of a server, as the catalog shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// `mcp__<server>__<tool>`.
    pub name: String,
    /// The name the server knows it by.
    pub tool: String,
    pub description: String,
    pub input_schema: Value,
}

/// A server's tools, and notes on those left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Listing {
    pub tools: Vec<McpTool>,
    pub left_out: Vec<String>,
}

impl Listing {
    pub fn find(&self, tool: &str) -> Option<&McpTool> {
        self.tools.iter().find(|t| t.tool == tool)
    }
}

/// The catalog name of `server`'s `tool`.
pub fn catalog_name(server: &str, tool: &str) -> String {
    format!("{PREFIX}{server}__{tool}")
}

/// Keeps the tools of `server` that fit, in the server's order.
pub fn sanitize(server: &str, listed: Vec<Tool>, more_pages: bool) -> Listing {
    let mut listing = Listing::default();
    let mut notes = Vec::new();
    let mut spent = 0usize;
    if more_pages {
        notes.push(format!(
            "the server listed more than {MAX_PAGES} pages of tools; the rest are left out"
        ));
    }
    for tool in listed {
        let name = catalog_name(server, &tool.name);
        let why_not = if listing.tools.len() >= MAX_TOOLS {
            Some(format!("over {MAX_TOOLS} tools"))
        } else if !tool_name_ok(&tool.name) || name.len() > MAX_NAME {
            Some(format!(
                "its name makes `{}`, not 1 to {MAX_NAME} of A-Z, a-z, 0-9, '_' and '-'",
                cut(&name, MAX_NAME * 2)
            ))
        } else if listing.tools.iter().any(|t| t.tool == tool.name) {
            Some("listed twice".into())
        } else {
            None
        };
        if let Some(why) = why_not {
            notes.push(format!(
                "tool `{}` left out: {why}",
                cut(&tool.name, MAX_NAME)
            ));
            continue;
        }
        let schema = Value::Object((*tool.input_schema).clone());
        let schema_len = schema.to_string().len();
        if schema_len > MAX_SCHEMA {
            notes.push(format!(
                "tool `{}` left out: its input schema is {schema_len} bytes, over {MAX_SCHEMA}",
                tool.name
            ));
            continue;
        }
        let description = tool
            .description
            .as_deref()
            .map(|d| cut(d, MAX_DESCRIPTION))
            .unwrap_or_default();
        let size = schema_len + description.len();
        if spent + size > MAX_LISTING {
            notes.push(format!(
                "tool `{}` left out: the server's tools are over {MAX_LISTING} bytes",
                tool.name
            ));
            continue;
        }
        spent += size;
        listing.tools.push(McpTool {
            name,
            tool: tool.name.into_owned(),
            description,
            input_schema: schema,
        });
    }
    if notes.len() > MAX_NOTES {
        let more = notes.len() - MAX_NOTES;
        notes.truncate(MAX_NOTES);
        notes.push(format!("and {more} more left out"));
    }
    listing.left_out = notes;
    listing
}

fn tool_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `text`, cut to at most `max` bytes on a character boundary, marked.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let head = holarchy_supervision::bounds::head(text, max.saturating_sub(4));
    format!("{head} …")
}

/// A result the server marked as an error, with the text it gave.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolReported {
    #[error("the tool reported an error without a message")]
    NoMessage,
    #[error("{0}")]
    Message(String),
}

/// A call's result as the brain reads it: `{"content": [...]}` (plus
/// `"structured"` when the server gave structured content). Binary content
/// (images, audio, blobs) is described, not passed on.
pub fn result_json(result: CallToolResult) -> Result<Value, ToolReported> {
    let content: Vec<Value> = result
        .content
        .into_iter()
        .map(|item| content_json(item.raw))
        .collect();
    if result.is_error == Some(true) {
        let text: Vec<&str> = content
            .iter()
            .filter_map(|c| c.get("text").and_then(Value::as_str))
            .collect();
        let text = text.join("\n");
        return Err(if text.trim().is_empty() {
            ToolReported::NoMessage
        } else {
            ToolReported::Message(text)
        });
    }
    let mut out = json!({ "content": content });
    if let Some(structured) = result.structured_content {
        out["structured"] = structured;
    }
    Ok(out)
}

fn content_json(raw: RawContent) -> Value {
    match raw {
        RawContent::Text(text) => json!({ "type": "text", "text": text.text }),
        RawContent::Image(image) => binary("image", &image.mime_type, image.data.len()),
        RawContent::Audio(audio) => binary("audio", &audio.mime_type, audio.data.len()),
        RawContent::Resource(resource) => match resource.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                json!({ "type": "resource", "uri": uri, "text": text })
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => {
                let mut out = binary("resource", mime_type.as_deref().unwrap_or(""), blob.len());
                out["uri"] = json!(uri);
                out
            }
        },
        RawContent::ResourceLink(link) => {
            json!({ "type": "resource_link", "uri": link.uri, "name": link.name })
        }
    }
}

/// Base64 content, described by its type and decoded size.
fn binary(kind: &str, mime_type: &str, base64_len: usize) -> Value {
    json!({
        "type": kind,
        "mime_type": mime_type,
        "bytes": base64_len / 4 * 3,
        "note": "binary content is not passed on to the brain",
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::model::Content;

    use super::*;

    fn tool(name: &str, description: &str, schema: Value) -> Tool {
        let Value::Object(schema) = schema else {
            panic!("an object");
        };
        Tool::new(name.to_owned(), description.to_owned(), Arc::new(schema))
    }

    #[test]
    fn tools_that_do_not_fit_are_left_out_with_a_note() {
        let object = json!({"type": "object"});
        let listed = vec![
            tool("echo", "Echoes", object.clone()),
            tool("bad name", "spaces", object.clone()),
            tool(&"x".repeat(60), "too long once prefixed", object.clone()),
            tool("echo", "again", object.clone()),
            tool(
                "big",
                "schema too big",
                json!({"type": "object", "description": "y".repeat(MAX_SCHEMA)}),
            ),
            tool("wordy", &"d".repeat(MAX_DESCRIPTION * 2), object),
        ];
        let listing = sanitize("srv", listed, false);
        let names: Vec<&str> = listing.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["mcp__srv__echo", "mcp__srv__wordy"]);
        assert!(listing.tools[1].description.len() <= MAX_DESCRIPTION);
        assert_eq!(listing.left_out.len(), 4, "{:?}", listing.left_out);
        assert!(listing.left_out[0].contains("bad name"));
    }

    #[test]
    fn a_server_listing_too_many_tools_gets_the_first_ones() {
        let listed: Vec<Tool> = (0..MAX_TOOLS + 40)
            .map(|i| tool(&format!("t{i}"), "", json!({"type": "object"})))
            .collect();
        let listing = sanitize("srv", listed, true);
        assert_eq!(listing.tools.len(), MAX_TOOLS);
        assert_eq!(listing.left_out.len(), MAX_NOTES + 1);
        assert!(listing.left_out[0].contains("pages"));
    }

    #[test]
    fn results_keep_text_and_describe_binary_content() {
        let result = CallToolResult {
            content: vec![
                Content::text("hello"),
                Content::image("aGVsbG8h", "image/png"),
            ],
            structured_content: Some(json!({"n": 1})),
            is_error: None,
            meta: None,
        };
        let out = result_json(result).expect("a success");
        assert_eq!(out["content"][0]["text"], "hello");
        assert_eq!(out["content"][1]["bytes"], 6);
        assert!(out["content"][1].get("data").is_none());
        assert_eq!(out["structured"]["n"], 1);
        let failed = CallToolResult::error(vec![Content::text("no such file")]);
        assert_eq!(
            result_json(failed),
            Err(ToolReported::Message("no such file".to_owned()))
        );
        let silent = CallToolResult::error(vec![Content::text("  ")]);
        assert_eq!(result_json(silent), Err(ToolReported::NoMessage));
    }
}
