//! The upstream watcher (`abfleet coordinator --watch-upstream-interval SECONDS`): polls the
//! milestone spec's upstream repository with `git ls-remote --tags` and, for each release tag
//! it has not seen, triggers an `upstream-tag` run of the milestone spec with the upstream pin
//! moved to that tag. The first poll of a repository only records the tags it has, so
//! starting the watcher does not run every past release. Tags seen are kept in the store
//! (`upstream_tags`), so a restart does not run them again. For where no webhook can be
//! installed; a tag that a webhook (its push or its release) and the watcher both see is one
//! run, however far apart: they share the key `tag NAME`, debounced against every earlier
//! trigger.
//!
//! Only a release newer than every release already known moves the pin: a backport
//! (`v3.1.5` tagged after `v3.2.0`) is recorded and skipped, and when one poll finds several
//! new releases only the newest runs (the others are superseded by it).

use std::future::Future;
use std::time::Duration;

use abfleet_core::spec::SourceSpec;
use tokio::time::MissedTickBehavior;
use tracing::{info, warn};

use crate::fleet::{Fleet, FleetError, TriggerOutcome, TriggerRequest};

/// How long one `git ls-remote` may take.
const LS_REMOTE_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(transparent)]
    Fleet(#[from] FleetError),
    #[error(transparent)]
    Store(#[from] crate::CoordinatorError),
    #[error("failed to run `git ls-remote --tags {url}`: {reason}; check that git is installed and the URL is reachable from the coordinator")]
    LsRemote { url: String, reason: String },
}

/// What one poll did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PollOutcome {
    /// The repository polled; `None` when the milestone spec's upstream is not git.
    pub url: Option<String>,
    /// Its first poll: tags recorded, nothing triggered.
    pub baseline: bool,
    /// New release tags and what triggering each did.
    pub triggered: Vec<(String, TriggerOutcome)>,
    /// New release tags recorded without a run, and why (older than a known release,
    /// superseded by a newer one in the same poll).
    pub skipped: Vec<(String, String)>,
}

/// A release tag's version numbers (`v3.1.0` → [3, 1, 0]); `None` for other tags.
pub fn release_version(tag: &str) -> Option<Vec<u64>> {
    if !is_release_tag(tag) {
        return None;
    }
    let version = tag.strip_prefix('v').unwrap_or(tag);
    version.split('.').map(|p| p.parse().ok()).collect()
}

/// The debounce key of an upstream tag, the same for the watcher and a tag-push webhook.
pub fn tag_debounce_key(tag: &str) -> String {
    format!("tag {tag}")
}

/// Whether a tag names a release: `v` or not, then dot-separated numbers (`v3.1.0`,
/// `3.1`); pre-releases (`v3.1.0-rc1`) and other tags (`nightly`) are not.
pub fn is_release_tag(tag: &str) -> bool {
    let version = tag.strip_prefix('v').unwrap_or(tag);
    !version.is_empty()
        && version
            .split('.')
            .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
}

/// Tags and their commits from `git ls-remote --tags` output (peeled `^{}` lines give the
/// commit of an annotated tag and win over the tag object).
pub fn parse_ls_remote(output: &str) -> Vec<(String, String)> {
    let mut tags: std::collections::BTreeMap<String, String> = Default::default();
    for line in output.lines() {
        let Some((sha, name)) = line.split_once('\t') else {
            continue;
        };
        let Some(tag) = name.strip_prefix("refs/tags/") else {
            continue;
        };
        match tag.strip_suffix("^{}") {
            Some(tag) => {
                tags.insert(tag.to_string(), sha.to_string());
            }
            None => {
                tags.entry(tag.to_string())
                    .or_insert_with(|| sha.to_string());
            }
        }
    }
    tags.into_iter().collect()
}

/// Polls every `interval` until `shutdown` resolves; a failed poll is logged and retried at
/// the next tick.
pub async fn watch_upstream(
    fleet: Fleet,
    interval: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            _ = ticks.tick() => {}
        }
        match poll_upstream_once(&fleet).await {
            Ok(outcome) => {
                for (tag, triggered) in &outcome.triggered {
                    info!(tag = %tag, run_id = %triggered.run_id(), "new upstream release tag");
                }
            }
            Err(err) => warn!(%err, "upstream watcher poll failed"),
        }
    }
}

