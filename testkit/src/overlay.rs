//! The stateful overlay: the operations whose answers depend on what was created before
//! (issue comments, pull requests, commit statuses, issue labels). Each answer starts from
//! the documented example and overwrites the remembered fields; every other operation gets
//! the documented example as it is. Requests reach here only after they passed the checks.

use serde_json::{json, Value};

use crate::documented_response::DocumentedResponse;
use crate::github_errors::Answer;
use crate::rendered::{first_item, render_comment, render_label, render_pull, render_status};
use crate::state::{same_repository, CommitStatus, GitHubState, IssueComment, PullRequest};

/// A checked request, as the overlay reads it.
pub(crate) struct OverlayRequest<'a> {
    pub(crate) operation_id: &'a str,
    pub(crate) path: &'a str,
    pub(crate) path_parameters: &'a [(String, String)],
    pub(crate) query: &'a [(String, String)],
    pub(crate) body: Option<&'a Value>,
    /// The request's token (who it is: `GitHubState::login_of`).
    pub(crate) token: &'a str,
    /// The double's URL: the API URLs in answers point back at it.
    pub(crate) api_base: &'a str,
}

/// The overlay's answer and the problems it saw (a `head` filter without its owner, a pull
/// request without a title).
pub(crate) struct OverlayAnswer {
    pub(crate) answer: Answer,
    pub(crate) problems: Vec<String>,
}

/// Answers `request` from `state`, or `None` when the operation is not stateful.
pub(crate) fn answer_from_state(
    state: &mut GitHubState,
    request: &OverlayRequest<'_>,
    documented: &DocumentedResponse,
) -> Option<OverlayAnswer> {
    let mut problems = Vec::new();
    let context = Context {
        request,
        documented,
    };
    let answer = match request.operation_id {
        "issues/create-comment" => create_comment(state, &context),
        "issues/list-comments" => list_comments(state, &context),
        "issues/get-comment" => get_comment(state, &context),
        "issues/update-comment" => update_comment(state, &context),
        "pulls/create" => create_pull(state, &context, &mut problems),
        "pulls/list" => list_pulls(state, &context, &mut problems),
        "pulls/get" => get_pull(state, &context),
        "pulls/update" => update_pull(state, &context),
        "repos/create-commit-status" => create_status(state, &context),
        "repos/list-commit-statuses-for-ref" => list_statuses(state, &context),
        "repos/get-combined-status-for-ref" => combined_status(state, &context),
        "issues/add-labels" => add_labels(state, &context),
        "users/get-authenticated" => authenticated_user(state, &context),
        _ => return None,
    };
    Some(OverlayAnswer { answer, problems })
}

struct Context<'a> {
    request: &'a OverlayRequest<'a>,
    documented: &'a DocumentedResponse,
}

