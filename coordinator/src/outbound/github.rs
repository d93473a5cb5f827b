//! The few GitHub REST calls abfleet makes, and only to the repositories it was given (the
//! milestone spec's fork and upstream): a commit status on a pull request's head, one
//! comment per spec on the pull request (found again by its marker and its author being this
//! token's identity, and updated: never a comment someone else wrote), a pull request's head
//! commit (checked to be a commit id before anything uses it), and a docs pull request (found by its branch, created or updated,
//! labelled). The token comes from a file (a GitHub App installation token or a
//! fine-grained token) and is never logged; `api_url` points at GitHub Enterprise or, in
//! tests, at a local double of the API that checks each request against GitHub's published
//! description.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use super::http_client::{HttpClient, OutboundError, OutboundRequest};

/// The API version every request asks for.
const API_VERSION: &str = "2022-11-28";
/// Comments read per page when looking for our own.
const PAGE: u32 = 100;
/// Pages of comments read at most (a pull request with more than 3,000 comments gets a new
/// comment rather than an endless scan).
const MAX_PAGES: u32 = 30;

#[derive(Debug, thiserror::Error)]
pub enum GitHubError {
    #[error("{0}")]
    Outbound(#[from] OutboundError),
    #[error("GitHub answered HTTP {status} to {what}: {message}")]
    Status {
        status: u16,
        what: String,
        message: String,
    },
    #[error("`{repo}` is not one of the repositories abfleet may call ({allowed}); it calls only the milestone spec's fork and upstream")]
    NotAllowed { repo: String, allowed: String },
    #[error("GitHub's answer to {what} is not what its API documents: {why}")]
    Unexpected { what: String, why: String },
    #[error("the GitHub token: {0}")]
    Token(String),
}

/// `owner/name` of a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    pub owner: String,
    pub name: String,
}

/// The longest owner (user or organisation) login GitHub allows.
const MAX_OWNER_CHARS: usize = 39;
/// The longest repository name GitHub allows.
const MAX_NAME_CHARS: usize = 100;

impl Repo {
    /// `owner/name` as GitHub allows them (an owner of at most 39 letters, digits, `-` and
    /// `_`, not starting with `-`; a name of at most 100 letters, digits, `-`, `_` and `.`,
    /// not `.` or `..`); anything else is refused.
    pub fn parse(full_name: &str) -> Result<Repo, String> {
        let valid_owner = |part: &str| {
            (1..=MAX_OWNER_CHARS).contains(&part.len())
                && !part.starts_with('-')
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
        };
        let valid_name = |part: &str| {
            (1..=MAX_NAME_CHARS).contains(&part.len())
                && part
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                && part != "."
                && part != ".."
        };
        match full_name.split_once('/') {
            Some((owner, name)) if valid_owner(owner) && valid_name(name) => Ok(Repo {
                owner: owner.to_string(),
                name: name.to_string(),
            }),
            _ => Err(format!("`{full_name}` is not a repository's `owner/name`")),
        }
    }

    pub fn full_name(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }
}

/// `value` when it is a commit id (40 hex digits for SHA-1, 64 for SHA-256), as GitHub's
/// answers and payloads must name one before it becomes a fork pin or a path segment;
/// otherwise an error that names `field`.
pub fn commit_sha<'a>(field: &str, value: &'a str) -> Result<&'a str, String> {
    if matches!(value.len(), 40 | 64) && value.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(value)
    } else {
        let shown: String = value
            .chars()
            .take(80)
            .map(|c| if c.is_control() { '\u{fffd}' } else { c })
            .collect();
        Err(format!(
            "`{field}` is {shown:?}, not a commit id (40 or 64 hex digits)"
        ))
    }
}

/// A token, never shown.
#[derive(Clone)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(…)")
    }
}

