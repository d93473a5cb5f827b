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
    /// Pooled mean per metric of the backend's run (`null` kept as such): what the report's
    /// cross-generation parity table compares with the CPU paths.
    #[serde(
        default,
        skip_serializing_if = "std::collections::BTreeMap::is_empty",
        with = "crate::scores::nullable::map"
    )]
    pub pooled: std::collections::BTreeMap<String, f64>,
    /// The backend's scores against the fork's own CPU path on the same binary
    /// (`--backend cpu`), when the spec asks for it: the gate a backend's speed depends on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_parity: Option<BackendParity>,
    /// 1-minute load average before and after the cell.
    #[serde(default)]
    pub load_avg_1min: Vec<f64>,
    /// The same cell in the previous run on this generation, filled in by the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<PreviousTiming>,
}

/// A backend's scores against the fork's CPU path, frame by frame over every shared metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackendParity {
    /// Within the gate on every shared metric's pooled mean.
    pub passed: bool,
    /// The CPU path's pooled means (what the backend is held to), per metric.
    #[serde(default, with = "crate::scores::nullable::map")]
    pub cpu_pooled: std::collections::BTreeMap<String, f64>,
    /// Pooled-mean delta (backend − CPU) per shared metric.
    #[serde(with = "crate::scores::nullable::map")]
    pub pooled_delta: std::collections::BTreeMap<String, f64>,
    /// The largest per-frame |delta| over the shared metrics and where (`psnr_y (frame 3)`);
    /// infinite (`null`) when one side scored a frame null that the other did not.
    #[serde(with = "crate::scores::nullable::number")]
    pub max_frame_delta: f64,
    pub max_frame_delta_at: String,
    /// Metrics the CPU path wrote and the backend did not: a failed gate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only_one_side: Vec<String>,
    /// Metrics only the backend wrote (the model's Vulkan extractors add their own): shown,
    /// not gated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only_backend: Vec<String>,
    /// `[measure] max_score_delta` (a metric's `[parity.allow]` allowance replaces it for
    /// that metric, as in the A/B gate).
    pub gate: f64,
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
            pooled: std::collections::BTreeMap::new(),
            cpu_parity: None,
            load_avg_1min: Vec::new(),
            previous: None,
        }
    }
}

impl BackendParity {
    /// The backend's scores against the CPU path's: pooled means per shared metric held to
    /// the spec's gate and allowances, the largest per-frame difference over the shared
    /// metrics reported (not gated, as for A/B cells).
    pub fn judge(
        cpu: &crate::scores::Scores,
        backend: &crate::scores::Scores,
        gate: &crate::retune::isa_parity::Gate,
    ) -> Self {
        let (cpu_pooled, backend_pooled) = (cpu.pooled_means(), backend.pooled_means());
        let mut pooled_delta = std::collections::BTreeMap::new();
        let mut only_one_side = Vec::new();
        for (metric, c) in &cpu_pooled {
            match backend_pooled.get(metric) {
                Some(b) => {
                    let delta = if crate::scores::same_value(*c, *b) {
                        0.0
                    } else if c.is_finite() && b.is_finite() {
                        b - c
                    } else {
                        f64::INFINITY
                    };
                    pooled_delta.insert(metric.clone(), delta);
                }
                None => only_one_side.push(metric.clone()),
            }
        }
        let only_backend: Vec<String> = backend_pooled
            .keys()
            .filter(|m| !cpu_pooled.contains_key(*m))
            .cloned()
            .collect();
        let (max_frame_delta, max_frame_delta_at) = if cpu.frames.len() != backend.frames.len() {
            (
                f64::INFINITY,
                format!(
                    "{} frames against {}",
                    backend.frames.len(),
                    cpu.frames.len()
                ),
            )
        } else {
            crate::retune::isa_parity::largest_shared_frame_delta(cpu, backend)
        };
        let passed = only_one_side.is_empty()
            && !pooled_delta.is_empty()
            && pooled_delta
                .iter()
                .all(|(metric, d)| d.abs() <= gate.for_metric(metric))
            && cpu.frames.len() == backend.frames.len();
        BackendParity {
            passed,
            cpu_pooled,
            pooled_delta,
            max_frame_delta,
            max_frame_delta_at,
            only_one_side,
            only_backend,
            gate: gate.gates.max_score_delta,
        }
    }