/// One poll of the milestone spec's upstream.
pub async fn poll_upstream_once(fleet: &Fleet) -> Result<PollOutcome, WatchError> {
    let (spec, _) = fleet.triggers().milestone_spec().await?;
    let SourceSpec::Git { url, .. } = &spec.upstream.source else {
        return Ok(PollOutcome::default());
    };
    let tags = ls_remote_tags(url).await?;
    let store = fleet.store();
    let known = store.triggers().known_upstream_tags(url).await?;
    let baseline = known.is_empty();
    let new: Vec<(String, String)> = tags
        .into_iter()
        .filter(|(tag, _)| !known.contains(tag))
        .collect();
    let mut outcome = PollOutcome {
        url: Some(url.clone()),
        baseline,
        triggered: Vec::new(),
        skipped: Vec::new(),
    };
    if !baseline {
        let newest_known = known
            .iter()
            .filter_map(|t| release_version(t).map(|v| (v, t.clone())))
            .max();
        let mut releases: Vec<(Vec<u64>, &String, &String)> = new
            .iter()
            .filter_map(|(tag, sha)| release_version(tag).map(|v| (v, tag, sha)))
            .collect();
        releases.sort();
        let newest_new = releases
            .last()
            .map(|(v, tag, _)| (v.clone(), (*tag).clone()));
        let mut to_run = Vec::new();
        for (version, tag, sha) in &releases {
            if let Some((known_version, known_tag)) = &newest_known {
                if version <= known_version {
                    info!(tag = %tag, newest = %known_tag, "upstream release tag older than a known release: recorded, not run");
                    outcome
                        .skipped
                        .push(((*tag).clone(), format!("not newer than {known_tag}")));
                    continue;
                }
            }
            match &newest_new {
                Some((newest, newest_tag)) if version < newest => {
                    outcome
                        .skipped
                        .push(((*tag).clone(), format!("superseded by {newest_tag}")));
                }
                _ => to_run.push(((*tag).clone(), (*sha).clone())),
            }
        }
        for (tag, sha) in &to_run {
            let triggered = fleet
                .triggers()
                .trigger(TriggerRequest {
                    reason: "upstream-tag".to_string(),
                    debounce_key: Some(tag_debounce_key(tag)),
                    note: format!("tag {tag} of {url} ({})", &sha[..sha.len().min(12)]),
                    source: "watcher",
                    spec: None,
                    upstream_rev: Some(tag.clone()),
                    fork_rev: None,
                    // A tag runs once: a webhook may have run it long before this poll.
                    once: true,
                    pull_request: None,
                })
                .await?;
            outcome.triggered.push((tag.clone(), triggered));
        }
    }
    // Recorded after triggering: a poll that failed to trigger tries the tag again.
    store
        .triggers()
        .record_upstream_tags(url, new, fleet.now_ms())
        .await?;
    Ok(outcome)
}

async fn ls_remote_tags(url: &str) -> Result<Vec<(String, String)>, WatchError> {
    let failed = |reason: String| WatchError::LsRemote {
        url: url.to_string(),
        reason,
    };
    let mut command = tokio::process::Command::new("git");
    command
        .args(["ls-remote", "--tags", "--", url])
        .env("GIT_TERMINAL_PROMPT", "0")
        .kill_on_drop(true);
    let output = tokio::time::timeout(LS_REMOTE_TIMEOUT, command.output())
        .await
        .map_err(|_| failed(format!("no answer in {LS_REMOTE_TIMEOUT:?}")))?
        .map_err(|err| failed(err.to_string()))?;
    if !output.status.success() {
        return Err(failed(format!(
            "{}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(parse_ls_remote(&String::from_utf8_lossy(&output.stdout)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_versions_order_numerically() {
        assert!(release_version("v3.10.0") > release_version("v3.9.1"));
        assert!(release_version("3.2") < release_version("v3.2.0"));
        assert_eq!(release_version("v3.1.0-rc1"), None);
    }

    #[test]
    fn release_tags_are_versions() {
        for tag in ["v3.1.0", "3.1", "v10", "v2.3.4.5"] {
            assert!(is_release_tag(tag), "{tag}");
        }
        for tag in [
            "v3.1.0-rc1",
            "nightly",
            "v",
            "",
            "v3..1",
            "release-3.1",
            "v3.1.",
        ] {
            assert!(!is_release_tag(tag), "{tag}");
        }
    }

    #[test]
    fn ls_remote_output_is_read_with_peeled_commits() {
        let output = "1111111111111111111111111111111111111111\trefs/tags/v1.0.0\n\
                      2222222222222222222222222222222222222222\trefs/tags/v1.1.0\n\
                      3333333333333333333333333333333333333333\trefs/tags/v1.1.0^{}\n\
                      4444444444444444444444444444444444444444\trefs/heads/master\n";
        assert_eq!(
            parse_ls_remote(output),
            [
                ("v1.0.0".to_string(), "1".repeat(40)),
                ("v1.1.0".to_string(), "3".repeat(40)),
            ]
        );
    }
}
