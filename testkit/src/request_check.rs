//! One request checked against the description, as GitHub would see it: its operation
//! (404 when none), the headers GitHub wants (`User-Agent`, else 403; a bearer or token
//! `Authorization`, else 401; an `Accept` of GitHub's JSON), its path and query parameters,
//! and its JSON body against the operation's `requestBody` schema (400 when it does not
//! parse, 422 when it breaks the schema). Every failure is a problem; the first refusal is
//! what the double answers.

use serde_json::Value;

use crate::description::{Description, FoundOperation};
use crate::github_errors::Answer;
use crate::parameters::{check_path_parameters, check_query_parameters};
use crate::schema::validate;

/// The parts of a request the checks read.
pub(crate) struct IncomingRequest<'a> {
    pub(crate) method: &'a str,
    pub(crate) path: &'a str,
    pub(crate) query: &'a [(String, String)],
    /// Names in lower case.
    pub(crate) headers: &'a [(String, String)],
    pub(crate) body: &'a [u8],
}

/// What the checks found.
pub(crate) struct CheckedRequest<'a> {
    pub(crate) found: Option<FoundOperation<'a>>,
    /// Human-readable, each naming the request.
    pub(crate) problems: Vec<String>,
    /// What GitHub would answer instead of success, if anything.
    pub(crate) refusal: Option<Answer>,
    /// The body, parsed, when it is JSON.
    pub(crate) body: Option<Value>,
}

/// Checks `request` against `description`.
pub(crate) fn check_request<'a>(
    description: &'a Description,
    request: &IncomingRequest<'_>,
) -> CheckedRequest<'a> {
    let body = parse_body(request.body);
    let Some(found) = description.find_operation(request.method, request.path) else {
        let methods = description.methods_of_path(request.path);
        let hint = if methods.is_empty() {
            String::new()
        } else {
            format!(
                " (that path is an operation for {} only)",
                methods.join(", ")
            )
        };
        return CheckedRequest {
            found: None,
            problems: vec![format!(
                "{} {} is not an operation of the GitHub REST API description{hint}",
                request.method, request.path
            )],
            refusal: Some(Answer::not_found()),
            body,
        };
    };
    let mut findings = Findings::default();
    check_headers(request, &mut findings);
    let path_problems = check_path_parameters(description, found.operation, &found.path_parameters);
    if !path_problems.is_empty() {
        // GitHub finds no such resource (`/issues/abc`).
        findings.refuse(Answer::not_found());
        findings.problems.extend(path_problems);
    }
    let query_problems = check_query_parameters(description, found.operation, request.query);
    if !query_problems.is_empty() {
        findings.refuse(Answer::error(422, "Validation Failed"));
        findings.problems.extend(query_problems);
    }
    check_body(description, &found, request, body.as_ref(), &mut findings);
    let label = format!(
        "{} {} ({})",
        request.method, request.path, found.route.operation_id
    );
    CheckedRequest {
        problems: findings
            .problems
            .iter()
            .map(|problem| format!("{label}: {problem}"))
            .collect(),
        found: Some(found),
        refusal: findings.refusal,
        body,
    }
}

/// The token of a `Bearer` or `token` Authorization header.
pub(crate) fn credential(headers: &[(String, String)]) -> Option<&str> {
    let authorization = header(headers, "authorization").unwrap_or_default();
    ["bearer ", "token "].iter().find_map(|scheme| {
        let prefix = authorization.get(..scheme.len())?;
        prefix
            .eq_ignore_ascii_case(scheme)
            .then(|| authorization[scheme.len()..].trim())
    })
}

/// The value of a header (names are lower case).
pub(crate) fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

#[derive(Default)]
struct Findings {
    problems: Vec<String>,
    refusal: Option<Answer>,
}

impl Findings {
    fn refuse(&mut self, answer: Answer) {
        self.refusal.get_or_insert(answer);
    }
}

fn parse_body(bytes: &[u8]) -> Option<Value> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    serde_json::from_slice(bytes).ok()
}

