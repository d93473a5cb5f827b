//! Remembered records rendered as GitHub answers: each starts from the description's
//! documented example of that object and overwrites only the fields the record knows (ids,
//! numbers, bodies, states, refs, URLs), so every other field keeps GitHub's shape.

use serde_json::{json, Value};

use crate::state::{CommitStatus, IssueComment, PullRequest};

/// Where rendered `html_url`s point (the API's own URLs point at the double).
const WEB_BASE_URL: &str = "https://github.com";

/// A comment over `template` (an `issue-comment` example).
pub(crate) fn render_comment(template: &Value, comment: &IssueComment, api_base: &str) -> Value {
    let repository = format!("{}/{}", comment.owner, comment.repo);
    let mut rendered = object_or_empty(template);
    set(&mut rendered, "id", json!(comment.id));
    set(
        &mut rendered,
        "node_id",
        json!(format!("IC_testkit{}", comment.id)),
    );
    set(&mut rendered, "body", json!(comment.body));
    if let Some(user) = rendered.get_mut("user") {
        set(user, "login", json!(comment.author));
        let kind = if comment.author.ends_with("[bot]") {
            "Bot"
        } else {
            "User"
        };
        set(user, "type", json!(kind));
    }
    set(
        &mut rendered,
        "url",
        json!(format!(
            "{api_base}/repos/{repository}/issues/comments/{}",
            comment.id
        )),
    );
    set(
        &mut rendered,
        "html_url",
        json!(format!(
            "{WEB_BASE_URL}/{repository}/issues/{}#issuecomment-{}",
            comment.issue_number, comment.id
        )),
    );
    set(
        &mut rendered,
        "issue_url",
        json!(format!(
            "{api_base}/repos/{repository}/issues/{}",
            comment.issue_number
        )),
    );
    rendered
}

/// A pull request over `template` (a `pull-request` or `pull-request-simple` example).
pub(crate) fn render_pull(
    template: &Value,
    pull: &PullRequest,
    labels: Vec<Value>,
    api_base: &str,
) -> Value {
    let repository = format!("{}/{}", pull.owner, pull.repo);
    let api = format!("{api_base}/repos/{repository}");
    let number = pull.number;
    let mut rendered = object_or_empty(template);
    for (key, value) in [
        ("id", json!(pull.id)),
        ("node_id", json!(format!("PR_testkit{}", pull.id))),
        ("number", json!(number)),
        ("title", json!(pull.title)),
        ("body", json!(pull.body)),
        ("state", json!(pull.state)),
        ("draft", json!(pull.draft)),
        ("labels", Value::Array(labels)),
        ("url", json!(format!("{api}/pulls/{number}"))),
        (
            "html_url",
            json!(format!("{WEB_BASE_URL}/{repository}/pull/{number}")),
        ),
        (
            "diff_url",
            json!(format!("{WEB_BASE_URL}/{repository}/pull/{number}.diff")),
        ),
        (
            "patch_url",
            json!(format!("{WEB_BASE_URL}/{repository}/pull/{number}.patch")),
        ),
        ("issue_url", json!(format!("{api}/issues/{number}"))),
        (
            "comments_url",
            json!(format!("{api}/issues/{number}/comments")),
        ),
        (
            "commits_url",
            json!(format!("{api}/pulls/{number}/commits")),
        ),
        ("merged", json!(false)),
        ("merged_at", Value::Null),
    ] {
        if key == "merged" && rendered.get(key).is_none() {
            continue; // pull-request-simple has no `merged`
        }
        set(&mut rendered, key, value);
    }
    if pull.state == "open" {
        set(&mut rendered, "closed_at", Value::Null);
    }
    let head_owner = pull
        .head_label
        .split_once(':')
        .map_or(pull.owner.as_str(), |(owner, _)| owner);
    if let Some(head) = rendered.get_mut("head") {
        set(head, "ref", json!(pull.head_ref));
        set(head, "label", json!(pull.head_label));
        if let Some(sha) = &pull.head_sha {
            set(head, "sha", json!(sha));
        }
        if let Some(user) = head.get_mut("user") {
            set(user, "login", json!(head_owner));
        }
    }
    if let Some(base) = rendered.get_mut("base") {
        set(base, "ref", json!(pull.base_ref));
        set(
            base,
            "label",
            json!(format!("{}:{}", pull.owner, pull.base_ref)),
        );
    }
    rendered
}

