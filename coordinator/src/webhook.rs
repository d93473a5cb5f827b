//! GitHub webhooks as triggers: the signature check (`X-Hub-Signature-256`, HMAC-SHA256 of
//! the raw body under the shared secret, compared in constant time) and the mapping from an
//! event to a trigger reason, debounce key and note. Pure: the HTTP listener (`http.rs`) reads
//! the request, asks here, and hands a trigger to the fleet.

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

/// The webhook endpoint's settings (`--webhook-secret-file`).
#[derive(Clone)]
pub struct WebhookConfig {
    /// The shared secret, as GitHub is given it (the file's text, surrounding whitespace
    /// trimmed).
    pub secret: Vec<u8>,
}

impl std::fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookConfig").finish_non_exhaustive()
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
        Ok(WebhookConfig {
            secret: secret.as_bytes().to_vec(),
        })
    }
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
    let bytes = mac.finalize().into_bytes();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
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
    Trigger {
        reason: &'static str,
        debounce_key: String,
        note: String,
        /// Run with the milestone spec's upstream pin moved here (a pushed tag).
        upstream_rev: Option<String>,
    },
    /// Not a trigger; the text says why.
    Ignored(String),
}

/// The label that makes a pull request a performance PR.
pub const PERFORMANCE_LABEL: &str = "performance";

/// Toolchains whose bump by a dependency bot triggers a run (matched case-insensitively in
/// the PR's title or body).
pub const TOOLCHAIN_WORDS: [&str; 3] = ["cuda", "rocm", "oneapi"];

/// Maps a GitHub event (`X-GitHub-Event`) and its payload to a trigger. `upstream_git_url` is
/// the milestone spec's upstream repository: only tags pushed there count.
pub fn decide(event: &str, payload: &Value, upstream_git_url: Option<&str>) -> HookDecision {
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
            HookDecision::Trigger {
                reason: "release",
                debounce_key: format!("{repo}@{tag}"),
                note: format!("release {shown} of {repo}"),
                upstream_rev: None,
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
            match upstream_git_url {
                Some(url) if same_repository(url, &repo) => HookDecision::Trigger {
                    reason: "upstream-tag",
                    // The tag alone: the upstream watcher sees the same tag by its URL.
                    debounce_key: crate::watcher::tag_debounce_key(tag),
                    note: format!("tag {tag} of {repo}"),
                    upstream_rev: Some(tag.to_string()),
                },
                Some(url) => HookDecision::Ignored(format!(
                    "tag `{tag}` pushed to {repo}, not to the milestone spec's upstream `{url}`"
                )),
                None => HookDecision::Ignored(format!(
                    "tag `{tag}` pushed to {repo}, and the milestone spec's upstream is not a git repository"
                )),
            }
        }
        "pull_request" => {
            let pr = &payload["pull_request"];
            let number = pr["number"].as_u64().or_else(|| payload["number"].as_u64());
            let Some(number) = number else {
                return HookDecision::Ignored("pull_request without a number".into());
            };
            let title = text(&pr["title"]);
            let key = format!("{repo}#{number}");
            if action == "labeled" {
                let label = text(&payload["label"]["name"]);
                if label == PERFORMANCE_LABEL {
                    return HookDecision::Trigger {
                        reason: "performance-pr",
                        debounce_key: key,
                        note: format!("PR {repo}#{number}: {title}"),
                        upstream_rev: None,
                    };
                }
                return HookDecision::Ignored(format!(
                    "PR #{number} labelled `{label}`, not `{PERFORMANCE_LABEL}`"
                ));
            }
            let login = text(&pr["user"]["login"]);
            if action == "opened" && login.ends_with("[bot]") {
                let haystack = format!("{title}\n{}", text(&pr["body"])).to_lowercase();
                if let Some(word) = TOOLCHAIN_WORDS.iter().find(|w| haystack.contains(*w)) {
                    return HookDecision::Trigger {
                        reason: "toolchain-bump",
                        debounce_key: key,
                        note: format!("PR {repo}#{number} by {login} ({word}): {title}"),
                        upstream_rev: None,
                    };
                }
                return HookDecision::Ignored(format!(
                    "PR #{number} by {login} names no toolchain ({})",
                    TOOLCHAIN_WORDS.join(", ")
                ));
            }
            HookDecision::Ignored(format!("pull_request action `{action}` by `{login}`"))
        }
        other => HookDecision::Ignored(format!("event `{other}`")),
    }
}

