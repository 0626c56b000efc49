//! `npx -y PACKAGE` and `uvx PACKAGE`, the ways most MCP servers are
//! documented to start, run from what the launcher's cache already holds.
//!
//! Neither launcher runs from a read-only cache: npm compacts its cache
//! index on every lookup and writes a lock and a `package.json` in the
//! install it runs; uv locks the environment it reuses. A confined server
//! must not write there (the cache is the daemon user's, shared by every
//! server and by the operator), nor fetch code from the network at each
//! start. So the daemon finds the install itself and runs its program
//! directly, granting it read-only:
//!
//! - `npx [-y] PACKAGE ARGS`: the install npx made under npm's cache
//!   (`$npm_config_cache`, else `~/.npm`), `_npx/*/`, whose `package.json`
//!   records exactly `[PACKAGE]`; its program is the package's `bin` (the
//!   one, or the one named after the package), in `node_modules/.bin`.
//! - `uvx [--from SPEC] COMMAND ARGS`: the tool `uv tool install` made
//!   (`$UV_TOOL_DIR`, else `~/.local/share/uv/tools/NAME`), else the newest
//!   environment uvx left in uv's cache (`$UV_CACHE_DIR`, else
//!   `~/.cache/uv`, `environments-v2/`) holding `bin/COMMAND` (and, for
//!   `NAME==VERSION` or `NAME@VERSION`, that version); its Python's
//!   installation is granted too.
//!
//! Not installed: the start fails, saying the one command that installs
//! it. A configuration that gives the cache in `read_write` opts out: the
//! launcher then runs as written and may install and update by itself.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::Value;

use super::config::StdioConfig;
use super::grants::{check, Env};
use crate::sandbox::SandboxConfig;

/// Most entries of a cache folder looked through for an install.
const MAX_ENTRIES: usize = 4096;
/// Largest `package.json` or `pyvenv.cfg` read.
const MAX_MANIFEST: u64 = 256 * 1024;

/// How a server is run: its command line, and what that needs to read
/// beyond what [`super::grants`] finds from the command line itself.
#[derive(Debug)]
pub struct Launch {
    pub config: StdioConfig,
    pub read_only: Vec<PathBuf>,
}

/// Why a server run by `npx` or `uvx` cannot start: its install is not
/// in the launcher's cache (the message says the command that installs
/// it), or is not one this can run.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(
        "`npx {spec}` is not installed in npm's cache ({}): run `npx -y {spec}` once as the \
         daemon's user, or give the server that cache in `read_write` to let npx install it",
        installs.display()
    )]
    NpxNotInstalled { spec: String, installs: PathBuf },
    #[error("`npx {spec}`: {name} has several programs and none named {unscoped}")]
    NpxWhichProgram {
        spec: String,
        name: String,
        unscoped: String,
    },
    #[error("`npx {spec}`: {name} has no program (`bin`)")]
    NpxNoProgram { spec: String, name: String },
    /// `cache` and `tools`: where it was looked for (`-` when unknown).
    #[error(
        "`uvx {spec}` is not installed in uv's cache ({cache}) or its tools ({tools}): run `uvx {spec}` \
         (or `uv tool install {name}`) once as the daemon's user, or give the server that \
         cache in `read_write` to let uvx install it"
    )]
    UvxNotInstalled {
        spec: String,
        name: String,
        cache: String,
        tools: String,
    },
    #[error("`uvx {spec}`: {source}")]
    UvxUnreadable {
        spec: String,
        source: std::io::Error,
    },
}

/// `config` as it will be run.
pub fn resolve(
    config: &StdioConfig,
    sandbox: &SandboxConfig,
    var: Env<'_>,
) -> Result<Launch, LaunchError> {
    let unchanged = || Launch {
        config: config.clone(),
        read_only: Vec::new(),
    };
    let launcher = Path::new(&config.command)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let writable = |cache: &Path| {
        let cache = std::fs::canonicalize(cache).unwrap_or_else(|_| cache.to_path_buf());
        config
            .read_write
            .iter()
            .any(|dir| std::fs::canonicalize(dir).is_ok_and(|dir| cache.starts_with(dir)))
    };
    match launcher {
        "npx" => {
            let Some(cache) = npm_cache(var) else {
                return Ok(unchanged());
            };
            if writable(&cache) {
                return Ok(unchanged());
            }
            npx(config, &cache)
        }
        "uvx" => {
            let cache = uv_cache(var);
            if cache.as_deref().is_some_and(writable) {
                return Ok(unchanged());
            }
            uvx(config, cache.as_deref(), uv_tools(var).as_deref(), sandbox)
        }
        _ => Ok(unchanged()),
    }
}