/// A commit status over `template` (a `status` example).
pub(crate) fn render_status(template: &Value, status: &CommitStatus, api_base: &str) -> Value {
    let mut rendered = object_or_empty(template);
    for (key, value) in [
        ("id", json!(status.id)),
        ("node_id", json!(format!("SC_testkit{}", status.id))),
        ("state", json!(status.state)),
        ("context", json!(status.context)),
        ("description", json!(status.description)),
        ("target_url", json!(status.target_url)),
        (
            "url",
            json!(format!(
                "{api_base}/repos/{}/{}/statuses/{}",
                status.owner, status.repo, status.sha
            )),
        ),
    ] {
        set(&mut rendered, key, value);
    }
    rendered
}

/// A label over `template` (a `label` example); its id is derived from its name.
pub(crate) fn render_label(
    template: &Value,
    owner: &str,
    repo: &str,
    name: &str,
    api_base: &str,
) -> Value {
    let id = label_id(name);
    let mut rendered = object_or_empty(template);
    set(&mut rendered, "id", json!(id));
    set(&mut rendered, "node_id", json!(format!("LA_testkit{id}")));
    set(&mut rendered, "name", json!(name));
    set(
        &mut rendered,
        "url",
        json!(format!("{api_base}/repos/{owner}/{repo}/labels/{name}")),
    );
    set(&mut rendered, "default", json!(false));
    rendered
}

/// The first item of a documented list example, the template of its items.
pub(crate) fn first_item(list_example: Option<&Value>) -> Value {
    list_example
        .and_then(|list| list.as_array())
        .and_then(|items| items.first())
        .cloned()
        .unwrap_or_else(|| json!({}))
}

fn object_or_empty(template: &Value) -> Value {
    if template.is_object() {
        template.clone()
    } else {
        json!({})
    }
}

fn set(object: &mut Value, key: &str, value: Value) {
    if let Some(map) = object.as_object_mut() {
        map.insert(key.to_string(), value);
    }
}

/// A stable id per label name (FNV-1a of its lower-case form), as GitHub's are per label.
fn label_id(name: &str) -> u64 {
    let hash = name
        .to_lowercase()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
    hash % 1_000_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_comment_keeps_the_examples_other_fields() {
        let template = json!({"id": 1, "body": "Me too", "user": {"login": "octocat"}});
        let comment = IssueComment {
            owner: "o".into(),
            repo: "r".into(),
            issue_number: 5,
            id: 1_000_001,
            body: "hello".into(),
            author: "abfleet-bot[bot]".into(),
        };
        let rendered = render_comment(&template, &comment, "http://127.0.0.1:1");
        assert_eq!(rendered["id"], 1_000_001);
        assert_eq!(rendered["body"], "hello");
        assert_eq!(rendered["user"]["login"], "abfleet-bot[bot]");
        assert_eq!(rendered["user"]["type"], "Bot");
        assert_eq!(
            rendered["url"],
            "http://127.0.0.1:1/repos/o/r/issues/comments/1000001"
        );
        assert_eq!(
            rendered["html_url"],
            "https://github.com/o/r/issues/5#issuecomment-1000001"
        );
    }

    #[test]
    fn label_ids_are_stable_per_name() {
        assert_eq!(label_id("perf"), label_id("Perf"));
        assert_ne!(label_id("perf"), label_id("docs"));
    }
}