impl Token {
    /// From a file only others cannot read.
    pub fn from_file(path: &Path) -> Result<Token, GitHubError> {
        let bytes = super::secret_file::read_private_file(path).map_err(GitHubError::Token)?;
        let token = String::from_utf8(bytes)
            .map_err(|_| GitHubError::Token(format!("{} is not text", path.display())))?;
        if token.chars().any(char::is_whitespace) {
            return Err(GitHubError::Token(format!(
                "{} holds more than one word; put the token alone in it",
                path.display()
            )));
        }
        Ok(Token(token))
    }
}

/// A client for one API, allowed to call the repositories it was given.
#[derive(Clone, Debug)]
pub struct GitHub {
    api_url: String,
    token: Token,
    allowed: Vec<String>,
    http: HttpClient,
    /// Who the token is (its comments' author): set in the config (an App's `SLUG[bot]`),
    /// or asked of `GET /user` once.
    identity: std::sync::Arc<tokio::sync::OnceCell<String>>,
}

/// A comment on a pull request.
#[derive(Debug, Clone, PartialEq)]
pub struct Comment {
    pub id: u64,
    pub html_url: String,
}

/// An open pull request found or made.
#[derive(Debug, Clone, PartialEq)]
pub struct PullRequest {
    pub number: u64,
    pub html_url: String,
    /// Made by this call, not found.
    pub created: bool,
}

impl GitHub {
    /// A client of `api_url` (`https://api.github.com`, or GitHub Enterprise's `/api/v3`)
    /// that may call `allowed` (`owner/name`, compared without case) and nothing else.
    pub fn new(
        api_url: &str,
        token: Token,
        allowed: Vec<String>,
        extra_ca_pem: Option<&str>,
    ) -> Result<GitHub, GitHubError> {
        super::http_client::check_url(api_url).map_err(|why| GitHubError::Unexpected {
            what: "the API URL".into(),
            why,
        })?;
        Ok(GitHub {
            api_url: api_url.trim_end_matches('/').to_string(),
            token,
            allowed: allowed.iter().map(|r| r.to_lowercase()).collect(),
            http: HttpClient::new(extra_ca_pem, Duration::from_secs(30))?,
            identity: std::sync::Arc::default(),
        })
    }

    /// The token's login as the config states it (a GitHub App installation token cannot
    /// ask `GET /user`: its comments are by `SLUG[bot]`).
    pub fn with_identity(self, login: &str) -> GitHub {
        GitHub {
            identity: std::sync::Arc::new(tokio::sync::OnceCell::new_with(Some(login.to_string()))),
            ..self
        }
    }

    /// Who the token is: the author of the comments abfleet writes with it.
    pub async fn identity(&self) -> Result<&str, GitHubError> {
        self.identity
            .get_or_try_init(|| async {
                let user = self
                    .call("GET", "/user", None, "asking who the token is (GET /user)")
                    .await
                    .map_err(|err| match err {
                        GitHubError::Status { status: 403, .. } => GitHubError::Token(
                            "GitHub does not say who it is (GET /user answered 403, as it does for an App installation token); set [github] `comment_author` to the App's bot login, `SLUG[bot]`".into(),
                        ),
                        other => other,
                    })?;
                user["login"]
                    .as_str()
                    .filter(|login| !login.is_empty())
                    .map(str::to_string)
                    .ok_or_else(|| GitHubError::Unexpected {
                        what: "GET /user".into(),
                        why: "no login".into(),
                    })
            })
            .await
            .map(String::as_str)
    }

    fn check(&self, repo: &Repo) -> Result<(), GitHubError> {
        if self.allowed.contains(&repo.full_name().to_lowercase()) {
            Ok(())
        } else {
            Err(GitHubError::NotAllowed {
                repo: repo.full_name(),
                allowed: self.allowed.join(", "),
            })
        }
    }

    async fn call(
        &self,
        method: &'static str,
        path: &str,
        body: Option<Value>,
        what: &str,
    ) -> Result<Value, GitHubError> {
        self.call_delivering(method, path, body, what, None).await
    }

