//! GitHub's REST API description (`@octokit/openapi`'s `api.github.com.json`), read and
//! indexed once per process: each operation's method, path template and `operationId`, and
//! lookups of a request's operation. `$ref`s are resolved when they are read, never ahead.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::npm_files::{read_npm_file, OPENAPI_DESCRIPTION};
use crate::path_template::{split_path, PathMatch, PathTemplate};

/// The HTTP methods an OpenAPI path item may hold operations under.
const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// The description and its index.
pub(crate) struct Description {
    pub(crate) document: Value,
    routes: Vec<Route>,
    routes_by_operation_id: HashMap<String, usize>,
    /// How long reading, parsing and indexing took.
    pub(crate) load_time: Duration,
}

/// One operation: where it is and how a path matches it.
pub(crate) struct Route {
    /// Upper case, as on the wire.
    pub(crate) method: String,
    pub(crate) template_text: String,
    pub(crate) operation_id: String,
    template: PathTemplate,
}

/// A request's operation, found.
pub(crate) struct FoundOperation<'a> {
    pub(crate) route: &'a Route,
    pub(crate) operation: &'a Value,
    /// Path parameters by name, percent-decoded.
    pub(crate) path_parameters: Vec<(String, String)>,
}

/// The description, loaded on first use.
pub(crate) fn description() -> &'static Description {
    static DESCRIPTION: OnceLock<Description> = OnceLock::new();
    DESCRIPTION.get_or_init(Description::load)
}

