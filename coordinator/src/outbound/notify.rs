//! Alerts (`[notify]` in the coordinator's config file): what a finished run found that
//! someone must hear about without opening its report — a parity failure, parity ratchet
//! growth, a slowdown against the previous comparable run, a `fail` retuning finding, a
//! stale sweep default, a run that could not be carried out — and an agent lost mid-job.
//! Each alert says what happened, on which generation and host, and links the report. It is
//! kept in the store before it is sent (in the transaction that finishes the run), sent by
//! the delivery task with retries and backoff (`delivery`), and what was sent stays with the
//! run. An endpoint that fails never blocks or fails a run.
//!
//! Two payloads: a generic JSON document (signed with HMAC-SHA256 in
//! `X-Abfleet-Signature-256` when the endpoint has a secret) and a Slack-compatible
//! incoming-webhook message (`{"text": …}`, which Mattermost and others accept too).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use abfleet_core::cell::CellParity;
use abfleet_core::finding::Severity;
use abfleet_core::report::history::FlagKind;
use abfleet_core::report::{GenerationSection, Report, ScoreParity};
use abfleet_core::sweep::DefaultVerdict;
use abfleet_render::pull_request::report_link_text;
use serde::{Deserialize, Serialize};
use serde_json::json;

pub mod delivery;

/// What an alert is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    /// A cell's scores moved beyond the gate (exit 1).
    ParityFailure,
    /// A metric's delta grew against the accepted one (the parity ratchet).
    RatchetGrowth,
    /// The speedup shrank, or the fork's own time grew, against the previous comparable run.
    Slowdown,
    /// A retuning check failed (exit 4).
    RetuneFail,
    /// A sweep's default configuration is beaten by another that kept parity.
    StaleSweep,
    /// The run could not be carried out (exit 3): a build failed, a binary crashed, …
    NotCarriedOut,
    /// An agent was lost mid-job (its job was requeued or failed).
    AgentLost,
}

impl AlertKind {
    pub const ALL: [AlertKind; 7] = [
        AlertKind::ParityFailure,
        AlertKind::RatchetGrowth,
        AlertKind::Slowdown,
        AlertKind::RetuneFail,
        AlertKind::StaleSweep,
        AlertKind::NotCarriedOut,
        AlertKind::AgentLost,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AlertKind::ParityFailure => "parity_failure",
            AlertKind::RatchetGrowth => "ratchet_growth",
            AlertKind::Slowdown => "slowdown",
            AlertKind::RetuneFail => "retune_fail",
            AlertKind::StaleSweep => "stale_sweep",
            AlertKind::NotCarriedOut => "not_carried_out",
            AlertKind::AgentLost => "agent_lost",
        }
    }

    fn headline(self) -> &'static str {
        match self {
            AlertKind::ParityFailure => "parity failed",
            AlertKind::RatchetGrowth => "a parity delta grew",
            AlertKind::Slowdown => "slower than the previous run",
            AlertKind::RetuneFail => "a retuning check failed",
            AlertKind::StaleSweep => "the tuned default is stale",
            AlertKind::NotCarriedOut => "the run could not be carried out",
            AlertKind::AgentLost => "an agent was lost",
        }
    }
}

impl fmt::Display for AlertKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AlertKind {
    type Err = String;
    fn from_str(text: &str) -> Result<AlertKind, String> {
        AlertKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = AlertKind::ALL.iter().map(|k| k.as_str()).collect();
                format!("`{text}` is not an alert; use one of {}", names.join(", "))
            })
    }
}

/// How an endpoint wants its alerts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PayloadFormat {
    /// The generic JSON document.
    Json,
    /// A Slack incoming-webhook message.
    Slack,
}

/// One place alerts go.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// How the store and the report name it (never its URL: a webhook URL is a secret).
    pub name: String,
    pub url: String,
    pub format: PayloadFormat,
    /// The alerts it wants; every kind when empty.
    pub events: Vec<AlertKind>,
    /// HMAC-SHA256 key for `X-Abfleet-Signature-256` (generic JSON only).
    pub secret: Option<Vec<u8>>,
    /// A private CA (PEM) the endpoint's certificate chains to, besides the system's.
    pub ca_pem: Option<String>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("name", &self.name)
            .field("url", &super::http_client::url_origin(&self.url))
            .field("format", &self.format)
            .field("events", &self.events)
            .field("secret", &self.secret.as_ref().map(|_| "…"))
            .finish()
    }
}

impl Endpoint {
    pub fn wants(&self, kind: AlertKind) -> bool {
        self.events.is_empty() || self.events.contains(&kind)
    }
}

