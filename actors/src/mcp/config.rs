//! The MCP configuration (`serve --mcp-config FILE`): a JSON object whose
//! `mcpServers` map names each server and says how to reach it. Read once
//! at start and checked whole: a bad file refuses the start, naming what is
//! wrong. Nothing in it is a secret by design: an HTTP server's header
//! value is read from the daemon's environment at connect time, by the
//! variable's name given here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::header::HeaderName;
use serde::Deserialize;

/// Largest configuration file.
pub const MAX_CONFIG_BYTES: u64 = 256 * 1024;
/// Most servers one daemon may name.
pub const MAX_SERVERS: usize = 32;
/// Longest server name (`[a-z0-9_-]`).
pub const MAX_SERVER_NAME: usize = 32;
/// Bounds on a stdio server's command line and environment.
const MAX_ARGS: usize = 64;
const MAX_ENV: usize = 64;
const MAX_TEXT: usize = 4096;
const MAX_ENV_NAME: usize = 128;
const MAX_READ_WRITE: usize = 16;
const MAX_READ_ONLY: usize = 16;
const MAX_URL: usize = 2048;
const MAX_HEADER_PREFIX: usize = 64;
/// A call's timeout, unless the server's entry sets `timeout_ms`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The least a start is given unless the entry sets `start_timeout_ms`.
const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(30);
const MIN_TIMEOUT_MS: u64 = 1_000;
const MAX_TIMEOUT_MS: u64 = 3_600_000;

/// Every configured server, by name.
#[derive(Debug, Clone, Default)]
pub struct McpConfig {
    servers: BTreeMap<String, ServerConfig>,
}

/// One server: how to reach it and how long a call may take.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub name: String,
    pub transport: Transport,
    /// How long a call may take.
    pub timeout: Duration,
    /// How long a start may take, up to its tool listing: `start_timeout_ms`,
    /// else the call's timeout or 30 s, whichever is longer (a program may
    /// take a while to start the first time). A server that never answers
    /// its handshake holds its slot, and the calls waiting on it, this long.
    pub start_timeout: Duration,
}

#[derive(Debug, Clone)]
pub enum Transport {
    Stdio(StdioConfig),
    Http(HttpConfig),
}

/// A server the daemon runs as a child process and talks to over its
/// stdin and stdout.
#[derive(Clone)]
pub struct StdioConfig {
    pub command: String,
    pub args: Vec<String>,
    /// Its whole environment besides the daemon's short allowlist (`PATH`,
    /// locale) and its private `HOME`/`TMPDIR`.
    pub env: Vec<(String, String)>,
    /// Directories it may write to besides its private one (absolute).
    pub read_write: Vec<PathBuf>,
    /// Files and directories it may read (absolute), besides the system's
    /// paths and those granted by default (see `mcp::grants`).
    pub read_only: Vec<PathBuf>,
    /// What network it may reach: `full` unless the operator says.
    pub network: holarchy_supervision::NetworkPolicy,
}

impl std::fmt::Debug for StdioConfig {
    // The environment's values may be tokens: names only.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioConfig")
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("read_write", &self.read_write)
            .field("read_only", &self.read_only)
            .field("network", &self.network)
            .finish()
    }
}

/// A server reached over streamable HTTP.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    pub url: reqwest::Url,
    pub header: Option<HeaderConfig>,
}

/// One header sent with every request, its value read from the daemon's
/// environment variable `value_env` when the connection is made.
#[derive(Debug, Clone)]
pub struct HeaderConfig {
    pub name: HeaderName,
    pub value_env: String,
    /// Put before the variable's value (`"Bearer "`, say).
    pub value_prefix: String,
}

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum McpConfigError {
    #[error("cannot read the MCP configuration {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the MCP configuration is over {MAX_CONFIG_BYTES} bytes")]
    TooLarge,
    #[error("the MCP configuration is not valid: {0}")]
    Parse(String),
    #[error("the MCP configuration names {count} servers; at most {MAX_SERVERS}")]
    TooMany { count: usize },
    #[error("MCP server name `{0}`: use 1 to {MAX_SERVER_NAME} of a-z, 0-9, '-' and '_', without \"__\"")]
    BadName(String),
    #[error("MCP server `{server}`: {reason}")]
    Server {
        server: String,
        reason: ServerProblem,
    },
}

