//! The catalog as brains see it: its order, each profile's surface, the
//! generated schemas against the ones brains were shown before they were
//! generated, and how inputs fail to parse.

use std::collections::HashSet;

use holarchy_supervision::Preset;
use serde_json::{json, Value};

use super::input::parse;
use super::*;

/// The catalog's input schemas as written by hand before they were
/// generated: a generated schema must say the same things.
const PREVIOUS_SCHEMAS: &[(&str, &str)] = &[
    (
        "AgentGet",
        r#"{"type":"object","properties":{},"additionalProperties":false}"#,
    ),
    (
        "SpawnAgent",
        r#"{"type":"object","properties":{"preset":{"type":"string","enum":["private_child","private_delegator","public_named"]},"initial_message":{"type":"string"},"name":{"type":"string"},"context":{"type":"string","enum":["fresh","fork"]},"workspace_mode":{"type":"string","enum":["inherit","worktree","explicit_root"]},"root":{"type":"string"},"role":{"type":"string"}},"additionalProperties":false}"#,
    ),
    (
        "TaskList",
        r#"{"type":"object","properties":{},"additionalProperties":false}"#,
    ),
    (
        "TaskStatus",
        r#"{"type":"object","properties":{"task_id":{"type":"string"}},"required":["task_id"],"additionalProperties":false}"#,
    ),
    (
        "TaskOutput",
        r#"{"type":"object","properties":{"task_id":{"type":"string"},"offset":{"type":"integer","minimum":0}},"required":["task_id"],"additionalProperties":false}"#,
    ),
    (
        "TaskInput",
        r#"{"type":"object","properties":{"task_id":{"type":"string"},"text":{"type":"string"}},"required":["task_id","text"],"additionalProperties":false}"#,
    ),
    (
        "TaskStop",
        r#"{"type":"object","properties":{"task_id":{"type":"string"}},"required":["task_id"],"additionalProperties":false}"#,
    ),
    (
        "ExecCommand",
        r#"{"type":"object","properties":{"command":{"type":"string"},"yield_ms":{"type":"integer","minimum":0,"maximum":600000},"env":{"type":"object","additionalProperties":{"type":"string"}}},"required":["command"],"additionalProperties":false}"#,
    ),
    (
        "UseWorkspace",
        r#"{"type":"object","properties":{"workspace_id":{"type":"string"},"path":{"type":"string"}},"additionalProperties":false}"#,
    ),
    (
        "ApplyPatch",
        r#"{"type":"object","properties":{"patch":{"type":"string"}},"required":["patch"],"additionalProperties":false}"#,
    ),
    (
        "AttachWorkspace",
        r#"{"type":"object","properties":{"path":{"type":"string"},"workspace_id":{"type":"string"}},"required":["path"],"additionalProperties":false}"#,
    ),
    (
        "DetachWorkspace",
        r#"{"type":"object","properties":{"workspace_id":{"type":"string"}},"required":["workspace_id"],"additionalProperties":false}"#,
    ),
    (
        "Sleep",
        r#"{"type":"object","properties":{"duration_ms":{"type":"integer","minimum":0},"reason":{"type":"string"},"work_item_id":{"type":"string"}},"required":["duration_ms"],"additionalProperties":false}"#,
    ),
    (
        "Enqueue",
        r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}"#,
    ),
    (
        "update_work_item",
        r#"{"type":"object","properties":{"work_item_id":{"type":"string"},"objective":{"type":"string"},"status":{"type":"string","enum":["active","blocked","done"]}},"additionalProperties":false}"#,
    ),
    (
        "update_work_plan",
        r#"{"type":"object","properties":{"work_item_id":{"type":"string"},"steps":{"type":"array","items":{"type":"object","properties":{"title":{"type":"string"},"status":{"type":"string","enum":["pending","in_progress","done","skipped"]}},"required":["title"]}}},"required":["work_item_id","steps"],"additionalProperties":false}"#,
    ),
    (
        "CreateExternalTrigger",
        r#"{"type":"object","properties":{"reason":{"type":"string"},"work_item_id":{"type":"string"}},"additionalProperties":false}"#,
    ),
    (
        "CancelExternalTrigger",
        r#"{"type":"object","properties":{"wait_id":{"type":"string"}},"required":["wait_id"],"additionalProperties":false}"#,
    ),
];

/// `required` lists are sets: their order says nothing.
fn normalized(mut schema: Value) -> Value {
    if let Some(Value::Array(required)) = schema.get_mut("required") {
        required.sort_by_key(|name| name.to_string());
    }
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for property in properties.values_mut() {
            *property = normalized(property.take());
        }
    }
    if let Some(items) = schema.get_mut("items") {
        *items = normalized(items.take());
    }
    schema
}

fn names(preset: Preset) -> Vec<&'static str> {
    tool_surface(preset.profile()).map(|t| t.name).collect()
}

#[test]
fn every_schema_is_an_object_schema_and_names_are_unique() {
    let mut names = HashSet::new();
    for spec in CATALOG {
        let schema = spec.schema();
        assert_eq!(schema["type"], "object", "{}: {schema}", spec.name);
        assert!(schema["properties"].is_object(), "{}: {schema}", spec.name);
        assert!(names.insert(spec.name), "{} twice", spec.name);
    }
}