    /// `call`, with `delivery` as `X-Abfleet-Delivery`: the same id on every retry of one
    /// delivery (docs/operations.md, "Deliveries").
    async fn call_delivering(
        &self,
        method: &'static str,
        path: &str,
        body: Option<Value>,
        what: &str,
        delivery: Option<&str>,
    ) -> Result<Value, GitHubError> {
        let mut headers = vec![
            (
                "accept".to_string(),
                "application/vnd.github+json".to_string(),
            ),
            (
                "authorization".to_string(),
                format!("Bearer {}", self.token.0),
            ),
            (
                "user-agent".to_string(),
                concat!("abfleet/", env!("CARGO_PKG_VERSION")).to_string(),
            ),
            ("x-github-api-version".to_string(), API_VERSION.to_string()),
        ];
        if body.is_some() {
            headers.push(("content-type".to_string(), "application/json".to_string()));
        }
        if let Some(id) = delivery {
            headers.push((super::DELIVERY_HEADER.to_string(), id.to_string()));
        }
        let request = OutboundRequest {
            method,
            url: format!("{}{path}", self.api_url),
            headers,
            body: body.map(|b| b.to_string().into_bytes()),
        };
        let response = self.http.send(&request).await?;
        if !response.is_success() {
            let message = serde_json::from_slice::<Value>(&response.body)
                .ok()
                .and_then(|v| v["message"].as_str().map(str::to_string))
                .unwrap_or_else(|| response.body_excerpt(200));
            return Err(GitHubError::Status {
                status: response.status,
                what: what.to_string(),
                message,
            });
        }
        if response.body.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&response.body).map_err(|err| GitHubError::Unexpected {
            what: what.to_string(),
            why: format!("not JSON ({err})"),
        })
    }

    /// Sets the commit status `context` of `sha` (`state`: pending, success, failure,
    /// error; `description` at most 140 characters, as GitHub keeps), as delivery
    /// `delivery`.
    #[allow(clippy::too_many_arguments)]
    pub async fn set_commit_status(
        &self,
        repo: &Repo,
        sha: &str,
        state: &str,
        description: &str,
        context: &str,
        target_url: Option<&str>,
        delivery: &str,
    ) -> Result<(), GitHubError> {
        self.check(repo)?;
        let sha = commit_sha("the commit", sha).map_err(|why| GitHubError::Unexpected {
            what: "a commit status".into(),
            why,
        })?;
        let mut body = json!({
            "state": state,
            "description": description.chars().take(140).collect::<String>(),
            "context": context,
        });
        if let Some(url) = target_url {
            body["target_url"] = url.into();
        }
        self.call_delivering(
            "POST",
            &format!("/repos/{}/statuses/{sha}", repo.full_name()),
            Some(body),
            "a commit status",
            Some(delivery),
        )
        .await
        .map(|_| ())
    }

    /// The comment of `number` that this token's identity wrote and whose body starts with
    /// `marker` updated to `body`, or a new one when there is none: a rerun never adds a
    /// second comment, and a comment anyone else wrote (with the marker or not) is never
    /// edited.
    pub async fn upsert_comment(
        &self,
        repo: &Repo,
        number: u64,
        marker: &str,
        body: &str,
        known: Option<u64>,
        delivery: &str,
    ) -> Result<Comment, GitHubError> {
        self.check(repo)?;
        // The delivery id in the body too, where a reader of the comment can see it.
        let body = format!("{body}\n<!-- {}: {delivery} -->\n", super::DELIVERY_HEADER);
        let existing = match known {
            Some(id) => Some(id),
            None => self.find_comment(repo, number, marker).await?,
        };
        let (method, path, what) = match existing {
            Some(id) => (
                "PATCH",
                format!("/repos/{}/issues/comments/{id}", repo.full_name()),
                "updating the comment",
            ),
            None => (
                "POST",
                format!("/repos/{}/issues/{number}/comments", repo.full_name()),
                "a new comment",
            ),
        };
        let answer = self
            .call_delivering(
                method,
                &path,
                Some(json!({ "body": body })),
                what,
                Some(delivery),
            )
            .await?;
        comment_of(&answer, what)
    }

    async fn find_comment(
        &self,
        repo: &Repo,
        number: u64,
        marker: &str,
    ) -> Result<Option<u64>, GitHubError> {
        let identity = self.identity().await?.to_string();
        for page in 1..=MAX_PAGES {
            let listed = self
                .call(
                    "GET",
                    &format!(
                        "/repos/{}/issues/{number}/comments?per_page={PAGE}&page={page}",
                        repo.full_name()
                    ),
                    None,
                    "listing the comments",
                )
                .await?;
            let comments = listed.as_array().ok_or_else(|| GitHubError::Unexpected {
                what: "listing the comments".into(),
                why: "not a list".into(),
            })?;
            if let Some(found) = comments.iter().find(|c| {
                c["user"]["login"]
                    .as_str()
                    .is_some_and(|login| login.eq_ignore_ascii_case(&identity))
                    && c["body"]
                        .as_str()
                        .is_some_and(|body| body.starts_with(marker))
            }) {
                return Ok(found["id"].as_u64());
            }
            if comments.len() < PAGE as usize {
                break;
            }
        }
        Ok(None)
    }

    /// The head commit of pull request `number`.
    pub async fn pull_request_head(&self, repo: &Repo, number: u64) -> Result<String, GitHubError> {
        self.check(repo)?;
        let pull = self
            .call(
                "GET",
                &format!("/repos/{}/pulls/{number}", repo.full_name()),
                None,
                "reading the pull request",
            )
            .await?;
        let sha = pull["head"]["sha"]
            .as_str()
            .ok_or_else(|| GitHubError::Unexpected {
                what: "reading the pull request".into(),
                why: "no head.sha".into(),
            })?;
        commit_sha("head.sha", sha)
            .map(str::to_string)
            .map_err(|why| GitHubError::Unexpected {
                what: "reading the pull request".into(),
                why,
            })
    }

    /// The number of the open pull request from `branch` (of `repo`'s owner) into `base`.
    pub async fn open_pull_request(
        &self,
        repo: &Repo,
        branch: &str,
        base: &str,
    ) -> Result<Option<u64>, GitHubError> {
        self.check(repo)?;
        let listed = self
            .call(
                "GET",
                &format!(
                    "/repos/{}/pulls?state=open&head={}:{branch}&base={base}",
                    repo.full_name(),
                    repo.owner
                ),
                None,
                "listing the open pull requests",
            )
            .await?;
        Ok(listed
            .as_array()
            .and_then(|pulls| {
                pulls
                    .iter()
                    .find(|p| p["head"]["ref"].as_str() == Some(branch))
            })
            .and_then(|p| p["number"].as_u64()))
    }

    /// The open pull request from `branch` (of `repo`'s owner) into `base`, updated to
    /// `title` and `body`; made when there is none. Labelled with `labels` either way.
    pub async fn upsert_pull_request(
        &self,
        repo: &Repo,
        branch: &str,
        base: &str,
        title: &str,
        body: &str,
        labels: &[String],
    ) -> Result<PullRequest, GitHubError> {
        let found = self.open_pull_request(repo, branch, base).await?;
        let (answer, created) = match found {
            Some(number) => (
                self.call(
                    "PATCH",
                    &format!("/repos/{}/pulls/{number}", repo.full_name()),
                    Some(json!({ "title": title, "body": body })),
                    "updating the pull request",
                )
                .await?,
                false,
            ),
            None => (
                self.call(
                    "POST",
                    &format!("/repos/{}/pulls", repo.full_name()),
                    Some(json!({ "title": title, "head": branch, "base": base, "body": body })),
                    "a new pull request",
                )
                .await?,
                true,
            ),
        };
        let number = answer["number"]
            .as_u64()
            .ok_or_else(|| GitHubError::Unexpected {
                what: "the pull request".into(),
                why: "no number".into(),
            })?;
        if !labels.is_empty() {
            self.call(
                "POST",
                &format!("/repos/{}/issues/{number}/labels", repo.full_name()),
                Some(json!({ "labels": labels })),
                "labelling the pull request",
            )
            .await?;
        }
        Ok(PullRequest {
            number,
            html_url: web_url(&answer),
            created,
        })
    }
}

