//! `holarchy serve --config FILE`: a TOML file whose keys are `serve`'s
//! long flags (and `data-dir`). Its values fill in what the command line
//! and the environment leave unset, so the order is: command line, then
//! environment, then the file, then the defaults. `--print-config` renders
//! the settings that result, as a file the daemon reads back unchanged.
//!
//! The file is applied by handing clap its values as extra flags, so
//! every value goes through the same parser, bounds and conflicts as a
//! typed flag: a key cannot mean something else in the file.

use std::any::TypeId;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};

/// Global flags that are settings of the daemon too.
const GLOBAL_KEYS: &[&str] = &["data-dir"];
/// `serve`'s flags that are about the file, not settings.
const NOT_SETTINGS: &[&str] = &["config", "print-config", "help"];

/// Why a config file is refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    #[error("cannot read the config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the config file {path} is not valid TOML: {source}")]
    Parse {
        path: PathBuf,
        source: toml::de::Error,
    },
    #[error(
        "{path}: unknown key `{key}`{hint}. The keys are the long flags of \
         `holarchy serve` without their dashes; `holarchy serve --print-config` lists them all"
    )]
    UnknownKey {
        path: PathBuf,
        key: String,
        hint: String,
    },
    #[error(
        "{path}: `token` is not read from a config file: set HOLARCHY_TOKEN, \
         or let the daemon keep it in <data-dir>/token"
    )]
    Token { path: PathBuf },
    #[error("{path}: `{key}` {why}")]
    BadValue {
        path: PathBuf,
        key: String,
        why: &'static str,
    },
}

/// A command line with a config file's values added.
#[derive(Debug)]
pub struct Layered {
    /// The process's arguments, then one flag per value the file gives
    /// and nothing else sets.
    pub argv: Vec<OsString>,
    /// The file.
    pub path: PathBuf,
    /// The keys whose values came from the file.
    pub from_file: BTreeSet<String>,
}

/// The arguments that are settings: `serve`'s own visible flags and the
/// global ones the daemon reads.
fn settings(root: &Command) -> Vec<&Arg> {
    let globals = root
        .get_arguments()
        .filter(|arg| arg.get_long().is_some_and(|l| GLOBAL_KEYS.contains(&l)));
    let serve = root
        .find_subcommand("serve")
        .into_iter()
        .flat_map(Command::get_arguments)
        .filter(|arg| {
            !arg.is_hide_set()
                && arg
                    .get_long()
                    .is_some_and(|long| !NOT_SETTINGS.contains(&long))
        });
    globals.chain(serve).collect()
}

/// Whether the command line or the environment set `id`: then the file's
/// value for it is not used.
fn set_outside_file(matches: &[&ArgMatches], id: &str) -> bool {
    matches.iter().any(|m| {
        matches!(
            m.try_get_raw(id).ok().and_then(|_| m.value_source(id)),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        )
    })
}

/// When `serve` was given `--config`, reads the file and returns the
/// command line with its values added; `None` for any other command line.
pub fn layer(
    root: &Command,
    matches: &ArgMatches,
    argv: &[OsString],
) -> Result<Option<Layered>, ConfigFileError> {
    let Some(serve) = matches.subcommand_matches("serve") else {
        return Ok(None);
    };
    let Some(path) = serve.get_one::<PathBuf>("config").cloned() else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(&path).map_err(|source| ConfigFileError::Read {
        path: path.clone(),
        source,
    })?;
    let table: toml::Table = toml::from_str(&text).map_err(|source| ConfigFileError::Parse {
        path: path.clone(),
        source,
    })?;
    let settings = settings(root);
    let base = std::path::absolute(&path)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    let mut layered = Layered {
        argv: argv.to_vec(),
        path: path.clone(),
        from_file: BTreeSet::new(),
    };
    for (key, value) in &table {
        let Some(arg) = settings.iter().find(|a| a.get_long() == Some(key)) else {
            if key == "token" {
                return Err(ConfigFileError::Token { path });
            }
            return Err(ConfigFileError::UnknownKey {
                hint: hint(key, &settings),
                key: key.clone(),
                path,
            });
        };
        if set_outside_file(&[matches, serve], arg.get_id().as_str()) {
            continue;
        }
        let flags = flags(arg, key, value, &base).map_err(|why| ConfigFileError::BadValue {
            path: path.clone(),
            key: key.clone(),
            why,
        })?;
        // A value that is the default already adds nothing, and given as
        // a flag it would bring the flag's `requires` into play: the
        // file `--print-config` writes names every default.
        if serve.value_source(arg.get_id().as_str()) == Some(ValueSource::DefaultValue)
            && defaults_as_flags(serve, arg, key) == flags
        {
            continue;
        }
        layered.argv.extend(flags);
        layered.from_file.insert(key.clone());
    }
    Ok(Some(layered))
}

/// The flags that would give `arg` its default value.
fn defaults_as_flags(serve: &ArgMatches, arg: &Arg, key: &str) -> Vec<OsString> {
    let raw = serve.get_raw(arg.get_id().as_str()).into_iter().flatten();
    match arg.get_action() {
        ArgAction::SetTrue => Vec::new(),
        _ => raw
            .map(|value| {
                let mut flag = OsString::from(format!("--{key}="));
                flag.push(value);
                flag
            })
            .collect(),
    }
}