impl Context<'_> {
    fn path_text(&self, name: &str) -> &str {
        self.request
            .path_parameters
            .iter()
            .find(|(key, _)| key == name)
            .map_or("", |(_, value)| value.as_str())
    }

    fn path_number(&self, name: &str) -> u64 {
        self.path_text(name).parse().unwrap_or_default()
    }

    fn owner(&self) -> &str {
        self.path_text("owner")
    }

    fn repo(&self) -> &str {
        self.path_text("repo")
    }

    fn query(&self, name: &str) -> Option<&str> {
        self.request
            .query
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    fn body_text(&self, name: &str) -> Option<String> {
        self.request.body?.get(name)?.as_str().map(str::to_string)
    }

    fn template(&self) -> Value {
        self.documented.body.clone().unwrap_or_else(|| json!({}))
    }

    fn item_template(&self) -> Value {
        first_item(self.documented.body.as_ref())
    }

    fn ok(&self, body: Value) -> Answer {
        Answer::json(self.documented.status, body)
    }

    /// A page of `items` (`per_page`, at most 100, and `page`) with GitHub's `Link` header.
    fn page(&self, items: Vec<Value>) -> Answer {
        let per_page = self
            .query("per_page")
            .and_then(|text| text.parse().ok())
            .unwrap_or(30_usize)
            .clamp(1, 100);
        let page = self
            .query("page")
            .and_then(|text| text.parse().ok())
            .unwrap_or(1_usize)
            .max(1);
        let last_page = items.len().div_ceil(per_page).max(1);
        let shown: Vec<Value> = items
            .into_iter()
            .skip((page - 1) * per_page)
            .take(per_page)
            .collect();
        let mut answer = self.ok(Value::Array(shown));
        let mut links = Vec::new();
        if page < last_page {
            links.push(format!(
                "<{}>; rel=\"next\"",
                self.page_url(page + 1, per_page)
            ));
            links.push(format!(
                "<{}>; rel=\"last\"",
                self.page_url(last_page, per_page)
            ));
        }
        if page > 1 {
            links.push(format!("<{}>; rel=\"first\"", self.page_url(1, per_page)));
            links.push(format!(
                "<{}>; rel=\"prev\"",
                self.page_url(page - 1, per_page)
            ));
        }
        if !links.is_empty() {
            answer.headers.push(("link".to_string(), links.join(", ")));
        }
        answer
    }

    fn page_url(&self, page: usize, per_page: usize) -> String {
        let mut query: Vec<String> = self
            .request
            .query
            .iter()
            .filter(|(key, _)| key != "page" && key != "per_page")
            .map(|(key, value)| format!("{}={}", percent_encode(key), percent_encode(value)))
            .collect();
        query.push(format!("per_page={per_page}"));
        query.push(format!("page={page}"));
        format!(
            "{}{}?{}",
            self.request.api_base,
            self.request.path,
            query.join("&")
        )
    }
}

fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b':' => {
                (byte as char).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

fn create_comment(state: &mut GitHubState, context: &Context<'_>) -> Answer {
    let comment = IssueComment {
        owner: context.owner().to_string(),
        repo: context.repo().to_string(),
        issue_number: context.path_number("issue_number"),
        id: state.next_id(),
        body: context.body_text("body").unwrap_or_default(),
        author: state.login_of(context.request.token),
    };
    let rendered = render_comment(&context.template(), &comment, context.request.api_base);
    state.comments.push(comment);
    context.ok(rendered)
}

/// The token's user: the documented example with its login (an App's bot login ends in
/// `[bot]`, its type `Bot`).
fn authenticated_user(state: &GitHubState, context: &Context<'_>) -> Answer {
    let mut user = context.template();
    let login = state.login_of(context.request.token);
    user["type"] = json!(if login.ends_with("[bot]") {
        "Bot"
    } else {
        "User"
    });
    user["login"] = json!(login);
    context.ok(user)
}

fn list_comments(state: &GitHubState, context: &Context<'_>) -> Answer {
    let issue_number = context.path_number("issue_number");
    let template = context.item_template();
    let items = state
        .comments
        .iter()
        .filter(|comment| {
            comment.issue_number == issue_number
                && same_repository(
                    context.owner(),
                    context.repo(),
                    &comment.owner,
                    &comment.repo,
                )
        })
        .map(|comment| render_comment(&template, comment, context.request.api_base))
        .collect();
    context.page(items)
}

fn find_comment<'a>(
    state: &'a mut GitHubState,
    context: &Context<'_>,
) -> Option<&'a mut IssueComment> {
    let id = context.path_number("comment_id");
    state.comments.iter_mut().find(|comment| {
        comment.id == id
            && same_repository(
                context.owner(),
                context.repo(),
                &comment.owner,
                &comment.repo,
            )
    })
}

fn get_comment(state: &mut GitHubState, context: &Context<'_>) -> Answer {
    match find_comment(state, context) {
        Some(comment) => context.ok(render_comment(
            &context.template(),
            comment,
            context.request.api_base,
        )),
        None => Answer::not_found(),
    }
}

fn update_comment(state: &mut GitHubState, context: &Context<'_>) -> Answer {
    let new_body = context.body_text("body");
    match find_comment(state, context) {
        Some(comment) => {
            if let Some(body) = new_body {
                comment.body = body;
            }
            context.ok(render_comment(
                &context.template(),
                comment,
                context.request.api_base,
            ))
        }
        None => Answer::not_found(),
    }
}

