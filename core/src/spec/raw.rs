//! The TOML form of a job spec, as a person writes it: optional keys and their defaults, a
//! shared `[build]` recipe with per-side overrides, one table per fixture file. Unknown keys
//! are refused (`deny_unknown_fields`). Nothing here checks values; `validate` turns this
//! form into a [`JobSpec`](super::JobSpec).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::backends::BackendsSpec;
use super::model::{
    Allowance, AllowedMissing, Fanout, Generator, OutputFormat, PixelFormat, WorkloadSpec,
};
use super::sweep::RawSweep;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSpec {
    pub(super) name: String,
    #[serde(default)]
    pub(super) description: String,
    /// Absent in a sweep spec, which times the fork alone.
    pub(super) upstream: Option<RawSide>,
    pub(super) fork: RawSide,
    #[serde(default)]
    pub(super) build: RawRecipe,
    pub(super) command: RawCommand,
    #[serde(default)]
    pub(super) fixtures: Vec<RawFixture>,
    #[serde(default)]
    pub(super) workloads: Vec<WorkloadSpec>,
    #[serde(default)]
    pub(super) measure: RawMeasure,
    #[serde(default)]
    pub(super) parity: RawParity,
    pub(super) targets: Option<RawTargets>,
    #[serde(default)]
    pub(super) backends: BackendsSpec,
    /// A retuning sweep of the fork instead of an A/B comparison (docs/sweeps.md).
    pub(super) sweep: Option<RawSweep>,
}

/// `[targets]`: every key optional (`["cpu"]`, `["*"]`, `["*"]`, `per-generation`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTargets {
    pub(super) backends: Option<Vec<String>>,
    pub(super) generations: Option<Vec<String>>,
    pub(super) vendors: Option<Vec<String>>,
    pub(super) fanout: Option<Fanout>,
}

/// `[upstream]` / `[fork]`: a source (`git` + `rev`, or `path`) and recipe overrides.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSide {
    pub(super) git: Option<String>,
    pub(super) rev: Option<String>,
    pub(super) path: Option<PathBuf>,
    #[serde(default)]
    pub(super) build: RawRecipe,
}

/// `[build]` and `[SIDE.build]`: a side's own key wins over the shared one.
#[derive(Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRecipe {
    pub(super) commands: Option<Vec<Vec<String>>>,
    pub(super) binary: Option<PathBuf>,
    pub(super) env: Option<BTreeMap<String, String>>,
    pub(super) toolchain: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCommand {
    pub(super) template: Vec<String>,
    #[serde(default = "default_output_format")]
    pub(super) output_format: OutputFormat,
    #[serde(default = "default_unknown_feature_exit_code")]
    pub(super) unknown_feature_exit_code: i32,
}

fn default_output_format() -> OutputFormat {
    OutputFormat::Json
}

fn default_unknown_feature_exit_code() -> i32 {
    255
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFixture {
    pub(super) name: String,
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) bitdepth: u8,
    pub(super) pixel_format: PixelFormat,
    pub(super) frames: u32,
    pub(super) reference: RawFixtureFile,
    pub(super) distorted: RawFixtureFile,
}

/// One fixture file: exactly one of `path`, `url` or `generate` (checked in `validate`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFixtureFile {
    pub(super) path: Option<PathBuf>,
    pub(super) url: Option<String>,
    pub(super) generate: Option<Generator>,
    pub(super) seed: Option<u64>,
    pub(super) sha256: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMeasure {
    #[serde(default = "default_warmup")]
    pub(super) warmup: u32,
    #[serde(default = "default_runs")]
    pub(super) runs: u32,
    #[serde(default = "default_threads")]
    pub(super) threads: u32,
    #[serde(default = "default_min_useful_seconds")]
    pub(super) min_useful_seconds: f64,
    #[serde(default = "default_max_score_delta")]
    pub(super) max_score_delta: f64,
    pub(super) max_frame_delta: Option<f64>,
    #[serde(default = "default_timeout_seconds")]
    pub(super) timeout_seconds: f64,
    pub(super) seed: Option<u64>,
    pub(super) max_runs: Option<u32>,
    #[serde(default = "default_max_cell_seconds")]
    pub(super) max_cell_seconds: f64,
    #[serde(default = "default_practical_threshold")]
    pub(super) practical_threshold: f64,
    #[serde(default = "default_max_output_bytes")]
    pub(super) max_output_bytes: u64,
}

impl Default for RawMeasure {
    fn default() -> Self {
        RawMeasure {
            warmup: default_warmup(),
            runs: default_runs(),
            threads: default_threads(),
            min_useful_seconds: default_min_useful_seconds(),
            max_score_delta: default_max_score_delta(),
            max_frame_delta: None,
            timeout_seconds: default_timeout_seconds(),
            seed: None,
            max_runs: None,
            max_cell_seconds: default_max_cell_seconds(),
            practical_threshold: default_practical_threshold(),
            max_output_bytes: default_max_output_bytes(),
        }
    }
}

fn default_max_output_bytes() -> u64 {
    super::model::DEFAULT_MAX_OUTPUT_BYTES
}
fn default_warmup() -> u32 {
    1
}
fn default_runs() -> u32 {
    5
}
fn default_threads() -> u32 {
    1
}
fn default_min_useful_seconds() -> f64 {
    2.0
}
fn default_max_score_delta() -> f64 {
    1e-5
}
fn default_timeout_seconds() -> f64 {
    600.0
}
/// Adaptive by default: five pairs cannot show a difference with a signed-rank test
/// (its smallest two-sided p is 1/16), so an unsure cell takes up to this many.
pub(super) const DEFAULT_MAX_RUNS: u32 = 20;

fn default_max_cell_seconds() -> f64 {
    600.0
}
fn default_practical_threshold() -> f64 {
    0.02
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawParity {
    #[serde(default)]
    pub(super) renames: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) allow: BTreeMap<String, Allowance>,
    #[serde(default)]
    pub(super) allow_missing: Vec<AllowedMissing>,
}