fn home(var: Env<'_>) -> Option<PathBuf> {
    var("HOME").map(PathBuf::from)
}

fn npm_cache(var: Env<'_>) -> Option<PathBuf> {
    var("npm_config_cache")
        .or_else(|| var("NPM_CONFIG_CACHE"))
        .map(PathBuf::from)
        .or_else(|| home(var).map(|h| h.join(".npm")))
}

fn uv_cache(var: Env<'_>) -> Option<PathBuf> {
    var("UV_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| var("XDG_CACHE_HOME").map(|c| Path::new(&c).join("uv")))
        .or_else(|| home(var).map(|h| h.join(".cache/uv")))
}

fn uv_tools(var: Env<'_>) -> Option<PathBuf> {
    var("UV_TOOL_DIR")
        .map(PathBuf::from)
        .or_else(|| var("XDG_DATA_HOME").map(|d| Path::new(&d).join("uv/tools")))
        .or_else(|| home(var).map(|h| h.join(".local/share/uv/tools")))
}

/// A small file's text; `None` when missing, unreadable or too large.
fn small_text(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    (meta.is_file() && meta.len() <= MAX_MANIFEST)
        .then(|| std::fs::read_to_string(path).ok())
        .flatten()
}

fn json_file(path: &Path) -> Option<Value> {
    serde_json::from_str(&small_text(path)?).ok()
}

/// The folders in `dir`, at most [`MAX_ENTRIES`] looked at.
fn folders(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .take(MAX_ENTRIES)
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect()
}

/// `npx`'s flags before the package that change nothing here, and the
/// package spec with the arguments after it. `None` for any other shape
/// (`--package`, `-c`, ...), which is run as written.
fn npx_spec(args: &[String]) -> Option<(&str, &[String])> {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        match arg.as_str() {
            "-y" | "--yes" | "-q" | "--quiet" => i += 1,
            "--" => {
                i += 1;
                break;
            }
            _ => break,
        }
    }
    let spec = args.get(i)?;
    (!spec.starts_with('-')).then(|| (spec.as_str(), &args[i + 1..]))
}

/// A package spec's name: `@scope/name@1.2` is `@scope/name`.
fn npm_name(spec: &str) -> &str {
    let from = usize::from(spec.starts_with('@'));
    match spec[from..].find('@') {
        Some(at) => &spec[..from + at],
        None => spec,
    }
}

fn npx(config: &StdioConfig, cache: &Path) -> Result<Launch, LaunchError> {
    let Some((spec, rest)) = npx_spec(&config.args) else {
        return Ok(Launch {
            config: config.clone(),
            read_only: Vec::new(),
        });
    };
    let not_installed = || LaunchError::NpxNotInstalled {
        spec: spec.to_owned(),
        installs: cache.join("_npx"),
    };
    let install = folders(&cache.join("_npx"))
        .into_iter()
        .find(|dir| {
            json_file(&dir.join("package.json"))
                .is_some_and(|p| p["_npx"]["packages"] == serde_json::json!([spec]))
        })
        .ok_or_else(not_installed)?;
    let name = npm_name(spec);
    let package = install.join("node_modules").join(name);
    let manifest = json_file(&package.join("package.json")).ok_or_else(not_installed)?;
    let unscoped = name.rsplit('/').next().unwrap_or(name);
    let (bin_name, script) = match &manifest["bin"] {
        Value::String(script) => (unscoped.to_owned(), script.clone()),
        Value::Object(bins) => {
            let chosen = if bins.len() == 1 {
                bins.iter().next()
            } else {
                bins.get_key_value(unscoped)
            };
            let (bin, script) = chosen.ok_or_else(|| LaunchError::NpxWhichProgram {
                spec: spec.to_owned(),
                name: name.to_owned(),
                unscoped: unscoped.to_owned(),
            })?;
            (bin.clone(), script.as_str().unwrap_or_default().to_owned())
        }
        _ => {
            return Err(LaunchError::NpxNoProgram {
                spec: spec.to_owned(),
                name: name.to_owned(),
            })
        }
    };
    let linked = install.join("node_modules/.bin").join(&bin_name);
    let program = if linked.exists() {
        linked
    } else {
        package.join(script)
    };
    Ok(Launch {
        config: StdioConfig {
            command: program.display().to_string(),
            args: rest.to_vec(),
            ..config.clone()
        },
        read_only: Vec::new(),
    })
}

