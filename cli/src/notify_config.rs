//! The `[notify]` table of the coordinator's config file: where alerts go
//! (docs/operations.md, "Alerts"). Secrets come from files — a Slack webhook's URL is its
//! secret, so it goes in `url_file` — and a file that others may read is refused, as SSH
//! refuses such a key. Relative paths are taken from the config file's directory.
//!
//! ```toml
//! [notify]
//! report_url = "https://abfleet.example:8443"   # links in alerts: {report_url}/runs/RUN
//!
//! [[notify.endpoint]]
//! name = "ops-slack"
//! format = "slack"
//! url_file = "/etc/abfleet/slack-webhook-url"
//! events = ["parity_failure", "not_carried_out", "agent_lost"]
//!
//! [[notify.endpoint]]
//! name = "dashboard"
//! format = "json"
//! url = "https://dashboard.example/hooks/abfleet"
//! secret_file = "/etc/abfleet/alert-secret"       # X-Abfleet-Signature-256
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use abfleet_coordinator::outbound::http_client::check_url;
use abfleet_coordinator::outbound::notify::{AlertKind, Endpoint, NotifyConfig, PayloadFormat};
use serde::Deserialize;

#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyFile {
    /// The web view's base URL as people reach it; alerts link `{report_url}/runs/RUN`.
    pub report_url: Option<String>,
    /// The first retry's wait; each next one doubles (default 5).
    pub retry_after_seconds: Option<f64>,
    /// Attempts per alert and endpoint before it is given up (default 8).
    pub max_attempts: Option<u32>,
    /// Each attempt's time limit (default 15).
    pub timeout_seconds: Option<f64>,
    #[serde(default)]
    pub endpoint: Vec<EndpointFile>,
}

#[derive(Debug, Default, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointFile {
    pub name: String,
    /// `json` (the generic document) or `slack` (an incoming-webhook message).
    pub format: String,
    pub url: Option<String>,
    /// A file holding the URL (for a URL that is itself the secret).
    pub url_file: Option<PathBuf>,
    /// A file holding the HMAC key of `X-Abfleet-Signature-256` (`json` only).
    pub secret_file: Option<PathBuf>,
    /// A PEM file with the CA of an endpoint behind a private CA.
    pub ca_file: Option<PathBuf>,
    /// The alerts it takes (default: all).
    pub events: Option<Vec<String>>,
}

impl crate::relative_paths::RelativePaths for NotifyFile {
    fn resolve_paths(&mut self, base: &Path) {
        for endpoint in &mut self.endpoint {
            for path in [
                &mut endpoint.url_file,
                &mut endpoint.secret_file,
                &mut endpoint.ca_file,
            ]
            .into_iter()
            .flatten()
            {
                if path.is_relative() {
                    *path = base.join(&*path);
                }
            }
        }
    }
}

impl NotifyFile {
    /// The alert settings, every file read and checked; each problem named.
    pub fn load(&self) -> Result<NotifyConfig, Vec<String>> {
        let mut problems = Vec::new();
        let defaults = NotifyConfig::default();
        let seconds = |value: Option<f64>,
                       key: &str,
                       default: Duration,
                       problems: &mut Vec<String>| match value {
            None => default,
            Some(s) if s.is_finite() && s > 0.0 => Duration::from_secs_f64(s),
            Some(_) => {
                problems.push(format!(
                    "[notify] `{key}` must be a positive number of seconds"
                ));
                default
            }
        };
        let retry_after = seconds(
            self.retry_after_seconds,
            "retry_after_seconds",
            defaults.retry_after,
            &mut problems,
        );
        let timeout = seconds(
            self.timeout_seconds,
            "timeout_seconds",
            defaults.timeout,
            &mut problems,
        );
        if self.max_attempts == Some(0) {
            problems.push("[notify] `max_attempts` must be 1 or more".to_string());
        }
        if let Some(url) = &self.report_url {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                problems.push(format!(
                    "[notify] `report_url` `{url}` is not an http(s) URL; give the web view's address as people open it"
                ));
            }
        }
        let mut endpoints = Vec::new();
        for (i, file) in self.endpoint.iter().enumerate() {
            let at = if file.name.is_empty() {
                format!("[[notify.endpoint]] #{}", i + 1)
            } else {
                format!("[[notify.endpoint]] `{}`", file.name)
            };
            if self.endpoint[..i]
                .iter()
                .any(|earlier| earlier.name == file.name)
            {
                problems.push(format!(
                    "{at}: the name is used twice; each endpoint needs its own"
                ));
            }
            match file.load(&at) {
                Ok(endpoint) => endpoints.push(endpoint),
                Err(mut found) => problems.append(&mut found),
            }
        }
        if problems.is_empty() {
            Ok(NotifyConfig {
                endpoints,
                report_url: self.report_url.clone(),
                retry_after,
                max_attempts: self.max_attempts.unwrap_or(defaults.max_attempts),
                timeout,
            })
        } else {
            Err(problems)
        }
    }
}

