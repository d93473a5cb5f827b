//! One cell of the A/B table (one fixture × one workload): what each side measured, the
//! speedup, and the parity verdict. The JSON shape is the fork's own A/B document's cell
//! (docs/report-format.md), with additions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::parity::{self, ParityFailure};
use crate::scores::Scores;
use crate::spec::JobSpec;
use crate::stats;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SideStatus {
    /// Ran every time and wrote scores.
    Ok,
    /// Rejected the workload the way the tool rejects an unknown feature.
    Absent,
    /// Could not be measured: build failed, crashed, timed out, or wrote no frames.
    Unavailable,
}

/// What the agent measured for one side of one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideMeasurement {
    pub status: SideStatus,
    /// Wall seconds of each timed run, in run order.
    pub times: Vec<f64>,
    /// User + system CPU seconds of each timed run.
    pub cpu_times: Vec<f64>,
    /// Wall seconds of the discarded warm-up runs.
    pub warmup_times: Vec<f64>,
    pub scores: Option<Scores>,
    pub returncode: Option<i32>,
    pub error: Option<String>,
    pub stderr_tail: Option<String>,
}

impl SideMeasurement {
    pub fn unavailable(error: impl Into<String>) -> Self {
        SideMeasurement {
            status: SideStatus::Unavailable,
            times: Vec::new(),
            cpu_times: Vec::new(),
            warmup_times: Vec::new(),
            scores: None,
            returncode: None,
            error: Some(error.into()),
            stderr_tail: None,
        }
    }
}

/// One side of a finished cell, in the report's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideResult {
    pub status: SideStatus,
    pub times: Vec<f64>,
    pub cpu_times: Vec<f64>,
    pub warmup_times: Vec<f64>,
    pub median_time: Option<f64>,
    pub best_time: Option<f64>,
    pub spread_pct: Option<f64>,
    pub median_fps: Option<f64>,
    pub nframes: Option<u64>,
    pub load_avg_1min: [f64; 2],
    /// Pooled mean per metric.
    pub pooled: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returncode: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr_tail: Option<String>,
    /// Per-frame scores of the first timed run (for parity and later inspection).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scores: Option<Scores>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellParity {
    Ok,
    Fail,
    AbsentUpstream,
    Unavailable,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellResult {
    /// Position in the spec's fixture × workload order; the store keeps one cell per index.
    pub index: u32,
    pub fixture: String,
    pub workload: String,
    pub upstream: SideResult,
    pub fork: SideResult,
    /// Upstream median / fork median; above 1 means the fork is faster.
    pub speedup: Option<f64>,
    pub score_delta: BTreeMap<String, f64>,
    pub max_frame_delta: BTreeMap<String, f64>,
    pub max_frame_delta_at: BTreeMap<String, u64>,
    pub frames_over_gate: BTreeMap<String, u64>,
    pub parity: CellParity,
    pub parity_failures: Vec<ParityFailure>,
    pub renamed_metrics: BTreeMap<String, String>,
    pub only_upstream_metrics: Vec<String>,
    pub only_fork_metrics: Vec<String>,
    /// The fork's median is under `min_useful_seconds`: process start-up weighs on the number.
    pub startup_dominated: bool,
}

/// Everything needed to turn two measurements into a cell.
pub struct CellInput {
    pub index: u32,
    pub fixture: String,
    pub workload: String,
    pub upstream: SideMeasurement,
    pub fork: SideMeasurement,
    pub load_avg_1min: [f64; 2],
}

impl CellResult {
    pub fn evaluate(input: CellInput, spec: &JobSpec) -> CellResult {
        let upstream = side_result(&input.upstream, input.load_avg_1min);
        let fork = side_result(&input.fork, input.load_avg_1min);
        let both_ok = upstream.status == SideStatus::Ok && fork.status == SideStatus::Ok;
        let speedup = match (both_ok, upstream.median_time, fork.median_time) {
            (true, Some(u), Some(f)) if f > 0.0 => Some(u / f),
            _ => None,
        };
        let mut cell = CellResult {
            index: input.index,
            fixture: input.fixture.clone(),
            workload: input.workload.clone(),
            speedup,
            score_delta: BTreeMap::new(),
            max_frame_delta: BTreeMap::new(),
            max_frame_delta_at: BTreeMap::new(),
            frames_over_gate: BTreeMap::new(),
            parity: CellParity::Unavailable,
            parity_failures: Vec::new(),
            renamed_metrics: BTreeMap::new(),
            only_upstream_metrics: Vec::new(),
            only_fork_metrics: Vec::new(),
            startup_dominated: fork
                .median_time
                .is_some_and(|t| t < spec.measure.min_useful_seconds),
            upstream,
            fork,
        };
        cell.parity = match (cell.upstream.status, cell.fork.status) {
            (SideStatus::Ok, SideStatus::Ok) => {
                let (Some(up), Some(fk)) = (&input.upstream.scores, &input.fork.scores) else {
                    unreachable!("an ok side always carries scores")
                };
                let outcome = parity::compare(up, fk, &spec.parity, spec.measure.max_score_delta);
                let passed = outcome.passed();
                cell.score_delta = outcome.score_delta;
                cell.max_frame_delta = outcome.max_frame_delta;
                cell.max_frame_delta_at = outcome.max_frame_delta_at;
                cell.frames_over_gate = outcome.frames_over_gate;
                cell.parity_failures = outcome.failures;
                cell.renamed_metrics = outcome.renamed;
                cell.only_upstream_metrics = outcome.only_upstream;
                cell.only_fork_metrics = outcome.only_fork;
                if passed {
                    CellParity::Ok
                } else {
                    CellParity::Fail
                }
            }
            (SideStatus::Absent, SideStatus::Ok) => {
                cell.only_fork_metrics = cell.fork.pooled.keys().cloned().collect();
                CellParity::AbsentUpstream
            }
            _ => CellParity::Unavailable,
        };
        cell
    }

    /// Unavailable sides that stop the run from being carried out (exit 3).
    pub fn is_unavailable(&self) -> bool {
        self.parity == CellParity::Unavailable
    }
}

fn side_result(m: &SideMeasurement, load_avg_1min: [f64; 2]) -> SideResult {
    let median_time = stats::median(&m.times);
    let nframes = m.scores.as_ref().map(|s| s.frames.len() as u64);
    let median_fps = match (median_time, nframes) {
        (Some(t), Some(n)) if t > 0.0 => Some(n as f64 / t),
        _ => None,
    };
    SideResult {
        status: m.status,
        times: m.times.clone(),
        cpu_times: m.cpu_times.clone(),
        warmup_times: m.warmup_times.clone(),
        median_time,
        best_time: stats::best(&m.times),
        spread_pct: stats::spread_pct(&m.times),
        median_fps,
        nframes,
        load_avg_1min,
        pooled: m
            .scores
            .as_ref()
            .map(Scores::pooled_means)
            .unwrap_or_default(),
        returncode: m.returncode,
        error: m.error.clone(),
        stderr_tail: m.stderr_tail.clone(),
        scores: m.scores.clone(),
    }
}