/// `uvx`'s package spec (`--from`, else the command) and command, with the
/// arguments after it; `None` for flags this does not know.
fn uvx_spec(args: &[String]) -> Option<(String, String, &[String])> {
    let mut from = None;
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        match arg.as_str() {
            "-q" | "--quiet" | "--offline" | "--no-progress" => i += 1,
            "--from" => {
                from = Some(args.get(i + 1)?.clone());
                i += 2;
            }
            flag if flag.starts_with('-') => return None,
            _ => break,
        }
    }
    let command = args.get(i)?;
    let spec = from.unwrap_or_else(|| command.clone());
    let command = python_name(command).0.to_owned();
    Some((spec, command, &args[i + 1..]))
}

/// A Python requirement's name and version, if pinned: `pkg==1.2`,
/// `pkg@1.2`, `pkg[extra]`.
fn python_name(spec: &str) -> (&str, Option<&str>) {
    let end = spec
        .find(['=', '@', '[', '<', '>', '~', '!'])
        .unwrap_or(spec.len());
    let version = spec
        .split_once("==")
        .or_else(|| spec.split_once('@'))
        .map(|(_, v)| v.trim());
    (spec[..end].trim(), version)
}

/// Python's spelling of a distribution's name in `.dist-info` folders.
fn dist_name(name: &str) -> String {
    name.to_ascii_lowercase().replace(['-', '.'], "_")
}

/// Whether the environment at `env` holds `name` at `version`.
fn has_version(env: &Path, name: &str, version: &str) -> bool {
    let wanted = format!("{}-{version}.dist-info", dist_name(name));
    folders(&env.join("lib"))
        .iter()
        .any(|python| python.join("site-packages").join(&wanted).is_dir())
}

fn uvx(
    config: &StdioConfig,
    cache: Option<&Path>,
    tools: Option<&Path>,
    sandbox: &SandboxConfig,
) -> Result<Launch, LaunchError> {
    let Some((spec, command, rest)) = uvx_spec(&config.args) else {
        return Ok(Launch {
            config: config.clone(),
            read_only: Vec::new(),
        });
    };
    let (name, version) = python_name(&spec);
    let fits = |env: &Path| {
        env.join("bin").join(&command).is_file()
            && version.is_none_or(|v| has_version(env, name, v))
    };
    let tool = tools.map(|t| t.join(name)).filter(|env| fits(env));
    let cached = || {
        // uv keeps each cached environment as a link one or two levels
        // down (`environments-v2/KEY/HASH`), into `archive-v0`.
        let envs = cache.map(|c| folders(&c.join("environments-v2")))?;
        let envs = envs.into_iter().flat_map(|dir| {
            if dir.join("bin").is_dir() {
                vec![dir]
            } else {
                folders(&dir)
            }
        });
        envs.filter_map(|env| std::fs::canonicalize(env).ok())
            .filter(|env| fits(env))
            .max_by_key(|env| {
                std::fs::metadata(env)
                    .and_then(|m| m.modified())
                    .unwrap_or(SystemTime::UNIX_EPOCH)
            })
    };
    let env = tool
        .or_else(cached)
        .ok_or_else(|| LaunchError::UvxNotInstalled {
            spec: spec.clone(),
            name: name.to_owned(),
            cache: cache.map_or("-".into(), |c| c.display().to_string()),
            tools: tools.map_or("-".into(), |t| t.display().to_string()),
        })?;
    let env = std::fs::canonicalize(&env).map_err(|source| LaunchError::UvxUnreadable {
        spec: spec.clone(),
        source,
    })?;
    let mut read_only = vec![env.clone()];
    // Packages are linked into an environment from elsewhere in the cache.
    if let Some(cache) = cache.and_then(|c| std::fs::canonicalize(c).ok()) {
        if check(&cache, sandbox).is_ok() {
            read_only.push(cache);
        }
    }
    if let Some(prefix) = python_prefix(&env) {
        read_only.push(prefix);
    }
    Ok(Launch {
        config: StdioConfig {
            command: env.join("bin").join(&command).display().to_string(),
            args: rest.to_vec(),
            ..config.clone()
        },
        read_only,
    })
}

