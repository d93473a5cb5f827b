//! A request's path and query parameters checked against the operation's `parameters`: each
//! text read as the type its schema declares (`"7"` as the integer 7) and validated; an
//! unknown, repeated or missing required query parameter is a problem. An array parameter
//! takes every occurrence of `name` and `name[]`.

use serde_json::Value;

use crate::description::Description;
use crate::schema::validate;

/// Problems of the path parameters the template captured.
pub(crate) fn check_path_parameters(
    description: &Description,
    operation: &Value,
    captured: &[(String, String)],
) -> Vec<String> {
    let declared = declared_parameters(description, operation, "path");
    let mut problems = Vec::new();
    for (name, text) in captured {
        match declared
            .iter()
            .find(|parameter| parameter["name"] == name.as_str())
        {
            Some(parameter) => {
                let at = format!("path parameter {name}");
                problems.extend(check_texts(description, &parameter["schema"], &[text], &at));
            }
            None => problems.push(format!(
                "path parameter {name}: the template names it but the operation does not declare it"
            )),
        }
    }
    problems
}

/// Problems of the query string's parameters.
pub(crate) fn check_query_parameters(
    description: &Description,
    operation: &Value,
    query: &[(String, String)],
) -> Vec<String> {
    let declared = declared_parameters(description, operation, "query");
    let declared_names: Vec<&str> = declared
        .iter()
        .filter_map(|parameter| parameter["name"].as_str())
        .collect();
    let mut problems = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (key, _) in query {
        let name = key.strip_suffix("[]").unwrap_or(key);
        if !declared_names.contains(&name) {
            problems.push(format!(
                "query parameter {key:?} is not a parameter of this operation (it takes: {})",
                if declared_names.is_empty() {
                    "none".to_string()
                } else {
                    declared_names.join(", ")
                }
            ));
        } else if !seen.contains(&name) {
            seen.push(name);
        }
    }
    for parameter in &declared {
        let Some(name) = parameter["name"].as_str() else {
            continue;
        };
        let texts: Vec<&String> = query
            .iter()
            .filter(|(key, _)| key == name || key.strip_suffix("[]") == Some(name))
            .map(|(_, text)| text)
            .collect();
        if texts.is_empty() {
            if parameter["required"] == true {
                problems.push(format!("query parameter {name} is required but missing"));
            }
            continue;
        }
        let at = format!("query parameter {name}");
        problems.extend(check_texts(description, &parameter["schema"], &texts, &at));
    }
    problems
}

fn declared_parameters<'a>(
    description: &'a Description,
    operation: &'a Value,
    location: &str,
) -> Vec<&'a Value> {
    description
        .parameters_of(operation)
        .into_iter()
        .filter(|parameter| parameter["in"] == location)
        .collect()
}

/// Checks the texts a parameter was given (one, or several for an array) against its schema.
fn check_texts(
    description: &Description,
    schema: &Value,
    texts: &[&String],
    at: &str,
) -> Vec<String> {
    let resolved = description.resolve(schema);
    let takes_array = declared_types(resolved).contains(&"array")
        || alternatives_take_array(description, resolved);
    if texts.len() > 1 && !takes_array {
        return vec![format!(
            "{at} is given {} times; it takes one value",
            texts.len()
        )];
    }
    let candidates: Vec<Value> = if takes_array {
        // An array first: `sort=a` is the array ["a"] (and a oneOf of string or array still
        // takes it as the string below).
        let items = description.resolve(&resolved["items"]);
        let array = Value::Array(texts.iter().map(|text| read_text_as(items, text)).collect());
        let mut candidates = vec![array];
        if let [text] = texts {
            candidates.push(read_text_as(resolved, text));
        }
        candidates
    } else {
        vec![read_text_as(resolved, texts[0])]
    };
    let mut first_violations = None;
    for candidate in &candidates {
        let violations = validate(description, schema, candidate, at);
        if violations.is_empty() {
            return Vec::new();
        }
        first_violations.get_or_insert(violations);
    }
    first_violations
        .unwrap_or_default()
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// The text read as the schema's declared scalar type, where it reads as one; else a string.
fn read_text_as(schema: &Value, text: &str) -> Value {
    let types = declared_types(schema);
    if types.contains(&"integer") {
        if let Ok(integer) = text.parse::<i64>() {
            return Value::from(integer);
        }
    }
    if types.contains(&"number") {
        if let Some(number) = text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
        {
            return Value::Number(number);
        }
    }
    if types.contains(&"boolean") {
        match text {
            "true" => return Value::Bool(true),
            "false" => return Value::Bool(false),
            _ => {}
        }
    }
    Value::String(text.to_string())
}

fn declared_types(schema: &Value) -> Vec<&str> {
    match &schema["type"] {
        Value::String(name) => vec![name.as_str()],
        Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn alternatives_take_array(description: &Description, schema: &Value) -> bool {
    ["oneOf", "anyOf"].iter().any(|keyword| {
        schema[keyword]
            .as_array()
            .into_iter()
            .flatten()
            .any(|alternative| declared_types(description.resolve(alternative)).contains(&"array"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn description() -> Description {
        Description::index(json!({"paths": {}, "components": {"parameters": {
            "per-page": {"name": "per_page", "in": "query", "schema": {"type": "integer", "default": 30}}
        }}}))
    }

    fn operation() -> Value {
        json!({"parameters": [
            {"name": "issue_number", "in": "path", "required": true, "schema": {"type": "integer"}},
            {"name": "state", "in": "query", "schema": {"type": "string", "enum": ["open", "closed", "all"]}},
            {"name": "draft", "in": "query", "schema": {"type": "boolean"}},
            {"name": "sort", "in": "query", "schema": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}},
            {"name": "q", "in": "query", "required": true, "schema": {"type": "string"}},
            {"$ref": "#/components/parameters/per-page"}
        ]})
    }

    fn query(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect()
    }

    #[test]
    fn path_parameters_are_read_as_their_type() {
        let description = description();
        let captured = vec![("issue_number".to_string(), "7".to_string())];
        assert!(check_path_parameters(&description, &operation(), &captured).is_empty());
        let captured = vec![("issue_number".to_string(), "seven".to_string())];
        assert_eq!(
            check_path_parameters(&description, &operation(), &captured),
            vec![r#"path parameter issue_number: "seven" is not an integer"#]
        );
    }

    #[test]
    fn query_parameters_known_typed_and_required() {
        let description = description();
        let good = query(&[
            ("q", "x"),
            ("state", "open"),
            ("per_page", "100"),
            ("draft", "true"),
            ("sort", "a"),
            ("sort", "b"),
        ]);
        assert!(check_query_parameters(&description, &operation(), &good).is_empty());
        let bad = query(&[
            ("state", "merged"),
            ("per_page", "many"),
            ("draft", "yes"),
            ("colour", "red"),
            ("sort[]", "c"),
        ]);
        assert_eq!(
            check_query_parameters(&description, &operation(), &bad),
            vec![
                r#"query parameter "colour" is not a parameter of this operation (it takes: state, draft, sort, q, per_page)"#,
                r#"query parameter state: "merged" is not one of ["open","closed","all"]"#,
                r#"query parameter draft: "yes" is not a boolean"#,
                r#"query parameter sort[0]: "c" is not one of ["a","b"]"#,
                "query parameter q is required but missing",
                r#"query parameter per_page: "many" is not an integer"#,
            ]
        );
        let repeated = query(&[("q", "x"), ("state", "open"), ("state", "all")]);
        assert_eq!(
            check_query_parameters(&description, &operation(), &repeated),
            vec!["query parameter state is given 2 times; it takes one value"]
        );
    }
}
