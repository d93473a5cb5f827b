//! GitHub webhooks as triggers: the signature check (`X-Hub-Signature-256`, HMAC-SHA256 of
//! the raw body under the shared secret, compared in constant time) and the mapping from an
//! event of the milestone spec's upstream or fork repository to a trigger reason, debounce
//! key, note and the pin it moves (an upstream tag, a fork release's tag, a PR's head commit).
//! Pure: the HTTP listener (`http.rs`) reads the request, asks here, and hands a trigger to
//! the fleet.

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use crate::git_url::names_repository;

/// The webhook endpoint's settings (`--webhook-secret-file`).
#[derive(Clone)]
pub struct WebhookConfig {
    /// The shared secret, as GitHub is given it (the file's text, surrounding whitespace
    /// trimmed).
    pub secret: Vec<u8>,
    /// The label that makes a pull request a performance PR (`--perf-label`).
    pub perf_label: String,
    /// The dependency bots whose toolchain PRs count (`--toolchain-bots`).
    pub toolchain_bots: Vec<String>,
}

impl std::fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookConfig")
            .field("perf_label", &self.perf_label)
            .field("toolchain_bots", &self.toolchain_bots)
            .finish_non_exhaustive()
    }
}

impl WebhookConfig {
    /// Reads the secret from `path`; an empty file is refused.
    pub fn load(path: &std::path::Path) -> Result<WebhookConfig, String> {
        let text = std::fs::read_to_string(path).map_err(|err| {
            format!(
                "failed to read the webhook secret `{}`: {err}; write the secret GitHub was given into it",
                path.display()
            )
        })?;
        let secret = text.trim();
        if secret.is_empty() {
            return Err(format!(
                "the webhook secret `{}` is empty; write the secret GitHub was given into it",
                path.display()
            ));
        }
        Ok(WebhookConfig::new(secret.as_bytes()))
    }

    /// `secret`, and the default performance label.
    pub fn new(secret: &[u8]) -> WebhookConfig {
        WebhookConfig {
            secret: secret.to_vec(),
            perf_label: PERFORMANCE_LABEL.to_string(),
            toolchain_bots: bot_logins(DEFAULT_TOOLCHAIN_BOTS),
        }
    }

    /// With `label` as the performance label.
    pub fn with_perf_label(mut self, label: &str) -> WebhookConfig {
        self.perf_label = label.to_string();
        self
    }

    /// With the comma-separated `logins` as the dependency bots whose toolchain PRs count.
    pub fn with_toolchain_bots(mut self, logins: &str) -> WebhookConfig {
        self.toolchain_bots = bot_logins(logins);
        self
    }
}

/// The dependency bots whose toolchain PRs start a run unless `--toolchain-bots` says others.
pub const DEFAULT_TOOLCHAIN_BOTS: &str = "dependabot[bot],renovate[bot]";

fn bot_logins(logins: &str) -> Vec<String> {
    logins
        .split(',')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// Whether `word` appears in `text` as a word of its own (`cuda` in "Bump nvidia/cuda to
/// 13.3" and "cuda-toolkit", not in "barracuda"), case-insensitively.
fn names_word(text: &str, word: &str) -> bool {
    let text = text.to_lowercase();
    let bytes = text.as_bytes();
    text.match_indices(word).any(|(at, _)| {
        let before = at.checked_sub(1).map(|i| bytes[i]);
        let after = bytes.get(at + word.len()).copied();
        !before.is_some_and(|b| b.is_ascii_alphanumeric())
            && !after.is_some_and(|b| b.is_ascii_alphanumeric())
    })
}

/// Why a request's signature is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("no X-Hub-Signature-256 header; set the webhook's secret on GitHub")]
    Missing,
    #[error("X-Hub-Signature-256 is not `sha256=` and 64 hex digits")]
    Malformed,
    #[error("X-Hub-Signature-256 does not match the body under this coordinator's secret; check that GitHub and --webhook-secret-file hold the same secret")]
    Mismatch,
}

/// Checks `header` (`sha256=<hex>`) against the HMAC-SHA256 of `body` under `secret`.
pub fn verify_signature(
    secret: &[u8],
    body: &[u8],
    header: Option<&str>,
) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let hex = header
        .strip_prefix("sha256=")
        .ok_or(SignatureError::Malformed)?;
    let expected = decode_hex(hex).ok_or(SignatureError::Malformed)?;
    if expected.len() != 32 {
        return Err(SignatureError::Malformed);
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(body);
    mac.verify_slice(&expected)
        .map_err(|_| SignatureError::Mismatch)
}

/// `sha256=<hex>` of `body` under `secret`, as GitHub signs it (for tests and tools).
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(body);
    format!("sha256={}", hex(&mac.finalize().into_bytes()))
}

