//! `GitHubApiDouble`: GitHub's REST API on `127.0.0.1:0`, for tests. Every request is
//! recorded and checked against the pinned description (`request_check`); it is answered
//! with what GitHub would refuse it with, a failure the test asked for (`fail_next`), the
//! stateful overlay's answer, or the operation's documented example.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use axum::Router;
use serde_json::Value;

use crate::description::{description, Description};
use crate::documented_response::documented_success;
use crate::github_errors::Answer;
use crate::overlay::{answer_from_state, OverlayRequest};
use crate::path_template::percent_decode;
use crate::request_check::{check_request, credential, header, IncomingRequest};
use crate::state::{same_repository, CommitStatus, GitHubState, IssueComment, PullRequest};

/// The most a request body may hold.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// One request the double received, and the status it answered.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// Upper case (`POST`).
    pub method: String,
    /// The path without the query, as sent (not percent-decoded).
    pub path: String,
    /// The query's pairs, percent-decoded, in order.
    pub query: Vec<(String, String)>,
    /// The operation it matched, if any (`repos/create-commit-status`).
    pub operation_id: Option<String>,
    /// Names in lower case, in order.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON; `None` when empty or not JSON (see `raw_body`).
    pub body: Option<Value>,
    /// The body as text (lossy UTF-8).
    pub raw_body: String,
    /// The status the double answered.
    pub status: u16,
}

impl RecordedRequest {
    /// A header's value (`name` in any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, &name.to_ascii_lowercase())
    }
}

/// A local GitHub REST API double (see the crate docs). The server stops when it is dropped.
pub struct GitHubApiDouble {
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

struct Shared {
    api_base: String,
    description: &'static Description,
    inner: Mutex<Recorded>,
}

#[derive(Default)]
struct Recorded {
    requests: Vec<RecordedRequest>,
    problems: Vec<String>,
    state: GitHubState,
    injected_failures: HashMap<String, InjectedFailure>,
}

struct InjectedFailure {
    answer: Answer,
    remaining: u32,
}

impl GitHubApiDouble {
    /// Starts the double on `127.0.0.1:0`. The description is read and indexed on first use
    /// in the process (off the runtime's threads) and shared by every double after it.
    pub async fn start() -> GitHubApiDouble {
        let description = match tokio::task::spawn_blocking(description).await {
            Ok(description) => description,
            // The loader's own message says what to install.
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(error) => panic!("failed to load GitHub's REST API description: {error}"),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("failed to bind the GitHub API double to 127.0.0.1:0");
        let address = listener
            .local_addr()
            .expect("a bound listener has an address");
        let shared = Arc::new(Shared {
            api_base: format!("http://{address}"),
            description,
            inner: Mutex::new(Recorded::default()),
        });
        let router = Router::new()
            .fallback(handle_request)
            .with_state(Arc::clone(&shared));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        GitHubApiDouble { shared, server }
    }

    /// The API base URL a client uses instead of GitHub's (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        self.shared.api_base.clone()
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.recorded().requests.clone()
    }

    /// The requests that matched `operation_id` (`issues/create-comment`), in order.
    pub fn requests_to(&self, operation_id: &str) -> Vec<RecordedRequest> {
        self.assert_known_operation(operation_id);
        self.recorded()
            .requests
            .iter()
            .filter(|request| request.operation_id.as_deref() == Some(operation_id))
            .cloned()
            .collect()
    }

    /// Every way a request broke the description (or GitHub's rules), in order.
    pub fn problems(&self) -> Vec<String> {
        self.recorded().problems.clone()
    }

    /// Panics listing the problems, if any request had one. Says nothing about how many
    /// requests came: assert that with `requests_to`.
    pub fn assert_every_request_valid(&self) {
        let problems = self.problems();
        if !problems.is_empty() {
            panic!(
                "{} problem(s) in the requests to the GitHub API double:\n  {}",
                problems.len(),
                problems.join("\n  ")
            );
        }
    }