/// Where alerts go and how hard delivery tries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyConfig {
    pub endpoints: Vec<Endpoint>,
    /// The web view's base URL as people reach it (`https://abfleet.example:8443`): each
    /// alert links `{report_url}/runs/{run_id}`. Without it alerts name the run id only.
    pub report_url: Option<String>,
    /// The first retry waits this long; each next one twice as long as the one before.
    pub retry_after: Duration,
    /// Attempts per alert and endpoint before it is given up (and logged as an error).
    pub max_attempts: u32,
    /// Each attempt's time limit.
    pub timeout: Duration,
}

impl Default for NotifyConfig {
    fn default() -> Self {
        NotifyConfig {
            endpoints: Vec::new(),
            report_url: None,
            retry_after: Duration::from_secs(5),
            max_attempts: 8,
            timeout: Duration::from_secs(15),
        }
    }
}

/// One alert, before it is put into an endpoint's payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    pub kind: AlertKind,
    pub run_id: String,
    pub run_name: String,
    pub trigger: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_note: Option<String>,
    pub fork_ref: String,
    pub upstream_ref: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// One line: what happened, where.
    pub summary: String,
    /// What exactly: a line per cell, flag, finding or error.
    pub details: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_url: Option<String>,
    /// What makes two alerts the same one (a finish retried, an agent lost twice): the store
    /// keeps one per run, endpoint, kind and key.
    pub key: String,
}

impl Alert {
    /// The alert's delivery id (`X-Abfleet-Delivery`, and `delivery_id` in a JSON payload):
    /// `RUN/KIND/HASH`, HASH the first 16 hex digits of the SHA-256 of its key. The store
    /// keeps one alert per run, kind and key (per endpoint), so the id is the same on every
    /// retry and after a restart, and a receiver drops what it already has by it.
    pub fn delivery_id(&self) -> String {
        delivery_id(&self.run_id, self.kind.as_str(), &self.key)
    }
}

/// The delivery id of the alert of `run_id`, `kind` and `key` (`Alert::delivery_id`).
pub fn delivery_id(run_id: &str, kind: &str, key: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(key.as_bytes());
    let hash: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{run_id}/{kind}/{hash}")
}

/// The most detail lines an alert carries; the report has the rest.
const MAX_DETAILS: usize = 20;

/// The alerts of a finished run: per generation, each kind that applies once.
pub fn alerts_for_finished_run(report: &Report, report_url: Option<&str>) -> Vec<Alert> {
    let fallback;
    let sections: &[GenerationSection] = if report.generations.is_empty() {
        fallback = [GenerationSection::from_report("any", report)];
        &fallback
    } else {
        &report.generations
    };
    let mut alerts = Vec::new();
    for section in sections {
        for (kind, details) in findings_of(report, section) {
            if details.is_empty() {
                continue;
            }
            alerts.push(alert(report, report_url, kind, section, details));
        }
    }
    alerts
}

/// What each kind found on one generation (empty: nothing).
fn findings_of(report: &Report, section: &GenerationSection) -> Vec<(AlertKind, Vec<String>)> {
    let cells: Vec<&abfleet_core::cell::CellResult> = report.cells_of(section).collect();
    let parity: Vec<String> = cells
        .iter()
        .filter(|cell| cell.parity == CellParity::Fail)
        .flat_map(|cell| {
            cell.parity_failures.iter().map(move |failure| {
                format!("{}/{}: {}", cell.fixture, cell.workload, failure.message)
            })
        })
        .collect();
    let flags = section
        .since_previous
        .as_ref()
        .map(|since| since.flags.as_slice())
        .unwrap_or_default();
    let flag_lines = |wanted: &[FlagKind]| -> Vec<String> {
        flags
            .iter()
            .filter(|flag| wanted.contains(&flag.kind))
            .map(|flag| format!("{}/{}: {}", flag.fixture, flag.workload, flag.detail))
            .collect()
    };
    let not_carried_out =
        if section.exit_code == abfleet_core::exit::NOT_CARRIED_OUT || section.status == "failed" {
            let mut lines = section.errors.clone();
            lines.extend(
                section
                    .missing_cells
                    .iter()
                    .map(|c| format!("not measured: {c}")),
            );
            if lines.is_empty() {
                lines.push(format!("the job ended `{}`", section.status));
            }
            lines
        } else {
            Vec::new()
        };
    vec![
        (
            AlertKind::ParityFailure,
            if section.score_parity == ScoreParity::Fail && parity.is_empty() {
                vec!["score parity FAIL (see the report)".to_string()]
            } else {
                parity
            },
        ),
        (
            AlertKind::RatchetGrowth,
            flag_lines(&[FlagKind::ParityGrowth]),
        ),
        (
            AlertKind::Slowdown,
            flag_lines(&[FlagKind::SpeedupShrank, FlagKind::ForkSlower]),
        ),
        (
            AlertKind::RetuneFail,
            section
                .findings
                .iter()
                .filter(|finding| finding.severity == Severity::Fail)
                .map(|finding| {
                    format!(
                        "{} {} ({}): {}",
                        finding.check, finding.subject, finding.backend, finding.verdict
                    )
                })
                .collect(),
        ),
        (
            AlertKind::StaleSweep,
            section
                .sweep
                .iter()
                .filter(|sweep| sweep.default_verdict == Some(DefaultVerdict::Stale))
                .map(|sweep| sweep.verdict_line.clone())
                .collect(),
        ),
        (AlertKind::NotCarriedOut, not_carried_out),
    ]
}

