//! The validator against the description's own request examples: every JSON request body
//! example GitHub documents must pass its operation's schema, so the double refuses no
//! request GitHub documents as good (no false positives on the real description), except the
//! few examples of 23.0.2 that contradict their own schema, pinned below.

use serde_json::Value;

use crate::description::description;
use crate::documented_response::example_of;
use crate::schema::validate;

/// The examples of `@octokit/openapi` 23.0.2 that break their own schema, each checked by
/// hand against the schema text: the description's inconsistencies, not the validator's.
const EXAMPLES_THAT_CONTRADICT_THEIR_SCHEMA: [&str; 7] = [
    // `{"files": {"hello.py": null}}` deletes a file, but the file schema is not nullable.
    "gists/update",
    // Its options' examples leave out `priority`, which the option schema requires.
    "orgs/create-issue-field",
    // The "204" example is the value null: "send no body", written as a body.
    "orgs/convert-member-to-outside-collaborator",
    // A `single_select` field's option descriptions are `{html, raw}` objects; the schema
    // says string.
    "projects/add-field-for-org",
    "projects/add-field-for-user",
    // One example is a bare array; the schema is an object.
    "security-advisories/update-repository-advisory",
    // Repository ids as strings; the schema says integer.
    "codespaces/set-repositories-for-secret-for-authenticated-user",
];

#[test]
fn every_documented_request_body_example_passes_its_schema() {
    let description = description();
    let mut checked = 0;
    let mut failures = Vec::new();
    let mut contradicting = Vec::new();
    for (template, path_item) in description.document["paths"].as_object().expect("paths") {
        for (method, operation) in path_item.as_object().expect("a path item") {
            let Some(request_body) = operation.get("requestBody") else {
                continue;
            };
            let request_body = description.resolve(request_body);
            let Some(media) = request_body["content"].get("application/json") else {
                continue;
            };
            let examples: Vec<Value> = match media["examples"].as_object() {
                Some(examples) => examples
                    .values()
                    .filter_map(|example| description.resolve(example).get("value").cloned())
                    .collect(),
                None => example_of(description, media).into_iter().collect(),
            };
            for example in examples {
                checked += 1;
                let violations = validate(description, &media["schema"], &example, "body");
                let operation_id = operation["operationId"].as_str().unwrap_or_default();
                if !violations.is_empty()
                    && EXAMPLES_THAT_CONTRADICT_THEIR_SCHEMA.contains(&operation_id)
                {
                    contradicting.push(operation_id);
                } else if !violations.is_empty() {
                    failures.push(format!(
                        "{} {template} ({}): {}",
                        method.to_uppercase(),
                        operation_id,
                        violations
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join("; ")
                    ));
                }
            }
        }
    }
    assert!(checked > 300, "only {checked} examples found");
    contradicting.sort_unstable();
    contradicting.dedup();
    let mut pinned = EXAMPLES_THAT_CONTRADICT_THEIR_SCHEMA.to_vec();
    pinned.sort_unstable();
    assert_eq!(
        contradicting, pinned,
        "the pinned contradictions are each still there"
    );
    assert!(
        failures.is_empty(),
        "{} of {checked} examples fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_operation_is_found_again_from_a_path_of_its_template() {
    let description = description();
    let mut misrouted = Vec::new();
    let mut checked = 0;
    for (template, path_item) in description.document["paths"].as_object().expect("paths") {
        for (method, operation) in path_item.as_object().expect("a path item") {
            let Some(operation_id) = operation["operationId"].as_str() else {
                continue;
            };
            let parameters = description.parameters_of(operation);
            let mut path = template.clone();
            for parameter in parameters
                .iter()
                .filter(|parameter| parameter["in"] == "path")
            {
                let name = parameter["name"].as_str().unwrap_or_default();
                let schema = description.resolve(&parameter["schema"]);
                let value = match (&schema["enum"], &schema["type"]) {
                    (Value::Array(allowed), _) => allowed[0].as_str().unwrap_or("x").to_string(),
                    (_, Value::String(kind)) if kind == "integer" => "12".to_string(),
                    _ => format!("{name}-value"),
                };
                path = path.replace(&format!("{{{name}}}"), &value);
            }
            checked += 1;
            let found = description.find_operation(&method.to_uppercase(), &path);
            let found_id = found
                .as_ref()
                .map(|found| found.route.operation_id.as_str());
            if found_id != Some(operation_id) {
                misrouted.push(format!(
                    "{} {path}: {operation_id} expected, {found_id:?} found",
                    method.to_uppercase()
                ));
            }
        }
    }
    assert!(checked > 1000, "only {checked} operations");
    assert!(
        misrouted.is_empty(),
        "{} misrouted:\n{}",
        misrouted.len(),
        misrouted.join("\n")
    );
}

#[test]
fn every_operation_has_a_documented_answer() {
    let description = description();
    let mut answered = 0;
    for path_item in description.document["paths"]
        .as_object()
        .expect("paths")
        .values()
    {
        for operation in path_item.as_object().expect("a path item").values() {
            let documented = crate::documented_response::documented_success(description, operation);
            assert!((200..400).contains(&documented.status), "{operation}");
            answered += 1;
        }
    }
    assert!(answered > 1000, "only {answered} operations");
}
