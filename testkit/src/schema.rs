//! The subset of JSON Schema (OpenAPI 3.0 flavour) that GitHub's description uses for
//! request bodies and parameters: `type` (one or a list, `nullable`), `enum`, `properties`,
//! `required`, `additionalProperties`, `items`, `oneOf`/`anyOf`/`allOf`, string lengths,
//! number bounds, item counts, `uniqueItems`, property counts. `$ref`s are resolved as they
//! are met. `format` and `pattern` are not checked (see the crate docs).

use serde_json::Value;

use crate::description::Description;

/// How deep schemas may nest (through `$ref`s) before the check gives up on a value.
const MAX_SCHEMA_DEPTH: usize = 64;

/// One way a value breaks its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SchemaViolation {
    /// Where: `body.state`, `body.labels[0]`, `query.per_page`.
    pub(crate) at: String,
    pub(crate) message: String,
    /// The property the violation is about, for GitHub's `errors[].field`.
    pub(crate) field: Option<String>,
    /// True for a required property that is missing (GitHub's `missing_field`).
    pub(crate) missing: bool,
}

impl std::fmt::Display for SchemaViolation {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}: {}", self.at, self.message)
    }
}

/// Checks `value` against `schema`; `at` names the value in messages (`body`).
pub(crate) fn validate(
    description: &Description,
    schema: &Value,
    value: &Value,
    at: &str,
) -> Vec<SchemaViolation> {
    let mut violations = Vec::new();
    Checker { description }.check(schema, value, &Location::root(at), 0, &mut violations);
    violations
}

/// A compact, shortened rendering of a value for messages.
pub(crate) fn show_value(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 80 {
        text
    } else {
        format!("{}…", text.chars().take(77).collect::<String>())
    }
}

#[derive(Clone)]
struct Location {
    at: String,
    field: Option<String>,
}

impl Location {
    fn root(at: &str) -> Location {
        Location {
            at: at.to_string(),
            field: None,
        }
    }

    fn property(&self, name: &str) -> Location {
        Location {
            at: format!("{}.{name}", self.at),
            field: Some(name.to_string()),
        }
    }

    fn item(&self, index: usize) -> Location {
        Location {
            at: format!("{}[{index}]", self.at),
            field: self.field.clone(),
        }
    }
}

struct Checker<'a> {
    description: &'a Description,
}

