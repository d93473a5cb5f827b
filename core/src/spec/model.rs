//! The validated job spec: what a run compares, on which inputs, with which workloads and
//! under which discipline. Only `validate` builds one from TOML and only `json` reads one
//! back, both through the same invariant checks, so a `JobSpec` in hand is always valid.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::backends::BackendsSpec;

/// A validated job spec. Paths are absolute. Its JSON form (the store, a submission, an
/// offer) is read back through the same invariant checks as the TOML form, so no path
/// deserializes one around validation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "super::json::JobSpecJson")]
pub struct JobSpec {
    pub name: String,
    pub description: String,
    pub upstream: SideSpec,
    pub fork: SideSpec,
    pub command: CommandSpec,
    pub fixtures: Vec<FixtureSpec>,
    pub workloads: Vec<WorkloadSpec>,
    pub measure: MeasureSpec,
    pub parity: ParitySpec,
    /// Which hosts run it; `None` means any one agent.
    pub targets: Option<TargetSpec>,
    /// Per-backend builds and retuning checks (`[backends.*]`, docs/retuning.md).
    #[serde(skip_serializing_if = "BackendsSpec::is_empty")]
    pub backends: BackendsSpec,
    /// A retuning sweep (`[sweep]`, docs/sweeps.md): the fork alone, each configuration of
    /// its tunables timed against the shipped default. `upstream` then mirrors `fork` and
    /// is never built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<super::sweep::SweepSpec>,
}

impl JobSpec {
    /// Number of (fixture, workload) cells; for a sweep, the configurations it plans to
    /// time (its progress counts those, and it stores no cells).
    pub fn cell_count(&self) -> usize {
        match &self.sweep {
            Some(sweep) => crate::sweep::plan(sweep, self.measure.seed)
                .configurations
                .len(),
            None => self.fixtures.len() * self.workloads.len(),
        }
    }

    /// Whether this is a retuning sweep rather than an A/B run.
    pub fn is_sweep(&self) -> bool {
        self.sweep.is_some()
    }
}

/// Which agents a run fans out to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    /// Backends to cover (default `["cpu"]`: the only honest A/B surface).
    pub backends: Vec<String>,
    /// Globs over generation keys, e.g. `cpu/x86-64-v4/*` (default `["*"]`).
    pub generations: Vec<String>,
    /// Globs over vendors (default `["*"]`).
    pub vendors: Vec<String>,
    pub fanout: Fanout,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fanout {
    /// One job per matching generation; the first free matching agent takes it.
    PerGeneration,
    /// One job per matching agent.
    PerAgent,
}

impl TargetSpec {
    pub fn matches(&self, generation: &crate::generation::Generation) -> bool {
        use crate::generation::glob_match;
        self.backends.iter().any(|b| b == &generation.backend)
            && self
                .generations
                .iter()
                .any(|g| glob_match(g, &generation.key))
            && self
                .vendors
                .iter()
                .any(|v| glob_match(v, &generation.vendor))
    }
}

/// One side of the comparison: where its source is and how to build it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SideSpec {
    pub source: SourceSpec,
    pub build: BuildRecipe,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum SourceSpec {
    /// A git repository (URL or local path to a repository) at a tag, branch or commit.
    Git { url: String, rev: String },
    /// A directory on the agent host, used as it is (content-hashed for the build cache).
    Path { path: PathBuf },
}

impl SourceSpec {
    /// The reference as a person asked for it: `v1.0.0`, a branch, or a path.
    pub fn requested(&self) -> String {
        match self {
            SourceSpec::Git { rev, .. } => rev.clone(),
            SourceSpec::Path { path } => path.display().to_string(),
        }
    }
}

/// How a side is built: argv lists run in order in the source tree, no shell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildRecipe {
    pub commands: Vec<Vec<String>>,
    /// The built binary, relative to the source tree.
    pub binary: PathBuf,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The command whose output fingerprints the compiler; part of the build cache key.
    pub toolchain: Vec<String>,
    /// Steps after `commands` that make `binary` and may fail on a host without everything a
    /// full link needs (a GPU backend's host code against older headers): their failure
    /// leaves the build usable for the checks, unlinked and untimed, with the reason.
    /// Empty for a side's own recipe: there a missing binary is a failed build.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub link: Vec<Vec<String>>,
}

/// How one timed command is formed: a template with placeholders, and how its output reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    pub template: Vec<String>,
    pub output_format: OutputFormat,
    /// The exit code with which the upstream tool rejects a feature it does not have.
    pub unknown_feature_exit_code: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    Json,
    Xml,
    Csv,
}

impl OutputFormat {
    pub fn extension(self) -> &'static str {
        match self {
            OutputFormat::Json => "json",
            OutputFormat::Xml => "xml",
            OutputFormat::Csv => "csv",
        }
    }
}

