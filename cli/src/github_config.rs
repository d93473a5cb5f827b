//! The `[github]` table of the coordinator's config file: how it answers the pull requests
//! that ask for runs (docs/milestone.md, "The pull request hears the answer"). The token —
//! a GitHub App installation token or a fine-grained token with "Commit statuses" and
//! "Pull requests" write access — comes from a file others cannot read, never from a flag
//! or a spec. Calls go only to the milestone spec's fork and upstream, and to the
//! repositories listed here.
//!
//! ```toml
//! [github]
//! token_file = "/etc/abfleet/github-token"
//! report_url = "https://abfleet.example:8443"
//! # comment_author = "abfleet-bench[bot]"   # an App's bot login; else GET /user says
//! # api_url = "https://github.example.com/api/v3"    # GitHub Enterprise
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use abfleet_coordinator::outbound::github::{
    repo_of_git_url, GitHub, GitHubReporting, Repo, Token,
};
use serde::Deserialize;

pub const DEFAULT_API_URL: &str = "https://api.github.com";
pub const DEFAULT_CONTEXT: &str = "abfleet";

#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitHubFile {
    /// The REST API's base (default `https://api.github.com`).
    pub api_url: Option<String>,
    /// The token, alone in a file only the coordinator's user may read.
    pub token_file: Option<PathBuf>,
    /// The CA of a GitHub Enterprise server behind a private CA (PEM).
    pub ca_file: Option<PathBuf>,
    /// The web view's address as people open it: statuses and comments link the report.
    pub report_url: Option<String>,
    /// The commit status's name on the pull request (default `abfleet`).
    pub context: Option<String>,
    /// Repositories (`owner/name`) besides the milestone spec's fork and upstream that
    /// `abfleet trigger --pr` may name.
    pub repositories: Option<Vec<String>>,
    pub retry_after_seconds: Option<f64>,
    pub max_attempts: Option<u32>,
    /// The token's login, the author of abfleet's comments (a GitHub App installation token's
    /// is `SLUG[bot]`, which `GET /user` does not answer); default: `GET /user` says.
    pub comment_author: Option<String>,
}

impl crate::relative_paths::RelativePaths for GitHubFile {
    fn resolve_paths(&mut self, base: &Path) {
        for path in [&mut self.token_file, &mut self.ca_file]
            .into_iter()
            .flatten()
        {
            if path.is_relative() {
                *path = base.join(&*path);
            }
        }
    }
}

impl GitHubFile {
    /// The settings, the token read; `milestone_spec` adds its fork and upstream to the
    /// repositories that may be called. Every problem is named.
    pub fn load(&self, milestone_spec: Option<&Path>) -> Result<GitHubReporting, Vec<String>> {
        let mut problems = Vec::new();
        let token = match &self.token_file {
            None => {
                problems.push("[github] needs `token_file`: a file holding a GitHub App installation token or a fine-grained token (statuses and pull requests: write), mode 0600".to_string());
                None
            }
            Some(path) => Token::from_file(path)
                .map_err(|err| problems.push(format!("[github] `token_file`: {err}")))
                .ok(),
        };
        let mut allowed = Vec::new();
        if let Some(path) = milestone_spec {
            match abfleet_core::spec::JobSpec::load(path) {
                Ok(spec) => {
                    for source in [&spec.fork.source, &spec.upstream.source] {
                        if let abfleet_core::spec::SourceSpec::Git { url, .. } = source {
                            allowed.extend(repo_of_git_url(url));
                        }
                    }
                }
                Err(err) => problems.push(format!(
                    "[github]: the milestone spec {} does not load ({err:#}); its repositories are the ones abfleet may call",
                    path.display()
                )),
            }
        }
        for name in self.repositories.iter().flatten() {
            match Repo::parse(name) {
                Ok(repo) => allowed.push(repo.full_name()),
                Err(err) => problems.push(format!("[github] `repositories`: {err}")),
            }
        }
        if allowed.is_empty() && problems.is_empty() {
            problems.push("[github]: no repository to answer: set `milestone_spec` (its fork and upstream) or list `repositories`".to_string());
        }
        if let Some(url) = &self.report_url {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                problems.push(format!(
                    "[github] `report_url` `{url}` is not an http(s) URL"
                ));
            }
        }
        let context = self
            .context
            .clone()
            .unwrap_or_else(|| DEFAULT_CONTEXT.to_string());
        if context.trim().is_empty() {
            problems.push(
                "[github] `context` is empty; name the status (default `abfleet`)".to_string(),
            );
        }
        let retry_after = match self.retry_after_seconds {
            None => Duration::from_secs(5),
            Some(s) if s.is_finite() && s > 0.0 => Duration::from_secs_f64(s),
            Some(_) => {
                problems.push("[github] `retry_after_seconds` must be positive".to_string());
                Duration::from_secs(5)
            }
        };
        if self.max_attempts == Some(0) {
            problems.push("[github] `max_attempts` must be 1 or more".to_string());
        }
        let ca_pem = self.ca_file.as_ref().and_then(|path| {
            std::fs::read_to_string(path)
                .map_err(|err| {
                    problems.push(format!("[github] `ca_file` {}: {err}", path.display()))
                })
                .ok()
        });
        let api_url = self
            .api_url
            .clone()
            .unwrap_or_else(|| DEFAULT_API_URL.to_string());
        if let Some(login) = &self.comment_author {
            let valid = !login.is_empty()
                && login.len() <= 64
                && login
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_[]".contains(c));
            if !valid {
                problems.push(format!(
                    "[github] `comment_author` {login:?} is not a GitHub login (letters, digits, `-`; an App's is `SLUG[bot]`)"
                ));
            }
        }
        let client = token.and_then(|token| {
            GitHub::new(&api_url, token, allowed.clone(), ca_pem.as_deref())
                .map_err(|err| problems.push(format!("[github] `api_url`: {err}")))
                .ok()
                .map(|client| match &self.comment_author {
                    Some(login) => client.with_identity(login),
                    None => client,
                })
        });
        match (problems.is_empty(), client) {
            (true, Some(client)) => Ok(GitHubReporting {
                client,
                context,
                report_url: self.report_url.clone(),
                retry_after,
                max_attempts: self.max_attempts.unwrap_or(10),
            }),
            _ => Err(problems),
        }
    }
}
