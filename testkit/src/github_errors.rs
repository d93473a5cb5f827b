//! The error answers GitHub gives, in its shapes: `{"message", "documentation_url",
//! "status"}`, and for a body it refuses `{"message": "Validation Failed", "errors": [...]}`.

use serde_json::{json, Value};

use crate::schema::SchemaViolation;

/// Where GitHub's error bodies point.
const REST_DOCS_URL: &str = "https://docs.github.com/rest";

/// A status, its body and any extra headers: what the double answers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: Option<Value>,
    pub(crate) headers: Vec<(String, String)>,
}

impl Answer {
    pub(crate) fn json(status: u16, body: Value) -> Answer {
        Answer {
            status,
            body: Some(body),
            headers: Vec::new(),
        }
    }

    /// GitHub's plain error body with its message.
    pub(crate) fn error(status: u16, message: &str) -> Answer {
        Answer::json(
            status,
            json!({"message": message, "documentation_url": REST_DOCS_URL, "status": status.to_string()}),
        )
    }

    pub(crate) fn not_found() -> Answer {
        Answer::error(404, "Not Found")
    }

    /// 422 with one `errors` entry per violation (`resource` is GitHub's name of the object).
    pub(crate) fn validation_failed(resource: &str, violations: &[SchemaViolation]) -> Answer {
        let errors: Vec<Value> = violations
            .iter()
            .map(|violation| {
                json!({
                    "resource": resource,
                    "code": if violation.missing { "missing_field" } else { "invalid" },
                    "field": violation.field.clone().unwrap_or_default(),
                    "message": violation.to_string(),
                })
            })
            .collect();
        Answer::json(
            422,
            json!({"message": "Validation Failed", "errors": errors,
                   "documentation_url": REST_DOCS_URL, "status": "422"}),
        )
    }

    /// 422 with GitHub's `custom` error, as for a pull request that already exists.
    pub(crate) fn custom_validation_failed(resource: &str, message: &str) -> Answer {
        Answer::json(
            422,
            json!({"message": "Validation Failed",
                   "errors": [{"resource": resource, "code": "custom", "message": message}],
                   "documentation_url": REST_DOCS_URL, "status": "422"}),
        )
    }
}