    /// What the gate found, in one line for people: `agrees with the CPU path (largest
    /// pooled delta +1.2e-7 on psnr_y)` or `differs from the CPU path: vif_scale0 by
    /// +1.0e-1 (gate 1e-5); largest frame delta 1.1e-1 at …`.
    pub fn words(&self) -> String {
        let largest = self
            .largest_pooled_delta()
            .map_or("no shared metric".to_string(), |(metric, delta)| {
                format!("{delta:+.1e} on {metric}")
            });
        let one_side = if self.only_one_side.is_empty() {
            String::new()
        } else {
            format!(
                "; the backend did not write {}",
                self.only_one_side.join(", ")
            )
        };
        if self.passed {
            format!("agrees with the CPU path (largest pooled delta {largest})")
        } else {
            format!(
                "differs from the CPU path: largest pooled delta {largest} (gate {:.0e}), largest frame delta {:.1e} at {}{one_side}",
                self.gate, self.max_frame_delta, self.max_frame_delta_at
            )
        }
    }

    /// The shared metric whose pooled delta is largest in size, with its delta.
    pub fn largest_pooled_delta(&self) -> Option<(&str, f64)> {
        self.pooled_delta
            .iter()
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
            .map(|(m, d)| (m.as_str(), *d))
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
    use crate::retune::isa_parity::Gate;

    fn cell(median: Option<f64>) -> BackendCell {
        let mut cell = BackendCell::skipped("cuda", "f", "psnr", "x".into());
        cell.median_seconds = median;
        cell
    }

    fn scores(metrics: &[(&str, &[f64])]) -> crate::scores::Scores {
        let frames = metrics[0].1.len();
        crate::scores::Scores {
            tool_version: None,
            fps: None,
            frames: (0..frames)
                .map(|i| crate::scores::FrameScores {
                    frame_num: i as u64,
                    metrics: metrics
                        .iter()
                        .map(|(name, values)| (name.to_string(), values[i]))
                        .collect(),
                })
                .collect(),
            pooled: Default::default(),
            printed_decimals: Some(6),
        }
    }

    /// The model on Vulkan writes its extractors' own metrics besides the CPU's: shown, not
    /// failed; a CPU metric the backend lacks fails; a null on one side is an infinite delta
    /// that survives the JSON a cell travels as.
    #[test]
    fn a_backend_is_gated_on_the_cpu_paths_metrics() {
        let cpu = scores(&[("vif", &[0.5, 0.6]), ("vmaf", &[80.0, 81.0])]);
        let vulkan = scores(&[
            ("vif", &[0.6, 0.7]),
            ("vmaf", &[80.0, 81.0]),
            ("vif_vulkan_extra", &[1.0, 1.0]),
        ]);
        let parity = BackendParity::judge(&cpu, &vulkan, &Gate::plain(1e-5));
        assert!(!parity.passed);
        assert_eq!(parity.only_backend, ["vif_vulkan_extra"]);
        assert!(parity.only_one_side.is_empty());
        assert_eq!(parity.largest_pooled_delta().map(|(m, _)| m), Some("vif"));
        assert!(
            parity.words().contains("differs from the CPU path"),
            "{}",
            parity.words()
        );
        let same = BackendParity::judge(&cpu, &cpu, &Gate::plain(1e-5));
        assert!(same.passed && same.max_frame_delta == 0.0, "{same:?}");
        let missing =
            BackendParity::judge(&cpu, &scores(&[("vif", &[0.5, 0.6])]), &Gate::plain(1e-5));
        assert!(!missing.passed);
        assert_eq!(missing.only_one_side, ["vmaf"]);
        let null = BackendParity::judge(
            &scores(&[("psnr_hvs_cb", &[f64::INFINITY])]),
            &scores(&[("psnr_hvs_cb", &[40.0])]),
            &Gate::plain(1e-5),
        );
        let mut cell = BackendCell::new("vulkan", "f", "psnr_hvs", BackendCellStatus::Measured);
        cell.cpu_parity = Some(null);
        let json = serde_json::to_string(&cell).unwrap();
        let back: BackendCell = serde_json::from_str(&json).unwrap();
        assert_eq!(back.cpu_parity.unwrap().max_frame_delta, f64::INFINITY);
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