fn labels_of(
    state: &GitHubState,
    owner: &str,
    repo: &str,
    number: u64,
    api_base: &str,
    template: &Value,
) -> Vec<Value> {
    state
        .labels_on(owner, repo, number)
        .iter()
        .map(|name| render_label(template, owner, repo, name, api_base))
        .collect()
}

fn render_stored_pull(
    state: &GitHubState,
    context: &Context<'_>,
    template: &Value,
    pull: &PullRequest,
) -> Value {
    let label_template = first_item(template.get("labels"));
    let labels = labels_of(
        state,
        &pull.owner,
        &pull.repo,
        pull.number,
        context.request.api_base,
        &label_template,
    );
    render_pull(template, pull, labels, context.request.api_base)
}

fn create_pull(
    state: &mut GitHubState,
    context: &Context<'_>,
    problems: &mut Vec<String>,
) -> Answer {
    let (owner, repo) = (context.owner().to_string(), context.repo().to_string());
    let head = context.body_text("head").unwrap_or_default();
    let base_ref = context.body_text("base").unwrap_or_default();
    let (head_label, head_ref) = match head.split_once(':') {
        Some((_, branch)) => (head.clone(), branch.to_string()),
        None => (format!("{owner}:{head}"), head.clone()),
    };
    let title = context.body_text("title");
    if title.is_none()
        && context
            .request
            .body
            .and_then(|body| body.get("issue"))
            .is_none()
    {
        problems.push(
            "body.title is required unless `issue` is given (the description says so in words)"
                .to_string(),
        );
        return Answer::validation_failed(
            "PullRequest",
            &[crate::schema::SchemaViolation {
                at: "body.title".to_string(),
                message: "is required unless issue is given".to_string(),
                field: Some("title".to_string()),
                missing: true,
            }],
        );
    }
    let already_open = state.pull_requests.iter().any(|pull| {
        pull.state == "open"
            && pull.head_label.eq_ignore_ascii_case(&head_label)
            && pull.base_ref == base_ref
            && same_repository(&owner, &repo, &pull.owner, &pull.repo)
    });
    if already_open {
        return Answer::custom_validation_failed(
            "PullRequest",
            &format!("A pull request already exists for {head_label}."),
        );
    }
    let pull = PullRequest {
        number: state.next_number(&owner, &repo),
        id: state.next_id(),
        owner,
        repo,
        head_label,
        head_ref,
        base_ref,
        title: title.unwrap_or_else(|| "(from an issue)".to_string()),
        body: context.body_text("body"),
        state: "open".to_string(),
        draft: context
            .request
            .body
            .and_then(|body| body["draft"].as_bool())
            .unwrap_or(false),
        head_sha: None,
    };
    let rendered = render_stored_pull(state, context, &context.template(), &pull);
    state.pull_requests.push(pull);
    context.ok(rendered)
}

fn list_pulls(state: &GitHubState, context: &Context<'_>, problems: &mut Vec<String>) -> Answer {
    let wanted_state = context.query("state").unwrap_or("open");
    let head = context.query("head");
    if let Some(head) = head.filter(|head| !head.contains(':')) {
        problems.push(format!(
            "head={head:?} is not `OWNER:BRANCH`, the format the description gives \
             (`user:ref-name`); the double matches no pull request by a bare branch"
        ));
    }
    let base = context.query("base");
    let template = context.item_template();
    let items = state
        .pull_requests
        .iter()
        .rev() // newest first, as GitHub's default sort (created, descending)
        .filter(|pull| same_repository(context.owner(), context.repo(), &pull.owner, &pull.repo))
        .filter(|pull| wanted_state == "all" || pull.state == wanted_state)
        .filter(|pull| head.is_none_or(|head| pull.head_label.eq_ignore_ascii_case(head)))
        .filter(|pull| base.is_none_or(|base| pull.base_ref == base))
        .map(|pull| render_stored_pull(state, context, &template, pull))
        .collect();
    context.page(items)
}

fn find_pull_index(state: &GitHubState, context: &Context<'_>) -> Option<usize> {
    let number = context.path_number("pull_number");
    state.pull_requests.iter().position(|pull| {
        pull.number == number
            && same_repository(context.owner(), context.repo(), &pull.owner, &pull.repo)
    })
}

