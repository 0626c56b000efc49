//! A tool's input schema, generated from its input type. The schema is
//! what a brain (and a model's function calling) reads, so it is kept
//! plain: every subschema inline; no titles, descriptions, formats or
//! defaults from the Rust types; an optional field is simply not required
//! (a `null` for it is taken as absent, but not advertised).

use schemars::generate::SchemaSettings;
use schemars::transform::{RecursiveTransform, Transform};
use schemars::{JsonSchema, Schema};
use serde_json::Value;

/// The JSON Schema of input type `I`, as a brain is shown it.
pub fn input_schema<I: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<I>();
    RecursiveTransform(plain).transform(&mut schema);
    // An input without fields still lists its (no) properties, as brains
    // were always shown; schemars leaves the keyword out.
    schema
        .ensure_object()
        .entry("properties")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    schema.to_value()
}

/// Strips what schemars adds from the Rust side of one subschema.
fn plain(schema: &mut Schema) {
    // An optional object or array: `{"anyOf": [<it>, {"type": "null"}]}`.
    if let Some(Value::Array(options)) = schema.get_mut("anyOf") {
        options.retain(|o| o.get("type").is_none_or(|t| t != "null"));
        if let [only] = options.as_slice() {
            if let Ok(only) = Schema::try_from(only.clone()) {
                *schema = only;
                return plain(schema);
            }
        }
    }
    // A default is the absent value, which the tool already documents.
    for keyword in ["title", "description", "format", "default"] {
        schema.remove(keyword);
    }
    // `Option<T>`: `"type": ["string", "null"]` becomes `"type": "string"`.
    if let Some(Value::Array(types)) = schema.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            schema.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(values)) = schema.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
}