impl Description {
    fn load() -> Description {
        let started = Instant::now();
        let bytes = read_npm_file(OPENAPI_DESCRIPTION);
        let document: Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|error| panic!("failed to parse {OPENAPI_DESCRIPTION}: {error}"));
        let mut description = Description::index(document);
        description.load_time = started.elapsed();
        description
    }

    /// Indexes an already parsed document (tests give small ones).
    pub(crate) fn index(document: Value) -> Description {
        let mut routes = Vec::new();
        let paths = document["paths"].as_object().cloned().unwrap_or_default();
        for (template_text, path_item) in &paths {
            for method in METHODS {
                let Some(operation) = path_item.get(method) else {
                    continue;
                };
                let Some(operation_id) = operation["operationId"].as_str() else {
                    continue;
                };
                let multi_segment = multi_segment_parameters(&document, operation);
                routes.push(Route {
                    method: method.to_ascii_uppercase(),
                    template_text: template_text.clone(),
                    operation_id: operation_id.to_string(),
                    template: PathTemplate::parse(template_text, |name| {
                        multi_segment.iter().any(|multi| multi == name)
                    }),
                });
            }
        }
        let routes_by_operation_id = routes
            .iter()
            .enumerate()
            .map(|(index, route)| (route.operation_id.clone(), index))
            .collect();
        Description {
            document,
            routes,
            routes_by_operation_id,
            load_time: Duration::ZERO,
        }
    }

    /// The operation `method path` (path without query) is, if any: the matching template
    /// with the most literal segments.
    pub(crate) fn find_operation(&self, method: &str, path: &str) -> Option<FoundOperation<'_>> {
        let segments: Vec<&str> = split_path(path).collect();
        let (route, found) = self
            .routes
            .iter()
            .filter(|route| route.method.eq_ignore_ascii_case(method))
            .filter_map(|route| {
                route
                    .template
                    .match_segments(&segments)
                    .map(|found| (route, found))
            })
            .max_by(|(_, left), (_, right): &(&Route, PathMatch)| {
                left.specificity.cmp(&right.specificity)
            })?;
        Some(FoundOperation {
            route,
            operation: self.operation_of(route),
            path_parameters: found.parameters,
        })
    }

    /// The methods under which `path` is an operation (for a message when `method` is not).
    pub(crate) fn methods_of_path(&self, path: &str) -> Vec<&str> {
        let segments: Vec<&str> = split_path(path).collect();
        let mut methods: Vec<&str> = self
            .routes
            .iter()
            .filter(|route| route.template.match_segments(&segments).is_some())
            .map(|route| route.method.as_str())
            .collect();
        methods.sort_unstable();
        methods.dedup();
        methods
    }

    /// The route of an `operationId`.
    pub(crate) fn route(&self, operation_id: &str) -> Option<&Route> {
        self.routes_by_operation_id
            .get(operation_id)
            .map(|&index| &self.routes[index])
    }

    /// The operation object of a route.
    pub(crate) fn operation_of(&self, route: &Route) -> &Value {
        &self.document["paths"][&route.template_text][route.method.to_ascii_lowercase()]
    }

    /// Follows `$ref`s (`#/components/...`) until a value that is not one.
    pub(crate) fn resolve<'a>(&'a self, mut value: &'a Value) -> &'a Value {
        for _ in 0..32 {
            let Some(reference) = value.get("$ref").and_then(Value::as_str) else {
                return value;
            };
            value = self.pointer(reference).unwrap_or_else(|| {
                panic!("the description's $ref {reference:?} points at nothing")
            });
        }
        panic!("the description's $refs go round in a circle at {value}")
    }

    /// The value a local `$ref` (`#/components/schemas/x`) names.
    pub(crate) fn pointer(&self, reference: &str) -> Option<&Value> {
        self.document.pointer(reference.strip_prefix('#')?)
    }

    /// An operation's parameters, resolved.
    pub(crate) fn parameters_of<'a>(&'a self, operation: &'a Value) -> Vec<&'a Value> {
        operation["parameters"]
            .as_array()
            .map(|parameters| {
                parameters
                    .iter()
                    .map(|parameter| self.resolve(parameter))
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn multi_segment_parameters(document: &Value, operation: &Value) -> Vec<String> {
    operation["parameters"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|parameter| resolve_in(document, parameter))
        .filter(|parameter| parameter["in"] == "path" && parameter["x-multi-segment"] == true)
        .filter_map(|parameter| parameter["name"].as_str().map(str::to_string))
        .collect()
}

/// Follows local `$ref`s within `document` (before a `Description` exists).
fn resolve_in<'a>(document: &'a Value, mut value: &'a Value) -> &'a Value {
    for _ in 0..32 {
        let target = value
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|reference| reference.strip_prefix('#'))
            .and_then(|pointer| document.pointer(pointer));
        match target {
            Some(target) => value = target,
            None => break,
        }
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn small_description() -> Description {
        Description::index(json!({
            "paths": {
                "/repos/{owner}/{repo}/pulls/{pull_number}": {
                    "get": {"operationId": "pulls/get", "parameters": []}
                },
                "/repos/{owner}/{repo}/pulls/comments": {
                    "get": {"operationId": "pulls/list-review-comments-for-repo"}
                },
                "/repos/{owner}/{repo}/commits/{ref}/statuses": {
                    "get": {"operationId": "repos/list-commit-statuses-for-ref",
                            "parameters": [{"$ref": "#/components/parameters/commit-ref"}]}
                }
            },
            "components": {"parameters": {"commit-ref": {
                "name": "ref", "in": "path", "required": true,
                "schema": {"type": "string"}, "x-multi-segment": true
            }}}
        }))
    }

    #[test]
    fn the_template_with_most_literal_segments_wins() {
        let description = small_description();
        let found = description
            .find_operation("GET", "/repos/o/r/pulls/comments")
            .expect("an operation");
        assert_eq!(
            found.route.operation_id,
            "pulls/list-review-comments-for-repo"
        );
        let found = description
            .find_operation("GET", "/repos/o/r/pulls/7")
            .expect("an operation");
        assert_eq!(found.route.operation_id, "pulls/get");
        assert!(description
            .find_operation("POST", "/repos/o/r/pulls/7")
            .is_none());
        assert_eq!(
            description.methods_of_path("/repos/o/r/pulls/7"),
            vec!["GET"]
        );
    }

    #[test]
    fn a_referenced_multi_segment_parameter_spans_segments() {
        let description = small_description();
        let found = description
            .find_operation("GET", "/repos/o/r/commits/heads/main/statuses")
            .expect("an operation");
        assert_eq!(
            found.path_parameters[2],
            ("ref".to_string(), "heads/main".to_string())
        );
    }
}