/// "did you mean" for a key written with underscores or a near miss.
fn hint(key: &str, settings: &[&Arg]) -> String {
    let dashed = key.replace('_', "-");
    let longs = settings.iter().filter_map(|a| a.get_long());
    let close = longs
        .filter(|long| {
            *long == dashed
                || (dashed.len() >= 4 && (long.starts_with(&dashed) || dashed.starts_with(long)))
        })
        .take(3)
        .map(|long| format!("`{long}`"))
        .collect::<Vec<_>>();
    if close.is_empty() {
        String::new()
    } else {
        format!(" (did you mean {}?)", close.join(" or "))
    }
}

/// The flags that give `arg` the file's `value`.
fn flags(
    arg: &Arg,
    key: &str,
    value: &toml::Value,
    base: &Path,
) -> Result<Vec<OsString>, &'static str> {
    let flag = format!("--{key}");
    let one = |value: &toml::Value| -> Result<OsString, &'static str> {
        let mut text = scalar(value)?;
        // A relative path is read beside the file, as a manifest's are,
        // not from wherever the daemon happens to start.
        if is_type::<PathBuf>(arg) && Path::new(&text).is_relative() {
            text = base.join(&text).display().to_string();
        }
        Ok(format!("{flag}={text}").into())
    };
    match (arg.get_action(), value) {
        (ArgAction::SetTrue, toml::Value::Boolean(true)) => Ok(vec![flag.into()]),
        (ArgAction::SetTrue, toml::Value::Boolean(false)) => Ok(Vec::new()),
        (ArgAction::SetTrue, _) => Err("takes true or false"),
        (ArgAction::Append, toml::Value::Array(items)) => items.iter().map(one).collect(),
        (_, toml::Value::Array(_)) => Err("takes one value, not a list"),
        (_, value) => Ok(vec![one(value)?]),
    }
}

/// A value as the text of a flag.
fn scalar(value: &toml::Value) -> Result<String, &'static str> {
    match value {
        toml::Value::String(text) => Ok(text.clone()),
        toml::Value::Integer(n) => Ok(n.to_string()),
        toml::Value::Float(x) => Ok(x.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        toml::Value::Datetime(_) | toml::Value::Array(_) | toml::Value::Table(_) => {
            Err("takes a string, a number or true/false")
        }
    }
}

fn is_type<T: 'static>(arg: &Arg) -> bool {
    arg.get_value_parser().type_id() == TypeId::of::<T>()
}

fn is_number(arg: &Arg) -> bool {
    [
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<i64>(),
        TypeId::of::<f32>(),
        TypeId::of::<f64>(),
    ]
    .iter()
    .any(|id| arg.get_value_parser().type_id() == *id)
}

/// A raw value as TOML: a number or a boolean bare when the flag parses
/// it as one, anything else a string.
fn toml_value(arg: &Arg, raw: &std::ffi::OsStr) -> String {
    let text = raw.to_string_lossy();
    let bare = (is_number(arg) && text.parse::<f64>().is_ok())
        || (is_type::<bool>(arg) && (text == "true" || text == "false"));
    if bare {
        text.into_owned()
    } else {
        toml::Value::String(text.into_owned()).to_string()
    }
}

/// The settings in effect, as a TOML file: every key, grouped under the
/// help's headings, each set one marked with where its value came from.
pub fn render(
    root: &Command,
    matches: &ArgMatches,
    layered: Option<&Layered>,
    data_dir: &Path,
) -> String {
    let serve = matches.subcommand_matches("serve").unwrap_or(matches);
    let settings = settings(root);
    let mut headings: Vec<&str> = Vec::new();
    for arg in &settings {
        let heading = arg.get_help_heading().unwrap_or("Options");
        if !headings.contains(&heading) {
            headings.push(heading);
        }
    }
    let mut out = String::from("# holarchy serve: the settings in effect");
    if let Some(layered) = layered {
        let _ = write!(out, " (config file {})", layered.path.display());
    }
    out.push('\n');
    for heading in headings {
        let _ = write!(out, "\n# {heading}\n");
        for arg in settings
            .iter()
            .filter(|a| a.get_help_heading().unwrap_or("Options") == heading)
        {
            let Some(key) = arg.get_long() else { continue };
            let id = arg.get_id().as_str();
            let raw: Vec<&std::ffi::OsStr> = serve
                .try_get_raw(id)
                .ok()
                .flatten()
                .map(Iterator::collect)
                .unwrap_or_default();
            let value = match (key, raw.as_slice()) {
                ("data-dir", []) => toml::Value::String(data_dir.display().to_string()).to_string(),
                (_, []) if matches!(arg.get_action(), ArgAction::Append) => "[]".to_owned(),
                (_, []) => {
                    let _ = writeln!(out, "# {key} = (not set)");
                    continue;
                }
                (_, values) if matches!(arg.get_action(), ArgAction::Append) => {
                    let items: Vec<String> = values.iter().map(|v| toml_value(arg, v)).collect();
                    format!("[{}]", items.join(", "))
                }
                (_, [one, ..]) => toml_value(arg, one),
            };
            let source = if layered.is_some_and(|l| l.from_file.contains(key)) {
                "  # config file"
            } else {
                match serve.value_source(id) {
                    Some(ValueSource::CommandLine) => "  # command line",
                    Some(ValueSource::EnvVariable) => "  # environment",
                    _ => "",
                }
            };
            let _ = writeln!(out, "{key} = {value}{source}");
        }
    }
    out
}
