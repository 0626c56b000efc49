//! Parsing a tool call's JSON input into the tool's typed input, and the
//! field parsers the inputs share (ids as their text form).

use std::fmt::Display;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// Longest field path quoted in an error: a path holds keys the brain
/// chose (an `env` variable's name), which may be long.
const MAX_PATH_CHARS: usize = 128;

/// The input of a tool that takes none: `{}` (or `null`), and nothing
/// else.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoInput {}

/// Why a call's input does not parse as its tool's input.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("the tool input must be a JSON object, not {0}")]
    NotAnObject(&'static str),
    /// serde's own message (missing field, unknown field, wrong type),
    /// after the field it is about.
    #[error("{}{message}", field_prefix(.field))]
    Parse {
        /// Where in the input, as `a.b[0].c`; empty for the whole input.
        field: String,
        message: String,
    },
}

fn field_prefix(field: &str) -> String {
    if field.is_empty() {
        String::new()
    } else {
        format!("`{field}`: ")
    }
}

/// Parses `input` as `I`. An absent input (`null`) is an empty object, as
/// a brain that calls `AgentGet` with no input means no fields.
pub fn parse<I: DeserializeOwned>(input: &Value) -> Result<I, InputError> {
    let empty = Value::Object(Map::new());
    let input = match input {
        Value::Null => &empty,
        Value::Object(_) => input,
        Value::Bool(_) => return Err(InputError::NotAnObject("a boolean")),
        Value::Number(_) => return Err(InputError::NotAnObject("a number")),
        Value::String(_) => return Err(InputError::NotAnObject("a string")),
        Value::Array(_) => return Err(InputError::NotAnObject("an array")),
    };
    serde_path_to_error::deserialize(input).map_err(|err| {
        let message = err.inner().to_string();
        // serde names an unknown field itself, and the path would name it
        // again: the field is the object it was found in.
        let unknown_at_top = message.starts_with("unknown field") && err.path().iter().len() <= 1;
        let path = err.path().to_string();
        let field = if path == "." || unknown_at_top {
            String::new()
        } else if path.chars().count() > MAX_PATH_CHARS {
            let mut cut: String = path.chars().take(MAX_PATH_CHARS).collect();
            cut.push('…');
            cut
        } else {
            path
        };
        InputError::Parse { field, message }
    })
}

/// An id (or any value with a text form) given as its text, as every id a
/// brain sees is written: `"task_id": "tsk_..."`.
pub fn from_text<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: Display,
{
    let text = String::deserialize(deserializer)?;
    text.parse().map_err(D::Error::custom)
}

/// [`from_text`] for a field that may be absent or `null`.
pub fn from_optional_text<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: Display,
{
    match Option::<String>::deserialize(deserializer)? {
        Some(text) => text.parse().map(Some).map_err(D::Error::custom),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use holarchy_supervision::TaskId;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Probe {
        #[serde(deserialize_with = "from_text")]
        task_id: TaskId,
        #[allow(dead_code)]
        count: Option<u64>,
    }

    fn error(input: Value) -> String {
        parse::<Probe>(&input).expect_err("refused").to_string()
    }

    #[test]
    fn parse_errors_name_their_field() {
        let id = TaskId::generate().to_string();
        assert_eq!(
            parse::<Probe>(&json!({ "task_id": id, "count": null }))
                .expect("parses")
                .task_id
                .to_string(),
            id
        );
        assert_eq!(error(json!({})), "missing field `task_id`");
        assert!(error(json!({ "task_id": id, "extra": 1 })).starts_with("unknown field `extra`"));
        assert!(error(json!({ "task_id": id, "count": "3" })).starts_with("`count`: invalid type"));
        assert!(error(json!({ "task_id": "agt_x" })).starts_with("`task_id`: "));
        assert_eq!(
            error(json!([1])),
            "the tool input must be a JSON object, not an array"
        );
    }

    #[test]
    fn long_paths_are_cut() {
        #[derive(Debug, Deserialize)]
        struct Vars {
            #[allow(dead_code)]
            env: std::collections::BTreeMap<String, String>,
        }
        let key = "k".repeat(10_000);
        let message = parse::<Vars>(&json!({ "env": { key: 1 } }))
            .expect_err("not a string")
            .to_string();
        assert!(message.len() < 400, "{message}");
    }
}
