//! A run's report as callers get it (`GetReport`, `abfleet report`, the web view). A finished
//! run's report — its own events assembled, each generation compared with the previous runs —
//! is assembled once, when the run finishes (`finishing::finish_run_if_complete` stores it with the
//! run's state and exit code), and served from the store as its JSON after that
//! (`store/reports.rs`). A run still going is assembled at each read. A finished run without
//! a stored report (finished before reports were stored, or its report dropped because what
//! it compares with changed) is assembled at its first read and stored then.

use abfleet_core::report::Report;
use abfleet_core::RunId;
use tracing::warn;

use super::FleetError;
use super::Reports;
use crate::store::{ReportToStore, StoredReport};

/// A report as a read found it.
enum Served {
    /// Stored, as its JSON.
    Stored(String),
    /// Assembled for this read, and its JSON when it was made to be stored.
    Assembled {
        report: Box<Report>,
        json: Option<String>,
    },
}

impl Reports {
    /// The run's report as JSON (compact; `Report::from_json` reads it).
    pub async fn report_json(&self, run_id: RunId) -> Result<String, FleetError> {
        let json = match self.served(run_id).await? {
            Served::Stored(json)
            | Served::Assembled {
                json: Some(json), ..
            } => json,
            Served::Assembled { report, json: None } => report_to_json(&report),
        };
        // Alerts are sent after the report is kept: they join it as it is served. A run
        // without any (most) costs one indexed read and no decoding.
        let sent = self
            .ground
            .store()
            .notifications()
            .notifications_of(run_id)
            .await?;
        if sent.is_empty() {
            return Ok(json);
        }
        let mut report = Report::from_json(&json).map_err(|err| {
            FleetError::Store(crate::CoordinatorError::Corrupt(format!(
                "the stored report of run {run_id}: {err}"
            )))
        })?;
        report.notifications = sent;
        Ok(report_to_json(&report))
    }

    /// The run's report.
    pub async fn report(&self, run_id: RunId) -> Result<Report, FleetError> {
        let mut report = match self.served(run_id).await? {
            Served::Stored(json) => Report::from_json(&json).map_err(|err| {
                FleetError::Store(crate::CoordinatorError::Corrupt(format!(
                    "the stored report of run {run_id}: {err}"
                )))
            })?,
            Served::Assembled { report, .. } => *report,
        };
        report.notifications = self
            .ground
            .store()
            .notifications()
            .notifications_of(run_id)
            .await?;
        Ok(report)
    }

    async fn served(&self, run_id: RunId) -> Result<Served, FleetError> {
        let (finished, basis) = match self.ground.store().reports().stored_report(run_id).await? {
            None => return Err(FleetError::UnknownRun(run_id)),
            Some(StoredReport::Stored(json)) => return Ok(Served::Stored(json)),
            Some(StoredReport::Missing { finished, basis }) => (finished, basis),
        };
        let report = Box::new(self.fresh_report(run_id).await?);
        if !finished {
            return Ok(Served::Assembled { report, json: None });
        }
        let json = report_to_json(&report);
        let keep = ReportToStore {
            json: json.clone(),
            basis,
            now_ms: self.ground.now_ms(),
        };
        // Served whether or not it could be kept: kept, the next read is one row.
        if let Err(err) = self
            .ground
            .store()
            .reports()
            .store_report(run_id, keep)
            .await
        {
            warn!(run_id = %run_id, error = %err, "failed to keep the assembled report; it is assembled again next time");
        }
        Ok(Served::Assembled {
            report,
            json: Some(json),
        })
    }
}

/// A report's JSON as the store keeps it and `GetReport` sends it (compact: half the bytes of
/// report.json's pretty form).
pub(super) fn report_to_json(report: &Report) -> String {
    serde_json::to_string(report).expect("a report always serialises")
}
