//! A timed cell of the fork alone on a GPU backend (`--backend NAME`): upstream has no SYCL
//! or HIP backend and its CUDA backend covers other features, so these cells are compared
//! with the fork's own previous run on the same generation, never with upstream.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendCellStatus {
    /// Timed, and the output says the asked-for backend ran.
    Measured,
    /// Not run here, with the reason (no such device on this host, recorded inventory).
    Skipped,
    /// Run, but the backend did not engage (exit 100, another backend in the output, no
    /// metrics) or the binary failed.
    Failed,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackendCell {
    pub backend: String,
    pub fixture: String,
    pub workload: String,
    pub status: BackendCellStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Timed runs in seconds (the warm-up is not among them).
    #[serde(default)]
    pub times: Vec<f64>,
    pub median_seconds: Option<f64>,
    /// `(max - min) / median × 100`.
    pub spread_pct: Option<f64>,
    /// The backend the fork's output names (`"backend"` in its JSON).
    pub backend_reported: Option<String>,
    /// Keys in `frames[0].metrics`: a second check that the backend engaged.
    pub metric_keys: Option<u32>,
    /// 1-minute load average before and after the cell.
    #[serde(default)]
    pub load_avg_1min: Vec<f64>,
    /// The same cell in the previous run on this generation, filled in by the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<PreviousTiming>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreviousTiming {
    pub run_id: String,
    pub median_seconds: f64,
    /// `previous / now`: above 1 is faster now.
    pub speedup: f64,
}

impl BackendCell {
    pub fn label(&self) -> String {
        format!("{}/{}", self.fixture, self.workload)
    }

    pub fn skipped(backend: &str, fixture: &str, workload: &str, reason: String) -> Self {
        Self {
            reason: Some(reason),
            ..Self::new(backend, fixture, workload, BackendCellStatus::Skipped)
        }
    }

    /// A cell with nothing measured yet.
    pub fn new(backend: &str, fixture: &str, workload: &str, status: BackendCellStatus) -> Self {
        Self {
            backend: backend.into(),
            fixture: fixture.into(),
            workload: workload.into(),
            status,
            reason: None,
            times: Vec::new(),
            median_seconds: None,
            spread_pct: None,
            backend_reported: None,
            metric_keys: None,
            load_avg_1min: Vec::new(),
            previous: None,
        }
    }
}

/// Fills `previous` from the previous run's cells of the same backend, fixture and workload.
pub fn attach_previous(cells: &mut [BackendCell], previous: &[BackendCell], run_id: &str) {
    for cell in cells.iter_mut() {
        let Some(now) = cell.median_seconds else {
            continue;
        };
        let old = previous.iter().find(|p| {
            p.backend == cell.backend && p.fixture == cell.fixture && p.workload == cell.workload
        });
        if let Some(before) = old.and_then(|p| p.median_seconds) {
            cell.previous = Some(PreviousTiming {
                run_id: run_id.to_string(),
                median_seconds: before,
                speedup: if now > 0.0 { before / now } else { f64::NAN },
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(median: Option<f64>) -> BackendCell {
        let mut cell = BackendCell::skipped("cuda", "f", "psnr", "x".into());
        cell.median_seconds = median;
        cell
    }

    #[test]
    fn previous_is_the_same_cell_of_the_earlier_run() {
        let mut now = vec![cell(Some(0.5)), cell(None)];
        attach_previous(&mut now, &[cell(Some(1.0))], "run-1");
        let previous = now[0].previous.as_ref().unwrap();
        assert_eq!((previous.median_seconds, previous.speedup), (1.0, 2.0));
        assert!(now[1].previous.is_none());
    }
}