/// The replay key of a delivery's body, its SHA-256: the delivery id is not signed, so the
/// same signed body under a new id must be recognised by itself.
pub fn body_replay_key(body: &[u8]) -> String {
    use sha2::Digest;
    format!("body sha256:{}", hex(&Sha256::digest(body)))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// What an event asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookDecision {
    /// Start (or debounce into) a run of the milestone spec.
    Trigger(HookTrigger),
    /// Not a trigger; the text says why.
    Ignored(String),
}

/// A trigger an event maps to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookTrigger {
    pub reason: &'static str,
    pub debounce_key: String,
    pub note: String,
    /// Run with the milestone spec's upstream pin moved here (an upstream tag or release).
    pub upstream_rev: Option<String>,
    /// Run with the milestone spec's fork pin moved here (a PR's head commit, a fork
    /// release's tag).
    pub fork_rev: Option<String>,
    /// Debounced against every earlier trigger of its key, not only those within the window:
    /// a tag is run once, however late its release, push or watcher poll comes.
    pub once: bool,
    /// The pull request the run answers (its repository, number and head commit).
    pub pull_request: Option<crate::PullRequestRef>,
}

/// The default label that makes a pull request a performance PR (`--perf-label`).
pub const PERFORMANCE_LABEL: &str = "performance";

/// Toolchains whose bump by a dependency bot triggers a run (matched case-insensitively in
/// the PR's title or body).
pub const TOOLCHAIN_WORDS: [&str; 3] = ["cuda", "rocm", "oneapi"];

/// The pull request actions on which a dependency bot's PR counts: opened, opened again,
/// and updated (the bot moved it to a newer version).
pub const BOT_PR_ACTIONS: [&str; 3] = ["opened", "reopened", "synchronize"];

/// What `decide` needs from the milestone spec and the coordinator's settings.
#[derive(Debug, Clone, Copy)]
pub struct HookContext<'a> {
    /// The milestone spec's upstream git URL (`None`: not git): its tags and releases count.
    pub upstream_git_url: Option<&'a str>,
    /// The milestone spec's fork git URL (`None`: not git): its PRs and releases count.
    pub fork_git_url: Option<&'a str>,
    /// The label that makes a PR a performance PR.
    pub perf_label: &'a str,
    /// The dependency bots whose toolchain PRs count.
    pub toolchain_bots: &'a [&'a str],
}

impl HookContext<'_> {
    fn is_upstream(&self, full_name: &str) -> bool {
        self.upstream_git_url
            .is_some_and(|url| names_repository(url, full_name))
    }

    fn is_fork(&self, full_name: &str) -> bool {
        self.fork_git_url
            .is_some_and(|url| names_repository(url, full_name))
    }

    fn shown(url: Option<&str>) -> String {
        url.map_or("(not a git repository)".to_string(), |url| {
            format!("`{url}`")
        })
    }
}

/// The first 12 characters of a commit, as notes show it.
fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

/// Maps a GitHub event (`X-GitHub-Event`) and its payload to a trigger. Only events of the
/// milestone spec's repositories count: upstream's tags and releases, the fork's releases
/// and pull requests.
pub fn decide(event: &str, payload: &Value, context: &HookContext<'_>) -> HookDecision {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_string();
    let repo = text(&payload["repository"]["full_name"]);
    let action = text(&payload["action"]);
    match event {
        "release" if action == "published" => {
            let tag = text(&payload["release"]["tag_name"]);
            if tag.is_empty() {
                return HookDecision::Ignored("release without a tag_name".into());
            }
            let name = text(&payload["release"]["name"]);
            let shown = if name.is_empty() || name == tag {
                tag.clone()
            } else {
                format!("{name} ({tag})")
            };
            let note = format!("release {shown} of {repo}");
            let prerelease = payload["release"]["prerelease"].as_bool() == Some(true);
            if context.is_upstream(&repo) && (prerelease || !crate::watcher::is_release_tag(&tag)) {
                // The upstream watcher's rule: only release tags move the upstream pin.
                HookDecision::Ignored(format!(
                    "release `{tag}` of {repo} is a pre-release{}; upstream runs start on release tags only (`v3.1.0`), as the upstream watcher's",
                    if prerelease { " (prerelease: true)" } else { " tag" }
                ))
            } else if context.is_upstream(&repo) {
                HookDecision::Trigger(HookTrigger {
                    reason: "release",
                    // The tag's key: its push and the upstream watcher seeing it are the
                    // same run.
                    debounce_key: crate::watcher::tag_debounce_key(&tag),
                    note,
                    upstream_rev: Some(tag),
                    fork_rev: None,
                    once: true,
                    pull_request: None,
                })
            } else if context.is_fork(&repo) {
                HookDecision::Trigger(HookTrigger {
                    reason: "release",
                    debounce_key: format!("{repo}@{tag}"),
                    note,
                    upstream_rev: None,
                    fork_rev: Some(tag),
                    once: true,
                    pull_request: None,
                })
            } else {
                HookDecision::Ignored(format!(
                    "release `{tag}` of {repo}, which is neither the milestone spec's upstream {} nor its fork {}",
                    HookContext::shown(context.upstream_git_url),
                    HookContext::shown(context.fork_git_url)
                ))
            }
        }
        "release" => HookDecision::Ignored(format!("release action `{action}`")),
        "push" => {
            let git_ref = text(&payload["ref"]);
            let Some(tag) = git_ref.strip_prefix("refs/tags/") else {
                return HookDecision::Ignored(format!("push of `{git_ref}`, not a tag"));
            };
            if payload["deleted"].as_bool() == Some(true) {
                return HookDecision::Ignored(format!("tag `{tag}` deleted"));
            }
            decide_new_tag(tag, &repo, context)
        }
        // A tag or branch made (GitHub sends it besides the push of a new tag): a new tag is
        // the same run as its push (one debounce key per tag).
        "create" => {
            let ref_type = text(&payload["ref_type"]);
            if ref_type != "tag" {
                return HookDecision::Ignored(format!("create of a {ref_type}, not a tag"));
            }
            decide_new_tag(&text(&payload["ref"]), &repo, context)
        }
        "pull_request" => decide_pull_request(payload, &repo, &action, context),
        other => HookDecision::Ignored(format!("event `{other}`")),
    }
}

