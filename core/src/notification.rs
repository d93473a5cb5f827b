//! An alert the coordinator sent (or is sending) about a run, as the run's report lists it:
//! which alert, to which endpoint (by name, never its URL), and how delivery went. Attached
//! by the coordinator when the report is served, never part of the assembly: alerts are sent
//! after the run finished.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotificationRecord {
    /// `parity_failure`, `slowdown`, `agent_lost`, … (docs/operations.md, "Alerts").
    pub kind: String,
    /// The configured endpoint's name.
    pub endpoint: String,
    /// The generation the alert is about, or `job/attempt` for a lost agent.
    pub key: String,
    /// The alert's one line.
    pub summary: String,
    /// `pending` (not sent yet, or retrying), `sent`, or `given_up` after its last attempt.
    pub state: String,
    pub attempts: u32,
    /// The endpoint's last HTTP status, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status: Option<u16>,
    /// Why the last attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When it was queued and when it was sent, UTC.
    pub created: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent: Option<String>,
}

impl NotificationRecord {
    /// `slowdown to ops-slack: sent (HTTP 200)`, as report.md lists it.
    pub fn line(&self) -> String {
        let how = match self.state.as_str() {
            "sent" => format!(
                "sent{}",
                self.last_status
                    .map_or(String::new(), |status| format!(" (HTTP {status})"))
            ),
            "given_up" => format!(
                "given up after {} attempts: {}",
                self.attempts,
                self.last_error.as_deref().unwrap_or("no reason recorded")
            ),
            _ if self.attempts == 0 => "queued".to_string(),
            _ => format!(
                "retrying ({} attempts so far): {}",
                self.attempts,
                self.last_error.as_deref().unwrap_or("no reason recorded")
            ),
        };
        format!("{} to {}: {how}", self.kind, self.endpoint)
    }
}