    /// Answers the next `times` valid requests to `operation_id` with `status` and GitHub's
    /// error body, changing nothing (a 502 for a retry test). A later call replaces it.
    pub fn fail_next(&self, operation_id: &str, status: u16, times: u32) {
        self.assert_known_operation(operation_id);
        let reason = StatusCode::from_u16(status)
            .ok()
            .and_then(|code| code.canonical_reason())
            .unwrap_or("Injected failure");
        self.inject(operation_id, Answer::error(status, reason), times);
    }

    /// Answers the next `times` valid requests to `operation_id` as GitHub's secondary rate
    /// limit does: 403 with `retry-after: SECONDS` and `x-ratelimit-remaining: 0`.
    pub fn rate_limit_next(&self, operation_id: &str, times: u32, retry_after_s: u64) {
        self.assert_known_operation(operation_id);
        let mut answer = Answer::error(
            403,
            "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
        );
        answer
            .headers
            .push(("retry-after".to_string(), retry_after_s.to_string()));
        answer
            .headers
            .push(("x-ratelimit-remaining".to_string(), "0".to_string()));
        self.inject(operation_id, answer, times);
    }

    /// Who `token` is from now on: what `GET /user` answers for it and the author of the
    /// comments it makes (every other token is `DEFAULT_LOGIN`).
    pub fn set_login(&self, token: &str, login: &str) {
        let mut recorded = self.recorded();
        recorded.state.logins.retain(|(known, _)| known != token);
        recorded
            .state
            .logins
            .push((token.to_string(), login.to_string()));
    }

    /// A comment by `author` on an issue or pull request, as if someone else wrote it
    /// through GitHub: its id.
    pub fn plant_comment(
        &self,
        owner: &str,
        repo: &str,
        issue_number: u64,
        author: &str,
        body: &str,
    ) -> u64 {
        let mut recorded = self.recorded();
        let id = recorded.state.next_id();
        recorded.state.comments.push(IssueComment {
            owner: owner.to_string(),
            repo: repo.to_string(),
            issue_number,
            id,
            body: body.to_string(),
            author: author.to_string(),
        });
        id
    }

    /// Makes pull request `number` answer `sha` as its `head.sha`, as a hostile or broken
    /// API might (the pull request must exist).
    pub fn set_pull_head(&self, owner: &str, repo: &str, number: u64, sha: &str) {
        let mut recorded = self.recorded();
        let pull = recorded
            .state
            .pull_requests
            .iter_mut()
            .find(|pull| {
                pull.number == number && same_repository(owner, repo, &pull.owner, &pull.repo)
            })
            .unwrap_or_else(|| panic!("no pull request {owner}/{repo}#{number} in the double"));
        pull.head_sha = Some(sha.to_string());
    }

    /// The comments remembered on an issue or pull request, oldest first.
    pub fn issue_comments(&self, owner: &str, repo: &str, issue_number: u64) -> Vec<IssueComment> {
        self.recorded()
            .state
            .comments
            .iter()
            .filter(|comment| {
                comment.issue_number == issue_number
                    && same_repository(owner, repo, &comment.owner, &comment.repo)
            })
            .cloned()
            .collect()
    }

    /// The pull requests remembered in a repository, oldest first.
    pub fn pull_requests(&self, owner: &str, repo: &str) -> Vec<PullRequest> {
        self.recorded()
            .state
            .pull_requests
            .iter()
            .filter(|pull| same_repository(owner, repo, &pull.owner, &pull.repo))
            .cloned()
            .collect()
    }

    /// The statuses remembered for a commit, oldest first.
    pub fn commit_statuses(&self, owner: &str, repo: &str, sha: &str) -> Vec<CommitStatus> {
        self.recorded()
            .state
            .statuses
            .iter()
            .filter(|status| {
                status.sha == sha && same_repository(owner, repo, &status.owner, &status.repo)
            })
            .cloned()
            .collect()
    }

    /// The labels remembered on an issue or pull request, in the order added.
    pub fn issue_labels(&self, owner: &str, repo: &str, issue_number: u64) -> Vec<String> {
        self.recorded().state.labels_on(owner, repo, issue_number)
    }