/// What is wrong with one server's entry.
#[derive(Debug, thiserror::Error)]
pub enum ServerProblem {
    #[error("timeout_ms must be {MIN_TIMEOUT_MS} to {MAX_TIMEOUT_MS}")]
    Timeout,
    #[error("start_timeout_ms must be {MIN_TIMEOUT_MS} to {MAX_TIMEOUT_MS}")]
    StartTimeout,
    #[error("a server with `command` is of type `stdio`")]
    CommandNotStdio,
    #[error("`header` is for HTTP servers")]
    HeaderOnStdio,
    #[error("a server with `url` is of type `http`")]
    UrlNotHttp,
    #[error("`args`, `env`, `read_write`, `read_only` and `network` are for stdio servers")]
    StdioFieldsOnHttp,
    #[error("give `command` or `url`, not both")]
    CommandAndUrl,
    #[error("give `command` (stdio) or `url` (HTTP)")]
    NoCommandOrUrl,
    #[error("`command` is empty")]
    EmptyCommand,
    /// `field` names the text as the operator wrote it (`env.NAME`...).
    #[error("{field} is over {MAX_TEXT} bytes")]
    TextTooLong { field: String },
    #[error("{field} holds a NUL byte")]
    NulByte { field: String },
    #[error("at most {MAX_ARGS} `args`")]
    TooManyArgs,
    #[error("at most {MAX_ENV} `env` entries")]
    TooManyEnv,
    #[error("`env` name `{0}` is not a variable name")]
    EnvName(String),
    #[error("at most {MAX_READ_WRITE} `read_write` paths")]
    TooManyReadWrite,
    #[error("`read_write` path {} is not absolute", .0.display())]
    RelativeReadWrite(PathBuf),
    #[error("at most {MAX_READ_ONLY} `read_only` paths")]
    TooManyReadOnly,
    #[error("`read_only` path {} is not absolute", .0.display())]
    RelativeReadOnly(PathBuf),
    #[error("`network`: {0}")]
    Network(#[from] holarchy_supervision::network::NetworkPolicyError),
    #[error("`url` is over {MAX_URL} bytes")]
    UrlTooLong,
    /// The URL parser's reason.
    #[error("`url` is not a URL: {0}")]
    NotUrl(String),
    #[error("`url` must be http or https")]
    UrlScheme,
    /// Credentials belong in the header, read from the environment.
    #[error("`url` must not hold credentials; use `header`")]
    UrlCredentials,
    #[error("header name `{0}` is not valid")]
    HeaderName(String),
    #[error("header `value_env` `{0}` is not a variable name")]
    HeaderValueEnv(String),
    #[error("header `value_prefix` must be at most {MAX_HEADER_PREFIX} printable ASCII bytes")]
    HeaderPrefix,
}

/// The file as written. Unknown fields are refused, so a typo is not a
/// silently ignored setting.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileEntry {
    #[serde(rename = "mcpServers")]
    mcp_servers: BTreeMap<String, ServerEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerEntry {
    /// `stdio`, `http` or `streamable-http`; optional, as the other fields
    /// already tell.
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    read_write: Vec<PathBuf>,
    #[serde(default)]
    read_only: Vec<PathBuf>,
    /// `full`, `none`, or TCP ports such as `"443,8080"`.
    network: Option<String>,
    url: Option<String>,
    header: Option<HeaderEntry>,
    timeout_ms: Option<u64>,
    start_timeout_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeaderEntry {
    name: String,
    value_env: String,
    #[serde(default)]
    value_prefix: String,
}

impl McpConfig {
    /// Reads and checks the file at `path`.
    pub fn load(path: &Path) -> Result<Self, McpConfigError> {
        let read = |source| McpConfigError::Read {
            path: path.to_owned(),
            source,
        };
        let size = std::fs::metadata(path).map_err(read)?.len();
        if size > MAX_CONFIG_BYTES {
            return Err(McpConfigError::TooLarge);
        }
        let text = std::fs::read_to_string(path).map_err(read)?;
        Self::parse(&text)
    }

    /// Checks a configuration's text.
    pub fn parse(text: &str) -> Result<Self, McpConfigError> {
        if text.len() as u64 > MAX_CONFIG_BYTES {
            return Err(McpConfigError::TooLarge);
        }
        let file: FileEntry =
            serde_json::from_str(text).map_err(|e| McpConfigError::Parse(e.to_string()))?;
        if file.mcp_servers.len() > MAX_SERVERS {
            return Err(McpConfigError::TooMany {
                count: file.mcp_servers.len(),
            });
        }
        let mut servers = BTreeMap::new();
        for (name, entry) in file.mcp_servers {
            if !server_name_ok(&name) {
                return Err(McpConfigError::BadName(name));
            }
            let server = entry
                .check(&name)
                .map_err(|reason| McpConfigError::Server {
                    server: name.clone(),
                    reason,
                })?;
            servers.insert(name, server);
        }
        Ok(Self { servers })
    }

    /// The server named `name`, if configured.
    pub fn server(&self, name: &str) -> Option<&ServerConfig> {
        self.servers.get(name)
    }

    pub fn servers(&self) -> impl Iterator<Item = &ServerConfig> {
        self.servers.values()
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }
}

/// `[a-z0-9_-]{1,32}` without `__`, which separates the server from the
/// tool in `mcp__<server>__<tool>`.
pub fn server_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SERVER_NAME
        && !name.contains("__")
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

fn env_name_ok(name: &str) -> bool {
    let mut bytes = name.bytes();
    name.len() <= MAX_ENV_NAME
        && bytes
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn text_ok(field: &str, text: &str) -> Result<(), ServerProblem> {
    if text.len() > MAX_TEXT {
        return Err(ServerProblem::TextTooLong {
            field: field.to_owned(),
        });
    }
    if text.contains('\0') {
        return Err(ServerProblem::NulByte {
            field: field.to_owned(),
        });
    }
    Ok(())
}

impl ServerEntry {
    fn check(self, name: &str) -> Result<ServerConfig, ServerProblem> {
        let timeout_ms = self
            .timeout_ms
            .unwrap_or(DEFAULT_TIMEOUT.as_millis() as u64);
        if !(MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS).contains(&timeout_ms) {
            return Err(ServerProblem::Timeout);
        }
        let start_timeout = match self.start_timeout_ms {
            Some(ms) if (MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS).contains(&ms) => {
                Duration::from_millis(ms)
            }
            Some(_) => return Err(ServerProblem::StartTimeout),
            None => Duration::from_millis(timeout_ms).max(DEFAULT_START_TIMEOUT),
        };
        let is_http = |kind: &str| matches!(kind, "http" | "streamable-http" | "streamable_http");
        let transport = match (self.command, self.url) {
            (Some(command), None) => {
                if self.kind.as_deref().is_some_and(|k| k != "stdio") {
                    return Err(ServerProblem::CommandNotStdio);
                }
                if self.header.is_some() {
                    return Err(ServerProblem::HeaderOnStdio);
                }
                let mut stdio = check_stdio(
                    command,
                    self.args,
                    self.env,
                    self.read_write,
                    self.read_only,
                )?;
                if let Some(network) = &self.network {
                    text_ok("`network`", network)?;
                    stdio.network = holarchy_supervision::NetworkPolicy::parse(network)?;
                }
                Transport::Stdio(stdio)
            }
            (None, Some(url)) => {
                if self.kind.as_deref().is_some_and(|k| !is_http(k)) {
                    return Err(ServerProblem::UrlNotHttp);
                }
                if !self.args.is_empty()
                    || !self.env.is_empty()
                    || !self.read_write.is_empty()
                    || !self.read_only.is_empty()
                    || self.network.is_some()
                {
                    return Err(ServerProblem::StdioFieldsOnHttp);
                }
                Transport::Http(check_http(&url, self.header)?)
            }
            (Some(_), Some(_)) => return Err(ServerProblem::CommandAndUrl),
            (None, None) => return Err(ServerProblem::NoCommandOrUrl),
        };
        Ok(ServerConfig {
            name: name.to_owned(),
            transport,
            timeout: Duration::from_millis(timeout_ms),
            start_timeout,
        })
    }
}

fn check_stdio(
    command: String,
    args: Vec<String>,
    env: BTreeMap<String, String>,
    read_write: Vec<PathBuf>,
    read_only: Vec<PathBuf>,
) -> Result<StdioConfig, ServerProblem> {
    if command.trim().is_empty() {
        return Err(ServerProblem::EmptyCommand);
    }
    text_ok("`command`", &command)?;
    if args.len() > MAX_ARGS {
        return Err(ServerProblem::TooManyArgs);
    }
    for arg in &args {
        text_ok("an argument", arg)?;
    }
    if env.len() > MAX_ENV {
        return Err(ServerProblem::TooManyEnv);
    }
    for (key, value) in &env {
        if !env_name_ok(key) {
            return Err(ServerProblem::EnvName(key.clone()));
        }
        text_ok(&format!("`env.{key}`"), value)?;
    }
    if read_write.len() > MAX_READ_WRITE {
        return Err(ServerProblem::TooManyReadWrite);
    }
    if let Some(relative) = read_write.iter().find(|p| !p.is_absolute()) {
        return Err(ServerProblem::RelativeReadWrite(relative.clone()));
    }
    if read_only.len() > MAX_READ_ONLY {
        return Err(ServerProblem::TooManyReadOnly);
    }
    if let Some(relative) = read_only.iter().find(|p| !p.is_absolute()) {
        return Err(ServerProblem::RelativeReadOnly(relative.clone()));
    }
    Ok(StdioConfig {
        command,
        args,
        env: env.into_iter().collect(),
        read_write,
        read_only,
        network: holarchy_supervision::NetworkPolicy::Full,
    })
}

fn check_http(url: &str, header: Option<HeaderEntry>) -> Result<HttpConfig, ServerProblem> {
    if url.len() > MAX_URL {
        return Err(ServerProblem::UrlTooLong);
    }
    let url = reqwest::Url::parse(url).map_err(|e| ServerProblem::NotUrl(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ServerProblem::UrlScheme);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ServerProblem::UrlCredentials);
    }
    let header = match header {
        None => None,
        Some(entry) => {
            let name = HeaderName::from_bytes(entry.name.as_bytes())
                .map_err(|_| ServerProblem::HeaderName(entry.name.clone()))?;
            if !env_name_ok(&entry.value_env) {
                return Err(ServerProblem::HeaderValueEnv(entry.value_env));
            }
            let prefix_ok = entry.value_prefix.len() <= MAX_HEADER_PREFIX
                && entry
                    .value_prefix
                    .bytes()
                    .all(|b| (b' '..=b'~').contains(&b));
            if !prefix_ok {
                return Err(ServerProblem::HeaderPrefix);
            }
            Some(HeaderConfig {
                name,
                value_env: entry.value_env,
                value_prefix: entry.value_prefix,
            })
        }
    };
    Ok(HttpConfig { url, header })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_names_stdio_and_http_servers() {
        let config = McpConfig::parse(
            r#"{"mcpServers": {
                "files": {"command": "mcp-files", "args": ["--root", "/srv"], "env": {"LEVEL": "warn"}},
                "search": {"type": "http", "url": "https://mcp.example.test/mcp",
                           "header": {"name": "Authorization", "value_env": "SEARCH_TOKEN", "value_prefix": "Bearer "},
                           "timeout_ms": 5000}
            }}"#,
        )
        .expect("valid");
        let files = config.server("files").expect("files");
        assert_eq!(files.timeout, DEFAULT_TIMEOUT);
        assert!(matches!(&files.transport, Transport::Stdio(s) if s.args.len() == 2));
        let search = config.server("search").expect("search");
        assert_eq!(search.timeout, Duration::from_secs(5));
        // A start gets the call's timeout or 30 s, whichever is longer.
        assert_eq!(files.start_timeout, Duration::from_secs(60));
        assert_eq!(search.start_timeout, Duration::from_secs(30));
        let Transport::Http(http) = &search.transport else {
            panic!("http");
        };
        let header = http.header.as_ref().expect("header");
        assert_eq!(header.name.as_str(), "authorization");
        assert_eq!(header.value_env, "SEARCH_TOKEN");
    }