impl Checker<'_> {
    fn check(
        &self,
        schema: &Value,
        value: &Value,
        location: &Location,
        depth: usize,
        out: &mut Vec<SchemaViolation>,
    ) {
        let schema = self.description.resolve(schema);
        let report = |out: &mut Vec<SchemaViolation>, message: String| {
            out.push(SchemaViolation {
                at: location.at.clone(),
                message,
                field: location.field.clone(),
                missing: false,
            })
        };
        if depth > MAX_SCHEMA_DEPTH {
            report(
                out,
                format!("schemas nest deeper than {MAX_SCHEMA_DEPTH}; not checked"),
            );
            return;
        }
        if value.is_null() && accepts_null(schema) {
            return;
        }
        for sub_schema in schema["allOf"].as_array().into_iter().flatten() {
            self.check(sub_schema, value, location, depth + 1, out);
        }
        if let Some(alternatives) = schema["anyOf"].as_array() {
            let failures = self.alternatives(alternatives, value, location, depth);
            if failures.iter().all(|failure| !failure.is_empty()) {
                report(out, none_matched("anyOf", value, &failures));
            }
        }
        if let Some(alternatives) = schema["oneOf"].as_array() {
            let failures = self.alternatives(alternatives, value, location, depth);
            let matched = failures.iter().filter(|failure| failure.is_empty()).count();
            if matched == 0 {
                report(out, none_matched("oneOf", value, &failures));
            } else if matched > 1 {
                report(
                    out,
                    format!(
                        "{} matches {matched} of oneOf's {} alternatives; exactly one must match",
                        show_value(value),
                        alternatives.len()
                    ),
                );
            }
        }
        if let Some(types) = declared_types(schema) {
            if !types.iter().any(|name| has_type(value, name)) {
                report(
                    out,
                    format!("{} is not {}", show_value(value), type_phrase(&types)),
                );
                return;
            }
        }
        if let Some(allowed) = schema["enum"].as_array() {
            if !allowed.contains(value) {
                report(
                    out,
                    format!(
                        "{} is not one of {}",
                        show_value(value),
                        Value::from(allowed.clone())
                    ),
                );
            }
        }
        match value {
            Value::String(text) => check_string(schema, text, |message| report(out, message)),
            Value::Number(number) => check_number(schema, number, |message| report(out, message)),
            Value::Array(items) => self.check_array(schema, items, location, depth, out),
            Value::Object(object) => self.check_object(schema, object, location, depth, out),
            Value::Null | Value::Bool(_) => {}
        }
    }

    fn alternatives(
        &self,
        alternatives: &[Value],
        value: &Value,
        location: &Location,
        depth: usize,
    ) -> Vec<Vec<SchemaViolation>> {
        alternatives
            .iter()
            .map(|alternative| {
                let mut violations = Vec::new();
                self.check(alternative, value, location, depth + 1, &mut violations);
                violations
            })
            .collect()
    }

    fn check_array(
        &self,
        schema: &Value,
        items: &[Value],
        location: &Location,
        depth: usize,
        out: &mut Vec<SchemaViolation>,
    ) {
        let mut report = |message: String| {
            out.push(SchemaViolation {
                at: location.at.clone(),
                message,
                field: location.field.clone(),
                missing: false,
            })
        };
        if let Some(min_items) = schema["minItems"].as_u64() {
            if (items.len() as u64) < min_items {
                report(format!(
                    "has {} items, fewer than minItems {min_items}",
                    items.len()
                ));
            }
        }
        if let Some(max_items) = schema["maxItems"].as_u64() {
            if (items.len() as u64) > max_items {
                report(format!(
                    "has {} items, more than maxItems {max_items}",
                    items.len()
                ));
            }
        }
        if schema["uniqueItems"] == true {
            let repeated = items
                .iter()
                .enumerate()
                .find(|(index, item)| items[..*index].contains(item));
            if let Some((_, item)) = repeated {
                report(format!(
                    "{} appears twice; uniqueItems is true",
                    show_value(item)
                ));
            }
        }
        if let Some(item_schema) = schema.get("items") {
            for (index, item) in items.iter().enumerate() {
                self.check(item_schema, item, &location.item(index), depth + 1, out);
            }
        }
    }

    fn check_object(
        &self,
        schema: &Value,
        object: &serde_json::Map<String, Value>,
        location: &Location,
        depth: usize,
        out: &mut Vec<SchemaViolation>,
    ) {
        for name in schema["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !object.contains_key(name) {
                out.push(SchemaViolation {
                    at: location.property(name).at,
                    message: "is required but missing".to_string(),
                    field: Some(name.to_string()),
                    missing: true,
                });
            }
        }
        let properties = schema["properties"].as_object();
        for (name, property_value) in object {
            match properties.and_then(|properties| properties.get(name)) {
                Some(property_schema) => self.check(
                    property_schema,
                    property_value,
                    &location.property(name),
                    depth + 1,
                    out,
                ),
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => out.push(SchemaViolation {
                        at: location.property(name).at,
                        message: format!(
                            "is not a property this schema allows (additionalProperties is \
                             false; allowed: {})",
                            property_names(properties)
                        ),
                        field: Some(name.to_string()),
                        missing: false,
                    }),
                    Some(additional @ Value::Object(_)) => self.check(
                        additional,
                        property_value,
                        &location.property(name),
                        depth + 1,
                        out,
                    ),
                    _ => {}
                },
            }
        }
        let count = object.len() as u64;
        let mut report = |message: String| {
            out.push(SchemaViolation {
                at: location.at.clone(),
                message,
                field: location.field.clone(),
                missing: false,
            })
        };
        if let Some(min) = schema["minProperties"].as_u64().filter(|&min| count < min) {
            report(format!(
                "has {count} properties, fewer than minProperties {min}"
            ));
        }
        if let Some(max) = schema["maxProperties"].as_u64().filter(|&max| count > max) {
            report(format!(
                "has {count} properties, more than maxProperties {max}"
            ));
        }
    }
}