fn comment_of(answer: &Value, what: &str) -> Result<Comment, GitHubError> {
    Ok(Comment {
        id: answer["id"]
            .as_u64()
            .ok_or_else(|| GitHubError::Unexpected {
                what: what.to_string(),
                why: "no id".into(),
            })?,
        html_url: web_url(answer),
    })
}

/// An answer's `html_url` when it is a web address (it becomes a status's `target_url` and
/// a link in logs): anything else from the API is dropped, never passed on.
fn web_url(answer: &Value) -> String {
    answer["html_url"]
        .as_str()
        .filter(|url| {
            (url.starts_with("https://") || url.starts_with("http://"))
                && !url.chars().any(|c| c.is_whitespace() || c.is_control())
        })
        .unwrap_or_default()
        .to_string()
}

/// `owner/name` of a git URL or path the way GitHub names it (its last two segments), for
/// the allow-list: `https://github.com/lusoris/vmaf.git` → `lusoris/vmaf`.
pub fn repo_of_git_url(url: &str) -> Option<String> {
    let key = crate::git_url::repository_key(url);
    let mut parts = key.rsplit('/');
    let name = parts.next()?;
    let owner = parts.next()?;
    Repo::parse(&format!("{owner}/{name}"))
        .ok()
        .map(|repo| repo.full_name())
}