/// Whether a git URL (`https://github.com/o/r.git`, `git@github.com:o/r`) names the
/// repository `owner/name`.
fn same_repository(url: &str, full_name: &str) -> bool {
    if full_name.is_empty() {
        return false;
    }
    let url = url.trim_end_matches('/');
    let url = url.strip_suffix(".git").unwrap_or(url).to_lowercase();
    let full_name = full_name.to_lowercase();
    url.ends_with(&format!("/{full_name}")) || url.ends_with(&format!(":{full_name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Value {
        let path = format!("{}/../fixtures/webhooks/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    const UPSTREAM: Option<&str> = Some("https://github.com/Netflix/vmaf.git");

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

    #[test]
    fn fixtures_map_to_their_reasons() {
        let reason = |event: &str, name: &str| match decide(event, &fixture(name), UPSTREAM) {
            HookDecision::Trigger { reason, .. } => reason,
            HookDecision::Ignored(why) => panic!("{name} ignored: {why}"),
        };
        assert_eq!(reason("release", "release.published.json"), "release");
        assert_eq!(reason("push", "push.tag.json"), "upstream-tag");
        assert_eq!(
            reason("pull_request", "pull_request.labeled.json"),
            "performance-pr"
        );
        assert_eq!(
            reason("pull_request", "pull_request.dependabot.json"),
            "toolchain-bump"
        );
    }

    #[test]
    fn notes_and_keys_name_the_thing() {
        assert_eq!(
            decide("push", &fixture("push.tag.json"), UPSTREAM),
            HookDecision::Trigger {
                reason: "upstream-tag",
                debounce_key: "tag v3.1.0".into(),
                note: "tag v3.1.0 of Netflix/vmaf".into(),
                upstream_rev: Some("v3.1.0".into()),
            }
        );
        let HookDecision::Trigger { note, .. } = decide(
            "pull_request",
            &fixture("pull_request.labeled.json"),
            UPSTREAM,
        ) else {
            panic!("labelled PR ignored")
        };
        assert!(note.starts_with("PR lusoris/vmaf#412: "), "{note}");
    }

    #[test]
    fn other_events_are_ignored() {
        let ignored = |event: &str, payload: Value, upstream: Option<&str>| {
            matches!(decide(event, &payload, upstream), HookDecision::Ignored(_))
        };
        let mut release = fixture("release.published.json");
        release["action"] = "created".into();
        assert!(ignored("release", release, UPSTREAM));
        let mut push = fixture("push.tag.json");
        assert!(ignored(
            "push",
            push.clone(),
            Some("https://github.com/lusoris/vmaf.git")
        ));
        push["ref"] = "refs/heads/master".into();
        assert!(ignored("push", push, UPSTREAM));
        let mut labeled = fixture("pull_request.labeled.json");
        labeled["label"]["name"] = "documentation".into();
        assert!(ignored("pull_request", labeled, UPSTREAM));
        let mut bot = fixture("pull_request.dependabot.json");
        bot["pull_request"]["user"]["login"] = "octocat".into();
        assert!(ignored("pull_request", bot, UPSTREAM));
        let mut bot = fixture("pull_request.dependabot.json");
        bot["pull_request"]["title"] = "Bump serde from 1.0.1 to 1.0.2".into();
        bot["pull_request"]["body"] = "Bumps serde.".into();
        assert!(ignored("pull_request", bot, UPSTREAM));
        assert!(ignored("ping", serde_json::json!({"zen": "hi"}), UPSTREAM));
    }

    #[test]
    fn repositories_match_by_owner_and_name() {
        assert!(same_repository(
            "https://github.com/Netflix/vmaf.git",
            "netflix/vmaf"
        ));
        assert!(same_repository(
            "git@github.com:Netflix/vmaf",
            "Netflix/vmaf"
        ));
        assert!(!same_repository(
            "https://github.com/Netflix/vmaf-x.git",
            "Netflix/vmaf"
        ));
        assert!(!same_repository(
            "https://github.com/xNetflix/vmaf.git",
            "Netflix/vmaf"
        ));
        assert!(!same_repository("https://github.com/Netflix/vmaf.git", ""));
    }
}