#[test]
fn generated_schemas_say_what_the_written_ones_said() {
    let order: Vec<&str> = CATALOG.iter().map(|s| s.name).collect();
    let previous: Vec<&str> = PREVIOUS_SCHEMAS.iter().map(|(name, _)| *name).collect();
    // Tools added since the schemas were written by hand come after them.
    assert_eq!(
        order[..previous.len()],
        previous,
        "the catalog keeps its order"
    );
    assert_eq!(
        order[previous.len()..],
        ["LoadSkill", "MemoryWrite", "MemorySearch", "MemoryGet"]
    );
    for (spec, (_, written)) in CATALOG.iter().zip(PREVIOUS_SCHEMAS) {
        let written: Value = serde_json::from_str(written).expect("written schema");
        assert_eq!(
            normalized(spec.schema()),
            normalized(written),
            "{}",
            spec.name
        );
    }
}

#[test]
fn a_view_shows_name_family_plane_description_and_schema() {
    let spec = CATALOG
        .iter()
        .find(|s| s.name == "ExecCommand")
        .expect("registered");
    let view = spec.view();
    assert_eq!(view["name"], "ExecCommand");
    assert_eq!(view["family"], "local_environment");
    assert_eq!(view["plane"], "task");
    assert!(view["description"]
        .as_str()
        .is_some_and(|d| d.starts_with("Runs a shell command")));
    assert_eq!(view["input_schema"], spec.schema());
    assert_eq!(view.as_object().map(|o| o.len()), Some(5));
}

#[test]
fn catalogs_follow_profiles_only() {
    assert_eq!(
        names(Preset::PrivateChild),
        [
            "AgentGet",
            "TaskList",
            "TaskStatus",
            "TaskOutput",
            "TaskInput",
            "TaskStop",
            "ExecCommand",
            "UseWorkspace",
            "ApplyPatch",
            "Sleep",
            "Enqueue",
            "update_work_item",
            "update_work_plan",
            "CreateExternalTrigger",
            "CancelExternalTrigger",
            "LoadSkill",
            "MemoryWrite",
            "MemorySearch",
            "MemoryGet",
        ]
    );
    let mut delegator = names(Preset::PrivateChild);
    delegator.insert(1, "SpawnAgent");
    assert_eq!(names(Preset::PrivateDelegator), delegator);
    assert_eq!(names(Preset::PublicNamed).len(), CATALOG.len());
}

#[test]
fn inputs_that_do_not_parse_are_invalid_and_name_their_field() {
    let refused = |tool: &str, input: Value| -> ToolError {
        let spec = CATALOG.iter().find(|s| s.name == tool).expect("registered");
        let err = match tool {
            "SpawnAgent" => parse::<agent::SpawnInput>(&input).map(drop),
            "ExecCommand" => parse::<command::ExecInput>(&input).map(drop),
            "TaskOutput" => parse::<task::OutputInput>(&input).map(drop),
            "update_work_plan" => parse::<work::PlanInput>(&input).map(drop),
            "Sleep" => parse::<wait::SleepInput>(&input).map(drop),
            other => panic!("no parser for {other}"),
        }
        .expect_err(spec.name);
        ToolError::from(err)
    };
    let cases = [
        (
            "SpawnAgent",
            json!({ "preset": "admin" }),
            "`preset`: unknown variant `admin`",
        ),
        ("SpawnAgent", json!({ "nmae": "x" }), "unknown field `nmae`"),
        ("ExecCommand", json!({}), "missing field `command`"),
        (
            "ExecCommand",
            json!({ "command": "ls", "yield_ms": -1 }),
            "`yield_ms`: invalid value",
        ),
        (
            "ExecCommand",
            json!({ "command": "ls", "env": { "X=1; touch /tmp/p #": "v" } }),
            "`env`: `X=1; touch /tmp/p #` is not a variable name",
        ),
        (
            "ExecCommand",
            json!({ "command": "ls", "env": { "A": 1 } }),
            "`env.A`: invalid type",
        ),
        ("TaskOutput", json!({ "task_id": "wat_01" }), "`task_id`: "),
        (
            "update_work_plan",
            json!({ "work_item_id": "wrk_x", "steps": [] }),
            "`work_item_id`: ",
        ),
        (
            "Sleep",
            json!({ "duration_ms": "10" }),
            "`duration_ms`: invalid type",
        ),
    ];
    for (tool, input, expected) in cases {
        let err = refused(tool, input);
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{tool}: {err}");
        assert!(err.to_string().starts_with(expected), "{tool}: {err}");
    }
}

#[test]
fn null_stands_for_absent() {
    assert!(parse::<input::NoInput>(&Value::Null).is_ok());
    let spawn = parse::<agent::SpawnInput>(&json!({ "preset": null, "initial_message": "go" }));
    assert!(spawn.is_ok());
    let exec =
        parse::<command::ExecInput>(&json!({ "command": "ls", "env": null, "yield_ms": null }));
    assert!(exec.is_ok());
    let err = parse::<input::NoInput>(&json!("x")).expect_err("not an object");
    assert_eq!(ToolError::from(err).kind(), ErrorKind::InvalidInput);
}

#[test]
fn tokens_are_redacted_and_other_text_kept() {
    let token = format!("htr_{}", "a".repeat(64));
    let text = format!("{{\"token\":\"{token}\",\"note\":\"htr_short\"}}");
    let redacted = crate::secrets::redact_trigger_tokens(&text);
    assert!(!redacted.contains(&token));
    assert!(redacted.contains("htr_<redacted>") && redacted.contains("htr_short"));
}