    #[test]
    fn bad_configs_are_refused_naming_what_is_wrong() {
        let refused = |text: &str| McpConfig::parse(text).expect_err(text).to_string();
        assert!(refused(r#"{"mcpServers": {"Files": {"command": "x"}}}"#).contains("`Files`"));
        assert!(refused(r#"{"mcpServers": {"a__b": {"command": "x"}}}"#).contains("a__b"));
        let long = "a".repeat(MAX_SERVER_NAME + 1);
        assert!(refused(&format!(
            r#"{{"mcpServers": {{"{long}": {{"command": "x"}}}}}}"#
        ))
        .contains(&long));
        assert!(refused(r#"{"mcpServers": {"a": {}}}"#).contains("give `command`"));
        assert!(
            refused(r#"{"mcpServers": {"a": {"command": "x", "url": "http://h"}}}"#)
                .contains("not both")
        );
        assert!(
            refused(r#"{"mcpServers": {"a": {"command": "x", "cwd": "/"}}}"#)
                .contains("unknown field")
        );
        assert!(refused(r#"{"mcpServers": {"a": {"url": "ftp://h/"}}}"#).contains("http"));
        assert!(
            refused(r#"{"mcpServers": {"a": {"url": "http://u:p@h/"}}}"#).contains("credentials")
        );
        assert!(refused(
            r#"{"mcpServers": {"a": {"url": "http://h/", "header": {"name": "X", "value_env": "1X"}}}}"#
        )
        .contains("variable name"));
        assert!(
            refused(r#"{"mcpServers": {"a": {"command": "x", "timeout_ms": 5}}}"#)
                .contains("timeout_ms")
        );
        assert!(
            refused(r#"{"mcpServers": {"a": {"command": "x", "start_timeout_ms": 5}}}"#)
                .contains("start_timeout_ms")
        );
        let quick = McpConfig::parse(
            r#"{"mcpServers": {"a": {"command": "x", "start_timeout_ms": 1000}}}"#,
        )
        .expect("valid");
        assert_eq!(
            quick.server("a").map(|a| a.start_timeout),
            Some(Duration::from_secs(1))
        );
        assert!(
            refused(r#"{"mcpServers": {"a": {"command": "x", "read_write": ["rel"]}}}"#)
                .contains("absolute")
        );
        assert!(
            refused(r#"{"mcpServers": {"a": {"command": "x", "read_only": ["rel"]}}}"#)
                .contains("`read_only` path rel is not absolute")
        );
        assert!(
            refused(r#"{"mcpServers": {"a": {"url": "http://h/", "read_only": ["/srv"]}}}"#)
                .contains("for stdio servers")
        );
        let many: Vec<String> = (0..=MAX_SERVERS)
            .map(|i| format!(r#""s{i}": {{"command": "x"}}"#))
            .collect();
        assert!(
            refused(&format!(r#"{{"mcpServers": {{{}}}}}"#, many.join(","))).contains("at most")
        );
        let huge = format!(
            r#"{{"mcpServers": {{"a": {{"command": "{}"}}}}}}"#,
            "x".repeat(MAX_CONFIG_BYTES as usize)
        );
        assert!(matches!(
            McpConfig::parse(&huge),
            Err(McpConfigError::TooLarge)
        ));
    }

    #[test]
    fn a_stdio_server_takes_a_network_policy_and_an_http_one_none() {
        let refused = |text: &str| McpConfig::parse(text).expect_err(text).to_string();
        let config = McpConfig::parse(
            r#"{"mcpServers": {"a": {"command": "x", "network": "none"}, "b": {"command": "x", "network": "443"}, "c": {"command": "x"}}}"#,
        )
        .expect("valid");
        let network = |name: &str| match config.server(name).map(|s| &s.transport) {
            Some(Transport::Stdio(stdio)) => stdio.network.clone(),
            other => panic!("{name}: {other:?}"),
        };
        assert_eq!(network("a"), holarchy_supervision::NetworkPolicy::None);
        assert_eq!(
            network("b"),
            holarchy_supervision::NetworkPolicy::Ports(vec![443])
        );
        assert_eq!(network("c"), holarchy_supervision::NetworkPolicy::Full);
        assert!(
            refused(r#"{"mcpServers": {"a": {"command": "x", "network": "all"}}}"#)
                .contains("`network`")
        );
        assert!(
            refused(r#"{"mcpServers": {"a": {"url": "http://h/", "network": "none"}}}"#)
                .contains("for stdio servers")
        );
    }

    #[test]
    fn a_stdio_servers_environment_values_never_print() {
        let config = McpConfig::parse(
            r#"{"mcpServers": {"a": {"command": "x", "env": {"API_TOKEN": "s3cr3t-value"}}}}"#,
        )
        .expect("valid");
        assert!(!format!("{config:?}").contains("s3cr3t-value"));
    }
}