/// The installation of the Python an environment runs on: the folder
/// above the `home` (its `bin`) its `pyvenv.cfg` names.
fn python_prefix(env: &Path) -> Option<PathBuf> {
    let cfg = small_text(&env.join("pyvenv.cfg"))?;
    let home = cfg.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        (key.trim() == "home").then(|| PathBuf::from(value.trim()))
    })?;
    let prefix = std::fs::canonicalize(home).ok()?.parent()?.to_path_buf();
    // Never the whole system root or a user's home: an interpreter's own
    // folder only.
    (prefix.components().count() > 2).then_some(prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| (*a).to_owned()).collect()
    }

    fn config(command: &str, args: &[&str]) -> StdioConfig {
        StdioConfig {
            command: command.into(),
            args: strings(args),
            env: vec![],
            read_write: vec![],
            read_only: vec![],
            network: Default::default(),
        }
    }

    #[test]
    fn specs_are_read_off_the_command_line() {
        let args = strings(&["-y", "@scope/server@1.2.0", "/srv"]);
        let (spec, rest) = npx_spec(&args).expect("a spec");
        assert_eq!((spec, rest), ("@scope/server@1.2.0", &args[2..]));
        assert_eq!(npm_name(spec), "@scope/server");
        assert_eq!(npm_name("plain@3"), "plain");
        assert!(npx_spec(&strings(&["--package", "x", "y"])).is_none());
        let args = strings(&[
            "--from",
            "mcp-server-git==1.0",
            "mcp-server-git",
            "--repo",
            "/r",
        ]);
        let (spec, command, rest) = uvx_spec(&args).expect("a spec");
        assert_eq!(
            (spec.as_str(), command.as_str()),
            ("mcp-server-git==1.0", "mcp-server-git")
        );
        assert_eq!(rest, &args[3..]);
        assert_eq!(python_name("a-b[x]==2.0"), ("a-b", Some("2.0")));
        assert!(uvx_spec(&strings(&["--python", "3.12", "x"])).is_none());
    }

    #[test]
    fn an_npx_install_in_the_cache_runs_its_program_directly() {
        let root = tempfile::tempdir().expect("tempdir");
        let cache = root.path().join("npm");
        let install = cache.join("_npx/0123456789abcdef");
        let package = install.join("node_modules/@scope/server");
        std::fs::create_dir_all(package.join("dist")).expect("dirs");
        std::fs::write(
            install.join("package.json"),
            r#"{"_npx": {"packages": ["@scope/server"]}}"#,
        )
        .expect("install manifest");
        std::fs::write(
            package.join("package.json"),
            r#"{"name": "@scope/server", "bin": {"mcp-server": "dist/index.js"}}"#,
        )
        .expect("package manifest");
        let cache_var = cache.display().to_string();
        let env = move |name: &str| (name == "npm_config_cache").then(|| cache_var.clone());
        let sandbox = SandboxConfig::default();
        let run = resolve(
            &config("npx", &["-y", "@scope/server", "/srv"]),
            &sandbox,
            &env,
        )
        .expect("found");
        assert_eq!(
            run.config.command,
            package.join("dist/index.js").display().to_string()
        );
        assert_eq!(run.config.args, ["/srv"]);
        let missing = resolve(&config("npx", &["-y", "other"]), &sandbox, &env)
            .expect_err("not installed")
            .to_string();
        assert!(missing.contains("run `npx -y other` once"), "{missing}");
        // The cache given writable: npx runs as written.
        let mut writable = config("npx", &["-y", "other"]);
        writable.read_write = vec![cache.clone()];
        let run = resolve(&writable, &sandbox, &env).expect("as written");
        assert_eq!(run.config.command, "npx");
    }

    #[test]
    fn a_uvx_environment_in_the_cache_runs_its_program_directly() {
        let root = tempfile::tempdir().expect("tempdir");
        let cache = root.path().join("uv");
        let env_dir = cache.join("archive-v0/abc");
        std::fs::create_dir_all(env_dir.join("bin")).expect("bin");
        std::fs::create_dir_all(
            env_dir.join("lib/python3.12/site-packages/mcp_server_time-1.0.dist-info"),
        )
        .expect("dist-info");
        std::fs::write(env_dir.join("bin/mcp-server-time"), "").expect("program");
        std::fs::create_dir_all(cache.join("environments-v2/key")).expect("envs");
        std::os::unix::fs::symlink(&env_dir, cache.join("environments-v2/key/f00")).expect("link");
        let cache_var = cache.display().to_string();
        let env = move |name: &str| (name == "UV_CACHE_DIR").then(|| cache_var.clone());
        let sandbox = SandboxConfig::default();
        let run = resolve(
            &config("uvx", &["mcp-server-time", "--tz", "UTC"]),
            &sandbox,
            &env,
        )
        .expect("found");
        let env_dir = std::fs::canonicalize(env_dir).expect("canonical");
        assert_eq!(
            run.config.command,
            env_dir.join("bin/mcp-server-time").display().to_string()
        );
        assert_eq!(run.config.args, ["--tz", "UTC"]);
        assert!(run.read_only.contains(&env_dir));
        assert!(resolve(&config("uvx", &["mcp-server-time==2.0"]), &sandbox, &env).is_err());
        assert!(resolve(&config("uvx", &["mcp-server-time==1.0"]), &sandbox, &env).is_ok());
    }
}