/// How the coordinator answers pull requests (`[github]` in its config file).
#[derive(Clone, Debug)]
pub struct GitHubReporting {
    pub client: GitHub,
    /// The commit status's context: what the check is called on the pull request.
    pub context: String,
    /// The web view's address as people open it: the status and the comment link
    /// `{report_url}/runs/RUN`.
    pub report_url: Option<String>,
    /// The first retry waits this long, each next one twice as long (at most ten minutes).
    pub retry_after: Duration,
    /// Failed attempts in a row before the answer is given up (logged as an error).
    pub max_attempts: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_id_is_40_or_64_hex_digits_and_nothing_else() {
        let sha1 = "a".repeat(40);
        assert_eq!(commit_sha("head.sha", &sha1), Ok(sha1.as_str()));
        assert!(commit_sha("head.sha", &"B".repeat(64)).is_ok());
        for bad in [
            "abc1234",
            "main/../../../../user",
            "--upload-pack=touch /tmp/x",
            "",
        ] {
            let err = commit_sha("head.sha", bad).unwrap_err();
            assert!(
                err.starts_with("`head.sha` is ")
                    && err.ends_with("not a commit id (40 or 64 hex digits)"),
                "{err}"
            );
        }
        assert!(commit_sha("head.sha", &format!("{sha1}?x=1")).is_err());
    }

    #[test]
    fn owner_and_name_follow_githubs_rules() {
        assert!(Repo::parse("lusoris/vmaf").is_ok());
        assert!(Repo::parse("Codertocat/Hello-World.js").is_ok());
        for bad in [
            "-lead/vmaf",
            "a/..",
            "a/.",
            &format!("{}/x", "o".repeat(40)),
            &format!("o/{}", "n".repeat(101)),
            "o/n/x",
            "o n/x",
        ] {
            assert!(Repo::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_a_web_address_is_taken_as_html_url() {
        assert_eq!(
            web_url(&json!({"html_url": "https://github.com/o/r/pull/1"})),
            "https://github.com/o/r/pull/1"
        );
        for bad in ["javascript:alert(1)", "https://x y", "file:///etc/passwd"] {
            assert_eq!(web_url(&json!({"html_url": bad})), "", "{bad}");
        }
        assert_eq!(web_url(&json!({})), "");
    }
}