    fn inject(&self, operation_id: &str, answer: Answer, times: u32) {
        self.recorded().injected_failures.insert(
            operation_id.to_string(),
            InjectedFailure {
                answer,
                remaining: times,
            },
        );
    }

    fn assert_known_operation(&self, operation_id: &str) {
        assert!(
            self.shared.description.route(operation_id).is_some(),
            "{operation_id:?} is not an operationId of GitHub's REST API description"
        );
    }

    fn recorded(&self) -> MutexGuard<'_, Recorded> {
        self.shared
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for GitHubApiDouble {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn handle_request(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .unwrap_or_default();
    let method = parts.method.as_str().to_ascii_uppercase();
    let path = parts.uri.path().to_string();
    let query = parse_query(parts.uri.query().unwrap_or_default());
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_string(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    let incoming = IncomingRequest {
        method: &method,
        path: &path,
        query: &query,
        headers: &headers,
        body: &body,
    };
    let checked = check_request(shared.description, &incoming);
    let mut problems = checked.problems;
    let operation_id = checked
        .found
        .as_ref()
        .map(|found| found.route.operation_id.clone());

    let mut recorded = shared
        .inner
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let answer = match (checked.refusal, &checked.found) {
        (Some(refusal), _) => refusal,
        (None, None) => Answer::not_found(),
        (None, Some(found)) => {
            let operation_id = found.route.operation_id.as_str();
            match take_injected_failure(&mut recorded, operation_id) {
                Some(failure) => failure,
                None => {
                    let documented = documented_success(shared.description, found.operation);
                    let overlay_request = OverlayRequest {
                        operation_id,
                        path: &path,
                        path_parameters: &found.path_parameters,
                        query: &query,
                        body: checked.body.as_ref(),
                        token: credential(&headers).unwrap_or_default(),
                        api_base: &shared.api_base,
                    };
                    match answer_from_state(&mut recorded.state, &overlay_request, &documented) {
                        Some(overlay) => {
                            let label = format!("{method} {path} ({operation_id})");
                            problems.extend(
                                overlay
                                    .problems
                                    .iter()
                                    .map(|problem| format!("{label}: {problem}")),
                            );
                            overlay.answer
                        }
                        None => Answer {
                            status: documented.status,
                            body: documented.body,
                            headers: Vec::new(),
                        },
                    }
                }
            }
        }
    };
    recorded.problems.extend(problems);
    recorded.requests.push(RecordedRequest {
        method,
        path,
        query,
        operation_id,
        headers,
        body: checked.body,
        raw_body: String::from_utf8_lossy(&body).into_owned(),
        status: answer.status,
    });
    drop(recorded);
    into_response(answer)
}

fn take_injected_failure(recorded: &mut Recorded, operation_id: &str) -> Option<Answer> {
    let failure = recorded.injected_failures.get_mut(operation_id)?;
    if failure.remaining == 0 {
        return None;
    }
    failure.remaining -= 1;
    Some(failure.answer.clone())
}

fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decode = |text: &str| percent_decode(&text.replace('+', " "));
            (decode(key), decode(value))
        })
        .collect()
}

fn into_response(answer: Answer) -> Response {
    let has_body = answer.body.is_some() && answer.status != 204;
    let body = match &answer.body {
        Some(value) if has_body => Body::from(value.to_string()),
        _ => Body::empty(),
    };
    let mut response = Response::new(body);
    *response.status_mut() =
        StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    if has_body {
        headers.insert(
            "content-type",
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
    }
    for (name, value) in answer.headers {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
            headers.append(name, value);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_split_and_decoded() {
        assert_eq!(
            parse_query("head=o%3Abranch&state=open&q=a+b&flag"),
            vec![
                ("head".to_string(), "o:branch".to_string()),
                ("state".to_string(), "open".to_string()),
                ("q".to_string(), "a b".to_string()),
                ("flag".to_string(), String::new()),
            ]
        );
    }
}