fn check_headers(request: &IncomingRequest<'_>, findings: &mut Findings) {
    match header(request.headers, "user-agent") {
        Some(agent) if !agent.trim().is_empty() => {}
        _ => {
            findings.problems.push(
                "no User-Agent header; GitHub refuses requests without one (403)".to_string(),
            );
            findings.refuse(Answer::error(
                403,
                "Request forbidden by administrative rules. Please make sure your request has a \
                 User-Agent header",
            ));
        }
    }
    let authorization = header(request.headers, "authorization").unwrap_or_default();
    if credential(request.headers).is_none_or(str::is_empty) {
        let what = if authorization.is_empty() {
            "no Authorization header".to_string()
        } else {
            let scheme = authorization.split_whitespace().next().unwrap_or_default();
            format!("an Authorization header with scheme {scheme:?}")
        };
        findings.problems.push(format!(
            "{what}; GitHub wants `Authorization: Bearer TOKEN` (or `token TOKEN`)"
        ));
        findings.refuse(Answer::error(401, "Requires authentication"));
    }
    let accept = header(request.headers, "accept").unwrap_or_default();
    let takes_github_json = accept
        .split(',')
        .map(|media| {
            media
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .any(|media| media.starts_with("application/vnd.github") || media == "application/json");
    if !takes_github_json {
        findings.problems.push(format!(
            "Accept is {accept:?}; GitHub recommends `Accept: application/vnd.github+json`"
        ));
    }
}

fn check_body(
    description: &Description,
    found: &FoundOperation<'_>,
    request: &IncomingRequest<'_>,
    body: Option<&Value>,
    findings: &mut Findings,
) {
    let has_body = !request.body.iter().all(u8::is_ascii_whitespace);
    let Some(request_body) = found
        .operation
        .get("requestBody")
        .map(|rb| description.resolve(rb))
    else {
        if has_body {
            findings
                .problems
                .push("sends a body, but the operation takes none".to_string());
        }
        return;
    };
    let Some(json_media) = request_body["content"].get("application/json") else {
        return; // a raw upload or markdown text: not JSON, not checked
    };
    if !has_body {
        if request_body["required"] == true {
            findings
                .problems
                .push("sends no body, but the operation requires one".to_string());
            findings.refuse(Answer::error(400, "Problems parsing JSON"));
        }
        return;
    }
    if let Some(content_type) = header(request.headers, "content-type") {
        let media = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        if media != "application/json" && !media.ends_with("+json") {
            findings.problems.push(format!(
                "Content-Type is {content_type:?} for a JSON body; send `application/json`"
            ));
        }
    }
    let Some(body) = body else {
        findings.problems.push(format!(
            "the body is not JSON: {}",
            String::from_utf8_lossy(&request.body[..request.body.len().min(80)])
        ));
        findings.refuse(Answer::error(400, "Problems parsing JSON"));
        return;
    };
    let violations = validate(description, &json_media["schema"], body, "body");
    if !violations.is_empty() {
        findings
            .problems
            .extend(violations.iter().map(ToString::to_string));
        findings.refuse(Answer::validation_failed(
            &resource_name(&found.route.operation_id),
            &violations,
        ));
    }
}

/// GitHub's `resource` for an operation's objects: `pulls/create` → `PullRequest`.
fn resource_name(operation_id: &str) -> String {
    let (group, action) = operation_id.split_once('/').unwrap_or(("", operation_id));
    match (group, action) {
        ("pulls", _) => "PullRequest".to_string(),
        (_, action) if action.contains("comment") => "IssueComment".to_string(),
        (_, action) if action.contains("status") => "Status".to_string(),
        (_, action) if action.contains("label") => "Label".to_string(),
        ("issues", _) => "Issue".to_string(),
        _ => group
            .split('-')
            .map(|word| {
                let mut letters = word.chars();
                letters
                    .next()
                    .map(|first| first.to_ascii_uppercase().to_string() + letters.as_str())
                    .unwrap_or_default()
            })
            .collect(),
    }
}