/// The placeholders a command template may use.
pub const TEMPLATE_PLACEHOLDERS: &[&str] = &[
    "binary",
    "reference",
    "distorted",
    "width",
    "height",
    "bitdepth",
    "pixel_format",
    "threads",
    "output",
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureSpec {
    pub name: String,
    pub width: u32,
    pub height: u32,
    pub bitdepth: u8,
    pub pixel_format: PixelFormat,
    pub frames: u32,
    pub reference: FixtureFile,
    pub distorted: FixtureFile,
}

impl FixtureSpec {
    /// Bytes of one frame of raw planar YUV in this geometry.
    pub fn frame_bytes(&self) -> u64 {
        let luma = u64::from(self.width) * u64::from(self.height);
        let (cw, ch) = self.pixel_format.chroma_divisors();
        let chroma_w = u64::from(self.width).div_ceil(cw);
        let chroma_h = u64::from(self.height).div_ceil(ch);
        let samples = luma + 2 * chroma_w * chroma_h;
        let bytes_per_sample = if self.bitdepth > 8 { 2 } else { 1 };
        samples * bytes_per_sample
    }

    pub fn file_bytes(&self) -> u64 {
        self.frame_bytes() * u64::from(self.frames)
    }

    /// The most bytes a tool's output for this fixture may have: [`MAX_OUTPUT_BYTES_PER_FRAME`]
    /// a frame and [`OUTPUT_BYTES_OVERHEAD`] besides. A larger output is not this input's
    /// scores, and is refused unread, so what a binary writes never sets an agent's memory
    /// (issue 38).
    pub fn max_output_bytes(&self) -> u64 {
        u64::from(self.frames) * MAX_OUTPUT_BYTES_PER_FRAME + OUTPUT_BYTES_OVERHEAD
    }
}

/// The most output bytes one frame may take: about fifty times what `vmaf` writes for a
/// frame with every feature on (some 1,300 bytes of JSON or XML).
pub const MAX_OUTPUT_BYTES_PER_FRAME: u64 = 64 * 1024;
/// The output bytes allowed besides the frames: the header, the pooled block, the aggregates.
pub const OUTPUT_BYTES_OVERHEAD: u64 = 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PixelFormat {
    #[serde(rename = "420")]
    Yuv420,
    #[serde(rename = "422")]
    Yuv422,
    #[serde(rename = "444")]
    Yuv444,
}

impl PixelFormat {
    /// Horizontal and vertical chroma subsampling divisors.
    pub fn chroma_divisors(self) -> (u64, u64) {
        match self {
            PixelFormat::Yuv420 => (2, 2),
            PixelFormat::Yuv422 => (2, 1),
            PixelFormat::Yuv444 => (1, 1),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PixelFormat::Yuv420 => "420",
            PixelFormat::Yuv422 => "422",
            PixelFormat::Yuv444 => "444",
        }
    }
}

/// Where an agent finds one fixture file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureFile {
    pub location: FixtureLocation,
    /// Expected sha256 (hex). Required for paths and URLs; for a generator it pins the output.
    pub sha256: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FixtureLocation {
    /// A file on the agent host.
    Path(PathBuf),
    /// Fetched once into the agent's cache, keyed by sha256.
    Url(String),
    /// Made by a deterministic generator built into the agent.
    Generate { generator: Generator, seed: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Generator {
    /// A moving test pattern (gradients, a checkerboard and a travelling square).
    MovingPattern,
    /// The moving pattern after a deterministic distortion (blur, noise, quantisation).
    MovingPatternDistorted,
}

impl Generator {
    pub fn name(self) -> &'static str {
        match self {
            Generator::MovingPattern => "moving-pattern",
            Generator::MovingPatternDistorted => "moving-pattern-distorted",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    pub name: String,
    pub args: Vec<String>,
    /// Metrics a side's output must hold for the workload to count as run: a side that
    /// exits 0 with none of them failed (a feature that could not load its model still
    /// writes frames of other metrics). Empty: derived from the `--feature NAME` arguments
    /// (a metric whose name contains `NAME`); see [`WorkloadSpec::expected_features`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expect_metrics: Vec<String>,
}

impl WorkloadSpec {
    /// The feature names this workload asks for with `--feature NAME[=opts]` (or
    /// `--feature=NAME`), in order.
    pub fn expected_features(&self) -> Vec<String> {
        let mut features = Vec::new();
        let mut args = self.args.iter();
        while let Some(arg) = args.next() {
            let value = if arg == "--feature" {
                args.next().map(String::as_str)
            } else {
                arg.strip_prefix("--feature=")
            };
            if let Some(value) = value {
                let name = value.split(['=', ':']).next().unwrap_or(value);
                if !name.is_empty() {
                    features.push(name.to_string());
                }
            }
        }
        features
    }

    /// Why `scores` does not hold what this workload asks for, when it does not: none of
    /// `expect_metrics`, or, without those, no metric named after one of the requested
    /// features. `None` when it does (or when the workload names no feature: a model row).
    pub fn missing_expected(&self, scores: &crate::scores::Scores) -> Option<String> {
        let names = scores.metric_names();
        let wrote = || {
            let mut list: Vec<&str> = names.iter().map(String::as_str).take(8).collect();
            if names.len() > 8 {
                list.push("…");
            }
            if list.is_empty() {
                "nothing".to_string()
            } else {
                list.join(", ")
            }
        };
        if !self.expect_metrics.is_empty() {
            if self.expect_metrics.iter().any(|m| names.contains(m)) {
                return None;
            }
            return Some(format!(
                "its output has none of the metrics workload `{}` expects ({}); it wrote: {}",
                self.name,
                self.expect_metrics.join(", "),
                wrote()
            ));
        }
        let missing: Vec<String> = self
            .expected_features()
            .into_iter()
            .filter(|feature| {
                let feature = feature.to_ascii_lowercase();
                !names
                    .iter()
                    .any(|name| name.to_ascii_lowercase().contains(&feature))
            })
            .collect();
        if missing.is_empty() {
            return None;
        }
        Some(format!(
            "its output has no metric of feature `{}` (it wrote: {}): the feature did not run (one that cannot load its model does this); if the feature's metrics are named otherwise, list them in the workload's `expect_metrics`",
            missing.join("`, `"),
            wrote()
        ))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MeasureSpec {
    pub warmup: u32,
    /// Timed pairs per cell (one upstream run and one fork run each).
    pub runs: u32,
    pub threads: u32,
    pub min_useful_seconds: f64,
    /// The parity gate on every shared metric's pooled-mean delta (ADR-1228 §2).
    pub max_score_delta: f64,
    /// An optional, stricter gate on every single frame's delta; `None`: per-frame deltas
    /// are reported, not gated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_frame_delta: Option<f64>,
    pub timeout_seconds: f64,
    /// Seeds the run order and the bootstrap; recorded in the report to replay a run.
    pub seed: u64,
    /// Adaptive runs: while a cell's verdict is `unsure`, more pairs up to this many.
    pub max_runs: u32,
    /// Adaptive runs stop once a cell has taken this long.
    pub max_cell_seconds: f64,
    /// A speedup inside 1 ± this is `same`.
    pub practical_threshold: f64,
    /// The largest output file one run may write; a larger one fails that side unread.
    /// Written only when not the default, so specs stored before it existed read the same.
    #[serde(
        default = "default_max_output_bytes",
        skip_serializing_if = "is_default_max_output_bytes"
    )]
    pub max_output_bytes: u64,
}

/// `[measure] max_output_bytes` when the spec says nothing: 512 MiB.
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 512 * 1024 * 1024;

fn default_max_output_bytes() -> u64 {
    DEFAULT_MAX_OUTPUT_BYTES
}

fn is_default_max_output_bytes(bytes: &u64) -> bool {
    *bytes == DEFAULT_MAX_OUTPUT_BYTES
}

impl MeasureSpec {
    /// Why no cell of this spec can be `faster` or `slower`, when `max_runs` is below the
    /// pairs the signed-rank test needs ([`crate::paired::min_pairs_for_a_verdict`]): such a
    /// spec is fine for a smoke test, but its verdicts are only `same` or `unsure`.
    pub fn verdict_limit_warning(&self) -> Option<String> {
        let needed = crate::paired::min_pairs_for_a_verdict();
        (self.max_runs < needed).then(|| {
            format!(
                "[measure] max_runs = {} is below {needed} pairs, the fewest with which the signed-rank test can reach p < 0.05: no cell can be `faster` or `slower`, only `same` or `unsure`; raise `max_runs` to {needed} or more for a verdict",
                self.max_runs
            )
        })
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParitySpec {
    /// Same metric, different name: upstream name → fork name.
    #[serde(default)]
    pub renames: BTreeMap<String, String>,
    /// Per-metric allowances that replace `max_score_delta` (and `max_frame_delta`), each
    /// with its reason.
    #[serde(default)]
    pub allow: BTreeMap<String, Allowance>,
    /// Upstream metrics the fork may stop writing, each with its reason. Any other metric
    /// only upstream writes fails the cell.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_missing: Vec<AllowedMissing>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Allowance {
    /// Gate on this metric's pooled-mean delta; `None` keeps `max_score_delta`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_delta: Option<f64>,
    /// Gate on this metric's per-frame deltas; `None` keeps `[measure] max_frame_delta`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_frame_delta: Option<f64>,
    pub reason: String,
}

/// An upstream metric the fork no longer writes, declared with why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllowedMissing {
    pub metric: String,
    pub reason: String,
}

impl ParitySpec {
    /// The pooled-mean gate of a metric (fork name first, then upstream name).
    pub fn pooled_gate(&self, names: [&str; 2], default: f64) -> f64 {
        names
            .iter()
            .find_map(|n| self.allow.get(*n).and_then(|a| a.max_delta))
            .unwrap_or(default)
    }

    /// The per-frame gate of a metric, when one is set for it or spec-wide.
    pub fn frame_gate(&self, names: [&str; 2], default: Option<f64>) -> Option<f64> {
        names
            .iter()
            .find_map(|n| self.allow.get(*n).and_then(|a| a.max_frame_delta))
            .or(default)
    }

    /// Why `metric` (an upstream name) may be missing from the fork, when declared.
    pub fn missing_reason(&self, metric: &str) -> Option<&str> {
        self.allow_missing
            .iter()
            .find(|m| m.metric == metric)
            .map(|m| m.reason.as_str())
    }
}
