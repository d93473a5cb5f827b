//! The answer the description documents for an operation's success: the lowest 2xx status
//! (the lowest documented status when there is no 2xx, as for the 302 of a download), with
//! its `application/json` example (the first of `examples`, a `$ref` into
//! `components/examples` read for its `value`; else `example`), or no body (a 204).

use serde_json::Value;

use crate::description::Description;

/// A status and an optional JSON body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DocumentedResponse {
    pub(crate) status: u16,
    pub(crate) body: Option<Value>,
}

/// The documented success response of `operation`.
pub(crate) fn documented_success(
    description: &Description,
    operation: &Value,
) -> DocumentedResponse {
    let Some(responses) = operation["responses"].as_object() else {
        return DocumentedResponse {
            status: 200,
            body: None,
        };
    };
    let mut statuses: Vec<(u16, &Value)> = responses
        .iter()
        .filter_map(|(code, response)| code.parse::<u16>().ok().map(|status| (status, response)))
        .collect();
    statuses.sort_by_key(|(status, _)| *status);
    let chosen = statuses
        .iter()
        .find(|(status, _)| (200..300).contains(status))
        .or_else(|| statuses.first());
    let Some(&(status, response)) = chosen else {
        return DocumentedResponse {
            status: 200,
            body: None,
        };
    };
    let response = description.resolve(response);
    let body = response["content"]
        .get("application/json")
        .and_then(|media| example_of(description, media));
    DocumentedResponse { status, body }
}

/// The first example of a media type object.
pub(crate) fn example_of(description: &Description, media: &Value) -> Option<Value> {
    if let Some(first) = media["examples"]
        .as_object()
        .and_then(|examples| examples.values().next())
    {
        return description.resolve(first).get("value").cloned();
    }
    media.get("example").cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lowest_success_with_its_referenced_example() {
        let description = Description::index(json!({
            "paths": {},
            "components": {
                "examples": {"status": {"value": {"id": 1, "state": "success"}}},
                "responses": {"not_found": {"description": "nope"},
                              "accepted": {"description": "", "content": {"application/json": {"example": {"queued": true}}}}}
            }
        }));
        let operation = json!({"responses": {
            "404": {"$ref": "#/components/responses/not_found"},
            "201": {"description": "", "content": {"application/json": {
                "schema": {}, "examples": {"default": {"$ref": "#/components/examples/status"}}}}},
            "202": {"description": ""}
        }});
        assert_eq!(
            documented_success(&description, &operation),
            DocumentedResponse {
                status: 201,
                body: Some(json!({"id": 1, "state": "success"}))
            }
        );
        let no_content = json!({"responses": {"204": {"description": "Response"}}});
        assert_eq!(
            documented_success(&description, &no_content),
            DocumentedResponse {
                status: 204,
                body: None
            }
        );
        let referenced = json!({"responses": {"202": {"$ref": "#/components/responses/accepted"}}});
        assert_eq!(
            documented_success(&description, &referenced),
            DocumentedResponse {
                status: 202,
                body: Some(json!({"queued": true}))
            }
        );
        let redirect =
            json!({"responses": {"302": {"description": ""}, "410": {"description": ""}}});
        assert_eq!(documented_success(&description, &redirect).status, 302);
    }
}