fn accepts_null(schema: &Value) -> bool {
    schema["nullable"] == true
        || declared_types(schema).is_some_and(|types| types.contains(&"null"))
        || schema["enum"]
            .as_array()
            .is_some_and(|allowed| allowed.contains(&Value::Null))
}

fn declared_types(schema: &Value) -> Option<Vec<&str>> {
    match &schema["type"] {
        Value::String(name) => Some(vec![name.as_str()]),
        Value::Array(names) => Some(names.iter().filter_map(Value::as_str).collect()),
        _ => None,
    }
}

fn has_type(value: &Value, name: &str) -> bool {
    match name {
        "string" => value.is_string(),
        "integer" => {
            value.is_i64()
                || value.is_u64()
                || value.as_f64().is_some_and(|number| number.fract() == 0.0)
        }
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "null" => value.is_null(),
        _ => true,
    }
}

fn type_phrase(types: &[&str]) -> String {
    let phrases: Vec<String> = types
        .iter()
        .map(|name| match *name {
            "integer" | "array" | "object" => format!("an {name}"),
            "null" => "null".to_string(),
            _ => format!("a {name}"),
        })
        .collect();
    phrases.join(" or ")
}

fn check_string(schema: &Value, text: &str, mut report: impl FnMut(String)) {
    let length = text.chars().count() as u64;
    if let Some(min) = schema["minLength"].as_u64().filter(|&min| length < min) {
        report(format!(
            "is {length} characters long, shorter than minLength {min}"
        ));
    }
    if let Some(max) = schema["maxLength"].as_u64().filter(|&max| length > max) {
        report(format!(
            "is {length} characters long, longer than maxLength {max}"
        ));
    }
}

fn check_number(schema: &Value, number: &serde_json::Number, mut report: impl FnMut(String)) {
    let Some(value) = number.as_f64() else {
        return;
    };
    if let Some(minimum) = schema["minimum"].as_f64() {
        let exclusive = schema["exclusiveMinimum"] == true;
        if value < minimum || (exclusive && value == minimum) {
            report(format!("{number} is below the minimum {minimum}"));
        }
    }
    if let Some(maximum) = schema["maximum"].as_f64() {
        let exclusive = schema["exclusiveMaximum"] == true;
        if value > maximum || (exclusive && value == maximum) {
            report(format!("{number} is above the maximum {maximum}"));
        }
    }
}

fn none_matched(keyword: &str, value: &Value, failures: &[Vec<SchemaViolation>]) -> String {
    let reasons: Vec<String> = failures
        .iter()
        .enumerate()
        .map(|(index, violations)| {
            let first = violations
                .first()
                .map(ToString::to_string)
                .unwrap_or_default();
            format!("({}) {first}", index + 1)
        })
        .collect();
    format!(
        "{} matches none of {keyword}'s {} alternatives: {}",
        show_value(value),
        failures.len(),
        reasons.join("; ")
    )
}