fn get_pull(state: &GitHubState, context: &Context<'_>) -> Answer {
    match find_pull_index(state, context) {
        Some(index) => context.ok(render_stored_pull(
            state,
            context,
            &context.template(),
            &state.pull_requests[index],
        )),
        None => Answer::not_found(),
    }
}

fn update_pull(state: &mut GitHubState, context: &Context<'_>) -> Answer {
    let Some(index) = find_pull_index(state, context) else {
        return Answer::not_found();
    };
    let pull = &mut state.pull_requests[index];
    if let Some(title) = context.body_text("title") {
        pull.title = title;
    }
    if let Some(body) = context.body_text("body") {
        pull.body = Some(body);
    }
    if let Some(new_state) = context.body_text("state") {
        pull.state = new_state;
    }
    if let Some(base) = context.body_text("base") {
        pull.base_ref = base;
    }
    context.ok(render_stored_pull(
        state,
        context,
        &context.template(),
        &state.pull_requests[index],
    ))
}

fn create_status(state: &mut GitHubState, context: &Context<'_>) -> Answer {
    let status = CommitStatus {
        owner: context.owner().to_string(),
        repo: context.repo().to_string(),
        sha: context.path_text("sha").to_string(),
        id: state.next_id(),
        state: context.body_text("state").unwrap_or_default(),
        context: context
            .body_text("context")
            .unwrap_or_else(|| "default".to_string()),
        description: context.body_text("description"),
        target_url: context.body_text("target_url"),
    };
    let rendered = render_status(&context.template(), &status, context.request.api_base);
    state.statuses.push(status);
    context.ok(rendered)
}

/// The statuses of a ref, newest first (a ref is matched as the sha it was posted to).
fn statuses_of<'a>(state: &'a GitHubState, context: &Context<'_>) -> Vec<&'a CommitStatus> {
    let reference = context.path_text("ref");
    state
        .statuses
        .iter()
        .rev()
        .filter(|status| {
            status.sha == reference
                && same_repository(context.owner(), context.repo(), &status.owner, &status.repo)
        })
        .collect()
}

fn list_statuses(state: &GitHubState, context: &Context<'_>) -> Answer {
    let template = context.item_template();
    let items = statuses_of(state, context)
        .into_iter()
        .map(|status| render_status(&template, status, context.request.api_base))
        .collect();
    context.page(items)
}

fn combined_status(state: &GitHubState, context: &Context<'_>) -> Answer {
    let mut latest_per_context: Vec<&CommitStatus> = Vec::new();
    for status in statuses_of(state, context) {
        if !latest_per_context
            .iter()
            .any(|seen| seen.context.eq_ignore_ascii_case(&status.context))
        {
            latest_per_context.push(status);
        }
    }
    let combined_state = if latest_per_context
        .iter()
        .any(|status| status.state == "error" || status.state == "failure")
    {
        "failure"
    } else if latest_per_context.is_empty()
        || latest_per_context
            .iter()
            .any(|status| status.state == "pending")
    {
        "pending"
    } else {
        "success"
    };
    let mut rendered = context.template();
    let status_template = first_item(rendered.get("statuses"));
    let statuses: Vec<Value> = latest_per_context
        .iter()
        .map(|status| render_status(&status_template, status, context.request.api_base))
        .collect();
    if let Some(object) = rendered.as_object_mut() {
        object.insert("state".to_string(), json!(combined_state));
        object.insert("total_count".to_string(), json!(statuses.len()));
        object.insert("statuses".to_string(), Value::Array(statuses));
        object.insert("sha".to_string(), json!(context.path_text("ref")));
    }
    context.ok(rendered)
}

fn add_labels(state: &mut GitHubState, context: &Context<'_>) -> Answer {
    let names: Vec<String> = context
        .request
        .body
        .and_then(|body| body["labels"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|label| {
            label
                .as_str()
                .or_else(|| label["name"].as_str())
                .map(str::to_string)
        })
        .collect();
    let (owner, repo, number) = (
        context.owner(),
        context.repo(),
        context.path_number("issue_number"),
    );
    state.add_labels(owner, repo, number, &names);
    let labels = labels_of(
        state,
        owner,
        repo,
        number,
        context.request.api_base,
        &context.item_template(),
    );
    context.ok(Value::Array(labels))
}