fn alert(
    report: &Report,
    report_url: Option<&str>,
    kind: AlertKind,
    section: &GenerationSection,
    mut details: Vec<String>,
) -> Alert {
    let generation = (section.key != "any").then(|| section.key.clone());
    let host = section
        .host
        .as_ref()
        .or(report.host.as_ref())
        .map(|inventory| inventory.hostname.clone());
    let place = match (&generation, &host) {
        (Some(g), Some(h)) => format!(" on {g} ({h})"),
        (Some(g), None) => format!(" on {g}"),
        (None, Some(h)) => format!(" on {h}"),
        (None, None) => String::new(),
    };
    let summary = format!(
        "{}: {}{place}: {}",
        report.name,
        kind.headline(),
        details.first().cloned().unwrap_or_default()
    );
    if details.len() > MAX_DETAILS {
        let more = details.len() - MAX_DETAILS;
        details.truncate(MAX_DETAILS);
        details.push(format!("… and {more} more in the report"));
    }
    Alert {
        kind,
        run_id: report.run_id.clone(),
        run_name: report.name.clone(),
        trigger: report.trigger.clone(),
        trigger_note: report.trigger_note.clone(),
        fork_ref: report.fork_ref.clone(),
        upstream_ref: report.upstream_ref.clone(),
        key: generation.clone().unwrap_or_else(|| "any".to_string()),
        generation,
        host,
        summary,
        details,
        report_url: report_link_text(report_url, &report.run_id),
    }
}

/// An agent lost mid-job: said when it happens, not when the run ends.
pub fn agent_lost_alert(
    run_id: &str,
    run_name: &str,
    job_id: &str,
    attempt: u32,
    reason: &str,
    report_url: Option<&str>,
) -> Alert {
    Alert {
        kind: AlertKind::AgentLost,
        run_id: run_id.to_string(),
        run_name: run_name.to_string(),
        trigger: String::new(),
        trigger_note: None,
        fork_ref: String::new(),
        upstream_ref: String::new(),
        generation: None,
        host: None,
        summary: format!("{run_name}: {}: {reason}", AlertKind::AgentLost.headline()),
        details: vec![format!("job {job_id}, attempt {attempt}: {reason}")],
        report_url: report_link_text(report_url, run_id),
        key: format!("{job_id}/{attempt}"),
    }
}

/// The body an endpoint gets for `alert`.
pub fn payload(format: PayloadFormat, alert: &Alert) -> serde_json::Value {
    match format {
        PayloadFormat::Json => json!({
            "delivery_id": alert.delivery_id(),
            "event": alert.kind.as_str(),
            "summary": alert.summary,
            "details": alert.details,
            "run": {
                "id": alert.run_id,
                "name": alert.run_name,
                "trigger": alert.trigger,
                "trigger_note": alert.trigger_note,
                "fork_ref": alert.fork_ref,
                "upstream_ref": alert.upstream_ref,
            },
            "generation": alert.generation,
            "host": alert.host,
            "report_url": alert.report_url,
            "sent_by": concat!("abfleet ", env!("CARGO_PKG_VERSION")),
        }),
        PayloadFormat::Slack => {
            let mut text = format!("*abfleet* — {}", slack_escape(&alert.summary));
            for line in alert.details.iter().skip(1).take(5) {
                text.push_str(&format!("\n• {}", slack_escape(line)));
            }
            match &alert.report_url {
                Some(url) => {
                    text.push_str(&format!("\n<{url}|the report of run {}>", alert.run_id))
                }
                None => text.push_str(&format!("\nrun {}", alert.run_id)),
            }
            json!({ "text": text })
        }
    }
}

/// Slack's three control characters in message text.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests;