fn property_names(properties: Option<&serde_json::Map<String, Value>>) -> String {
    let names: Vec<&str> = properties
        .map(|properties| properties.keys().map(String::as_str).collect())
        .unwrap_or_default();
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn description() -> Description {
        Description::index(json!({
            "paths": {},
            "components": {"schemas": {
                "label": {"type": "object", "properties": {"name": {"type": "string"}},
                          "required": ["name"], "additionalProperties": false}
            }}
        }))
    }

    fn messages(schema: Value, value: Value) -> Vec<String> {
        validate(&description(), &schema, &value, "body")
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn types_nullable_and_enum() {
        let schema = json!({"type": "object", "properties": {
            "state": {"type": "string", "enum": ["error", "failure", "pending", "success"]},
            "target_url": {"type": "string", "nullable": true},
            "count": {"type": ["integer", "null"]}
        }, "required": ["state"]});
        assert!(messages(
            schema.clone(),
            json!({"state": "success", "target_url": null})
        )
        .is_empty());
        assert_eq!(
            messages(schema.clone(), json!({"state": "passed"})),
            vec![r#"body.state: "passed" is not one of ["error","failure","pending","success"]"#]
        );
        assert_eq!(
            messages(schema.clone(), json!({})),
            vec!["body.state: is required but missing"]
        );
        assert_eq!(
            messages(schema.clone(), json!({"state": "success", "count": 1.5})),
            vec!["body.count: 1.5 is not an integer or null"]
        );
        assert_eq!(
            messages(schema, json!([])),
            vec!["body: [] is not an object"]
        );
    }

    #[test]
    fn refs_additional_properties_and_items() {
        let schema = json!({"type": "array", "minItems": 1, "maxItems": 2, "uniqueItems": true,
                            "items": {"$ref": "#/components/schemas/label"}});
        assert!(messages(schema.clone(), json!([{"name": "a"}])).is_empty());
        assert_eq!(
            messages(schema.clone(), json!([{"name": "a", "colour": "red"}])),
            vec!["body[0].colour: is not a property this schema allows (additionalProperties is false; allowed: name)"]
        );
        assert_eq!(
            messages(schema.clone(), json!([])),
            vec!["body: has 0 items, fewer than minItems 1"]
        );
        assert_eq!(
            messages(schema, json!([{"name": "a"}, {"name": "a"}])),
            vec![r#"body: {"name":"a"} appears twice; uniqueItems is true"#]
        );
        let map = json!({"type": "object", "additionalProperties": {"type": "integer"}});
        assert_eq!(
            messages(map, json!({"x": "1"})),
            vec![r#"body.x: "1" is not an integer"#]
        );
    }

    #[test]
    fn one_of_any_of_all_of() {
        let one_of = json!({"oneOf": [{"type": "string"}, {"type": "object",
            "properties": {"name": {"type": "string"}}, "required": ["name"]}]});
        assert!(messages(one_of.clone(), json!("bug")).is_empty());
        assert!(messages(one_of.clone(), json!({"name": "bug"})).is_empty());
        assert_eq!(
            messages(one_of, json!(3)),
            vec!["body: 3 matches none of oneOf's 2 alternatives: (1) body: 3 is not a string; (2) body: 3 is not an object"]
        );
        let overlapping = json!({"oneOf": [{"type": "integer"}, {"type": "number"}]});
        assert_eq!(
            messages(overlapping, json!(3)),
            vec!["body: 3 matches 2 of oneOf's 2 alternatives; exactly one must match"]
        );
        let any_of = json!({"anyOf": [{"type": "integer"}, {"type": "number"}]});
        assert!(messages(any_of, json!(3)).is_empty());
        let all_of = json!({"allOf": [{"type": "string", "minLength": 2}, {"maxLength": 3}]});
        assert_eq!(
            messages(all_of, json!("abcd")),
            vec!["body: is 4 characters long, longer than maxLength 3"]
        );
    }

    #[test]
    fn number_bounds() {
        let schema = json!({"type": "integer", "minimum": 1, "maximum": 100});
        assert!(messages(schema.clone(), json!(100)).is_empty());
        assert_eq!(
            messages(schema.clone(), json!(0)),
            vec!["body: 0 is below the minimum 1"]
        );
        assert_eq!(
            messages(schema, json!(101)),
            vec!["body: 101 is above the maximum 100"]
        );
    }
}