impl EndpointFile {
    fn load(&self, at: &str) -> Result<Endpoint, Vec<String>> {
        let mut problems = Vec::new();
        let valid_name = !self.name.is_empty()
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid_name {
            problems.push(format!("{at}: `name` must be letters, digits, `-` or `_` (the report and the store name it)"));
        }
        let format = match self.format.as_str() {
            "json" => Some(PayloadFormat::Json),
            "slack" => Some(PayloadFormat::Slack),
            other => {
                problems.push(format!("{at}: `format` `{other}` is not `json` or `slack`"));
                None
            }
        };
        let url = match (&self.url, &self.url_file) {
            (Some(url), None) => Some(url.trim().to_string()),
            (None, Some(path)) => read_secret(path, at, "url_file", &mut problems)
                .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_string()),
            (Some(_), Some(_)) => {
                problems.push(format!("{at}: give `url` or `url_file`, not both"));
                None
            }
            (None, None) => {
                problems.push(format!("{at}: needs `url`, or `url_file` for a URL that is a secret (a Slack webhook's)"));
                None
            }
        };
        if let Some(url) = &url {
            if let Err(why) = check_url(url) {
                // The URL itself may be the secret: only its origin is repeated.
                problems.push(format!(
                    "{at}: the URL ({}) cannot be called: {}",
                    abfleet_coordinator::outbound::http_client::url_origin(url),
                    why.split(": ").last().unwrap_or(&why)
                ));
            }
        }
        let secret = self
            .secret_file
            .as_ref()
            .and_then(|path| read_secret(path, at, "secret_file", &mut problems))
            .map(|bytes| bytes.trim_ascii().to_vec());
        if secret.is_some() && format == Some(PayloadFormat::Slack) {
            problems.push(format!("{at}: `secret_file` signs generic JSON alerts; a Slack webhook's secret is its URL (`url_file`)"));
        }
        let ca_pem = self
            .ca_file
            .as_ref()
            .and_then(|path| match std::fs::read_to_string(path) {
                Ok(pem) => Some(pem),
                Err(err) => {
                    problems.push(format!("{at}: `ca_file` {}: {err}", path.display()));
                    None
                }
            });
        let mut events = Vec::new();
        for name in self.events.iter().flatten() {
            match name.parse::<AlertKind>() {
                Ok(kind) => events.push(kind),
                Err(err) => problems.push(format!("{at}: `events`: {err}")),
            }
        }
        match (problems.is_empty(), format, url) {
            (true, Some(format), Some(url)) => Ok(Endpoint {
                name: self.name.clone(),
                url,
                format,
                events,
                secret,
                ca_pem,
            }),
            _ => Err(problems),
        }
    }
}

/// A secret's bytes; refused when the file may be read by its group or others.
fn read_secret(path: &Path, at: &str, key: &str, problems: &mut Vec<String>) -> Option<Vec<u8>> {
    abfleet_coordinator::outbound::secret_file::read_private_file(path)
        .map_err(|err| problems.push(format!("{at}: `{key}` {err}")))
        .ok()
}

#[cfg(test)]
mod tests;