/// A new tag (pushed or created): an upstream release tag moves the upstream pin.
fn decide_new_tag(tag: &str, repo: &str, context: &HookContext<'_>) -> HookDecision {
    if tag.is_empty() {
        HookDecision::Ignored("a tag event without the tag's name".into())
    } else if context.is_upstream(repo) && !crate::watcher::is_release_tag(tag) {
        HookDecision::Ignored(format!(
            "tag `{tag}` of {repo} is not a release tag; upstream runs start on release tags only (`v3.1.0`), as the upstream watcher's"
        ))
    } else if context.is_upstream(repo) {
        HookDecision::Trigger(HookTrigger {
            reason: "upstream-tag",
            // The tag alone: the upstream watcher sees the same tag by its URL.
            debounce_key: crate::watcher::tag_debounce_key(tag),
            note: format!("tag {tag} of {repo}"),
            upstream_rev: Some(tag.to_string()),
            fork_rev: None,
            once: true,
            pull_request: None,
        })
    } else {
        HookDecision::Ignored(format!(
            "tag `{tag}` of {repo}, not of the milestone spec's upstream {}",
            HookContext::shown(context.upstream_git_url)
        ))
    }
}

/// A labelled performance PR, or a dependency bot's PR that names a toolchain: a run of the
/// PR's head commit as the fork, when the PR is on the milestone spec's fork.
fn decide_pull_request(
    payload: &Value,
    repo: &str,
    action: &str,
    context: &HookContext<'_>,
) -> HookDecision {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_string();
    let pr = &payload["pull_request"];
    let number = pr["number"].as_u64().or_else(|| payload["number"].as_u64());
    let Some(number) = number else {
        return HookDecision::Ignored("pull_request without a number".into());
    };
    let title = text(&pr["title"]);
    let login = text(&pr["user"]["login"]);
    let (reason, label_or_word) = if action == "labeled" {
        let label = text(&payload["label"]["name"]);
        if label != context.perf_label {
            return HookDecision::Ignored(format!(
                "PR #{number} labelled `{label}`, not `{}`",
                context.perf_label
            ));
        }
        ("performance-pr", label)
    } else if BOT_PR_ACTIONS.contains(&action) && context.toolchain_bots.contains(&login.as_str()) {
        // A login ending in `[bot]` can be any GitHub App; GitHub's own `user.type` says
        // whether it is a bot account at all.
        let user_type = text(&pr["user"]["type"]);
        if user_type != "Bot" {
            return HookDecision::Ignored(format!(
                "PR #{number} by `{login}`, whose user.type is `{user_type}`, not `Bot`"
            ));
        }
        let haystack = format!("{title}\n{}", text(&pr["body"]));
        let Some(word) = TOOLCHAIN_WORDS.iter().find(|w| names_word(&haystack, w)) else {
            return HookDecision::Ignored(format!(
                "PR #{number} by {login} names no toolchain ({})",
                TOOLCHAIN_WORDS.join(", ")
            ));
        };
        ("toolchain-bump", word.to_string())
    } else if BOT_PR_ACTIONS.contains(&action) && login.ends_with("[bot]") {
        return HookDecision::Ignored(format!(
            "PR #{number} by `{login}`, not one of the toolchain bots ({}; --toolchain-bots)",
            context.toolchain_bots.join(", ")
        ));
    } else {
        return HookDecision::Ignored(format!("pull_request action `{action}` by `{login}`"));
    };
    if !context.is_fork(repo) {
        return HookDecision::Ignored(format!(
            "PR {repo}#{number} is not on the milestone spec's fork {}",
            HookContext::shown(context.fork_git_url)
        ));
    }
    let head = text(&pr["head"]["sha"]);
    if let Err(why) = crate::outbound::github::commit_sha("pull_request.head.sha", &head) {
        return HookDecision::Ignored(format!("PR {repo}#{number}: {why}"));
    }
    let note = match reason {
        "performance-pr" => format!("PR {repo}#{number} at {}: {title}", short(&head)),
        _ => format!(
            "PR {repo}#{number} by {login} ({label_or_word}) at {}: {title}",
            short(&head)
        ),
    };
    HookDecision::Trigger(HookTrigger {
        reason,
        debounce_key: format!("{repo}#{number}"),
        note,
        upstream_rev: None,
        pull_request: Some(crate::PullRequestRef {
            repo: repo.to_string(),
            number,
            head_sha: Some(head.clone()),
        }),
        fork_rev: Some(head),
        once: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Value {
        let path = format!("{}/../fixtures/webhooks/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    const CONTEXT: HookContext<'static> = HookContext {
        upstream_git_url: Some("https://github.com/Netflix/vmaf.git"),
        fork_git_url: Some("git@github.com:lusoris/vmaf.git"),
        perf_label: PERFORMANCE_LABEL,
        toolchain_bots: &["dependabot[bot]", "renovate[bot]"],
    };

    fn trigger(event: &str, payload: &Value) -> HookTrigger {
        match decide(event, payload, &CONTEXT) {
            HookDecision::Trigger(trigger) => trigger,
            HookDecision::Ignored(why) => panic!("{event} ignored: {why}"),
        }
    }

    fn ignored(event: &str, payload: &Value, context: &HookContext<'_>) -> String {
        match decide(event, payload, context) {
            HookDecision::Ignored(why) => why,
            HookDecision::Trigger(trigger) => panic!("{event} triggered: {trigger:?}"),
        }
    }

    #[test]
    fn signatures_are_checked() {
        let body = br#"{"zen":"Keep it logically awesome."}"#;
        let good = sign(b"s3cret", body);
        assert_eq!(verify_signature(b"s3cret", body, Some(&good)), Ok(()));
        assert_eq!(
            verify_signature(b"other", body, Some(&good)),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_signature(b"s3cret", b"{}", Some(&good)),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_signature(b"s3cret", body, None),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            verify_signature(b"s3cret", body, Some(&good.replace("sha256=", "sha1="))),
            Err(SignatureError::Malformed)
        );
        assert_eq!(
            verify_signature(b"s3cret", body, Some("sha256=abcd")),
            Err(SignatureError::Malformed)
        );
    }

    #[test]
    fn github_documents_this_signature() {
        // The example of GitHub's "Validating webhook deliveries" page.
        assert_eq!(
            sign(b"It's a Secret to Everybody", b"Hello, World!"),
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
        );
    }

    /// The keys GitHub's documented payloads carry (its webhook payload schemas): the
    /// fixtures keep the whole structure, not only what abfleet reads. Long on purpose: the
    /// expected key lists are written out, one per payload object, as the schemas list them.
    #[test]
    fn fixtures_carry_githubs_full_structure() {
        fn keys(value: &Value) -> std::collections::BTreeSet<&str> {
            value
                .as_object()
                .unwrap_or_else(|| panic!("not an object: {value}"))
                .keys()
                .map(String::as_str)
                .collect()
        }
        fn has_all(what: &str, value: &Value, required: &[&str]) {
            let present = keys(value);
            let missing: Vec<&&str> = required.iter().filter(|k| !present.contains(**k)).collect();
            assert!(missing.is_empty(), "{what} lacks {missing:?}");
        }
        const USER: &[&str] = &[
            "login",
            "id",
            "node_id",
            "avatar_url",
            "gravatar_id",
            "url",
            "html_url",
            "followers_url",
            "following_url",
            "gists_url",
            "starred_url",
            "subscriptions_url",
            "organizations_url",
            "repos_url",
            "events_url",
            "received_events_url",
            "type",
            "site_admin",
        ];
        const REPOSITORY: &[&str] = &[
            "id",
            "node_id",
            "name",
            "full_name",
            "private",
            "owner",
            "html_url",
            "description",
            "fork",
            "url",
            "forks_url",
            "keys_url",
            "collaborators_url",
            "teams_url",
            "hooks_url",
            "issue_events_url",
            "events_url",
            "assignees_url",
            "branches_url",
            "tags_url",
            "blobs_url",
            "git_tags_url",
            "git_refs_url",
            "trees_url",
            "statuses_url",
            "languages_url",
            "stargazers_url",
            "contributors_url",
            "subscribers_url",
            "subscription_url",
            "commits_url",
            "git_commits_url",
            "comments_url",
            "issue_comment_url",
            "contents_url",
            "compare_url",
            "merges_url",
            "archive_url",
            "downloads_url",
            "issues_url",
            "pulls_url",
            "milestones_url",
            "notifications_url",
            "labels_url",
            "releases_url",
            "deployments_url",
            "created_at",
            "updated_at",
            "pushed_at",
            "git_url",
            "ssh_url",
            "clone_url",
            "svn_url",
            "homepage",
            "size",
            "stargazers_count",
            "watchers_count",
            "language",
            "has_issues",
            "has_projects",
            "has_downloads",
            "has_wiki",
            "has_pages",
            "forks_count",
            "mirror_url",
            "archived",
            "open_issues_count",
            "license",
            "forks",
            "open_issues",
            "watchers",
            "default_branch",
            "is_template",
        ];
        const PULL_REQUEST: &[&str] = &[
            "url",
            "id",
            "node_id",
            "html_url",
            "diff_url",
            "patch_url",
            "issue_url",
            "number",
            "state",
            "locked",
            "title",
            "user",
            "body",
            "created_at",
            "updated_at",
            "closed_at",
            "merged_at",
            "merge_commit_sha",
            "assignee",
            "assignees",
            "requested_reviewers",
            "requested_teams",
            "labels",
            "milestone",
            "commits_url",
            "review_comments_url",
            "review_comment_url",
            "comments_url",
            "statuses_url",
            "head",
            "base",
            "_links",
            "author_association",
            "auto_merge",
            "active_lock_reason",
            "draft",
            "merged",
            "mergeable",
            "rebaseable",
            "mergeable_state",
            "merged_by",
            "comments",
            "review_comments",
            "maintainer_can_modify",
            "commits",
            "additions",
            "deletions",
            "changed_files",
        ];
        const RELEASE: &[&str] = &[
            "url",
            "assets_url",
            "upload_url",
            "html_url",
            "id",
            "node_id",
            "tag_name",
            "target_commitish",
            "name",
            "draft",
            "author",
            "prerelease",
            "created_at",
            "published_at",
            "assets",
            "tarball_url",
            "zipball_url",
            "body",
        ];
        const COMMIT: &[&str] = &[
            "id",
            "tree_id",
            "distinct",
            "message",
            "timestamp",
            "url",
            "author",
            "committer",
            "added",
            "removed",
            "modified",
        ];
        const LABEL: &[&str] = &[
            "id",
            "node_id",
            "url",
            "name",
            "color",
            "default",
            "description",
        ];
        let repository = |what: &str, repo: &Value| {
            has_all(what, repo, REPOSITORY);
            has_all(&format!("{what}.owner"), &repo["owner"], USER);
        };
        for name in ["release.published.json", "release.published.fork.json"] {
            let payload = fixture(name);
            has_all(
                name,
                &payload,
                &["action", "release", "repository", "sender"],
            );
            has_all(&format!("{name} release"), &payload["release"], RELEASE);
            has_all(
                &format!("{name} author"),
                &payload["release"]["author"],
                USER,
            );
            repository(name, &payload["repository"]);
            has_all(&format!("{name} sender"), &payload["sender"], USER);
        }
        for name in ["push.tag.json", "push.branch.json"] {
            let payload = fixture(name);
            has_all(
                name,
                &payload,
                &[
                    "ref",
                    "before",
                    "after",
                    "created",
                    "deleted",
                    "forced",
                    "base_ref",
                    "compare",
                    "commits",
                    "head_commit",
                    "repository",
                    "pusher",
                    "sender",
                    "organization",
                ],
            );
            repository(name, &payload["repository"]);
            has_all(
                &format!("{name} repository (push)"),
                &payload["repository"],
                &["stargazers", "master_branch", "organization"],
            );
            has_all(
                &format!("{name} head_commit"),
                &payload["head_commit"],
                COMMIT,
            );
            for commit in payload["commits"].as_array().unwrap() {
                has_all(&format!("{name} commit"), commit, COMMIT);
            }
        }
        assert!(!fixture("push.branch.json")["commits"]
            .as_array()
            .unwrap()
            .is_empty());
        for name in ["pull_request.labeled.json", "pull_request.dependabot.json"] {
            let payload = fixture(name);
            has_all(
                name,
                &payload,
                &["action", "number", "pull_request", "repository", "sender"],
            );
            let pr = &payload["pull_request"];
            has_all(&format!("{name} pull_request"), pr, PULL_REQUEST);
            has_all(&format!("{name} user"), &pr["user"], USER);
            for side in ["head", "base"] {
                has_all(
                    &format!("{name} {side}"),
                    &pr[side],
                    &["label", "ref", "sha", "user", "repo"],
                );
                repository(&format!("{name} {side}.repo"), &pr[side]["repo"]);
            }
            for label in pr["labels"].as_array().unwrap() {
                has_all(&format!("{name} label"), label, LABEL);
            }
            repository(name, &payload["repository"]);
        }
        has_all(
            "labeled label",
            &fixture("pull_request.labeled.json")["label"],
            LABEL,
        );
        let bot = fixture("pull_request.dependabot.json");
        assert_eq!(bot["pull_request"]["user"]["type"], "Bot");
        let ping = fixture("ping.json");
        has_all(
            "ping",
            &ping,
            &["zen", "hook_id", "hook", "repository", "sender"],
        );
        repository("ping", &ping["repository"]);
    }

    /// GitHub's own recorded deliveries (`@octokit/webhooks-examples`, via abfleet-testkit),
    /// of Codertocat/Hello-World: as the milestone spec's upstream, then as its fork.
    #[test]
    fn recorded_deliveries_map_to_their_reasons_and_pins() {
        use abfleet_testkit::{webhook_example, webhook_examples};
        let as_upstream = HookContext {
            upstream_git_url: Some("https://github.com/Codertocat/Hello-World.git"),
            fork_git_url: Some("git@github.com:lusoris/vmaf.git"),
            perf_label: "bug",
            toolchain_bots: &["dependabot[bot]"],
        };
        let as_fork = HookContext {
            upstream_git_url: Some("https://github.com/Netflix/vmaf.git"),
            fork_git_url: Some("https://github.com/Codertocat/Hello-World"),
            ..as_upstream
        };
        let decided = |event: &str, payload: &Value, context: &HookContext<'_>| match decide(
            event, payload, context,
        ) {
            HookDecision::Trigger(trigger) => Ok(trigger),
            HookDecision::Ignored(why) => Err(why),
        };
        let published = webhook_example("release", Some("published"));
        let release = decided("release", &published, &as_upstream).unwrap();
        assert_eq!(
            (release.reason, release.debounce_key.as_str(), release.once),
            ("release", "tag 0.0.1", true)
        );
        assert_eq!(
            (release.upstream_rev.as_deref(), release.fork_rev),
            (Some("0.0.1"), None)
        );
        assert_eq!(release.note, "release 0.0.1 of Codertocat/Hello-World");
        assert_eq!(release.pull_request, None);
        let fork_release = decided("release", &published, &as_fork).unwrap();
        assert_eq!(
            (fork_release.upstream_rev, fork_release.fork_rev.as_deref()),
            (None, Some("0.0.1"))
        );
        let prerelease = webhook_example("release", Some("prereleased"));
        assert!(decided("release", &prerelease, &as_upstream)
            .unwrap_err()
            .contains("action `prereleased`"));

        // A tag pushed and the same tag created: one debounce key, so one run.
        let pushes = webhook_examples("push");
        let tag_push = pushes
            .iter()
            .find(|p| p["ref"] == "refs/tags/simple-tag" && p["deleted"] == false)
            .unwrap();
        let created = webhook_example("create", None);
        assert_eq!(created["ref_type"], "tag");
        for (event, payload) in [("push", tag_push), ("create", &created)] {
            // `simple-tag` is no release tag: upstream ignores it, saying why.
            let why = decided(event, payload, &as_upstream).unwrap_err();
            assert!(
                why.contains("`simple-tag`") && why.contains("not a release tag"),
                "{why}"
            );
        }
        let mut release_tag = tag_push.clone();
        release_tag["ref"] = "refs/tags/v3.2.0".into();
        let mut created_release = created.clone();
        created_release["ref"] = "v3.2.0".into();
        let by_push = decided("push", &release_tag, &as_upstream).unwrap();
        let by_create = decided("create", &created_release, &as_upstream).unwrap();
        assert_eq!(by_push.debounce_key, by_create.debounce_key);
        assert_eq!(by_create.upstream_rev.as_deref(), Some("v3.2.0"));
        let deleted = pushes.iter().find(|p| p["deleted"] == true).unwrap();
        assert!(decided("push", deleted, &as_upstream)
            .unwrap_err()
            .contains("deleted"));
        let branch = pushes
            .iter()
            .find(|p| p["ref"] == "refs/heads/master")
            .unwrap();
        assert!(decided("push", branch, &as_upstream)
            .unwrap_err()
            .contains("not a tag"));

        // The recorded `labeled` PR, labelled with the perf label (`bug` here), on the fork.
        let labeled = webhook_example("pull_request", Some("labeled"));
        let head = labeled["pull_request"]["head"]["sha"]
            .as_str()
            .unwrap()
            .to_string();
        let pr = decided("pull_request", &labeled, &as_fork).unwrap();
        assert_eq!(pr.reason, "performance-pr");
        assert_eq!(pr.debounce_key, "Codertocat/Hello-World#2");
        assert_eq!(pr.fork_rev.as_deref(), Some(head.as_str()));
        assert_eq!(
            pr.pull_request,
            Some(crate::PullRequestRef {
                repo: "Codertocat/Hello-World".into(),
                number: 2,
                head_sha: Some(head),
            })
        );
        // On the upstream it starts nothing; opened without the label neither.
        assert!(decided("pull_request", &labeled, &as_upstream).is_err());
        let opened = webhook_example("pull_request", Some("opened"));
        assert!(decided("pull_request", &opened, &as_fork).is_err());
    }

    /// No recording has a dependency bot's PR: the hand-written fixture (docs in
    /// fixtures/webhooks/README.md).
    #[test]
    fn a_toolchain_bots_pr_maps_to_a_toolchain_bump_of_its_head() {
        let bot = trigger("pull_request", &fixture("pull_request.dependabot.json"));
        assert_eq!(bot.reason, "toolchain-bump");
        assert_eq!(bot.debounce_key, "lusoris/vmaf#418");
        assert_eq!(
            bot.fork_rev.as_deref(),
            Some("3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b")
        );
        assert!(
            bot.note.starts_with(
                "PR lusoris/vmaf#418 by dependabot[bot] (cuda) at 3c2b1a0f9e8d: Bump nvidia/cuda"
            ),
            "{}",
            bot.note
        );
    }

    #[test]
    fn a_bot_pr_counts_when_opened_reopened_or_updated() {
        for action in ["opened", "reopened", "synchronize"] {
            let mut bot = fixture("pull_request.dependabot.json");
            bot["action"] = action.into();
            bot["pull_request"]["head"]["sha"] = "ab".repeat(20).into();
            let trigger = trigger("pull_request", &bot);
            assert_eq!(trigger.reason, "toolchain-bump", "{action}");
            // One PR, one key: a bot's updates within the window are one run.
            assert_eq!(trigger.debounce_key, "lusoris/vmaf#418", "{action}");
            assert_eq!(trigger.fork_rev, Some("ab".repeat(20)), "{action}");
        }
        let mut closed = fixture("pull_request.dependabot.json");
        closed["action"] = "closed".into();
        assert!(ignored("pull_request", &closed, &CONTEXT).contains("action `closed`"));
    }

    /// Issue 23: any login ending in `[bot]` with "cuda" anywhere in the title started a run.
    #[test]
    fn only_the_configured_bots_naming_a_toolchain_as_a_word_count() {
        let bump = |login: &str, user_type: &str, title: &str| {
            let mut pr = fixture("pull_request.dependabot.json");
            pr["pull_request"]["user"]["login"] = login.into();
            pr["pull_request"]["user"]["type"] = user_type.into();
            pr["pull_request"]["title"] = title.into();
            pr["pull_request"]["body"] = "".into();
            pr
        };
        let why = ignored(
            "pull_request",
            &bump("anyone-at-all[bot]", "Bot", "Bump cuda"),
            &CONTEXT,
        );
        assert!(why.contains("not one of the toolchain bots"), "{why}");
        let why = ignored(
            "pull_request",
            &bump("dependabot[bot]", "User", "Bump cuda"),
            &CONTEXT,
        );
        assert!(why.contains("user.type is `User`"), "{why}");
        let why = ignored(
            "pull_request",
            &bump("dependabot[bot]", "Bot", "Bump barracuda from 1.0 to 1.1"),
            &CONTEXT,
        );
        assert!(why.contains("names no toolchain"), "{why}");
        for title in [
            "Bump nvidia/cuda from 12.4 to 13.3",
            "chore(deps): update CUDA-toolkit to v13",
        ] {
            let trigger = trigger("pull_request", &bump("renovate[bot]", "Bot", title));
            assert_eq!(trigger.reason, "toolchain-bump", "{title}");
        }
        let own = HookContext {
            toolchain_bots: &["our-bumper[bot]"],
            ..CONTEXT
        };
        assert!(matches!(
            decide(
                "pull_request",
                &bump("our-bumper[bot]", "Bot", "Bump ROCm to 6.4"),
                &own
            ),
            HookDecision::Trigger(_)
        ));
        let why = ignored(
            "pull_request",
            &bump("dependabot[bot]", "Bot", "Bump cuda"),
            &own,
        );
        assert!(why.contains("our-bumper[bot]; --toolchain-bots"), "{why}");
        assert_eq!(bot_logins(" a[bot], ,b[bot]"), ["a[bot]", "b[bot]"]);
    }

    /// Issue 23: a pre-release started upstream runs that the upstream watcher would not.
    #[test]
    fn upstream_pre_releases_follow_the_watchers_rule() {
        let mut prerelease = fixture("release.published.json");
        prerelease["release"]["prerelease"] = true.into();
        let why = ignored("release", &prerelease, &CONTEXT);
        assert!(why.contains("prerelease: true"), "{why}");
        for tag in ["v3.3.0-rc1", "nightly"] {
            let mut release = fixture("release.published.json");
            release["release"]["tag_name"] = tag.into();
            release["release"]["name"] = tag.into();
            let why = ignored("release", &release, &CONTEXT);
            assert!(why.contains("release tags only"), "{tag}: {why}");
            let mut push = fixture("push.tag.json");
            push["ref"] = format!("refs/tags/{tag}").into();
            let why = ignored("push", &push, &CONTEXT);
            assert!(why.contains("not a release tag"), "{tag}: {why}");
            assert!(!crate::watcher::is_release_tag(tag), "the watcher agrees");
        }
        assert_eq!(
            trigger("release", &fixture("release.published.json")).reason,
            "release"
        );
    }

    #[test]
    fn names_word_needs_word_boundaries() {
        assert!(names_word("Bump nvidia/cuda to 13", "cuda"));
        assert!(names_word("CUDA", "cuda"));
        assert!(names_word("cuda-toolkit", "cuda"));
        assert!(!names_word("barracuda", "cuda"));
        assert!(!names_word("cudart", "cuda"));
    }

    #[test]
    fn the_performance_label_is_configurable() {
        let labeled = fixture("pull_request.labeled.json");
        let renamed = HookContext {
            perf_label: "perf",
            ..CONTEXT
        };
        assert_eq!(
            ignored("pull_request", &labeled, &renamed),
            "PR #412 labelled `performance`, not `perf`"
        );
        let mut perf = labeled.clone();
        perf["label"]["name"] = "perf".into();
        assert!(matches!(
            decide("pull_request", &perf, &renamed),
            HookDecision::Trigger(HookTrigger {
                reason: "performance-pr",
                ..
            })
        ));
    }

    #[test]
    fn other_repositories_and_events_are_ignored_with_a_reason() {
        let mut release = fixture("release.published.json");
        release["action"] = "created".into();
        assert_eq!(
            ignored("release", &release, &CONTEXT),
            "release action `created`"
        );
        let mut elsewhere = fixture("release.published.json");
        elsewhere["repository"]["full_name"] = "someone/else".into();
        let why = ignored("release", &elsewhere, &CONTEXT);
        assert!(
            why.contains("of someone/else, which is neither the milestone spec's upstream `https://github.com/Netflix/vmaf.git` nor its fork `git@github.com:lusoris/vmaf.git`"),
            "{why}"
        );
        let fork_is_path = HookContext {
            fork_git_url: None,
            ..CONTEXT
        };
        let why = ignored(
            "release",
            &fixture("release.published.fork.json"),
            &fork_is_path,
        );
        assert!(why.contains("nor its fork (not a git repository)"), "{why}");

        let tag_on_fork = HookContext {
            upstream_git_url: Some("https://github.com/lusoris/vmaf.git"),
            ..CONTEXT
        };
        assert!(ignored("push", &fixture("push.tag.json"), &tag_on_fork)
            .contains("not of the milestone spec's upstream"));
        assert_eq!(
            ignored("push", &fixture("push.branch.json"), &CONTEXT),
            "push of `refs/heads/master`, not a tag"
        );
        let mut deleted = fixture("push.tag.json");
        deleted["deleted"] = true.into();
        assert_eq!(ignored("push", &deleted, &CONTEXT), "tag `v3.1.0` deleted");

        let mut labeled = fixture("pull_request.labeled.json");
        labeled["label"]["name"] = "documentation".into();
        assert!(ignored("pull_request", &labeled, &CONTEXT).contains("labelled `documentation`"));
        let mut on_upstream = fixture("pull_request.labeled.json");
        on_upstream["repository"]["full_name"] = "Netflix/vmaf".into();
        assert_eq!(
            ignored("pull_request", &on_upstream, &CONTEXT),
            "PR Netflix/vmaf#412 is not on the milestone spec's fork `git@github.com:lusoris/vmaf.git`"
        );
        let mut headless = fixture("pull_request.labeled.json");
        headless["pull_request"]["head"]["sha"] = Value::Null;
        assert!(ignored("pull_request", &headless, &CONTEXT).contains("not a commit id"));
        // Hex but not a whole commit id, or a path and a query riding on one: never a pin.
        for bad in [
            "abc1234".to_string(),
            format!("{}/../../user", "a".repeat(40)),
            format!("{}?x=1", "a".repeat(40)),
        ] {
            headless["pull_request"]["head"]["sha"] = bad.clone().into();
            let why = ignored("pull_request", &headless, &CONTEXT);
            assert!(why.contains("`pull_request.head.sha`"), "{bad}: {why}");
        }

        let mut bot = fixture("pull_request.dependabot.json");
        bot["pull_request"]["user"]["login"] = "octocat".into();
        assert!(ignored("pull_request", &bot, &CONTEXT).contains("by `octocat`"));
        let mut bot = fixture("pull_request.dependabot.json");
        bot["pull_request"]["title"] = "Bump serde from 1.0.1 to 1.0.2".into();
        bot["pull_request"]["body"] = "Bumps serde.".into();
        assert!(ignored("pull_request", &bot, &CONTEXT).contains("names no toolchain"));
        assert_eq!(
            ignored("ping", &fixture("ping.json"), &CONTEXT),
            "event `ping`"
        );
    }
}
